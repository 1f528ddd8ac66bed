"""Building the toy world: a normal model folder the stages can load, cached by settings."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from masprm.models.tiny import IM_END
from masprm.worlds import build as toy_build
from masprm.worlds.train_policy import PolicySpec, encode_turns, make_batch

TINY = PolicySpec(vocab_size=400, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
                  intermediate_size=64, steps=4, batch_size=8, warmup=2, drill_every=2, drill_batch_size=8,
                  n_problems=60)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("toy")
    manifest = toy_build.build_toy_world(out, config=ROOT / "configs/toy.yaml", spec=TINY, log=lambda m: None)
    return out, manifest


@pytest.mark.slow
def test_build_writes_a_loadable_policy_and_the_data(built):
    from masprm.graph import load_mas_config
    from masprm.models.loading import ModelOptions
    from masprm.models.policy import HFPolicy

    out, manifest = built
    assert manifest["fingerprint"] == json.loads((out / "build.json").read_text())["fingerprint"]
    assert sorted(p.name for p in (out / "data").iterdir()) == ["test.jsonl", "train.jsonl"]
    assert not list(out.glob(".policy.tmp-*"))
    policy = HFPolicy(str(out / "policy"), ModelOptions(device_map="cpu"))
    graph = load_mas_config(ROOT / "configs/toy.yaml")
    messages = graph.start("Tom has 3 apples. He buys 2 more. How many apples does Tom have now?").messages(0)
    policy.reseed(0)
    [gens] = policy.sample([messages], 2, temperature=1.0, top_p=1.0, max_new_tokens=5)
    assert len(gens) == 2 and all(1 <= g.new_tokens <= 5 for g in gens)
    [lp] = policy.logprob([(messages, "3 +2")])
    assert lp.logprob < 0 and lp.completion_tokens == 3  # "3", " +", "2" (no end-of-turn token, as the original)
    # whole numbers are single tokens; text round-trips exactly
    text = "Steps: 12*3=36, 36-4=32. Answer: 32"
    assert "36" in policy.tokenizer.tokenize(text)
    assert policy.tokenizer.decode(policy.tokenizer(text)["input_ids"]) == text


def test_second_build_is_cached_and_a_changed_setting_rebuilds(built, monkeypatch):
    out, manifest = built
    calls = []

    def fake_train(out_dir, *args, **kwargs):
        calls.append(1)
        Path(out_dir).mkdir(parents=True)
        (Path(out_dir) / "config.json").write_text("{}")
        return {"final_loss": 0.0}

    monkeypatch.setattr("masprm.worlds.train_policy.train_policy", fake_train)
    again = toy_build.build_toy_world(out, config=ROOT / "configs/toy.yaml", spec=TINY, log=lambda m: None)
    assert again == manifest and calls == []
    other = toy_build.build_toy_world(out, config=ROOT / "configs/toy.yaml",
                                      spec=PolicySpec(**{**TINY.__dict__, "steps": 5}), log=lambda m: None)
    assert calls == [1] and other["fingerprint"] != manifest["fingerprint"]
    assert (out / "policy" / "config.json").read_text() == "{}"  # the new build replaced the old one


def test_loss_covers_only_the_agent_output():
    from masprm.graph import load_mas_config
    from masprm.worlds.toy.task import generate_split
    from masprm.worlds.train_policy import build_policy_tokenizer

    tok = build_policy_tokenizer(generate_split("test"), load_mas_config(ROOT / "configs/toy.yaml"), 400)
    messages = [{"role": "system", "content": "Planner: x"}, {"role": "user", "content": "has 3, buys 2"}]
    [(ids, start)] = encode_turns(tok, [(messages, "3 +2")])
    _, mask, labels = make_batch([(ids, start), (ids[:start + 1], start)], tok.pad_token_id)
    assert tok.decode(labels[0][labels[0] != -100]) == "3 +2<|im_end|>"
    assert (labels[1] != -100).sum() == 1 and mask[1].sum() == start + 1
    rendered = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert tok.decode(ids[:start]) == rendered


def test_cli_reports_bad_flags_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "masprm.worlds.build", "--out", str(tmp_path), "--steps", "0"],
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--steps" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "masprm.worlds.build", "--out", str(tmp_path),
                           "--mas_config", "configs/single.yaml"],
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True)
    assert proc.returncode == 2 and "Reader -> Planner -> Solver -> Verifier" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "masprm.worlds.build", "--out", str(tmp_path), "--hidden_size", "32"],
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True)
    assert (proc.returncode, proc.stderr.strip()) == (2, "build.py: error: --hidden_size 32: must be an even "
                                                         "multiple of the policy's 6 attention heads")
    assert not (tmp_path / "policy").exists()


def test_arithmetic_drill_teaches_the_facts_the_worked_solutions_use():
    import random

    from masprm.graph import load_mas_config
    from masprm.worlds.toy.task import apply_op, generate_split
    from masprm.worlds.train_policy import Drill, build_policy_tokenizer
    from masprm.worlds.toy.transcripts import worked_steps

    problems = generate_split("train")[:50]
    tok = build_policy_tokenizer(problems, load_mas_config(ROOT / "configs/toy.yaml"), 400)
    drill = Drill(tok, problems)
    used = {s for p in problems for s in worked_steps(p)}
    assert len(drill.examples) == len(used) and sum(drill.weights) == sum(len(p.ops) for p in problems)
    for ids, start in drill.batch(random.Random(0), 64):
        prompt, result = tok.decode(ids[:start]), tok.decode(ids[start:])
        m = re.fullmatch(r"(\d+)([-+*/])(\d+)=", prompt)
        assert m and apply_op(int(m[1]), m[2], int(m[3])) == int(result)
        assert len(ids) - start == 1  # a whole-number result is one token


def test_prompt_weight_adds_the_prompt_to_the_loss_and_zero_is_plain_sft():
    import torch

    from masprm.worlds.train_policy import build_model, make_batch, weighted_loss

    spec = PolicySpec(vocab_size=400, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1,
                          intermediate_size=32)

    class Tok:  # the model only needs sizes and special ids
        pad_token_id = 0

        def __len__(self):
            return 50

        def convert_tokens_to_ids(self, token):
            return 2

        def get_vocab(self):
            return {IM_END: 2}

    torch.manual_seed(0)
    model = build_model(spec, Tok())
    batch = make_batch([([5, 6, 7, 8, 9], 3), ([5, 6, 7], 2)], pad_id=0)
    plain = weighted_loss(model, *batch, prompt_weight=0.0)
    with torch.no_grad():
        logits = model(input_ids=batch[0], attention_mask=batch[1]).logits
    logp = torch.log_softmax(logits, -1)
    outputs = [(0, 3, 8), (0, 4, 9), (1, 2, 7)]        # (row, position, token) of the outputs
    manual = -sum(logp[r, t - 1, tok] for r, t, tok in outputs) / len(outputs)
    assert abs(plain.item() - manual.item()) < 1e-5
    prompt_tokens = [(0, 1, 6), (0, 2, 7), (1, 1, 6)]  # predictable prompt tokens; padding never counts
    full = weighted_loss(model, *batch, prompt_weight=0.5)
    manual_full = (-sum(logp[r, t - 1, tok] for r, t, tok in outputs)
                   - 0.5 * sum(logp[r, t - 1, tok] for r, t, tok in prompt_tokens)) / (len(outputs) + 1.5)
    assert abs(full.item() - manual_full.item()) < 1e-5


def test_the_build_pins_the_demos_numerics_unless_the_environment_names_its_own(monkeypatch):
    # A policy built or verified by hand must be computed as make demo's jobs compute it: the shipped
    # weights were trained under PINNED_NUMERICS, and a rebuild on other kernels misses them.
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")   # the user's choice is kept, as masprm.running.commands keeps it
    assert toy_build.pin_numerics() == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE"}
    import os
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2"


@pytest.mark.slow
def test_a_build_run_by_hand_trains_on_the_pinned_kernels_and_records_them(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if k not in toy_build.PINNED_NUMERICS}
    env["PYTHONPATH"] = str(ROOT / "src")
    env["OMP_NUM_THREADS"] = "1"   # as a demo job runs: the build sets its own count
    proc = subprocess.run([sys.executable, "-m", "masprm.worlds.build", "--out", str(tmp_path), "--steps", "1",
                           "--hidden_size", "48", "--num_layers", "1", "--retrain"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    numerics = json.loads((tmp_path / "build.json").read_text())["numerics"]
    assert numerics["ATEN_CPU_CAPABILITY"] == "avx2" and numerics["MKL_CBWR"] == "AVX2"
    assert numerics["cpu_capability"] == "AVX2"   # the kernels torch ran, whatever this CPU offers
    assert numerics["threads"] == toy_build.POLICY_THREADS == 2   # as the shipped policies were trained


def test_the_policys_thread_count_is_the_callers_again_after_training():
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)   # not POLICY_THREADS, so that a count left behind shows
    try:
        with toy_build.policy_threads():
            assert torch.get_num_threads() == toy_build.POLICY_THREADS == 2
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
