"""Stage 3 follows the original trainer (issue 13): defaults, split, dropout, batch halving, logs, cache.

Short CPU runs on the session's tiny model; each training run is a few steps.
"""

from __future__ import annotations

import random
import importlib
from pathlib import Path

import pytest
import torch

from masprm.state_text import StepText, join_steps
from masprm.train import TrainConfig, train_scorer
from masprm.train import data as train_data
from masprm.train.objectives import OBJECTIVES
from masprm.train.cache import CACHE_DIR, cached_examples
from masprm.models.text_encoder import TextEncoder
from masprm.models.token_scorer import separator_token_id
from masprm.train.data import split_eval

from helpers_training import config, ppm_record, step_record, write_jsonl

pytestmark = pytest.mark.slow   # trains scorers

REPO = Path(__file__).resolve().parents[1]
SEED_README_TRAINING = [  # the seed README's scorer command, verbatim
    "--mode", "ppm",
    "--data_dir", "results/ppm_pairs_gsm8k_res_train_Qwen_Qwen2.5-1.5B-Instruct_r40_c4_cand3_t0p7_p0p95.jsonl",
    "--model-id", "Qwen/Qwen2.5-1.5B-Instruct", "--output-dir", "checkpoints/MASPRM-GSM8K-1.5B",
    "--epochs", "5", "--lr", "1e-5", "--train-batch-size", "8", "--grad-accum", "16", "--lora-r", "256",
    "--lora-alpha", "32", "--lora-dropout", "0.05", "--seed", "42"]


def _parser():
    return importlib.import_module("masprm.stages.train").build_parser()


def test_cli_defaults_are_the_originals_and_hub_logs_is_accepted():
    args = _parser().parse_args(["--mode", "prm", "--data_dir", "d.jsonl", "--output-dir", "o"])
    assert (args.epochs, args.eval_steps, args.save_steps, args.hub_logs) == (10, 200, None, True)
    cfg = TrainConfig(**vars(args))
    assert cfg.epochs == 10 and cfg.eval_steps == 200 and cfg.lr == 1e-5 and cfg.grad_accum == 16
    assert _parser().parse_args(["--mode", "ppm", "--data_dir", "d", "--output-dir", "o", "--hub-logs"]).hub_logs
    assert not _parser().parse_args(["--mode", "ppm", "--data_dir", "d", "--output-dir", "o",
                                     "--no-hub-logs"]).hub_logs
    seed = _parser().parse_args(SEED_README_TRAINING)
    assert seed.epochs == 5 and seed.lora_dropout == 0.05 and seed.train_batch_size == 8


def test_mode_data_and_output_defaults_are_the_originals(tmp_path, monkeypatch, capsys):
    # The original trainer: --mode prm, --data_dir the stage-2 file of its GSM8K folder
    # (results/gsm8k_res_train_Qwen_Qwen2.5-1.5B-Instruct, named by Path.stem: ".5B-Instruct" went as a
    # suffix), --output-dir checkpoints/Qwen2.5-1.5B-RM.
    run_folder = Path("results/gsm8k_res_train_Qwen_Qwen2.5-1.5B-Instruct")
    args = _parser().parse_args([])
    assert (args.mode, args.data_file, args.output_dir) == (
        "prm", f"results/prm_samples_{run_folder.stem}.jsonl", "checkpoints/Qwen2.5-1.5B-RM")
    assert args.data_file == "results/prm_samples_gsm8k_res_train_Qwen_Qwen2.5-1.jsonl"
    # Without its data the bare command stops at once: one line naming the flag, nothing written.
    from masprm.cli import run_cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["trainer.py"])
    with pytest.raises(SystemExit) as done:
        run_cli(importlib.import_module("masprm.stages.train").main)
    assert done.value.code == 2 and "--data_dir" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("n,seed", [(2, 0), (10, 42), (25, 7), (26, 42), (100, 3), (333, 14)])
