"""Reliability round 4 (issue 44): what models, trees and state read back from disk may give.

- lengths and generation files checked before a model loads; no non-finite number leaves a model;
- a scorer folder checked whole before any model loads or any log opens;
- one tree reader checks values; strings that cannot be written back as UTF-8 are refused by file:line;
- state read back (checkpoints, caches) is checked: a broken one is set aside and rebuilt, a finished
  scorer is unchanged until a new run over it finishes.

Paths, outputs, logs and the command line are in test_reliability4.py.
"""


from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from helpers import snapshot
from helpers_cli import run_module

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- class 11: state read back

def _checkpoint(folder: Path, step: int) -> Path:
    import torch
    from safetensors.torch import save_file

    ck = folder / f"checkpoint-{step}"
    ck.mkdir(parents=True)
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    save_file({"w": torch.zeros(2, 2)}, str(ck / "adapter_model.safetensors"))
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        torch.save({"step": step}, ck / name)
    return ck


@pytest.mark.parametrize("name, damage, reason", [
    ("optimizer.pt", lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "optimizer.pt"),
    ("rng_state.pth", lambda p: p.write_bytes(os.urandom(300)), "rng_state.pth"),
    ("scheduler.pt", lambda p: p.write_bytes(b""), "scheduler.pt"),
    ("trainer_state.json", lambda p: p.write_text('{"global_step": 2'), "trainer_state.json is cut short"),
])
def test_a_corrupt_checkpoint_file_sets_the_checkpoint_aside(tmp_path, name, damage, reason):
    from masprm.train.checkpoints import resume_checkpoint

    _checkpoint(tmp_path, 1)
    damage(_checkpoint(tmp_path, 2) / name)
    said = []
    assert resume_checkpoint(tmp_path, said.append) == tmp_path / "checkpoint-1"
    assert (tmp_path / "incomplete-checkpoint-2" / name).exists() and reason in said[0]


@pytest.mark.parametrize("stored", [
    {"examples": {"input_ids": [1]}, "skipped": 0},
    {"examples": [[1, 2, 3]], "skipped": 0},
    {"examples": [{"input_ids": [{"x": 1}]}], "skipped": 0},
    {"examples": [{"input_ids": [1]}], "skipped": -1},
    {"examples": [], "skipped": 0},
    ["not", "a", "cache"],
])
def test_a_cache_of_the_wrong_structure_is_rebuilt(stored):
    from masprm.train.cache import _well_formed

    assert not _well_formed(stored)
    assert _well_formed({"examples": [{"text": "a", "input_ids": [1, 2], "positions": [1], "targets": [0.5],
                                      "pos_has_sep": True, "weight": 1.0}], "skipped": 0})


def test_torch_files_are_zip_archives():
    """The checkpoint check relies on torch.save writing a zip archive (torch >= 1.6)."""
    import io

    import torch

    buf = io.BytesIO()
    torch.save({"a": 1}, buf)
    assert zipfile.is_zipfile(io.BytesIO(buf.getvalue()))


# --------------------------------------------------------------------------- classes 8 and 9: trees and text

def _tree(**root_changes) -> dict:
    from helpers_trees import gsm8k_tree

    tree = gsm8k_tree()
    tree["children"][0].update(root_changes)
    if tree["children"][0].get("q_mean") == "drop":
        del tree["children"][0]["q_mean"]
    return tree


