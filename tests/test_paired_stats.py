"""The paired-statistics module: p-values, two-level bootstrap, Holm, TOST and power, against hand-worked cases."""

from __future__ import annotations

import random

import pytest

from masprm.errors import DataError
from masprm.paired_stats import (PairedResult, adjusted_verdict, bootstrap_ci, format_comparison, headroom_bootstrap,
                                 holm, mde,
                                 paired_bootstrap,
                                 paired_se, power_at, tail_p, tost, two_level_bootstrap)


def built(means: list[float], alpha: float = 0.05) -> PairedResult:
    """A result carrying hand-chosen resampled means (the other fields do not matter here)."""
    return PairedResult(mean_diff=sum(means) / len(means), ci_low=min(means), ci_high=max(means), n_questions=9,
                        share_positive=0.0, alpha=alpha, means=tuple(sorted(means)))


# --------------------------------------------------------------------------- bootstrap p-values


def test_p_value_counts_both_tails_and_a_zero_on_both_sides():
    # means -0.1, 0.0, 0.1, 0.2, 0.3: #(m <= 0) = 2 (the 0 counts), #(m >= 0) = 4 -> p = 2 * 2 / 5 = 0.8
    assert built([-0.1, 0.0, 0.1, 0.2, 0.3]).p_value == pytest.approx(0.8)
    # all five above 0: #(m <= 0) = 0 -> p = 0; all at 0: 2 * 5 / 5 capped at 1
    assert built([0.1, 0.2, 0.2, 0.3, 0.4]).p_value == 0.0
    assert tail_p([0.0] * 5, 0.0) == 1.0
    with pytest.raises(ValueError, match="resampled means"):
        PairedResult(0.1, 0.0, 0.2, 3, 0.5).p_value


@pytest.mark.parametrize("seed", range(6))
def test_the_ci_excludes_zero_exactly_when_p_is_below_alpha(seed):
    # 0/1 outcomes with a small true gap, so some seeds land near the boundary
    rng = random.Random(seed)
    a = {f"q{i}": float(rng.random() < 0.55) for i in range(40)}
    b = {f"q{i}": float(rng.random() < 0.45) for i in range(40)}
    r = paired_bootstrap(a, b, n_resamples=400, seed=seed)
    assert (r.verdict != "inconclusive") == (r.p_value < r.alpha)


def test_the_bootstrap_standard_error_is_the_spread_of_the_means():
    assert built([0.0, 1.0]).se == pytest.approx(0.5)     # population sd of {0, 1}
    assert built([0.3]).se == 0.0


# --------------------------------------------------------------------------- two-level bootstrap


def test_one_training_seed_is_the_one_level_bootstrap_exactly():
    a = {f"q{i}": (i % 3) / 2 for i in range(30)}
    b = {f"q{i}": (i % 5) / 4 for i in range(30)}
    one = paired_bootstrap(a, b, n_resamples=300, seed=7)
    two = two_level_bootstrap([a], [b], n_resamples=300, seed=7)
    assert two == one and two.means == one.means and two.n_seeds == 1


def test_seeds_that_disagree_widen_the_interval_by_the_training_variance():
    # seed 0's scorer gains 0.1 on each of 50 questions, seed 1's loses 0.1. Averaged over seeds every
    # question's difference is 0, so the one-level CI is [0, 0]. Two levels: a resample draws two seeds
    # with replacement -> {0,0} (1/4) gives +0.1, {0,1} (1/2) gives 0, {1,1} (1/4) gives -0.1
    # whatever questions it draws; 25% of the mass at each end is above 2.5%, so the CI is [-0.1, +0.1].
    qs = [f"q{i}" for i in range(50)]
    a = [{q: 0.6 for q in qs}, {q: 0.4 for q in qs}]
    b = [{q: 0.5 for q in qs}, {q: 0.5 for q in qs}]
    pooled = paired_bootstrap({q: 0.5 for q in qs}, {q: 0.5 for q in qs}, n_resamples=2000)
    assert (pooled.ci_low, pooled.ci_high) == (0.0, 0.0)
    r = two_level_bootstrap(a, b, n_resamples=2000, seed=1)
    assert r.mean_diff == pytest.approx(0.0, abs=1e-12) and r.n_seeds == 2 and r.n_questions == 50
    assert (r.ci_low, r.ci_high) == (pytest.approx(-0.1), pytest.approx(0.1))
    assert sum(m > 0.05 for m in r.means) / 2000 == pytest.approx(0.25, abs=0.03)
    assert format_comparison("x", r) == "x: +0.0 points [95% CI -10.0, +10.0] over 50 questions x 2 training seeds (inconclusive)"