def test_held_out_split_is_datasets_train_test_split(n, seed):
    datasets = pytest.importorskip("datasets")
    split = datasets.Dataset.from_dict({"i": list(range(n))}).train_test_split(test_size=0.04, seed=seed)
    train, held = split_eval(n, seed)
    assert held == split["test"]["i"] and train == split["train"]["i"]
    assert len(held) == -(-4 * n // 100)  # ceil(4% of n)


# --------------------------------------------------------------------------- short runs (shared)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir):
    """One short run per mode with LoRA dropout 0.1 and the default eval/save interval of 200."""
    tmp = tmp_path_factory.mktemp("orig_runs")
    rng = random.Random(5)
    data = {"ppm": write_jsonl(tmp / "pairs.jsonl", [ppm_record(rng) for _ in range(30)])}
    data["prm"] = data["orm"] = write_jsonl(tmp / "steps.jsonl", [step_record(rng) for _ in range(30)])
    out = {}
    for mode in ("ppm", "prm", "orm"):
        cfg = config(tmp, data[mode], tiny_model_dir, mode, max_steps=3, lora_dropout=0.1)
        cfg.eval_steps, cfg.save_steps = TrainConfig.eval_steps, TrainConfig.save_steps  # the defaults
        out[mode] = train_scorer(cfg)
    return out


def _dropouts(model) -> list[float]:
    return [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]


def test_prm_and_orm_train_with_every_dropout_off_ppm_keeps_lora_dropout(runs):
    for mode in ("prm", "orm"):
        ps = _dropouts(runs[mode].trainer.model)
        assert ps and all(p == 0.0 for p in ps), mode  # LoRA's dropout modules included
    lora = [m.p for n, m in runs["ppm"].trainer.model.named_modules()
            if "lora_dropout" in n and isinstance(m, torch.nn.Dropout)]
    assert lora and all(p == 0.1 for p in lora)


def test_a_run_shorter_than_the_eval_interval_keeps_its_final_weights(runs):
    for mode, result in runs.items():
        args, state = result.trainer.args, result.trainer.state
        assert (args.eval_steps, args.save_steps) == (200, 200), mode
        # No evaluation before the end; the only checkpoint (if any) is the last step's, so the
        # weights kept are the final ones.
        final = str(result.output_dir / "checkpoint-3")
        assert state.global_step == 3 and state.best_model_checkpoint in (None, final), mode
        assert [p.name for p in result.output_dir.glob("checkpoint-*")] in ([], ["checkpoint-3"])
        assert {h["step"] for h in state.log_history if "eval_loss" in h} <= {3}
        assert (result.output_dir / "adapter_model.safetensors").is_file()


def test_prm_orm_group_by_length_and_batches_halve_on_out_of_memory(runs):
    assert runs["ppm"].trainer.args.train_sampling_strategy == "random"
    assert {runs[m].trainer.args.train_sampling_strategy for m in ("prm", "orm")} == {"group_by_length"}
    assert all(r.trainer.args.auto_find_batch_size for r in runs.values())


def test_out_of_memory_halves_the_training_batch(tmp_path, tiny_model_dir, monkeypatch):
    from masprm.train.scorer_trainer import ScorerTrainer

    real = ScorerTrainer.token_logits
    seen = []

    def small_memory(self, model, inputs):
        rows = inputs["input_ids"].shape[0]
        if model.training:
            seen.append(rows)
            if rows > 2:
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, model, inputs)

    monkeypatch.setattr(ScorerTrainer, "token_logits", small_memory)
    data = write_jsonl(tmp_path / "steps.jsonl", [step_record(random.Random(1)) for _ in range(30)])
    # 30 copies of one question's record: only a split over records can hold some out
    result = train_scorer(config(tmp_path, data, tiny_model_dir, "prm", max_steps=2, train_batch_size=8,
                                 eval_split_by="record"))
    # 8 -> 4 -> 2 (halved each time, not accelerate's 0.9x), then the run completes.
    assert seen[0] == 8 and 4 in seen and 7 not in seen
    assert result.trainer.state.train_batch_size == 2 and result.trainer.state.global_step == 2


