"""The vllm generation backend against the hf one, in vLLM's environment (`make test-vllm`, docs/backends.md).

One engine per test session: the policy fixture starts it, and stages 1 and 4, run in this process with the
same engine settings, reuse it (`masprm.models.vllm_policy.engine`). The model is the tiny Qwen2 with head
size 32 (2 heads of a hidden size of 64): vLLM's CPU attention has no head size 16, the shipped toy's.
Skipped where vLLM is not installed (the main environment).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed in this environment: `make setup-vllm` builds its own, "
                                   "`make test-vllm` runs these tests there (docs/backends.md)")

from masprm.models.backends import BackendFlags, check_backend, load_policy  # noqa: E402
from masprm.models.options import ModelOptions  # noqa: E402
from masprm.models.tiny import build_tiny_model, default_corpus, untrained_scorer  # noqa: E402

pytestmark = pytest.mark.slow   # starts an engine (about 1-2 minutes on 2 CPU cores)

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = ModelOptions(device_map="cpu")
FLAGS = BackendFlags(backend="vllm", enforce_eager=True)   # no compilation: the engine starts in about a minute
STAGE_FLAGS = ["--backend", "vllm", "--enforce_eager", "--device_map", "cpu", "--no_compile"]   # the same engine
PROMPTS = [[{"role": "system", "content": "You are a careful assistant."}, {"role": "user", "content": line}]
           for line in default_corpus(n_lines=80, seed=1)[32:72]]   # 40 prompts of 25-60 tokens
NEW_TOKENS = 12


@pytest.fixture(scope="session")
def tiny32(tmp_path_factory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny32"), num_heads=2, num_kv_heads=1, seed=0))


@pytest.fixture(scope="session")
def vllm_policy(tiny32):
    return load_policy(FLAGS, tiny32, OPTIONS)


@pytest.fixture(scope="session")
def hf_policy(tiny32):
    return load_policy(None, tiny32, OPTIONS)


def greedy_tokens(policy, prompts) -> list[list[int]]:
    """The greedy token ids each backend's decoding gives, up to and including the stop token."""
    rows = [policy.prompt_ids(p) for p in prompts]
    if hasattr(policy, "llm"):
        outs = policy._run(rows, [policy._params(temperature=0.0, max_tokens=NEW_TOKENS) for _ in rows])
        tokens = [list(o.outputs[0].token_ids) for o in outs]
    else:
        tokens = [policy._decode([(row, (0, 0))], 0.0, 1.0, NEW_TOKENS)[0] for row in rows]
    return [t[:next((j + 1 for j, x in enumerate(t) if x in policy.stop_ids), len(t))] for t in tokens]


def top_two_gap(hf_policy, prompt, prefix: list[int]) -> float:
    """The HF model's logit gap between its two best next tokens after prompt + prefix (a near tie is small)."""
    import torch
    ids = torch.tensor([hf_policy.prompt_ids(prompt) + prefix])
    with torch.no_grad():
        top = hf_policy.model(input_ids=ids).logits[0, -1].float().topk(2).values
    return float(top[0] - top[1])


# --------------------------------------------------------------------------- equivalence with hf