@pytest.mark.parametrize("change, problem", [
    ({"q_mean": 5.0}, "root/0: 'q_mean' is 5, outside [-1, 1]"),
    ({"q_mean": -1.5}, "root/0: 'q_mean' is -1.5, outside [-1, 1]"),
    ({"q_mean": "drop", "q_sum": 9.0, "visits": 3}, "root/0: 'q_sum / visits' is 3, outside [-1, 1]"),
    ({"visits": -2}, "root/0: 'visits' must be a whole number >= 0, got -2"),
    ({"visits": 1.5}, "root/0: 'visits' must be a whole number >= 0, got 1.5"),
    ({"node_text": ["a", "list"]}, "root/0: 'node_text' must be a string, got list"),
    ({"action_text": 3}, "root/0: 'action_text' must be a string, got int"),
    ({"steps": ["ok", 2]}, "root/0: 'steps' must be a list of strings"),
])
def test_one_tree_reader_checks_values_for_every_consumer(tmp_path, change, problem):
    from masprm.errors import TreeError
    from masprm.tree_schema import check_search_tree, read_tree

    tree = _tree(**change)
    (tmp_path / "0.json").write_text(json.dumps(tree))
    with pytest.raises(TreeError) as stage2:           # stage 2's reader
        read_tree(tmp_path / "0.json", "0.json")
    with pytest.raises(TreeError) as show:             # show_tree's and the plots' check
        check_search_tree(tree, "0.json")
    assert str(stage2.value) == f"0.json: {problem}" and str(show.value) == f"0.json: {problem}"


def test_show_tree_refuses_a_list_as_node_text_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "0.json").write_text(json.dumps(_tree(node_text=["a"])))
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.stages.show_tree", ["0.json", "--text"])
    assert code == 2 and lines == ["show_tree.py: error: 0.json: root/0: 'node_text' must be a string, got list"]
    assert snapshot(tmp_path) == before


def test_the_demo_trees_values_pass(tmp_path):
    """Values at the edges of the range are accepted: +-1, 0 visits, null texts."""
    from masprm.tree_schema import check_search_tree

    check_search_tree(_tree(q_mean=-1.0, visits=0, final_answer=None), "t")
    check_search_tree(_tree(q_mean="drop", q_sum=-3.0, visits=3), "t")


@pytest.mark.parametrize("reader", ["tree", "jsonl", "json", "records"])
def test_a_lone_surrogate_is_refused_naming_file_and_line(tmp_path, reader):
    from masprm.errors import DataError, TreeError
    from masprm.io import iter_jsonl, read_json
    from masprm.train.data import load_records
    from masprm.tree_schema import read_tree_json

    good = '{"prompt": "p", "completions": ["a \\ud83d\\ude00 b"], "labels": [1.0]}'   # a valid pair: an emoji
    bad = '{"prompt": "p", "completions": ["a \\ud800 b"], "labels": [1.0]}'
    if reader == "tree":
        path = tmp_path / "0.json"
        path.write_text('{"visits": 1,\n "node_text": "q \\ud83d\\ude00",\n "children": [],\n'
                        ' "meta": "\\udc00 alone"}')
        with pytest.raises(TreeError, match=r"^0.json:4: a string holds a lone surrogate \(\\udc00\)"):
            read_tree_json(path, "0.json")
        return
    path = tmp_path / ("d.json" if reader == "json" else "d.jsonl")
    path.write_text(f"[{good},\n{bad}]\n" if reader == "json" else f"{good}\n{good}\n{bad}\n")
    line = 2 if reader == "json" else 3
    expected = rf"^{path}:{line}: a string holds a lone surrogate \(\\ud800\), which cannot be written as UTF-8"
    with pytest.raises(DataError, match=expected if reader != "records" else r"lone surrogate"):
        if reader == "json":
            read_json(path)
        elif reader == "jsonl":
            list(iter_jsonl(path))
        else:
            load_records(path, "prm")


# --------------------------------------------------------------------------- class 6: no NaN leaves a model

class _NanModel:
    """A token-classification model whose every logit is NaN (weights that overflowed)."""

    def __init__(self, value=float("nan")):
        import torch

        self.value, self.weight = value, torch.zeros(1)

    def parameters(self):
        return iter([self.weight])

    def __call__(self, input_ids, attention_mask):
        import types

        import torch

        return types.SimpleNamespace(logits=torch.full((*input_ids.shape, 1), self.value))


class _Encoder:
    sep_id, tokenizer = 5, None

    def encode(self, texts):
        return [[1, 2, 5] for _ in texts]


