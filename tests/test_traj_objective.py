"""Stage 3's new objectives: --mode traj (loss and gradient by hand) and weighted Bradley-Terry pairs."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from masprm.errors import DataError
from masprm.models.step_agg import aggregate
from masprm.train.data import label_scheme_of, load_records
from masprm.train.pairwise import PairCollator, bt_loss, build_pair_examples
from masprm.train.trajectory import traj_loss

from helpers import SEP
from helpers_training import config, step_record, write_jsonl

P1, P2 = 0.5, 0.75                      # the two steps' probabilities: logits 0 and ln 3
LOGITS = [0.0, math.log(3.0)]
T = 0.25


def softmin_by_hand():
    """A = w1 p1 + w2 p2 with w = softmax(-p / T), and dA/dp_i = w_i (1 - (p_i - A) / T)."""
    e1, e2 = math.exp(-P1 / T), math.exp(-P2 / T)
    w1, w2 = e1 / (e1 + e2), e2 / (e1 + e2)
    a = w1 * P1 + w2 * P2
    return a, [w1 * (1 - (P1 - a) / T), w2 * (1 - (P2 - a) / T)]


def by_hand(agg):
    """(A, [dA/ds1, dA/ds2]) for the two-step transcript; dp/ds = p (1 - p)."""
    dp = [P1 * (1 - P1), P2 * (1 - P2)]
    if agg == "min":
        return P1, [dp[0], 0.0]                                 # only the smaller step moves A
    if agg == "prod":
        a = P1 * P2
        return a, [a * (1 - P1), a * (1 - P2)]                  # dA/ds_i = A (1 - p_i)
    if agg == "mean":
        return (P1 + P2) / 2, [dp[0] / 2, dp[1] / 2]
    a, da_dp = softmin_by_hand()
    return a, [da_dp[0] * dp[0], da_dp[1] * dp[1]]


@pytest.mark.parametrize("agg", ["min", "softmin", "prod", "mean"])
@pytest.mark.parametrize("outcome", [1.0, 0.0])
def test_traj_loss_and_gradient_on_a_two_step_transcript(agg, outcome):
    logits = torch.tensor([LOGITS], dtype=torch.float64, requires_grad=True)
    loss, score = traj_loss(logits, torch.ones(1, 2, dtype=torch.bool), torch.tensor([outcome], dtype=torch.float64),
                            agg, T)
    loss.backward()
    a, da_ds = by_hand(agg)
    # BCE: -log A for a correct transcript, -log(1 - A) for a wrong one; dL/dA = -1/A or 1/(1 - A)
    assert score.item() == pytest.approx(a, rel=1e-12)
    assert loss.item() == pytest.approx(-math.log(a) if outcome else -math.log(1 - a), rel=1e-12)
    dl_da = -1 / a if outcome else 1 / (1 - a)
    assert logits.grad[0].tolist() == pytest.approx([dl_da * g for g in da_ds], rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("agg", ["min", "softmin", "prod", "mean"])
def test_padding_steps_change_nothing(agg):
    short = torch.tensor([LOGITS], requires_grad=True)
    padded = torch.tensor([LOGITS + [-7.0]], requires_grad=True)
    y = torch.tensor([1.0])
    a, _ = traj_loss(short, torch.ones(1, 2, dtype=torch.bool), y, agg, T)
    b, _ = traj_loss(padded, torch.tensor([[True, True, False]]), y, agg, T)
    a.backward()
    b.backward()
    assert b.item() == pytest.approx(a.item()) and padded.grad[0, 2].item() == 0.0
    assert padded.grad[0, :2].tolist() == pytest.approx(short.grad[0].tolist())


def test_softmin_lies_between_min_and_mean():
    logits, mask = torch.tensor([LOGITS]), torch.ones(1, 2, dtype=torch.bool)
    assert aggregate(logits, mask, "softmin", 1e-3).item() == pytest.approx(P1, abs=1e-6)
    assert aggregate(logits, mask, "softmin", 1e3).item() == pytest.approx((P1 + P2) / 2, abs=1e-3)
    assert aggregate(torch.tensor([[30.0, 30.0]]), mask, "prod", T).item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown step aggregation 'max'"):
        aggregate(logits, mask, "max")


# --------------------------------------------------------------------------- weighted Bradley-Terry


def test_bt_loss_without_weights_is_todays_loss_and_weights_make_a_weighted_mean():
    r_pos, r_neg = torch.tensor([1.0, -0.5]), torch.tensor([0.0, 0.5])
    assert torch.equal(bt_loss(r_pos, r_neg), -torch.nn.functional.logsigmoid(r_pos - r_neg).mean())
    # -log sigmoid(d) = log(1 + e^-d): pair 1 (d = 1) weight 1, pair 2 (d = -1) weight 3
    l1, l2 = math.log(1 + math.exp(-1.0)), math.log(1 + math.exp(1.0))
    assert bt_loss(r_pos, r_neg, torch.tensor([1.0, 3.0])).item() == pytest.approx((l1 + 3 * l2) / 4)
    assert bt_loss(r_pos, r_neg, torch.ones(2)).item() == pytest.approx(bt_loss(r_pos, r_neg).item())


class CharEncoder:
    """Token ids = character codes; '|' is the separator."""

    sep_id = ord("|")

    def encode_whole(self, texts):
        return [[ord(c) for c in t] for t in texts]


def test_weights_travel_from_records_to_batches_only_when_given():
    plain = {"prompt": "Q", "chosen_actions": ["a"], "rejected_actions": ["b"]}
    examples, _ = build_pair_examples([plain, plain], CharEncoder(), "|")
    assert all("weight" not in e for e in examples)
    assert "pair_weight" not in PairCollator(0)(examples)          # today's pairs: the plain mean
    examples, _ = build_pair_examples([plain, {**plain, "weight": 0.25}], CharEncoder(), "|")
    assert PairCollator(0)(examples)["pair_weight"].tolist() == [1.0, 0.25]


def test_bad_weights_and_the_recorded_label_scheme(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "Q", "chosen_actions": ["a"], "rejected_actions": ["b"],
                                               "weight": 0}])
    with pytest.raises(DataError, match=r"p.jsonl:1: field 'weight' must be a number > 0, got 0"):
        load_records(path, "ppm")
    named = [{"meta": {"label_scheme": "margin_pairs"}}] * 2
    assert label_scheme_of(named, "pairs") == "margin_pairs"
    assert (label_scheme_of([{}], "pairs"), label_scheme_of([{"meta": {}}], "steps")) == ("masprm", "mc")


# --------------------------------------------------------------------------- a trained traj scorer


@pytest.mark.slow
def test_a_traj_scorer_values_a_transcript_by_its_training_aggregate(tmp_path, tiny_model_dir):
    from masprm.models.scorer import TrajScorer, load_scorer
    from masprm.state_text import join_steps
    from masprm.train import train_scorer
    from masprm.train.stepwise import StepCollator

    rng = random.Random(4)
    records = [{**step_record(rng), "meta": {"label_scheme": "mc"}} for _ in range(24)]
    result = train_scorer(config(tmp_path, write_jsonl(tmp_path / "s.jsonl", records), tiny_model_dir, "traj",
                                 max_steps=2, eval_steps=2, step_agg="softmin", softmin_temperature=0.5))
    meta = json.loads((result.output_dir / "masprm_scorer.json").read_text())
    assert (meta["objective"], meta["label_scheme"], meta["step_agg"], meta["softmin_temperature"]) == \
        ("traj", "mc", "softmin", 0.5)
    scorer = load_scorer(result.output_dir)
    assert isinstance(scorer, TrajScorer)
    # the training-time aggregate of a finished transcript (the trainer's own loss code, same weights)
    example = result.eval_examples[0]
    trainer = result.trainer
    trainer.model.eval()
    batch = {k: v.to(trainer.model.device) for k, v in StepCollator(0)([example]).items()}
    with torch.no_grad():
        _, score, _ = trainer.loss_and_predictions(trainer.model, batch)
        step_logits = trainer.token_logits(trainer.model, batch)[0, example["positions"]]
    text = example["text"]
    full = join_steps(text.prompt, text.steps, SEP)
    assert scorer.score_batch([full])[0] == pytest.approx(2 * score.item() - 1, abs=1e-5)
    # a partial transcript: the same aggregation over its steps so far
    first = aggregate(step_logits[None, :1], torch.ones(1, 1, dtype=torch.bool), "softmin", 0.5).item()
    assert scorer.score_batch([join_steps(text.prompt, text.steps[:1], SEP)])[0] == pytest.approx(2 * first - 1,
                                                                                                    abs=1e-5)


# --------------------------------------------------------------------------- issue 34 item 7: traj as a ranker


@pytest.mark.parametrize("agg", ["min", "prod"])
def test_best_of_n_min_over_a_traj_scorers_prefixes_is_its_trained_score(agg):
    """Hypothesis (a) of issue 34 refuted: best-of-N `min` takes the smallest of the prefixes' values 2 A_k - 1,
    and for min and prod A_k only falls as steps are added, so `min` and `last` both give the finished
    transcript's 2 A - 1, the quantity trained."""
    from masprm.search.scorer_kinds import aggregate_steps

    logits = [0.3, -1.2, 0.8, 2.0]
    p = [1 / (1 + math.exp(-z)) for z in logits]
    by_hand = {"min": min(p), "prod": p[0] * p[1] * p[2] * p[3]}[agg]
    prefixes = [2 * aggregate(torch.tensor([logits[:k]], dtype=torch.float64), torch.ones(1, k, dtype=torch.bool),
                              agg).item() - 1 for k in range(1, 5)]
    assert aggregate_steps(prefixes, "min") == pytest.approx(2 * by_hand - 1, rel=1e-12)
    assert aggregate_steps(prefixes, "last") == pytest.approx(2 * by_hand - 1, rel=1e-12)