def test_greedy_tokens_match_the_hf_backend_on_at_least_95_percent_of_prompts(vllm_policy, hf_policy):
    ours, theirs = greedy_tokens(vllm_policy, PROMPTS), greedy_tokens(hf_policy, PROMPTS)
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    gaps = []
    for i in differ:   # where they part, the HF model's two best tokens are a near tie
        at = next(j for j, (a, b) in enumerate(zip(ours[i], theirs[i])) if a != b)
        gaps.append(top_two_gap(hf_policy, PROMPTS[i], theirs[i][:at]))
    print(f"greedy: {len(PROMPTS) - len(differ)}/{len(PROMPTS)} prompts give the same {NEW_TOKENS} tokens; "
          f"where not, HF's top-two logit gap at the first difference: {gaps}")
    assert len(differ) <= 0.05 * len(PROMPTS), (differ, gaps)
    assert all(gap < 1e-3 for gap in gaps), gaps
    # what the engine reports agrees too: texts and token counts of the same tokens
    same = [i for i in range(len(PROMPTS)) if i not in differ][:8]
    for i, (a, b) in zip(same, zip(vllm_policy.sample([PROMPTS[i] for i in same], 2, temperature=0.0, top_p=1.0,
                                                      max_new_tokens=NEW_TOKENS),
                                   hf_policy.sample([PROMPTS[i] for i in same], 2, temperature=0.0, top_p=1.0,
                                                    max_new_tokens=NEW_TOKENS))):
        assert a == b and len(a) == 2 and a[0].new_tokens == len(ours[i]), i
        assert a[0].prompt_tokens == len(hf_policy.prompt_ids(PROMPTS[i]))


LOGPROB_TOLERANCE = 1e-3   # per completion token, float32 on both sides


def test_logprobs_of_given_continuations_agree_with_the_hf_backend(vllm_policy, hf_policy):
    completions = ["Answer: 7", "So the answer is 12.", "", "Step 1: 3 + 4 = 7</step>", "VERDICT: CORRECT"]
    requests = [(p, c) for p, c in zip(PROMPTS[:20], completions * 4)]
    ours, theirs = vllm_policy.logprob(requests), hf_policy.logprob(requests)
    worst = max(abs(a.logprob - b.logprob) / max(1, b.completion_tokens) for a, b in zip(ours, theirs))
    print(f"log-probs: largest difference per completion token {worst:.2e} over {len(requests)} pairs")
    assert worst < LOGPROB_TOLERANCE
    assert [(a.prompt_tokens, a.completion_tokens) for a in ours] == [(b.prompt_tokens, b.completion_tokens)
                                                                       for b in theirs]
    assert ours[2].logprob == 0.0 and ours[2].completion_tokens == 0   # an empty completion scores nothing
    assert all(a.logprob < 0 for a, (_, c) in zip(ours, requests) if c)


# --------------------------------------------------------------------------- determinism


def test_the_same_keys_sample_the_same_texts_and_other_keys_other_texts(vllm_policy):
    keys = [(42, i, 1, 0) for i in range(6)]
    first = vllm_policy.sample(PROMPTS[:6], 3, temperature=1.0, top_p=0.95, max_new_tokens=NEW_TOKENS, keys=keys)
    again = vllm_policy.sample(PROMPTS[:6], 3, temperature=1.0, top_p=0.95, max_new_tokens=NEW_TOKENS, keys=keys)
    other = vllm_policy.sample(PROMPTS[:6], 3, temperature=1.0, top_p=0.95, max_new_tokens=NEW_TOKENS,
                               keys=[(43, *k[1:]) for k in keys])
    assert first == again
    assert first != other
    assert all(len({g.text for g in gens}) > 1 for gens in first)   # the n samples of a prompt differ
    # without keys, reseed names the streams
    vllm_policy.reseed(5)
    a = vllm_policy.sample(PROMPTS[:2], 2, temperature=1.0, top_p=1.0, max_new_tokens=NEW_TOKENS)
    vllm_policy.reseed(5)
    assert vllm_policy.sample(PROMPTS[:2], 2, temperature=1.0, top_p=1.0, max_new_tokens=NEW_TOKENS) == a


def test_a_prompts_samples_do_not_depend_on_the_rest_of_the_batch_on_cpu(vllm_policy):
    """Measured for docs/backends.md: on CPU (float32, this vLLM) a keyed request samples the same alone as
    among 23 others. vLLM does not promise it on GPUs (batch-variant kernels): there a run repeats for one
    configuration (same batch sizes), which is what stage 4's fingerprints hold fixed."""
    keys = [(7, i, 1, 0) for i in range(24)]
    together = vllm_policy.sample(PROMPTS[:24], 2, temperature=0.8, top_p=0.95, max_new_tokens=NEW_TOKENS, keys=keys)
    alone = [vllm_policy.sample([PROMPTS[i]], 2, temperature=0.8, top_p=0.95, max_new_tokens=NEW_TOKENS,
                                keys=[keys[i]])[0] for i in (0, 11, 23)]
    assert alone == [together[i] for i in (0, 11, 23)]