@pytest.mark.parametrize("kind", ["HFScorer", "TrajScorer"])
def test_a_scorer_giving_nan_stops_the_condition_in_one_error_naming_its_flag(tmp_path, kind):
    from test_eval_runner import World

    from masprm.errors import ModelOutputError
    from masprm.eval.logs import log_status
    from masprm.models import scorer as scorers

    world = World()
    world.prm = getattr(scorers, kind)(_NanModel(), _Encoder(), "\n", pad_id=0, setting="prm_dir", source="fake-prm")
    with pytest.raises(ModelOutputError) as caught:
        world.run(tmp_path, ["sbs_prm"])
    assert str(caught.value) == ("prm_dir fake-prm: the model gave nan as a value (not a finite number); its weights "
                                 "or its precision are broken") and caught.value.setting == "prm_dir"
    assert all(log_status(p) != "COMPLETED" for p in tmp_path.glob("*.txt"))   # never a finished condition


def test_a_policy_giving_nan_logits_raises_naming_its_flag(tiny_model_dir):
    import torch

    from masprm.errors import ModelOutputError
    from masprm.models.backends import load_policy
    from masprm.models.options import ModelOptions

    policy = load_policy(None, str(tiny_model_dir), ModelOptions(device_map="cpu"), setting="gen_model_id")
    with torch.no_grad():
        policy.model.get_output_embeddings().weight.fill_(float("nan"))
    messages = [{"role": "user", "content": "What is 3 + 4?"}]
    with pytest.raises(ModelOutputError, match=rf"^gen_model_id {tiny_model_dir}: the model gave nan as logits "
                                               r"\(new token 1\) \(not a finite number\)"):
        policy.sample([messages], 2, temperature=0.7, max_new_tokens=4)
    with pytest.raises(ModelOutputError, match=r"the model gave nan as a completion's log-probability"):
        policy.logprob([(messages, "7")])


def _nan_backend(model_id, options, flags, *, setting="model_id", max_batch_tokens=None):
    """A backend's loader whose policy samples fine and gives one non-finite log-prob per call (as an
    engine on a broken model would): the value after the model id, 'nan', 'inf' or '-inf'."""
    from conftest import FakePolicy

    from masprm.interfaces import LogProb

    class Broken(FakePolicy):
        def logprob(self, requests):
            return [LogProb(-1.5, 3, 2)] + [LogProb(float(model_id.rsplit("/", 1)[1]), 3, 2)
                                             for _ in requests[1:]]

    policy = Broken(lambda messages, k, rng: "Answer: 7")
    policy.engine = "the backend's own"
    return policy


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_non_finite_log_prob_from_any_backend_is_the_same_model_output_error(value):
    """The check sits in the shared policy layer (load_policy), not in a backend: a backend that has none
    (a fake one here, as vLLM's engine has none) still never lets a NaN or inf out."""
    from masprm.errors import ModelOutputError
    from masprm.models.backends import BACKENDS, Backend, BackendFlags, load_policy, register_backend
    from masprm.models.options import ModelOptions

    register_backend(Backend("nan_engine", f"{__name__}:_nan_backend", help="a broken engine"))
    try:
        policy = load_policy(BackendFlags(backend="nan_engine"), f"broken/{value}", ModelOptions(),
                             setting="gen_model_id")
    finally:
        BACKENDS.unregister("nan_engine")
    messages = [{"role": "user", "content": "What is 3 + 4?"}]
    assert policy.sample([messages], 2, temperature=0.7, top_p=1.0, max_new_tokens=4)[0][0].text == "Answer: 7"
    assert policy.engine == "the backend's own"   # the backend's attributes pass through
    assert policy.logprob([(messages, "7")])[0].logprob == -1.5   # finite: returned as the backend gave it
    with pytest.raises(ModelOutputError) as caught:
        policy.logprob([(messages, "7"), (messages, "8")])
    assert str(caught.value) == (f"gen_model_id broken/{value}: the model gave {value} as a completion's "
                                 "log-probability (not a finite number); its weights or its precision are broken")
    assert caught.value.setting == "gen_model_id"


