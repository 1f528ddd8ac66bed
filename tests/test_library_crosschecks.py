"""The project's statistics and metrics against the libraries that define them, on the same inputs.

Where ours and the library's are the same quantity the check is equality to a tight tolerance: the percentile
rule of every bootstrap CI (numpy's ``inverted_cdf``, Hyndman & Fan's type 1), Holm's adjustment and the
power of a normal test (statsmodels), the exact McNemar test (statsmodels and scipy), the standard error
(scipy), ROC AUC (scikit-learn and scipy's Mann-Whitney U), the ECE's bins (scikit-learn's
``calibration_curve``), Platt's fit (statsmodels' logistic MLE), the per-question means a comparison of two
conditions' logs takes and the CSV's mean and sample std over seeds (pandas). Where ours does more (the keyed bootstrap streams, the two-level bootstrap), the part a
library defines is checked: the quantile read from the resampled values. scipy, scikit-learn and
statsmodels are test-only dependencies (requirements.txt says so).
"""

from __future__ import annotations

import csv
import io
import math
import random
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest

scipy_stats = pytest.importorskip("scipy.stats")
sk_metrics = pytest.importorskip("sklearn.metrics")
sk_calibration = pytest.importorskip("sklearn.calibration")
sm = pytest.importorskip("statsmodels.api")
from statsmodels.stats.contingency_tables import mcnemar   # noqa: E402 (after the skip above)
from statsmodels.stats.multitest import multipletests       # noqa: E402
from statsmodels.stats.power import NormalIndPower, normal_power   # noqa: E402

from masprm.calibration import fit_platt, value_logit   # noqa: E402
from masprm.eval.aggregate import aggregate, parse_log, to_csv   # noqa: E402
from masprm.eval.bootstrap import compare   # noqa: E402
from masprm.paired_stats import (bootstrap_ci, holm, mcnemar_exact_p, mde, nearest_rank,   # noqa: E402
                                 paired_bootstrap, paired_bootstrap_ci, paired_se, power_at, tost,
                                 two_level_bootstrap)
from masprm.step_metrics import auc, expected_calibration_error   # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from helpers_stage4_logs import log_text, write_stage4_log   # noqa: E402


def outcomes(seed: int, n: int, p: float) -> dict[str, float]:
    """Per question a 0/1 outcome (pass@1 of one search seed), drawn at rate p."""
    rng = random.Random(seed)
    return {f"q{i:03d}": float(rng.random() < p) for i in range(n)}


def inverted_cdf(values, q: float) -> float:
    """numpy's nearest-rank quantile (H&F type 1: the smallest value whose empirical CDF reaches q)."""
    return float(np.quantile(np.asarray(values), q, method="inverted_cdf"))


# --------------------------------------------------------------------------- bootstrap percentile rule


@pytest.mark.parametrize("size", [1, 2, 7, 40, 999, 1000, 10_000])
def test_nearest_rank_is_numpys_inverted_cdf_quantile(size):
    rng = random.Random(size)
    values = sorted(rng.gauss(0, 1) for _ in range(size))
    for q in (0.0, 0.001, 0.025, 0.05, 0.1, 1 / 3, 0.5, 0.9, 0.95, 0.975, 0.999, 1.0):
        assert nearest_rank(values, q) == inverted_cdf(values, q), (size, q)


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.01])
def test_paired_bootstrap_point_ci_and_se_are_the_numpy_statistics_of_its_resamples(alpha):
    a, b = outcomes(1, 60, 0.6), outcomes(2, 60, 0.45)
    result = paired_bootstrap(a, b, n_resamples=2000, seed=3, alpha=alpha)
    diffs = np.array([a[q] - b[q] for q in sorted(a)])
    means = np.array(result.means)
    assert result.mean_diff == pytest.approx(diffs.mean(), abs=1e-12)
    assert result.ci_low == inverted_cdf(means, alpha / 2)
    assert result.ci_high == inverted_cdf(means, 1 - alpha / 2)
    assert result.se == pytest.approx(means.std(ddof=0), rel=1e-9)   # the bootstrap SE: sd of the resampled means
    assert result.share_positive == pytest.approx((means > 0).mean(), abs=0)


def test_paired_bootstrap_ci_agrees_with_scipys_percentile_bootstrap_within_resampling_noise():
    # scipy draws its own resamples, so only the distributions agree: with 20,000 resamples each, the
    # quantiles' Monte Carlo error is about 0.003 here (se of a 2.5% quantile of a spread of ~0.18).
    a, b = outcomes(4, 120, 0.6), outcomes(5, 120, 0.5)
    diffs = np.array([a[q] - b[q] for q in sorted(a)])
    ours = paired_bootstrap(a, b, n_resamples=20_000, seed=0)
    theirs = scipy_stats.bootstrap((diffs,), np.mean, n_resamples=20_000, method="percentile",
                                   confidence_level=0.95, rng=np.random.default_rng(0)).confidence_interval
    assert ours.ci_low == pytest.approx(theirs.low, abs=0.015)
    assert ours.ci_high == pytest.approx(theirs.high, abs=0.015)