def test_traj_eval_reports_the_outcome_auc_of_the_held_out_transcripts():
    from types import SimpleNamespace

    from masprm.train.trajectory import outcome_metrics

    outcome = [1.0, 0.0, 1.0, 0.0]
    # right ones at 0.7 and 0.4, wrong ones at 0.5 and 0.2: 3 of the 4 (right, wrong) pairs in order
    found = outcome_metrics(SimpleNamespace(predictions=[[0.7], [0.5], [0.4], [0.2]], label_ids=[[o] for o in outcome]))
    assert found["auc"] == pytest.approx(0.75)
    assert found["accuracy"] == pytest.approx(0.75)   # 0.7 right, 0.5 not above 1/2: wrong, 0.4 wrong, 0.2 right
    assert found["brier"] == pytest.approx((0.09 + 0.25 + 0.36 + 0.04) / 4)
    one_class = outcome_metrics(SimpleNamespace(predictions=[[0.7], [0.2]], label_ids=[[1.0], [1.0]]))
    assert one_class["auc"] == 0.5


def test_the_traj_model_kept_is_the_held_out_ranker_not_the_constant_one():
    """The cause of issue 34 item 7, on a hand-built held-out set: a traj scorer whose loss never beats the
    constant base-rate prediction is kept, under "lowest eval loss", at the checkpoint nearest that constant,
    whatever its ranking; there the ranking is an accident, here reversed (AUC 0). A checkpoint that ranks
    every right transcript first but is over-confident has the higher loss and was thrown away."""
    from types import SimpleNamespace

    from masprm.train.objectives import OBJECTIVES
    from masprm.train.trajectory import outcome_metrics

    outcome = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]          # 2 of 8 right: the base rate 1/4
    checkpoints = {"near the constant": [0.249, 0.249] + [0.251] * 6,
                   "ranker": [0.9, 0.9] + [0.6] * 6}
    by_hand = {   # mean binary cross-entropy, the trainer's eval loss, and the AUC
        "near the constant": ((-2 * math.log(0.249) - 6 * math.log(0.749)) / 8, 0.0),
        "ranker": ((-2 * math.log(0.9) - 6 * math.log(0.4)) / 8, 1.0)}
    assert by_hand["near the constant"][0] < by_hand["ranker"][0]   # 0.5624 against 0.7136
    metrics = {}
    for name, scores in checkpoints.items():
        found = outcome_metrics(SimpleNamespace(predictions=[[s] for s in scores], label_ids=[[o] for o in outcome]))
        assert found["auc"] == pytest.approx(by_hand[name][1])
        metrics[name] = {**found, "loss": by_hand[name][0]}
    metric, greater = OBJECTIVES["traj"].best(None)
    kept = (max if greater else min)(metrics, key=lambda name: metrics[name][metric])
    assert kept == "ranker"
