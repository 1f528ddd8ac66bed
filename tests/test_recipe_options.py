"""The scorer recipe's axes as training options (issue 55): where the value head reads a step (--head-read
step_end | step_mean), recorded only when changed so that a default training writes what it wrote before; a
scorer on its own backbone loaded on that backbone by the step benchmark."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from masprm.errors import ConfigError
from masprm.models.scorer import load_scorer
from masprm.models.step_read import read_logits
from masprm.models.options import ModelOptions
from masprm.scorer_meta import head_read_of
from masprm.instruments import stepbench
from masprm.train.config import TrainConfig, recorded_settings
from masprm.train.stepwise import StepCollator

from helpers_training import config, first_eval_batch, step_record, train_tiny, write_jsonl

SEP = 9


def test_read_logits_by_hand():
    logits = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                           [10.0, 20.0, 30.0, 40.0, 0.0, 0.0]])
    ids = torch.tensor([[5, 6, SEP, 7, 8, SEP],
                        [5, SEP, 6, SEP, 0, 0]])   # the second row padded after its last separator
    at = torch.tensor([[2, 5], [1, 3]])
    assert read_logits(logits, ids, at, SEP).tolist() == [[3.0, 6.0], [20.0, 40.0]]
    # step_mean: (1 + 2 + 3) / 3, (4 + 5 + 6) / 3; (10 + 20) / 2, (30 + 40) / 2
    assert read_logits(logits, ids, at, SEP, "step_mean").tolist() == [[2.0, 5.0], [15.0, 35.0]]
    # a position that is not a separator (a text without one: its last token) spans from the last separator on
    assert read_logits(logits, ids, torch.tensor([[4], [0]]), SEP, "step_mean").tolist() == [[4.5], [10.0]]
    with pytest.raises(ValueError, match="step_end, step_mean"):
        read_logits(logits, ids, at, SEP, "pooled")


def test_head_read_is_for_the_stepwise_objectives_and_recorded_only_when_changed():
    with pytest.raises(ConfigError, match="built for --mode prm and orm") as err:
        TrainConfig(mode="ppm", head_read="step_mean").validate()
    assert err.value.setting == "head_read"
    TrainConfig(mode="orm", head_read="step_mean").validate()
    default = TrainConfig(mode="prm")
    assert "head_read" not in recorded_settings(default)   # a default training records what it did before
    assert recorded_settings(TrainConfig(mode="prm", head_read="step_mean"))["head_read"] == "step_mean"


def test_what_a_training_shows_is_not_recorded_so_quiet_and_verbose_scorers_are_one_scorer():
    from dataclasses import fields

    from masprm.train.config import DISPLAY_SETTINGS

    assert set(DISPLAY_SETTINGS) <= {f.name for f in fields(TrainConfig)}   # a renamed field breaks this
    verbose = TrainConfig(mode="prm", logging_steps=5, report_to=["tensorboard"])
    quiet = TrainConfig(mode="prm", progress=False, hub_logs=False)
    assert recorded_settings(verbose) == recorded_settings(quiet)
    assert not set(DISPLAY_SETTINGS) & set(recorded_settings(verbose))
    assert recorded_settings(TrainConfig(mode="prm", lr=1e-3)) != recorded_settings(quiet)   # a learning setting is recorded
    assert head_read_of({}) == "step_end" and head_read_of({"head_read": "step_mean"}) == "step_mean"


@pytest.mark.parametrize("read", ["step_end", "step_mean"])
def test_the_trainer_and_the_served_scorer_read_steps_where_told(tmp_path, tiny_model_dir, read):
    result = train_tiny(tmp_path, tiny_model_dir, "prm", seed=3, head_read=read)
    meta = json.loads((tmp_path / "out_prm" / "masprm_scorer.json").read_text())
    assert meta.get("head_read") == (None if read == "step_end" else read)
    assert ("head_read" in meta["settings"]) == (read != "step_end")
    # training: the loss's logits are the read of the token logits at the labelled separators
    example, trainer, batch = first_eval_batch(result, StepCollator)
    with torch.no_grad():
        _, preds, _ = trainer.loss_and_predictions(trainer.model, batch)
        token = trainer.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[0, :, 0]
    sep_id = trainer.processing_class.convert_tokens_to_ids("</step>")
    spans, start = [], 0
    for p in example["positions"]:   # by hand: each step's tokens end at its separator
        spans.append(token[start:p + 1] if read == "step_mean" else token[p:p + 1])
        start = p + 1
    assert [example["input_ids"][p] for p in example["positions"]] == [sep_id] * len(spans)
    expected = [math.tanh(0.5 * float(span.mean())) for span in spans]   # BCE's read-out: tanh(z / 2)
    assert preds[0, :len(spans)].tolist() == pytest.approx(expected, abs=1e-5)
    # served: the folder's scorer reads its text's last step the same way
    scorer = load_scorer(tmp_path / "out_prm", options=ModelOptions(device_map="cpu"))
    assert scorer.head_read == read
    [value] = scorer.score_batch([example["text"]])
    assert value == pytest.approx(expected[-1], abs=1e-5)


def test_step_mean_trains_other_weights_than_the_default(tmp_path, tiny_model_dir):
    from safetensors.torch import load_file
    for name in ("end", "mean", "explicit"):
        (tmp_path / name).mkdir()
    end = train_tiny(tmp_path / "end", tiny_model_dir, "prm", seed=3)
    mean = train_tiny(tmp_path / "mean", tiny_model_dir, "prm", seed=3, head_read="step_mean")
    explicit = train_tiny(tmp_path / "explicit", tiny_model_dir, "prm", seed=3, head_read="step_end")
    assert end and mean and explicit
    weights = {name: load_file(tmp_path / name / "out_prm" / "adapter_model.safetensors")
               for name in ("end", "mean", "explicit")}
    same = lambda a, b: all(torch.equal(weights[a][k], weights[b][k]) for k in weights[a])  # noqa: E731
    assert same("end", "explicit") and not same("end", "mean")
    # naming the default changes nothing in the record either
    records = {name: json.loads((tmp_path / name / "out_prm" / "masprm_scorer.json").read_text())
               for name in ("end", "explicit")}
    for r in records.values():
        # (where each run wrote and read: the only differences a second folder can have)
        r.pop("data"), r.pop("best_checkpoint", None), r["settings"].pop("output_dir"), r["settings"].pop("data_file")
    assert records["end"] == records["explicit"]


def test_the_step_benchmark_loads_a_scorer_on_the_backbone_it_names(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr("masprm.models.scorer.load_scorer", lambda folder, base, options, setting: seen.append(base))
    own = tmp_path / "own"
    own.mkdir()
    (own / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "artifacts/toy_deep/scorer"}))
    bare = tmp_path / "bare"
    bare.mkdir()
    stepbench.load_scorer_folder(str(own), "artifacts/toy_deep/policy", "scorer")
    stepbench.load_scorer_folder(str(bare), "artifacts/toy_deep/policy", "scorer")
    assert seen == [None, "artifacts/toy_deep/policy"]   # None: the base the adapter names


def test_the_cli_refuses_head_read_for_pairs(tmp_path, tiny_model_dir):
    import subprocess
    import sys
    from helpers import REPO
    data = write_jsonl(tmp_path / "s.jsonl", [step_record(random.Random(i)) for i in range(4)])
    out = subprocess.run([sys.executable, str(REPO / "src/train/trainer.py"), "--mode", "ppm", "--data_dir",
                          str(data), "--model-id", str(tiny_model_dir), "--output-dir", str(tmp_path / "o"),
                          "--head-read", "step_mean"], capture_output=True, text=True)
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert "--head-read" in line and "--mode prm and orm" in line
    assert not (tmp_path / "o").exists()
    assert config(tmp_path, data, tiny_model_dir, "prm", head_read="step_mean").head_read == "step_mean"