def test_two_level_bootstrap_reads_its_ci_by_the_same_percentile_rule():
    a = [outcomes(10 + s, 30, 0.6) for s in range(3)]
    b = [outcomes(20 + s, 30, 0.5) for s in range(3)]
    result = two_level_bootstrap(a, b, n_resamples=1000, seed=7)
    assert result.mean_diff == pytest.approx(np.mean([[x[q] - y[q] for q in sorted(x)] for x, y in zip(a, b)]))
    assert (result.ci_low, result.ci_high) == (inverted_cdf(result.means, 0.025), inverted_cdf(result.means, 0.975))


def test_bootstrap_ci_of_any_statistic_reads_the_percentile_rule_off_its_defined_resamples():
    rng = random.Random(8)
    units = [rng.random() for _ in range(25)]
    seen: list[float] = []

    def median_or_none(sample):   # left out when undefined, as an AUC without a class is
        if min(sample) > 0.9:
            return None
        seen.append(statistics.median(sample))
        return seen[-1]

    low, high = bootstrap_ci(units, median_or_none, n_resamples=800, seed=1, alpha=0.1)
    assert (low, high) == (inverted_cdf(seen, 0.05), inverted_cdf(seen, 0.95))


def test_the_originals_handoff_ci_is_numpys_lower_and_higher_quantile():
    # The original reads the sorted means at floor(0.025 (B - 1)) and ceil(0.975 (B - 1)): numpy's "lower" and
    # "higher" methods. The means are redrawn here by the docstring's stream (one randrange per drawn pair).
    a = [int(v) for v in outcomes(30, 50, 0.5).values()]
    b = [int(v) for v in outcomes(31, 50, 0.6).values()]
    delta, low, high = paired_bootstrap_ci(a, b, n_resamples=999, seed=2)
    diff = [y - x for x, y in zip(a, b)]
    rng = random.Random(2)
    means = [sum(diff[rng.randrange(50)] for _ in range(50)) / 50 for _ in range(999)]
    assert delta == pytest.approx(np.mean(diff), abs=1e-12)
    assert low == float(np.quantile(means, 0.025, method="lower"))
    assert high == float(np.quantile(means, 0.975, method="higher"))


def test_tost_tail_shares_are_scipys_percentiles_of_score():
    result = paired_bootstrap(outcomes(40, 80, 0.55), outcomes(41, 80, 0.5), n_resamples=3000, seed=4)
    for margin in (0.02, 0.05, 0.1, 0.2):
        eq = tost(result, margin)
        # p_not_better = share of means >= margin = 1 - share strictly below; p_not_worse = share <= -margin
        assert eq.p_not_better == pytest.approx(1 - scipy_stats.percentileofscore(result.means, margin,
                                                                                  kind="strict") / 100, abs=1e-12)
        assert eq.p_not_worse == pytest.approx(scipy_stats.percentileofscore(result.means, -margin,
                                                                             kind="weak") / 100, abs=1e-12)


# --------------------------------------------------------------------------- multiplicity, exact tests, power


@pytest.mark.parametrize("p_values", [[0.01, 0.04, 0.03, 0.005], [0.2, 0.2, 0.01, 0.5, 0.04],
                                      [0.04], [0.9, 0.5, 0.6], [0.001, 0.001, 0.02, 0.03, 0.04, 0.3]])
def test_holm_is_statsmodels_holm(p_values):
    _, expected, _, _ = multipletests(p_values, alpha=0.05, method="holm")
    assert holm(p_values) == pytest.approx(list(expected), abs=1e-15)


@pytest.mark.parametrize("only_a,only_b", [(0, 0), (3, 9), (9, 3), (5, 5), (0, 7), (12, 30), (40, 41)])
def test_exact_mcnemar_is_statsmodels_and_scipys_binomial_test(only_a, only_b):
    # statsmodels reads the discordant cells of a 2x2 table; the concordant ones do not enter the exact test
    table = [[11, only_a], [only_b, 17]]
    expected = mcnemar(table, exact=True).pvalue
    assert mcnemar_exact_p(only_a, only_b) == pytest.approx(expected, rel=1e-12)
    if only_a + only_b:
        assert mcnemar_exact_p(only_a, only_b) == pytest.approx(
            scipy_stats.binomtest(only_a, only_a + only_b, 0.5).pvalue, rel=1e-12)