def test_two_level_pairs_seeds_and_uses_the_questions_every_seed_has():
    # one question q1 in every seed: d = 1 (seed 0) and 0 (seed 1); q2 is missing from seed 1's B
    a = [{"q1": 1.0, "q2": 1.0}, {"q1": 0.0, "q2": 1.0}]
    b = [{"q1": 0.0, "q2": 0.0}, {"q1": 0.0}]
    r = two_level_bootstrap(a, b, n_resamples=4000, seed=3)
    assert r.n_questions == 1 and r.mean_diff == 0.5
    # resample values: 1 with prob 1/4, 0.5 with 1/2, 0 with 1/4
    assert set(r.means) == {0.0, 0.5, 1.0} and r.share_positive == pytest.approx(0.75, abs=0.03)
    with pytest.raises(DataError, match="pairs seeds"):
        two_level_bootstrap(a, b[:1])
    with pytest.raises(DataError, match="no question in common"):
        two_level_bootstrap([{"x": 1.0}], [{"y": 1.0}])


# --------------------------------------------------------------------------- Holm


def test_holm_by_hand():
    # sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> running max 0.06)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # equal p-values get equal adjusted values: 2 x 0.02 = 0.04, then max(0.04, 0.02) = 0.04
    assert holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])
    assert holm([0.6, 0.9]) == [1.0, 1.0]             # 1.2 capped at 1; the running max keeps 1
    assert holm([0.3]) == [0.3] and holm([]) == []


def test_adjusted_verdicts_follow_the_sign_and_the_adjusted_p():
    up, down = built([0.01, 0.02, 0.03]), built([-0.03, -0.02, -0.01])
    assert adjusted_verdict(up, 0.049) == "holds" and adjusted_verdict(down, 0.01) == "reversed"
    assert adjusted_verdict(up, 0.05) == "inconclusive"


# --------------------------------------------------------------------------- TOST


def test_tost_by_hand():
    # ten means; margin 0.02: #(m >= 0.02) = 3 -> p_not_better 0.3; #(m <= -0.02) = 1 -> p_not_worse 0.1
    r = built([-0.025, -0.01, 0.0, 0.005, 0.01, 0.015, 0.019, 0.02, 0.021, 0.03], alpha=0.35)
    e = tost(r, 0.02)
    assert (e.p_not_better, e.p_not_worse) == (pytest.approx(0.3), pytest.approx(0.1))
    assert e.not_better and e.equivalent                      # both below 0.35
    strict = tost(built(list(r.means), alpha=0.2), 0.02)
    assert not strict.not_better and not strict.equivalent    # 0.3 >= 0.2
    with pytest.raises(ValueError, match="positive"):
        tost(r, 0.0)


def test_tost_on_a_bootstrap_of_constant_differences():
    qs = [f"q{i}" for i in range(20)]
    small = paired_bootstrap({q: 0.51 for q in qs}, {q: 0.50 for q in qs}, n_resamples=200)   # every mean +0.01
    assert tost(small, 0.02).equivalent
    large = paired_bootstrap({q: 0.53 for q in qs}, {q: 0.50 for q in qs}, n_resamples=200)   # every mean +0.03
    assert not tost(large, 0.02).not_better and large.verdict == "holds"


# --------------------------------------------------------------------------- power