def test_seeded_prompts_longer_than_one_engine_step_sample_and_repeat(vllm_policy):
    """12 prompts of about 1,600 tokens (more than the CPU engine's 4,096-token step): with chunked prefill,
    vLLM's CPU worker dies rewinding a seeded request's generator; prompts are prefilled whole instead."""
    system = " ".join(default_corpus(n_lines=200, seed=2)[40:100])
    prompts = [[{"role": "system", "content": system}, {"role": "user", "content": f"Question {i}"}] for i in range(12)]
    assert sum(len(vllm_policy.prompt_ids(p)) for p in prompts) > 4096
    keys = [(9, i, 1, 0) for i in range(12)]
    first = vllm_policy.sample(prompts, 1, temperature=1.0, top_p=1.0, max_new_tokens=4, keys=keys)
    assert first == vllm_policy.sample(prompts, 1, temperature=1.0, top_p=1.0, max_new_tokens=4, keys=keys)


def test_a_call_without_budget_and_an_empty_call(vllm_policy):
    assert vllm_policy.sample([], 3, temperature=1.0, top_p=1.0, max_new_tokens=8) == []
    [gens] = vllm_policy.sample(PROMPTS[:1], 2, temperature=1.0, top_p=1.0, max_new_tokens=0)
    assert [(g.text, g.new_tokens) for g in gens] == [("", 0), ("", 0)]


# --------------------------------------------------------------------------- refusals, before loading


def test_what_vllm_cannot_serve_is_refused_in_one_line_before_loading(tiny32, tmp_path):
    from masprm.errors import ConfigError, ModelError

    head16 = build_tiny_model(tmp_path / "head16", seed=0)   # the shipped toy's shape: 4 heads of 16
    with pytest.raises(ModelError, match=r"head size 16 is not one vLLM's CPU attention has \(32, 64, .*--backend hf"):
        check_backend(FLAGS, str(head16), OPTIONS)
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": tiny32}))
    with pytest.raises(ModelError, match="is a LoRA adapter: the vllm backend serves full policies only"):
        check_backend(FLAGS, str(tmp_path / "adapter"), OPTIONS)
    with pytest.raises(ConfigError, match="attn_impl eager is the hf backend's"):
        check_backend(FLAGS, tiny32, ModelOptions(device_map="cpu", attn_impl="eager"))
    with pytest.raises(ConfigError, match="decode static is the hf backend's"):
        check_backend(FLAGS, tiny32, ModelOptions(device_map="cpu", decode="static"))
    with pytest.raises(ConfigError, match="device_map cuda:1: vLLM places the model itself"):
        check_backend(FLAGS, tiny32, ModelOptions(device_map="cuda:1"))
    with pytest.raises(ConfigError, match="load_in_4bit"):   # this vLLM has no bitsandbytes, or fp4 was asked for
        check_backend(FLAGS, tiny32, ModelOptions(device_map="cpu", load_in_4bit=True))


# --------------------------------------------------------------------------- the stages, end to end


def toy_args(tiny32) -> list[str]:
    return ["--dataset", "toy", "--mas_config", str(ROOT / "configs" / "toy.yaml"), *STAGE_FLAGS]


