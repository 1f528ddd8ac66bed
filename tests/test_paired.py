"""Paired comparisons: per-question values over seeds, the bootstrap over questions, the one-line verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers_stage4_logs import write_stage4_log
from masprm.errors import DataError
from masprm.eval.bootstrap import compare, compare_gaps, gap_per_question, load_condition, per_question
from masprm.paired_stats import PairedResult, format_comparison, nearest_rank, paired_bootstrap

A = "toy_mcts_prm_0123abcd45_policy"
B = "toy_mcts_orm_89abcdef01_policy"


def record(question: str, hits: list[int], index: int = 0) -> dict:
    """A stage-4 record whose pass@k follow ``hits`` (pass@1, pass@5; the rest carried forward)."""
    p1, p5 = hits
    metrics = {f"pass@{k}": p1 if k < 5 else p5 for k in range(1, 11)}
    return {"index": index, "question": question, "gold": "1", "prediction": "1", "correct": bool(p1),
            "metrics": {**metrics, "generated_tokens": 5, "scorer_tokens": 0}, "error": None}


def crashed(question: str) -> dict:
    """A crashed example's record: usage only, no pass@k."""
    return {"index": 0, "question": question, "prediction": None, "correct": False,
            "metrics": {"generated_tokens": 3}, "error": "RuntimeError: boom"}


def write_seed(folder: Path, experiment: str, seed: int, records: list[dict], status: str | None = "COMPLETED"):
    """One seed's condition as stage 4 leaves it: COMPLETED, FAILED (one example raised) or unfinished (None)."""
    write_stage4_log(folder / f"{experiment}_{seed}", records, {"condition": "cond", "seed": seed}, label="cond",
                     errors=int(bool(status) and status.startswith("FAILED")), finished=status is not None,
                     summary={"pass@1": 0.5})


# --------------------------------------------------------------------------- the bootstrap


def test_equal_differences_collapse_the_interval():
    a = {f"q{i}": 0.75 for i in range(20)}
    b = {f"q{i}": 0.25 for i in range(20)}
    result = paired_bootstrap(a, b, n_resamples=500)
    assert (result.mean_diff, result.ci_low, result.ci_high) == (0.5, 0.5, 0.5)
    assert result.n_questions == 20 and result.share_positive == 1.0 and result.verdict == "holds"


def test_three_questions_reach_their_extremes():
    # differences (1, 0, 0): a resample's mean is 0 with probability 8/27 and 1 with 1/27 (> 2.5%)
    result = paired_bootstrap({"x": 1.0, "y": 0.0, "z": 0.0}, {"x": 0.0, "y": 0.0, "z": 0.0}, seed=3)
    assert result.mean_diff == pytest.approx(1 / 3)
    assert (result.ci_low, result.ci_high) == (0.0, 1.0)
    assert result.share_positive == pytest.approx(19 / 27, abs=0.02) and result.verdict == "inconclusive"
    reversed_ = paired_bootstrap({"x": 0.0}, {"x": 1.0}, n_resamples=10)
    assert (reversed_.ci_low, reversed_.ci_high, reversed_.verdict) == (-1.0, -1.0, "reversed")


def test_the_bootstrap_is_fixed_by_its_seed_and_ignores_unshared_questions():
    a = {f"q{i}": (i % 3) / 2 for i in range(30)}
    b = {f"q{i}": (i % 5) / 4 for i in range(30)}
    first = paired_bootstrap(a, b, n_resamples=300, seed=7)
    assert paired_bootstrap(dict(reversed(a.items())), b, n_resamples=300, seed=7) == first   # order-free
    assert paired_bootstrap(a, b, n_resamples=300, seed=8) != first
    extra = paired_bootstrap({**a, "only_a": 1.0}, {**b, "only_b": 0.0}, n_resamples=300, seed=7)
    assert extra == first and extra.n_questions == 30
    with pytest.raises(DataError, match="no question in common"):
        paired_bootstrap({"x": 1.0}, {"y": 1.0})