def test_paired_se_is_scipys_sem():
    diffs = [v - w for v, w in zip(outcomes(50, 33, 0.5).values(), outcomes(51, 33, 0.4).values())]
    assert paired_se(diffs) == pytest.approx(float(scipy_stats.sem(diffs)), rel=1e-12)


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.1])
def test_power_is_statsmodels_normal_power(alpha):
    for effect, se in ((0.05, 0.02), (0.0, 0.03), (-0.04, 0.01), (0.1, 0.05)):
        # statsmodels standardises by sigma and sqrt(nobs): one observation with sigma = se is our z = effect / se
        assert power_at(effect, se, alpha=alpha) == pytest.approx(
            float(normal_power(effect, 1, alpha, alternative="two-sided", sigma=se)), rel=1e-12)


@pytest.mark.parametrize("alpha,power", [(0.05, 0.8), (0.01, 0.9), (0.1, 0.5)])
def test_mde_is_the_textbook_formula_and_statsmodels_solution_up_to_the_far_tail(alpha, power):
    se = 0.025
    # (z_{1-alpha/2} + z_power) se is the effect a one-sided test at alpha/2 detects with that power exactly
    one_sided = NormalIndPower().solve_power(effect_size=None, nobs1=1, alpha=alpha / 2, power=power, ratio=0,
                                             alternative="larger")
    assert mde(se, alpha=alpha, power=power) == pytest.approx(one_sided * se, rel=1e-6)
    # the two-sided solution also counts rejections in the wrong tail (power there < 1e-3 at these settings),
    # so the textbook MDE is never below it (up to the solver's tolerance) and a hair above it at most
    two_sided = NormalIndPower().solve_power(effect_size=None, nobs1=1, alpha=alpha, power=power, ratio=0)
    assert two_sided * se <= mde(se, alpha=alpha, power=power) * (1 + 1e-7)
    assert mde(se, alpha=alpha, power=power) == pytest.approx(two_sided * se, rel=2e-3)


# --------------------------------------------------------------------------- AUC, ECE, Platt


def scores_and_labels(seed: int, n: int, ties: bool):
    rng = random.Random(seed)
    labels = [int(rng.random() < 0.6) for _ in range(n)]
    values = [round(rng.gauss(0.4 * y, 1), 1 if ties else 12) for y in labels]   # one decimal: many ties
    return values, labels


@pytest.mark.parametrize("seed,ties", [(0, False), (1, True), (2, True), (3, False)])
def test_auc_is_sklearns_roc_auc_and_scipys_mann_whitney(seed, ties):
    values, labels = scores_and_labels(seed, 300, ties)
    ours = auc(values, labels)
    assert ours == pytest.approx(sk_metrics.roc_auc_score(labels, values), abs=1e-12)
    pos = [v for v, y in zip(values, labels) if y]
    neg = [v for v, y in zip(values, labels) if not y]
    u = scipy_stats.mannwhitneyu(pos, neg, alternative="two-sided").statistic
    assert ours == pytest.approx(u / (len(pos) * len(neg)), abs=1e-12)


@pytest.mark.parametrize("bins", [10, 5, 15])
def test_ece_is_the_weighted_gap_of_sklearns_calibration_curve(bins):
    rng = random.Random(bins)
    probs = [rng.random() ** 1.5 for _ in range(500)]          # no value on a bin edge (continuous draws)
    labels = [int(rng.random() < min(1.0, p + 0.1)) for p in probs]
    share_true, mean_prob = sk_calibration.calibration_curve(labels, probs, n_bins=bins, strategy="uniform")
    # calibration_curve returns the non-empty bins in order; their sizes are the same bins' counts
    edges = np.linspace(0, 1, bins + 1)
    counts = np.bincount(np.searchsorted(edges[1:-1], probs, side="right"), minlength=bins)
    counts = counts[counts > 0]
    expected = float(np.sum(counts / len(probs) * np.abs(share_true - mean_prob)))
    assert expected_calibration_error(probs, labels, bins=bins) == pytest.approx(expected, abs=1e-12)


def test_ece_bins_are_left_closed_at_exact_edges_where_sklearns_float_edges_are_not():
    # The one difference found: np.linspace(0, 1, 11) holds 0.30000000000000004, 0.6000000000000001 and
    # 0.7000000000000001, so calibration_curve puts 0.3, 0.6 and 0.7 one bin below [k/10, (k+1)/10); ours
    # takes floor(10 p), the left-closed bin (0.3 -> 3). Kept: exact decimals are common (v = 0.4 reads p = 0.7).
    edges = np.linspace(0, 1, 11)
    assert list(np.searchsorted(edges[1:-1], [0.3, 0.6, 0.7], side="right")) == [2, 5, 6]
    # 0.7 and 0.75 share bin 7: |(0.7 + 0.75) - (1 + 0)| / 2 = 0.225 (sklearn's bins would give
    # (|0.7 - 1| + |0.75 - 0|) / 2 = 0.525)
    assert expected_calibration_error([0.7, 0.75], [1, 0], bins=10) == pytest.approx(0.225, abs=1e-12)