def test_ppm_and_orm_runs_write_tensorboard_event_files(runs):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (requirements.txt pins it)")
    for mode in ("ppm", "orm"):
        events = list((runs[mode].output_dir / "runs").glob("*/events.out.tfevents.*"))
        assert events and all(e.stat().st_size > 0 for e in events), mode


def test_the_scorer_tokenises_a_state_text_as_training_did(runs):
    from masprm.models.scorer import load_scorer

    for mode in ("prm", "orm", "ppm"):
        result = runs[mode]
        scorer = load_scorer(result.output_dir)
        if mode == "ppm":
            ex = result.train_examples[0]
            assert scorer.encoder.encode([ex["pos_text"]]) == [ex["pos_ids"]]
            continue
        rec = {"prompt": "Q: 3 plus 4? ", "completions": ["3 + 4.", "VERDICT: CORRECT"], "labels": [0.3, 1.0]}
        # training's rule with the run's lengths (max_length 64, max_prompt_length 32)
        expected = TextEncoder(scorer.encoder.tokenizer, scorer.encoder.sep_id, 64, 32,
                               style="steps").encode_steps(rec["prompt"], rec["completions"])[0]
        text = join_steps(rec["prompt"], rec["completions"], "</step>")
        assert scorer.encoder.style == "steps" and scorer.encoder.encode([text]) == [expected], mode


def test_state_texts_carry_their_prompt_and_steps():
    text = join_steps("Q?", ["a", "b"], "</step>")
    assert text == "Q?a</step>b</step>" and isinstance(text, StepText)
    assert (text.prompt, text.steps) == ("Q?", ("a", "b"))
    import pickle

    again = pickle.loads(pickle.dumps(text))
    assert again == text and again.steps == ("a", "b") and again.sep == "</step>"


# --------------------------------------------------------------------------- tokenised-data cache


def test_tokenised_data_is_cached_per_data_file_seed_and_lengths(tmp_path, tiny_model_dir, monkeypatch):
    from masprm.models.loading import load_tokenizer

    tok = load_tokenizer(str(tiny_model_dir), padding_side="right")
    sep_id = separator_token_id(tok, "</step>")
    data = write_jsonl(tmp_path / "steps.jsonl", [step_record(random.Random(2)) for _ in range(6)])
    records = train_data.load_records(data, "prm")
    builds = []
    real = OBJECTIVES["prm"].build_examples
    monkeypatch.setattr(OBJECTIVES["prm"], "build_examples", lambda *a, **k: builds.append(1) or real(*a, **k))

    def get(**changes):
        cfg = TrainConfig(mode="prm", data_file=str(data), output_dir=str(tmp_path / "out"), max_length=64,
                          max_prompt_length=32)
        for k, v in changes.items():
            setattr(cfg, k, v)
        enc = TextEncoder(tok, sep_id, cfg.max_length, cfg.max_prompt_length, style="steps")
        return cached_examples(cfg, records, enc, tmp_path / "out")

    first, _, hit = get()
    assert not hit and len(builds) == 1
    again, _, hit = get()
    assert hit and again == first and len(builds) == 1
    for n, change in enumerate([{"seed": 1}, {"max_length": 32}, {"max_prompt_length": 8}], start=2):
        _, _, hit = get(**change)
        assert not hit and len(builds) == n
    data.write_text(data.read_text() + data.read_text().splitlines(keepends=True)[0])  # new content, same name
    _, _, hit = get()
    assert not hit and len(builds) == 5
    assert len(list((tmp_path / "out" / CACHE_DIR).glob("prm_*.json"))) == 1  # stale keys are removed