# --------------------------------------------------------------------------- classes 4 and 5: checked before loading

def _policy_copy(tiny_model_dir, tmp_path, edit_generation=None, edit_config=None) -> str:
    import shutil

    folder = tmp_path / "policy"
    shutil.copytree(tiny_model_dir, folder)
    for name, edit in (("generation_config.json", edit_generation), ("config.json", edit_config)):
        if edit is not None:
            path = folder / name
            data = json.loads(path.read_text()) if path.is_file() else {}
            text = edit(data)
            path.write_text(text if isinstance(text, str) else json.dumps(data))
    return str(folder)


@pytest.mark.parametrize("edit, problem", [
    (lambda d: '{"eos_token_id": 1,', "generation_config.json cannot be read ("),
    (lambda d: "[1, 2]", "generation_config.json must hold a JSON object"),
    (lambda d: d.update(repetition_penalty=-1.2), "generation_config.json: repetition_penalty must be a number > 0, "
                                                  "got -1.2"),
    (lambda d: d.update(top_p=1.5), "generation_config.json: top_p must be a number in (0, 1], got 1.5"),
    (lambda d: d.update(top_k="many"), "generation_config.json: top_k must be a number >= 0, got 'many'"),
    (lambda d: d.update(eos_token_id=[3, 70000]), "the EOS token id 70000 is outside the vocabulary (0..511), so "
                                                  "no message could end"),
])
def test_a_policy_s_generation_files_are_checked_before_it_loads(tiny_model_dir, tmp_path, edit, problem):
    from masprm.errors import ModelError
    from masprm.models.model_checks import check_model_serves

    folder = _policy_copy(tiny_model_dir, tmp_path, edit_generation=edit)
    with pytest.raises(ModelError) as caught:
        check_model_serves(folder, "model_id", chat=True)
    assert str(caught.value).startswith(f"model_id {folder}: {problem}"), str(caught.value)


def test_a_system_prompt_or_question_longer_than_the_context_is_refused_before_loading(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    from masprm.errors import ConfigError, DataError
    from masprm.models.model_checks import check_questions_fit

    folder = _policy_copy(tiny_model_dir, tmp_path, edit_config=lambda d: d.update(max_position_embeddings=64))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompt, question = "Solve it step by step. " * 4, "How many apples are there? " * 4
    p, q = (len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in (prompt, question))
    assert p < 64 and q < 64 <= p + q   # each fits alone, not together
    check_questions_fit(folder, "model_id", [question], where="data.jsonl")   # alone it fits
    with pytest.raises(DataError) as caught:
        check_questions_fit(folder, "model_id", ["2 + 2?", question], where="data.jsonl", prompts=[prompt, "Hi."])
    assert str(caught.value) == (f"data.jsonl: example 1: the question is {q} tokens (with the longest system prompt, "
                                 f"{p + q}), more than the context of {folder} (64 tokens)")
    with pytest.raises(ConfigError, match=r"^mas_config: a system prompt is \d+ tokens, more than the context"):
        check_questions_fit(folder, "model_id", ["2 + 2?"], where="data.jsonl", prompts=[prompt * 3])


def test_stage3_refuses_records_longer_than_the_base_model_s_context(tiny_model_dir, tmp_path):
    import types

    from masprm.errors import ConfigError
    from masprm.train.trainer import _check_fits_context

    folder = _policy_copy(tiny_model_dir, tmp_path, edit_config=lambda d: d.update(max_position_embeddings=64))
    cfg = types.SimpleNamespace(model_id=folder, trust_remote_code=False, max_length=100)
    _check_fits_context(cfg, [{"pos_ids": [1] * 64, "neg_ids": [1] * 10}])   # up to the context: fine
    with pytest.raises(ConfigError) as caught:
        _check_fits_context(cfg, [{"pos_ids": [1] * 65, "neg_ids": [1] * 10}])
    assert str(caught.value) == (f"max_length 100: the records are up to 65 tokens at this length, more than the "
                                 f"context of {folder} (64 tokens); pass `max_length` 64 or less")
    assert caught.value.setting == "max_length"


# --------------------------------------------------------------------------- class 7: a scorer folder checked whole

def _scorer(folder: Path, base: Path, adapter: dict | None = None, meta: dict | None = None, lora=None) -> Path:
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps(
        {"base_model_name_or_path": str(base), "peft_type": "LORA", "r": 2, **(adapter or {})}))
    (folder / "masprm_scorer.json").write_text(json.dumps({"mode": "ppm", "status": "completed", **(meta or {})}))
    save_file({k: torch.zeros(*v) for k, v in (lora or {"w": (1,)}).items()}, str(folder / "adapter_model.safetensors"))
    return folder