def test_mde_and_power_by_hand():
    # d = (1, 0, 0, 1): mean 0.5, deviations +-0.5, sample variance 1 / 3, sd 0.57735, se = sd / 2 = 0.288675
    se = paired_se([1, 0, 0, 1])
    assert se == pytest.approx(0.288675, abs=1e-6)
    # (z_0.975 + z_0.80) = 1.959964 + 0.841621 = 2.801585; x 0.288675 = 0.808748
    assert mde(se) == pytest.approx(0.808748, abs=1e-6)
    # at the MDE the power is 0.80 (plus the far tail, Phi(-5.6) ~ 1e-6); at no effect it is alpha
    assert power_at(mde(se), se) == pytest.approx(0.80, abs=1e-5)
    assert power_at(0.0, se) == pytest.approx(0.05)
    # the check: MDE 4.6 points means se = 1.6419; 2 / 1.6419 = 1.2181; Phi(1.2181 - 1.96) =
    # Phi(-0.7419) = 0.2291, plus Phi(-3.178) = 0.0007: power 0.2298 against +2 points
    assert power_at(2.0, 4.6 / 2.801585) == pytest.approx(0.2298, abs=1e-3)
    with pytest.raises(ValueError, match="two differences"):
        paired_se([1.0])


def test_the_json_record_leaves_out_the_resampled_means():
    qs = [f"q{i}" for i in range(4)]
    r = paired_bootstrap({q: 1.0 for q in qs}, {q: 0.0 for q in qs}, n_resamples=50)
    assert r.as_dict() == {"mean_diff": 1.0, "ci_low": 1.0, "ci_high": 1.0, "n_questions": 4, "share_positive": 1.0,
                           "alpha": 0.05, "n_resamples": 50}
    two = two_level_bootstrap([{q: 1.0 for q in qs}] * 2, [{q: 0.0 for q in qs}] * 2, n_resamples=50)
    assert two.as_dict()["n_seeds"] == 2 and "means" not in two.as_dict()


def test_a_bootstrap_ci_of_any_statistic_over_units():
    # the share of 1s among (1, 0): a resample is (1,1) 1/4, mixed 1/2, (0,0) 1/4 -> the 95% CI is [0, 1]
    assert bootstrap_ci([1, 0], lambda xs: sum(xs) / len(xs), n_resamples=400) == (0.0, 1.0)
    # a constant sample has a point interval; an undefined statistic leaves its resamples out
    assert bootstrap_ci([3, 3, 3], max) == (3, 3)
    assert bootstrap_ci([1, 0], lambda xs: None if len(set(xs)) < 2 else 0.5, n_resamples=200) == (0.5, 0.5)
    assert bootstrap_ci([], max) is None and bootstrap_ci([1], lambda xs: None) is None


def test_headroom_recovered_by_hand():
    # 40 questions: the ceiling beats the base by 1 on q0-q19 (mean gap 0.5); the learned scorer by 1 on
    # q0-q9 (mean gain 0.25): it recovers 0.25 / 0.5 = half the headroom
    qs = [f"q{i}" for i in range(40)]
    base = {q: 0.0 for q in qs}
    ceiling = {q: float(i < 20) for i, q in enumerate(qs)}
    learned = {q: float(i < 10) for i, q in enumerate(qs)}
    h = headroom_bootstrap(learned, base, ceiling, n_resamples=2000, seed=1)
    assert h.share == 0.5 and h.ci_low < 0.5 < h.ci_high and 0 <= h.ci_low and h.ci_high <= 1
    assert h.gap.mean_diff == 0.5 and h.gap.verdict == "holds"
    # the learned scorer as good as the ceiling: 1 on every resample
    same = headroom_bootstrap(ceiling, base, ceiling, n_resamples=500)
    assert (same.share, same.ci_low, same.ci_high) == (1.0, 1.0, 1.0)
    # no headroom (a ceiling gap whose CI reaches 0): nothing to report
    one = {q: float(i == 0) for i, q in enumerate(qs)}
    assert headroom_bootstrap(learned, base, one, n_resamples=500) is None
