"""--calibrate: Platt scaling of the read-out, fitted on held-out training questions and applied by the scorer."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from masprm.calibration import calibrated_value, fit_from_values, fit_platt, newton_step, value_logit
from masprm.errors import ConfigError, ModelError
from masprm.models.scorer import HFScorer
from masprm.scorer_meta import platt_of
from masprm.train.config import TrainConfig
from masprm.train.metrics import PAD

SEP_ID = 9


def test_one_newton_step_by_hand():
    # z = (-1, 1), targets (1, 0), from (a, b) = (1, 0), no L2: p = (s(-1), s(1)), w = s(1) s(-1) at both;
    # g_a = ((s(-1) - 1)(-1) + s(1)) / 2 = s(1), g_b = 0, H = diag(w, w): a' = 1 - s(1) / (s(1) s(-1)) = 1 - (1 + e) = -e
    a, b = newton_step([-1.0, 1.0], [1.0, 0.0], 1.0, 0.0, l2=0.0)
    assert a == pytest.approx(-math.e, abs=1e-12) and b == pytest.approx(0.0, abs=1e-12)


def test_the_fit_matches_the_closed_form_on_two_logit_values():
    # at z = 0 one target in four is 1, at z = 1 three in four: sigmoid(b) = 1/4 and sigmoid(a + b) = 3/4,
    # so b = -ln 3 and a = 2 ln 3 (the tiny L2 moves them by less than 1e-5)
    a, b = fit_platt([0.0] * 4 + [1.0] * 4, [1, 0, 0, 0, 1, 1, 1, 0])
    assert a == pytest.approx(2 * math.log(3), abs=1e-4) and b == pytest.approx(-math.log(3), abs=1e-4)


def test_a_calibrated_scorer_is_left_as_it_is_and_a_separated_split_stays_finite():
    # targets equal to the scorer's own probabilities sigmoid(z): the identity (1, 0) is the optimum
    z = [-2.0, -0.5, 0.3, 1.7]
    a, b = fit_platt(z * 50, [1 / (1 + math.exp(-x)) for x in z] * 50)
    assert (a, b) == pytest.approx((1.0, 0.0), abs=1e-4)
    a, b = fit_platt([-1.0, 1.0], [0.0, 1.0])   # separable: only the L2 (1e-6) stops a at a large finite value
    assert 10 < a < 1e4 and math.isfinite(b)


def test_values_are_read_as_logits_of_their_probability():
    assert value_logit(0.6) == pytest.approx(math.log(4))     # (0.6 + 1) / 2 = 0.8, logit ln 4
    assert value_logit(1.0) == pytest.approx(2 * math.atanh(1 - 1e-7)) and value_logit(-1.0) < -16
    assert calibrated_value(0.6, 1.0, 0.0) == pytest.approx(0.6)           # the identity
    assert calibrated_value(0.6, 2.0, 0.0) == pytest.approx(15 / 17)       # sigmoid(2 ln 4) = 16 / 17
    assert calibrated_value(0.6, 1.0, -math.log(4)) == pytest.approx(0.0)  # sigmoid(0) = 1 / 2


class _Logits(torch.nn.Module):
    """A model whose logit at every position is `z` (the scorer reads it at the separator)."""

    def __init__(self, z: float):
        super().__init__()
        self.z = torch.nn.Parameter(torch.tensor(z))

    def forward(self, input_ids, attention_mask):
        return SimpleNamespace(logits=self.z.expand(*input_ids.shape, 1))


@pytest.mark.parametrize("platt, expected", [(None, 0.6), ((2.0, 0.0), 15 / 17), ((1.0, -math.log(4)), 0.0),
                                             ((0.5, math.log(2)), 0.6)])   # 0.5 ln 4 + ln 2 = ln 4 again
def test_the_read_out_applies_a_and_b(platt, expected):
    scorer = HFScorer(model=_Logits(math.log(4)), encoder=SimpleNamespace(sep_id=SEP_ID, encode=lambda t: [[5, SEP_ID]]),
                      separator="</step>", pad_id=0, scale=0.5, platt=platt)
    assert scorer.score_batch(["q step</step>"]) == [pytest.approx(expected, abs=1e-6)]   # the logit is a float32 ln 4


def test_the_recorded_platt_scaling_is_read_and_checked():
    assert platt_of({"objective": "prm"}) is None
    assert platt_of({"platt": {"a": 1.5, "b": -0.25, "n": 40, "l2": 1e-6}}) == (1.5, -0.25)
    with pytest.raises(ModelError, match="platt must hold numbers a and b"):
        platt_of({"platt": {"a": 1.5}})
    with pytest.raises(ModelError, match="finite"):
        platt_of({"platt": {"a": float("nan"), "b": 0}})


@pytest.mark.parametrize("a", [-0.13547880276481222, 0.0])   # the first: toy_deep's seed-42 MASPRM (48 values)
def test_a_slope_that_is_not_positive_is_recorded_but_never_applied(a):
    # applied, a < 0 reverses the order: of two values 0.2 > -0.2 the calibrated first is the smaller
    assert a == 0 or calibrated_value(0.2, a, -0.0045) < calibrated_value(-0.2, a, -0.0045)
    said = []
    assert platt_of({"platt": {"a": a, "b": -0.0045, "n": 48, "l2": 1e-6}}, warn=said.append) is None
    assert len(said) == 1 and f"a = {a:.4g} <= 0 would reverse the scorer's order; served uncalibrated" in said[0]
    assert platt_of({"platt": {"a": 1e-3, "b": 0.0}}, warn=said.append) == (1e-3, 0.0) and len(said) == 1


def test_calibration_pairs_of_the_step_and_pair_objectives():
    from masprm.train.pairwise import PAIRWISE
    from masprm.train.stepwise import LAST_STEP, STEPWISE

    # two eval rows padded to two labels; targets (v + 1) / 2 of the step labels, the padding left out
    preds, labels = np.array([[0.2, -0.4], [0.9, PAD]]), np.array([[1.0, -1.0], [0.5, PAD]])
    for objective in (STEPWISE, LAST_STEP):
        assert objective.calibration_pairs(preds, labels) == ([0.2, -0.4, 0.9], [1.0, 0.0, 0.75])
    # pairs: (r_pos, r_neg, has_sep_pos, has_sep_neg); the served values tanh(r), preferred side 1, other 0
    values, targets = PAIRWISE.calibration_pairs(np.array([[1.0, -2.0, 1, 1], [0.5, 0.25, 1, 1]]), np.ones((2, 1)))
    assert values == pytest.approx([math.tanh(1.0), math.tanh(0.5), math.tanh(-2.0), math.tanh(0.25)])
    assert targets == [1.0, 1.0, 0.0, 0.0]
    record = fit_from_values([0.2, -0.4, 0.9], [1.0, 0.0, 0.75])
    assert record["n"] == 3 and record["l2"] == 1e-6 and set(record) == {"a", "b", "n", "l2"}


def test_calibrate_is_off_by_default_and_refused_where_it_is_not_built():
    assert TrainConfig().calibrate is False
    TrainConfig(mode="ppm", calibrate=True).validate()
    with pytest.raises(ConfigError, match="calibrate is built for --mode ppm, prm, orm only, got --mode traj"):
        TrainConfig(mode="traj", calibrate=True).validate()


@pytest.mark.slow
def test_a_calibrated_scorer_records_its_fit_and_serves_it(tmp_path, tiny_model_dir, capsys):
    from masprm.models.scorer import load_scorer
    from helpers_training import train_tiny

    result = train_tiny(tmp_path, tiny_model_dir, "prm", seed=3, calibrate=True)
    meta = json.loads((result.output_dir / "masprm_scorer.json").read_text())
    assert meta["platt"]["n"] == 2 * len(result.eval_examples)   # every held-out record has 2 labelled steps
    scorer = load_scorer(result.output_dir)
    assert scorer.platt == (meta["platt"]["a"], meta["platt"]["b"])
    text = "Q: 1 plus 2? 1 + 2.</step>VERDICT: CORRECT</step>"
    calibrated = scorer.score_batch([text])[0]
    scorer.platt = None
    raw = scorer.score_batch([text])[0]
    assert calibrated == pytest.approx(calibrated_value(raw, meta["platt"]["a"], meta["platt"]["b"]), abs=1e-9)
    # a folder whose recorded slope is negative loads, says so on one line, and serves its raw values
    meta["platt"]["a"] = -0.5
    (result.output_dir / "masprm_scorer.json").write_text(json.dumps(meta))
    capsys.readouterr()
    scorer = load_scorer(result.output_dir)
    assert scorer.platt is None and scorer.score_batch([text])[0] == pytest.approx(raw, abs=1e-9)
    assert "Platt slope a = -0.5 <= 0 would reverse the scorer's order" in capsys.readouterr().err


@pytest.mark.parametrize("targets, said", [
    ([1.0, 1.0, 1.0], "the held-out split's 3 labels are all one class (every one right)"),
    ([0.0, 0.0], "the held-out split's 2 labels are all one class (every one wrong)"),
    ([0.65, 0.65], "the held-out split's 2 labels are all one class (every one at 0.65)"),
    ([], "the held-out split has no labelled step"),
])
def test_a_one_class_split_cannot_be_fitted(targets, said):
    from masprm.calibration import unfittable

    assert unfittable(targets) == said
    assert unfittable([0.0, 1.0]) is None and unfittable([0.65, 0.7]) is None   # two values: a slope exists


@pytest.mark.slow
def test_calibrate_on_a_one_class_split_records_platt_null_and_says_so_in_one_line(tmp_path, tiny_model_dir, caplog):
    """Every held-out outcome right: the fit would send every value to +1. The run finishes (the scorer is
    trained), records "platt": null (asked, not fitted: the lab does not retrain it) and says why in one line."""
    import logging
    import random

    from helpers_training import config, step_record, write_jsonl
    from masprm.models.scorer import load_scorer
    from masprm.train import train_scorer

    rng = random.Random(5)
    records = [{**step_record(rng), "labels": [0.3, 1.0]} for _ in range(16)]   # every outcome right
    with caplog.at_level(logging.WARNING):
        result = train_scorer(config(tmp_path, write_jsonl(tmp_path / "s.jsonl", records), tiny_model_dir, "orm",
                                     max_steps=2, eval_steps=2, calibrate=True))
    said = [r.getMessage() for r in caplog.records if "--calibrate" in r.getMessage()]
    n = 2 * len(result.eval_examples)   # an orm is evaluated at both steps of a record, each with the outcome
    assert said == [f"--calibrate: the held-out split's {n} labels are all one class (every "
                    "one right); no Platt scaling can be fitted, the scorer is served uncalibrated"]
    meta = json.loads((result.output_dir / "masprm_scorer.json").read_text())
    assert meta["status"] == "completed" and "platt" in meta and meta["platt"] is None
    assert load_scorer(result.output_dir).platt is None