@pytest.mark.parametrize("adapter, meta, lora, problem", [
    ({"r": "8"}, None, None, "adapter_config.json: r must be a whole number >= 1, got '8'"),
    ({"r": 0}, None, None, "adapter_config.json: r must be a whole number >= 1, got 0"),
    ({"lora_alpha": -16}, None, None, "adapter_config.json: lora_alpha must be a number > 0, got -16"),
    ({"lora_dropout": 1.5}, None, None, "adapter_config.json: lora_dropout must be a number in [0, 1), got 1.5"),
    ({"target_modules": 7}, None, None, "adapter_config.json: target_modules must be a module name or a list of "
                                        "them, got 7"),
    (None, {"max_length": -5}, None, "masprm_scorer.json: max_length must be a whole number >= 2, got -5"),
    (None, {"max_prompt_length": "long"}, None, "masprm_scorer.json: max_prompt_length must be a whole number >= 0, "
                                                "got 'long'"),
    (None, None, {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": (2, 32)},
     "the adapter does not fit base model {base}: base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight "
     "is [2, 32], the base's model.layers.0.self_attn.q_proj needs [2, 64]"),
    (None, None, {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": (64, 4)},
     "the adapter does not fit base model {base}: base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight "
     "is [64, 4], the base's model.layers.0.self_attn.q_proj needs [64, 2]"),
    (None, None, {"base_model.model.model.layers.9.mlp.up_proj.lora_A.weight": (2, 64)},
     "the adapter adapts model.layers.9.mlp.up_proj, which base model {base} does not have"),
])
def test_a_scorer_folder_is_checked_whole_before_any_model_loads(tiny_model_dir, tmp_path, adapter, meta, lora,
                                                                   problem):
    from masprm.errors import ModelError
    from masprm.models.model_checks import weight_shapes
    from masprm.models.scorer_checks import check_scorer_fits
    from masprm.scorer_folder import read_scorer_folder

    base = Path(tiny_model_dir)
    assert weight_shapes(base, "s", "s")["model.layers.0.self_attn.q_proj.weight"] == (64, 64)   # the sizes used
    folder = _scorer(tmp_path / "scorer", base, adapter, meta, lora)
    with pytest.raises(ModelError) as caught:
        check_scorer_fits(read_scorer_folder(folder), "prm_dir", str(base))
    assert str(caught.value).startswith(f"prm_dir {folder}: {problem.format(base=base)}"), str(caught.value)


def test_a_fitting_adapter_passes(tiny_model_dir, tmp_path):
    from masprm.models.scorer_checks import check_scorer_fits
    from masprm.scorer_folder import read_scorer_folder

    lora = "base_model.model.model.layers.{}.self_attn.{}.lora_{}.weight"
    shapes = {lora.format(i, m, "A"): (2, 64) for i in (0, 1) for m in ("q_proj", "v_proj")}
    shapes.update({lora.format(0, "q_proj", "B"): (64, 2), "base_model.model.score.modules_to_save.weight": (1, 64)})
    folder = _scorer(tmp_path / "scorer", Path(tiny_model_dir), {"lora_alpha": 16, "target_modules": ["q_proj"]},
                     {"max_length": 512}, shapes)
    check_scorer_fits(read_scorer_folder(folder), "prm_dir", str(tiny_model_dir))


@pytest.mark.slow
def test_a_scorer_stage3_trained_passes_the_whole_folder_check_and_holds_only_new_files(tmp_path_factory,
                                                                                          tiny_model_dir):
    from helpers_cli import trained_adapter

    from masprm.io import process_umask
    from masprm.models.scorer_checks import check_scorer_fits
    from masprm.scorer_folder import read_scorer_folder

    folder = trained_adapter(tmp_path_factory, tiny_model_dir)
    record = read_scorer_folder(folder)
    check_scorer_fits(record, "prm_dir", str(tiny_model_dir))
    assert record.meta["status"] == "completed" and record.adapter["r"] == 4
    assert not list(folder.glob(".save.*"))                                  # the temporary folder is gone
    mode = 0o666 & ~process_umask()
    assert (folder / "adapter_model.safetensors").stat().st_mode & 0o777 == mode   # written private, then the umask's


def test_a_finished_scorer_is_unchanged_until_a_new_run_over_it_finishes(tmp_path, tiny_model_dir):
    """Its record stays "completed" and its weights stay byte for byte while a new run (--overwrite) trains
    into the folder; a run that dies half way leaves the finished scorer as it was."""
    import random

    from transformers import TrainerCallback

    from helpers_training import config, ppm_record, write_jsonl
    from masprm.train.trainer import train_scorer

    data = write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(random.Random(i)) for i in range(12)])
    cfg = config(tmp_path, data, tiny_model_dir, "ppm", max_steps=2, eval_steps=1, save_steps=1)
    out = Path(cfg.output_dir)
    train_scorer(cfg)
    import shutil

    for checkpoint in out.glob("checkpoint-*"):   # a finished scorer as shared: its checkpoints removed
        shutil.rmtree(checkpoint)
    finished = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert json.loads(finished["masprm_scorer.json"])["status"] == "completed"

    class Dies(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            assert json.loads((out / "masprm_scorer.json").read_text())["status"] == "completed"
            raise KeyboardInterrupt("killed half way")

    import dataclasses

    with pytest.raises(KeyboardInterrupt):
        train_scorer(dataclasses.replace(cfg, overwrite=True, seed=1), callbacks=[Dies()])
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name in finished} == finished