def test_nearest_rank_percentiles():
    values = [float(v) for v in range(1, 10_001)]
    assert nearest_rank(values, 0.025) == 250.0 and nearest_rank(values, 0.975) == 9750.0   # 0.975 * 1e4 > 9750
    assert nearest_rank([1.0, 2.0, 3.0, 4.0], 0.25) == 1.0 and nearest_rank([1.0, 2.0, 3.0, 4.0], 0.26) == 2.0
    assert nearest_rank([5.0], 0.0) == 5.0 and nearest_rank([1.0, 2.0], 1.0) == 2.0


def test_the_one_line_verdicts():
    holds = PairedResult(mean_diff=0.042, ci_low=0.010, ci_high=0.075, n_questions=240, share_positive=0.99)
    assert format_comparison("mcts_prm vs mcts_orm", holds) == \
        "mcts_prm vs mcts_orm: +4.2 points [95% CI +1.0, +7.5] over 240 questions (holds)"
    mixed = PairedResult(-0.0001, -0.02, 0.03, 12, 0.4, alpha=0.1)
    assert format_comparison("x", mixed) == "x: +0.0 points [90% CI -2.0, +3.0] over 12 questions (inconclusive)"
    assert format_comparison("y", PairedResult(-0.05, -0.08, -0.01, 3, 0.0)).endswith("(reversed)")


# --------------------------------------------------------------------------- per-question values


def test_values_are_means_over_seeds_and_crashes_count_as_wrong():
    by_q = {"q1": [record("q1", [1, 1]), record("q1", [0, 1])], "q2": [crashed("q2"), record("q2", [1, 1])]}
    assert per_question(by_q) == {"q1": 0.5, "q2": 0.5}
    assert per_question(by_q, "pass@5") == {"q1": 1.0, "q2": 0.5}
    assert gap_per_question(by_q) == {"q1": 0.5, "q2": 0.0}


# --------------------------------------------------------------------------- reading and comparing logs


@pytest.fixture
def logs(tmp_path):
    """A: q1 right in both seeds, q2 right at pass@5 only; B: q1 right in one seed, q2 crashed in one."""
    write_seed(tmp_path, A, 1, [record("q1", [1, 1], 0), record("q2", [0, 1], 1), record("q3", [1, 1], 2)])
    write_seed(tmp_path, A, 2, [record("q1", [1, 1], 0), record("q2", [0, 1], 1)])
    write_seed(tmp_path, A, 3, [record("q1", [0, 0], 0)], status="FAILED")
    write_seed(tmp_path, A, 4, [record("q1", [0, 0], 0)], status=None)           # unfinished
    write_seed(tmp_path, f"{A}_v2", 1, [record("q1", [0, 0], 0)])                # another experiment
    write_seed(tmp_path, B, 1, [record("q1", [1, 1], 0), crashed("q2")])
    write_seed(tmp_path, B, 2, [record("q1", [0, 0], 0), record("q2", [0, 0], 1)])
    return tmp_path


def test_load_condition_reads_the_completed_seeds_of_one_experiment(logs):
    a = load_condition(logs, A)
    assert sorted(a) == ["q1", "q2", "q3"]
    assert [len(a[q]) for q in ("q1", "q2", "q3")] == [2, 2, 1]   # seeds 1 and 2; 3 FAILED, 4 unfinished
    assert per_question(load_condition(logs, B)) == {"q1": 0.5, "q2": 0.0}
    with pytest.raises(DataError, match="no COMPLETED log"):
        load_condition(logs, "toy_missing")


def test_compare_and_compare_gaps_pair_the_shared_questions(logs):
    result = compare(logs, A, B, n_resamples=200)
    # q1: 1 - 0.5, q2: 0 - 0; q3 is A's only
    assert result.n_questions == 2 and result.mean_diff == pytest.approx(0.25)
    assert (result.ci_low, result.ci_high) == (0.0, 0.5)
    assert compare(logs, A, B, metric="pass@5", n_resamples=200).mean_diff == pytest.approx(0.75)
    gaps = compare_gaps(logs, A, B, n_resamples=200)
    # gaps: A q1 0, q2 1; B q1 0, q2 0
    assert gaps.mean_diff == pytest.approx(0.5) and gaps.n_questions == 2
