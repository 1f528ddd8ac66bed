"""Stage 3 scorer training: data checks, losses, metrics, learnability, the CLI (resume: test_trainer_resume.py).

Everything runs on CPU with the session's tiny Qwen2 model; training runs are
a few dozen steps on short synthetic texts.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from masprm.train import train_scorer
from masprm.state_text import join_steps
from masprm.errors import MasprmError
from masprm.models.text_encoder import TextEncoder
from masprm.models.token_scorer import separator_token_id
from masprm.train.data import eval_view, load_records, split_eval
from masprm.train.metrics import PAD, pair_metrics, regression_metrics
from masprm.train.stepwise import build_step_examples, step_loss

from helpers import REPO, SEP
from helpers_training import config, ppm_record, step_record, write_jsonl

pytestmark = pytest.mark.slow   # trains scorers


# --------------------------------------------------------------------------- synthetic data


# --------------------------------------------------------------------------- reading and checking data


def test_records_are_checked_with_file_and_line(tmp_path):
    good = json.dumps(ppm_record(random.Random(0)))
    cases = {
        "empty": ("", "no records"),
        "bad_json": (good + "\n{oops\n", ":2: not valid JSON"),
        "missing": (good + "\n" + json.dumps({"prompt": "q", "chosen_actions": ["a"]}) + "\n",
                    ":2: missing field(s) rejected_actions for ppm training"),
        "not_list": (json.dumps({"prompt": "q", "chosen_actions": "a", "rejected_actions": ["b"]}),
                     ":1: field 'chosen_actions' must be a non-empty list of strings"),
        "ragged": (json.dumps({"prompt": "q", "chosen_actions": ["a", "b"], "rejected_actions": ["c"]}),
                   ":1: chosen_actions and rejected_actions must have the same number of steps"),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(MasprmError, match=re.escape(expected)) as err:
            load_records(path, "ppm")
        assert str(path) in str(err.value)
    with pytest.raises(MasprmError, match="file not found"):
        load_records(tmp_path / "nope.jsonl", "ppm")
    with pytest.raises(MasprmError, match="is a folder"):
        load_records(tmp_path, "ppm")


def test_step_records_need_one_label_in_range_per_completion(tmp_path):
    ok = {"prompt": "q", "completions": ["a", "b"], "labels": [0.5, -1]}
    path = write_jsonl(tmp_path / "prm.jsonl", [ok, {**ok, "labels": [0.5]}])
    with pytest.raises(MasprmError, match=r"prm.jsonl:2: field 'labels' must be a list with one number"):
        load_records(path, "prm")
    write_jsonl(path, [{**ok, "labels": [0.5, 1.7]}])
    with pytest.raises(MasprmError, match=r":1: label 1.7 is not a number in \[-1, 1\]"):
        load_records(path, "orm")
    # A ppm file given to --mode prm names the fields prm needs.
    write_jsonl(path, [ppm_record(random.Random(0))])
    with pytest.raises(MasprmError, match=r"missing field\(s\) completions, labels for prm training"):
        load_records(path, "prm")


def test_json_list_files_are_read_too(tmp_path):
    records = [ppm_record(random.Random(i)) for i in range(3)]
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    assert load_records(path, "ppm") == records


def test_json_and_jsonl_train_without_the_datasets_package(tmp_path, monkeypatch):
    # A GPU image without `datasets` (the lent H200's) must still read stage-2 JSON/JSONL: the
    # project's own reader takes over; Parquet, which only `datasets` reads, is refused in one line.
    monkeypatch.setitem(sys.modules, "datasets", None)   # `import datasets` now raises ImportError
    rows = [ppm_record(random.Random(i)) for i in range(2)]
    jsonl = write_jsonl(tmp_path / "pairs.jsonl", rows)
    as_list = tmp_path / "pairs.json"
    as_list.write_text(json.dumps(rows), encoding="utf-8")
    assert load_records(jsonl, "ppm") == rows
    assert load_records(as_list, "ppm") == rows
    parquet = tmp_path / "pairs.parquet"
    parquet.write_bytes(b"PAR1")
    with pytest.raises(MasprmError) as err:
        load_records(parquet, "ppm")
    assert str(err.value) == (f"{parquet}: reading Parquet needs the datasets package (pip install datasets), "
                              "which does not import here; JSON and JSONL files need no extra package")


def test_eval_split_is_seeded_four_percent_and_never_empty():
    train, held = split_eval(100, seed=3)
    assert len(held) == 4 and sorted(train + held) == list(range(100))
    assert split_eval(100, seed=3) == (train, held) and split_eval(100, seed=4) != (train, held)
    assert len(split_eval(5, seed=0)[1]) == 1
    with pytest.raises(MasprmError, match="at least 2"):
        split_eval(1, seed=0)


# --------------------------------------------------------------------------- separator and truncation


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from masprm.models.loading import load_tokenizer

    tok = load_tokenizer(str(tiny_model_dir), padding_side="right")
    return tok, separator_token_id(tok, SEP)


def test_separator_becomes_one_special_token(tiny_model_dir, tokenizer):
    tok, sep_id = tokenizer
    ids = tok("x" + SEP + "y" + SEP, add_special_tokens=False)["input_ids"]
    assert ids.count(sep_id) == 2 and len(tok) == sep_id + 1
    from masprm.models.loading import load_tokenizer

    fresh = load_tokenizer(str(tiny_model_dir))
    with pytest.raises(MasprmError, match="is .* tokens .*allow adding it as a new token"):
        separator_token_id(fresh, "<sep>", add_if_missing=False)
    with pytest.raises(MasprmError, match="only a separator of the form <...> can be added"):
        separator_token_id(fresh, "##END##")


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def test_prm_orm_tokenise_prompt_and_each_step_separately_and_keep_the_end(tokenizer):
    tok, sep_id = tokenizer
    prompt, steps = "Q: " + "apples and pens " * 20, ["1 + 2 = 3.", "VERDICT: CORRECT"]
    # TRL's PRM rule: prompt ids + (step ids + separator) per step; no BOS for this tokenizer.
    expected = _ids(tok, prompt) + _ids(tok, steps[0]) + [sep_id] + _ids(tok, steps[1]) + [sep_id]
    ids, ends = TextEncoder(tok, sep_id, max_length=10_000, style="steps").encode_steps(prompt, steps)
    assert ids == expected and ends == [i for i, t in enumerate(expected) if t == sep_id]
    # Prompt cut: its last 5 tokens survive, the steps are intact.
    cut, _ = TextEncoder(tok, sep_id, max_length=10_000, max_prompt_length=5,
                         style="steps").encode_steps(prompt, steps)
    n_steps = len(expected) - len(_ids(tok, prompt))
    assert cut == expected[-(5 + n_steps):]
    # Length cut: the end is kept, so the last separator is the last token.
    short, ends = TextEncoder(tok, sep_id, max_length=8, style="steps").encode_steps(prompt, steps)
    assert short == expected[-8:] and short[-1] == sep_id
    assert ends == [i for i, t in enumerate(short) if t == sep_id]
    # At inference a StepText is tokenised the same way; a ppm (whole) text in one piece.
    text = join_steps(prompt, steps, SEP)
    assert TextEncoder(tok, sep_id, max_length=10_000, style="steps").encode([text]) == [expected]
    assert TextEncoder(tok, sep_id, max_length=10_000).encode([str(text)]) == [_ids(tok, str(text))]


def test_a_bos_token_is_prepended_when_the_tokenizer_has_one(tiny_model_dir):
    from masprm.models.loading import load_tokenizer

    tok = load_tokenizer(str(tiny_model_dir), padding_side="right")
    tok.add_special_tokens({"bos_token": "<s>"})
    tok.add_bos_token = True  # a Llama/Mistral/Gemma-style tokenizer
    sep_id = separator_token_id(tok, SEP)
    bos = tok.bos_token_id
    ids, ends = TextEncoder(tok, sep_id, max_length=64, style="steps").encode_steps("Q: 1+1?", ["2"])
    assert ids == [bos] + _ids(tok, "Q: 1+1?") + _ids(tok, "2") + [sep_id] and ends == [len(ids) - 1]
    # ppm: the whole text with the tokenizer's special tokens, cut from the left after the BOS.
    text = "Q: " + "apples " * 30 + "2" + SEP
    whole = TextEncoder(tok, sep_id, max_length=10).encode([text])[0]
    assert whole == [bos] + _ids(tok, text)[-9:]


def test_truncated_step_examples_label_the_surviving_separators_from_the_end(tokenizer):
    tok, sep_id = tokenizer
    rec = {"prompt": "Q: 3 plus 4? ", "completions": ["3 + 4 = 7.", "VERDICT: CORRECT"], "labels": [0.5, 1.0]}
    wide = TextEncoder(tok, sep_id, max_length=512, style="steps")
    (ex,), _ = build_step_examples([rec], wide, SEP)
    assert ex["targets"] == [0.5, 1.0] and [ex["input_ids"][p] for p in ex["positions"]] == [sep_id, sep_id]
    # Keep only the last few tokens: the first separator is gone, the last label stays on the last one.
    narrow = TextEncoder(tok, sep_id, max_length=6, style="steps")
    (ex,), _ = build_step_examples([rec], narrow, SEP)
    assert ex["targets"] == [1.0] and ex["positions"] == [5]


def test_orm_trains_on_the_last_step_and_evaluates_every_step_with_the_final_outcome(tokenizer):
    tok, sep_id = tokenizer
    rec = {"prompt": "Q: 3 plus 4? ", "completions": ["3 + 4 = 7.", "VERDICT: CORRECT"], "labels": [-0.2, 1.0]}
    (orm,), _ = build_step_examples([rec], TextEncoder(tok, sep_id, max_length=512, style="steps"), SEP,
                                    last_only=True)
    seps = [i for i, t in enumerate(orm["input_ids"]) if t == sep_id]
    assert orm["positions"] == seps[-1:] and orm["targets"] == [1.0]
    held = eval_view(orm)  # the original's ORM eval: TRL labels all steps, then the final label goes on each
    assert held["positions"] == seps and held["targets"] == [1.0, 1.0]


def test_a_separator_that_also_occurs_inside_a_step_is_refused_in_one_line(tmp_path, tiny_model_dir, capsys):
    from masprm.models.loading import load_tokenizer

    tok = load_tokenizer(str(tiny_model_dir), padding_side="right")
    sep_id = separator_token_id(tok, "\n")
    good = {"prompt": "Q: 3 plus 4? ", "completions": ["3 + 4 = 7.", "So 7."], "labels": [0.5, 1.0]}
    bad = {"prompt": "Q: 3 plus 4? ", "completions": ["3 + 4\n= 7.", "So 7."], "labels": [0.5, 1.0]}
    enc = TextEncoder(tok, sep_id, max_length=512, style="steps")
    (ex,), _ = build_step_examples([good], enc, "\n")
    assert [ex["input_ids"][p] for p in ex["positions"]] == [sep_id, sep_id]
    with pytest.raises(MasprmError, match=r"data.jsonl: record 2: the step separator '\\n' also occurs"):
        build_step_examples([good, bad], enc, "\n", source="data.jsonl")
    # The command line: one line, exit 2, before any model weights are loaded for training.
    data = write_jsonl(tmp_path / "nl.jsonl", [good, bad] * 4)
    proc = subprocess.run([sys.executable, str(REPO / "src/train/trainer.py"), "--mode", "prm", "--data_dir",
                           str(data), "--model-id", str(tiny_model_dir), "--output-dir", str(tmp_path / "o"),
                           "--step-separator", "\n", "--quiet"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "record 2" in proc.stderr


# --------------------------------------------------------------------------- losses and metrics


def test_step_losses_follow_spec_targets():
    logit = torch.tensor([0.0, 2.0, -1.0])
    y = torch.tensor([1.0, -0.5, 0.2])
    bce = step_loss(logit, y, "bce")
    soft = (y + 1) / 2
    expected = -(soft * torch.log(torch.sigmoid(logit)) + (1 - soft) * torch.log(1 - torch.sigmoid(logit)))
    assert torch.allclose(bce, expected, atol=1e-6)
    hard = step_loss(logit, y, "bce", binary_targets=True)
    assert torch.allclose(hard, torch.nn.functional.binary_cross_entropy_with_logits(
        logit, torch.tensor([1.0, 0.0, 1.0]), reduction="none"))
    target = torch.atanh(torch.tensor([0.95, -0.5, 0.2]))  # y=1 is clamped to 0.95 before atanh
    assert torch.allclose(step_loss(logit, y, "mse"), (logit - target) ** 2, atol=1e-6)
    huber = step_loss(logit, y, "huber", huber_beta=0.1)
    assert torch.allclose(huber, torch.nn.functional.smooth_l1_loss(logit, target, beta=0.1, reduction="none"))


def test_pair_and_regression_metrics_have_the_original_names_and_values():
    # rows: r_pos, r_neg (raw logits), pos_found, neg_found
    preds = np.array([[2.0, 1.0, 1, 1], [0.0, 1.0, 1, 0], [3.0, -1.0, 0, 0]])
    m = pair_metrics(preds)
    assert m == pytest.approx({
        "pair_acc": 2 / 3, "avg_margin": 4 / 3, "median_margin": 1.0, "std_margin": np.std([1.0, -1.0, 4.0]),
        "avg_bt_prob": np.mean(1 / (1 + np.exp(-np.array([1.0, -1.0, 4.0])))),
        "pos_mean": 5 / 3, "neg_mean": 1 / 3,  # raw logits, not tanh
        "fallback_rate_pos": 1 / 3, "fallback_rate_neg": 2 / 3, "fallback_rate_any": 2 / 3, "num_pairs": 3,
        # tie figures (tests/test_newer_branch_trainer.py): no logit near saturation here
        "tanh_pair_acc": 2 / 3, "tanh_tie_rate": 0.0, "raw_score_abs_max": 3.0, "raw_score_abs_ge_9p011_rate": 0.0,
        "raw_score_abs_p95": np.quantile([2.0, 0.0, 3.0, 1.0, 1.0, 1.0], 0.95)})

    p = np.array([[0.5, PAD], [-0.5, 0.9], [0.3, PAD]])
    y = np.array([[1.0, PAD], [-1.0, 1.0], [0.0, PAD]])
    r = regression_metrics(p, y)
    err = np.array([0.5, -0.5, 0.9, 0.3]) - np.array([1.0, -1.0, 1.0, 0.0])
    assert set(r) == {"rmse", "pearson", "r2", "explained_variance", "mae", "mse", "bias"}
    assert r["mse"] == pytest.approx(np.mean(err ** 2)) and r["bias"] == pytest.approx(err.mean())
    assert r["pearson"] == pytest.approx(np.corrcoef([0.5, -0.5, 0.9, 0.3], [1, -1, 1, 0])[0, 1])
    assert r["rmse"] == pytest.approx(np.sqrt(np.mean(err ** 2))) and r["mae"] == pytest.approx(np.abs(err).mean())
    assert regression_metrics(np.array([0.2, 0.2]), np.array([1.0, -1.0]))["pearson"] == 0.0  # undefined -> 0


# --------------------------------------------------------------------------- training


def test_ppm_learns_a_property_of_the_chosen_step(tmp_path, tiny_model_dir):
    from masprm.models.scorer import load_scorer

    rng = random.Random(0)
    data = write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(rng) for _ in range(150)])
    result = train_scorer(config(tmp_path, data, tiny_model_dir, "ppm", max_steps=160, eval_steps=80))
    losses = [h["loss"] for h in result.trainer.state.log_history if "loss" in h]
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:5])

    held_out = [ppm_record(random.Random(10_000 + i)) for i in range(40)]
    from masprm.labels.mining import ppm_texts

    scorer = load_scorer(result.output_dir)
    texts = [ppm_texts(r, SEP) for r in held_out]
    pos = scorer.score_batch([p for p, _ in texts])
    neg = scorer.score_batch([n for _, n in texts])
    accuracy = np.mean(np.array(pos) > np.array(neg))
    assert accuracy >= 0.9, accuracy

    out = result.output_dir
    meta = json.loads((out / "masprm_scorer.json").read_text())
    assert meta["status"] == "completed" and meta["mode"] == "ppm" and meta["separator"] == SEP
    assert meta["base_model_id"] == str(tiny_model_dir) and "eval_pair_acc" in meta["eval_metrics"]
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["task_type"] == "TOKEN_CLS" and adapter["bias"] == "all"
    assert set(adapter["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                              "down_proj"}
    assert {"score", "embed_tokens", "input_layernorm", "post_attention_layernorm", "norm"} <= set(
        adapter["modules_to_save"])
    weights = load_file(out / "adapter_model.safetensors")
    embedding_keys = [k for k in weights if "embed_tokens" in k]
    assert len(embedding_keys) == 1  # the trained copy only, not the base matrix again
    assert weights[embedding_keys[0]].shape[0] == len(scorer.encoder.tokenizer)
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-160", "checkpoint-80"]


@pytest.mark.parametrize("mode,loss", [("prm", "mse"), ("orm", "bce")])
def test_step_objectives_reduce_their_loss(tmp_path, tiny_model_dir, mode, loss):
    rng = random.Random(1)
    data = write_jsonl(tmp_path / f"{mode}.jsonl", [step_record(rng) for _ in range(120)])
    result = train_scorer(config(tmp_path, data, tiny_model_dir, mode, loss=loss, max_steps=40, eval_steps=40))
    losses = [h["loss"] for h in result.trainer.state.log_history if "loss" in h]
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5])
    # Both modes are judged on every step (orm: each labelled with the final outcome); orm trains on the last.
    labels = result.trainer.predict(result.eval_examples).label_ids
    assert (labels != PAD).sum() == 2 * len(result.eval_examples)
    assert {len(ex["positions"]) for ex in result.train_examples} == {2 if mode == "prm" else 1}
    assert set(result.metrics) >= {"eval_rmse", "eval_pearson", "eval_r2", "eval_explained_variance",
                                   "eval_mae", "eval_mse", "eval_bias"}


def test_qlora_path_trains_adapters_on_a_4bit_base(tmp_path, tiny_model_dir):
    """The CUDA default (4-bit NF4 base, k-bit preparation, LoRA on Linear4bit), run here on CPU by flag."""
    import bitsandbytes as bnb

    rng = random.Random(3)
    data = write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(rng) for _ in range(30)])
    result = train_scorer(config(tmp_path, data, tiny_model_dir, "ppm", max_steps=4, eval_steps=4,
                                 load_in_4bit=True))
    inner = result.trainer.model.base_model.model
    assert isinstance(inner.model.layers[0].self_attn.q_proj.base_layer, bnb.nn.Linear4bit)
    assert inner.is_activation_checkpointing
    head = inner.score.modules_to_save["default"]
    assert isinstance(head, torch.nn.Linear) and head.weight.requires_grad and head.weight.dtype == torch.float32
    losses = [h["loss"] for h in result.trainer.state.log_history if "loss" in h]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert (result.output_dir / "adapter_model.safetensors").is_file()
    with pytest.raises(MasprmError, match="load_in_4bit needs LoRA"):
        train_scorer(config(tmp_path, data, tiny_model_dir, "ppm", load_in_4bit=True, lora=False))


def test_cli_reports_bad_input_in_one_line(tmp_path, monkeypatch, capsys):
    from masprm.cli import run_cli

    script = REPO / "src" / "train" / "trainer.py"
    from masprm.stages.train import main
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "q", "completions": ["a"], "labels": [1]}\n{broken\n', encoding="utf-8")
    cases = [
        (["--mode", "prm", "--data_dir", str(bad)], f"{bad}:2: not valid JSON"),
        (["--mode", "ppm", "--data_dir", str(tmp_path / "none.jsonl")], "none.jsonl: file not found"),
        (["--mode", "ppm", "--data_dir", str(bad), "--lora-dropout", "1.5"], "--lora-dropout must be in [0, 1)"),
        (["--mode", "xyz", "--data_dir", str(bad)], "invalid choice: 'xyz'"),
    ]
    for argv, expected in cases:
        monkeypatch.setattr(sys, "argv", [str(script), *argv, "--output-dir", str(tmp_path / "o")])
        with pytest.raises(SystemExit) as exit_info:
            run_cli(main)
        assert exit_info.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], lines
    assert not (tmp_path / "o").exists()
    # The script runs from the repo root (the package installed by make setup; here conftest's PYTHONPATH).
    proc = subprocess.run([sys.executable, str(script), "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "--max-prompt-length" in proc.stdout and "--no-lora" in proc.stdout


def test_a_training_into_a_log_file_shows_progress_lines_and_the_same_weights_as_a_quiet_one(tmp_path, capsys,
                                                                                              tiny_model_dir):
    """stderr here is no terminal (pytest captures it), as in the demo's log files: a line per logged loss, the
    steps, the loss and the time left; printing them changes no number (the weights are byte for byte a quiet
    run's)."""
    from helpers_training import train_tiny

    runs = {}
    for progress in (False, True):
        folder = tmp_path / f"progress_{progress}"
        folder.mkdir()
        capsys.readouterr()
        result = train_tiny(folder, tiny_model_dir, "prm", seed=0, progress=progress, max_steps=4, eval_steps=4,
                            logging_steps=2)
        runs[progress] = (result.output_dir, capsys.readouterr().err)
    (quiet, quiet_err), (shown, shown_err) = runs[False], runs[True]
    assert "[progress]" not in quiet_err
    lines = [line for line in shown_err.splitlines() if line.startswith("[progress]")]
    assert [re.match(r"\[progress\] train step (\d+)/4 \(\d+%\), loss [\d.]+, .* so far, about .* left", line).group(1)
            for line in lines] == ["2", "4"]   # --logging_steps 2 of 4 steps
    assert not re.search(r"\d/4 \[", shown_err)   # no training bar redrawn into the file ("2/4 [00:01<00:01")
    assert (quiet / "adapter_model.safetensors").read_bytes() == (shown / "adapter_model.safetensors").read_bytes()