@pytest.mark.slow
def test_resuming_from_a_checkpoint_file_torch_refuses_is_one_line(tmp_path, tiny_model_dir):
    """A checkpoint file that is a complete zip but holds a pickle the weights-only loader refuses (here the RNG
    state) cannot be told without loading it: the resume stops in one ConfigError naming the checkpoint."""
    import dataclasses
    import datetime
    import random

    import torch
    from transformers import TrainerCallback

    from helpers_training import config, ppm_record, write_jsonl
    from masprm.errors import ConfigError
    from masprm.train.trainer import train_scorer

    data = write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(random.Random(i)) for i in range(12)])
    cfg = config(tmp_path, data, tiny_model_dir, "ppm", max_steps=3, eval_steps=1, save_steps=1)
    out = Path(cfg.output_dir)

    class Dies(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            raise KeyboardInterrupt("killed after the first checkpoint")

    with pytest.raises(KeyboardInterrupt):
        train_scorer(cfg, callbacks=[Dies()])
    [checkpoint] = out.glob("checkpoint-*")
    [rng] = checkpoint.glob("rng_state*.pth")
    torch.save({"when": datetime.datetime(2024, 1, 1)}, rng)   # a zip archive, but not only tensors
    with pytest.raises(ConfigError) as caught:
        train_scorer(dataclasses.replace(cfg, resume=True))
    assert str(caught.value).startswith(f"output_dir {out}: {checkpoint.name} holds a file torch refuses to load (")
    assert str(caught.value).endswith("move that checkpoint aside and resume again")