def test_stage_1_builds_trees_with_the_vllm_backend_and_records_it(vllm_policy, tiny32, tmp_path):
    from masprm.stages import trees

    argv = ["--split", "train", "--n", "2", "--seed", "3", "--model_id", tiny32, "--n_rollouts", "2",
            "--n_candidates", "2", "--max_new_tokens", "8", "--no_plot", "--out_root", str(tmp_path),
            *toy_args(tiny32)]
    assert trees.main(argv) == 0
    [folder] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((folder / ".run_settings").read_text())["backend"] == "vllm"
    built = [json.loads((folder / f"{i}.json").read_text()) for i in (0, 1)]
    assert all(tree["children"] for tree in built)   # each root expanded by the vLLM policy
    assert trees.main(argv) == 0   # a rerun resumes: nothing to build
    assert [json.loads((folder / f"{i}.json").read_text()) for i in (0, 1)] == built


STAGE_4_METHODS = ["single_pass", "sbs_prm", "sbs_logprob", "mcts_prm", "mcts_logprob", "voter_prm",
                   "voter_logprob", "bon_prm", "bon_logprob"]


def test_stage_4_runs_every_search_family_with_the_vllm_backend(vllm_policy, tiny32, tmp_path, prm_dir):
    from masprm.stages import evaluate

    argv = ["--split", "test", "--sample_n", "2", "--seed", "14", "--gen_model_id", tiny32,
            "--prm_dir", str(prm_dir), "--methods", *STAGE_4_METHODS, "--b1", "2", "--b2", "2", "--voter_k", "2",
            "--n_simulations", "2", "--max_children", "2", "--max_new_tokens", "6", "--workers", "1",
            "--logs_dir", str(tmp_path / "logs"), *toy_args(tiny32)]
    assert evaluate.main(argv) == 0
    for method in STAGE_4_METHODS:
        [manifest] = (tmp_path / "logs").glob(f"toy_{method}_*.manifest.json")
        assert json.loads(manifest.read_text())["definition"]["models"]["policy"]["backend"] == "vllm"
        records = [json.loads(line) for line in manifest.with_name(
            manifest.name.replace(".manifest.json", ".jsonl")).read_text().splitlines()]
        assert [r["index"] for r in records] == [0, 1] and not any(r["error"] for r in records), method
        assert all(r["metrics"]["generated_tokens"] > 0 for r in records), method


def test_the_handoff_conditions_run_with_the_vllm_backend(vllm_policy, tiny32, tmp_path):
    import yaml
    from masprm.stages import evaluate

    scorer = untrained_scorer(tiny32, tmp_path / "scorer")   # a head in its weights: a headless one is refused

    roles = ["Analyst", "Solver", "Finalizer"]
    config = tmp_path / "handoff3.yaml"
    config.write_text(yaml.safe_dump({
        "agents": [{"name": r, "system_prompt": f"You are the {r}.", "max_new_tokens": 6} for r in roles],
        "edges": [], "handoff": {"initial_role": "Analyst", "fixed_schedule": ["Analyst", "Solver", "Finalizer"]}}))
    data = tmp_path / "math.jsonl"
    data.write_text("".join(json.dumps({"problem": f"What is {i} + {i}?", "solution": f"$\\boxed{{{2 * i}}}$",
                                        "level": "Level 5", "type": "Algebra"}) + "\n" for i in (1, 2)))
    argv = ["--methods", "handoff_policy", "handoff_prm", "--gen_model_id", tiny32, "--handoff_prm_dir", str(scorer),
            "--allow_scorer_kind_mismatch", "--mas_config", str(config), "--data_file", str(data),
            "--sample_n", "2", "--seed", "3", "--min_turns", "2", "--max_turns", "3", "--handoff_candidates", "2",
            "--max_new_tokens", "6", "--workers", "1", "--logs_dir", str(tmp_path / "logs"), *STAGE_FLAGS]
    assert evaluate.main(argv) == 0
    for log in (tmp_path / "logs").glob("*.jsonl"):
        records = [json.loads(line) for line in log.read_text().splitlines()]
        assert [r["index"] for r in records] == [0, 1] and not any(r["error"] for r in records), log.name