def test_platt_fit_is_statsmodels_logistic_regression_on_the_logits():
    rng = random.Random(9)
    values = [math.tanh(rng.gauss(0.3, 0.8)) for _ in range(400)]
    z = [value_logit(v) for v in values]
    # a scorer too confident by a factor of 2 and shifted: the fit should undo it (a near 0.5, b near -0.2)
    targets = [float(rng.random() < 1 / (1 + math.exp(-(0.5 * zi - 0.2)))) for zi in z]
    fit = sm.Logit(np.array(targets), sm.add_constant(np.array(z))).fit(disp=0, tol=1e-12, maxiter=100)
    b_ref, a_ref = fit.params
    a, b = fit_platt(z, targets, l2=0.0)   # no penalty: the plain maximum-likelihood fit
    assert (a, b) == (pytest.approx(a_ref, abs=1e-7), pytest.approx(b_ref, abs=1e-7))
    # the project's default L2 of 1e-6 moves (a, b) by about 1e-6 times the inverse Hessian: within 1e-4
    a, b = fit_platt(z, targets)
    assert (a, b) == (pytest.approx(a_ref, abs=1e-4), pytest.approx(b_ref, abs=1e-4))


# --------------------------------------------------------------------------- comparing two conditions' logs


def test_compare_is_the_mean_over_questions_of_pandas_per_question_means(tmp_path):
    # eval/bootstrap.compare: per question the mean over seeds (a crashed record counts 0), then the
    # paired bootstrap over the questions both conditions have; pandas computes the same point estimate.
    pd = pytest.importorskip("pandas")
    rng = random.Random(12)
    rows = []
    for experiment in ("toy_a_fp_policy", "toy_b_fp_policy"):
        for seed in (14, 24, 42):
            records = []
            for i in range(30 if experiment.startswith("toy_a") else 28):   # b lacks two questions
                crashed = rng.random() < 0.05
                value = float(rng.random() < (0.6 if experiment.startswith("toy_a") else 0.5))
                records.append({"index": i, "question": f"q{i}", "metrics": {"pass@1": value},
                                **({"error": "boom"} if crashed else {})})
                rows.append({"exp": experiment, "question": f"q{i}", "value": 0.0 if crashed else value})
            write_stage4_log(tmp_path / f"{experiment}_{seed}", records, {"condition": experiment}, label=experiment)
    result = compare(tmp_path, "toy_a_fp_policy", "toy_b_fp_policy", n_resamples=500, seed=3)
    means = pd.DataFrame(rows).groupby(["exp", "question"])["value"].mean().unstack(0).dropna()
    assert result.n_questions == len(means) == 28
    assert result.mean_diff == pytest.approx(float((means["toy_a_fp_policy"] - means["toy_b_fp_policy"]).mean()),
                                             abs=1e-12)
    assert (result.ci_low, result.ci_high) == (inverted_cdf(result.means, 0.025), inverted_cdf(result.means, 0.975))


# --------------------------------------------------------------------------- the CSV's mean and std over seeds


def test_csv_mean_and_std_over_seeds_are_pandas_groupby_mean_and_sample_std():
    pd = pytest.importorskip("pandas")
    # tokens with one decimal: the log writes them so (log_text), pass@1 with four
    runs = {"exp_a": [(0.3, 10.0), (0.5, 20.0), (0.6, 33.3)], "exp_b": [(0.8, 5.5), (0.7, 6.3)],
            "exp_c": [(0.25, 7.0)]}
    logs = [parse_log(f"{exp}_{seed}", log_text(acc=acc, tokens=tokens))
            for exp, seeds in runs.items() for seed, (acc, tokens) in enumerate(seeds)]
    rows, skipped = aggregate(logs)
    assert not skipped
    csv_rows = {row["Experiment"]: row for row in csv.DictReader(io.StringIO(to_csv(rows)))}
    frame = pd.DataFrame([{"exp": exp, "pass@1": acc, "tokens": tokens}
                          for exp, seeds in runs.items() for acc, tokens in seeds])
    grouped = frame.groupby("exp")
    for key in ("pass@1", "tokens"):
        for exp, mean in grouped[key].mean().items():
            assert csv_rows[exp][f"{key}_mean"] == f"{mean:.4f}"
        for exp, std in grouped[key].std(ddof=1).items():
            # pandas leaves the std of one seed undefined (NaN); the CSV writes 0 there, as the original did
            assert csv_rows[exp][f"{key}_std"] == f"{0.0 if math.isnan(std) else std:.4f}"
