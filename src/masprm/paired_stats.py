"""Paired statistics over questions: the one home of every paired test the project reports. Pure Python.

A paired comparison of two conditions A and B looks at the questions both
answered and the per-question differences d = a − b (each a value in [0, 1],
typically pass@1 averaged over search seeds). The unit of resampling is always
the question: two answers to one question are not independent evidence.

    paired_bootstrap      mean of d with a percentile CI, resampling questions (the project's rule)
    bootstrap_ci          a percentile CI of any statistic, resampling its units (the step metrics' transcripts)
    two_level_bootstrap   the same with training seeds resampled too (a CI that includes training variance)
    headroom_bootstrap    the share of a ceiling's gain over a base that a learned scorer recovers
    holm                  Holm's step-down adjustment of a family's p-values, and verdicts from it
    tost                  equivalence / non-superiority within a margin Δ (two one-sided tests)
    mde, power            the minimum detectable effect at 80% power and the power against an effect
    paired_bootstrap_ci   the original's handoff resampling (reproduces its numbers), with
    mcnemar_exact_p       the exact McNemar test, combined by paired_accuracy

Every bootstrap keeps its sorted resampled means on the result, so a p-value, a
TOST or an MDE read from it agrees with its CI by construction: a CI at level
1 − α excludes 0 exactly when the bootstrap p-value is below α (see
`PairedResult.p_value`).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Sequence

from masprm.errors import DataError

Z_POWER_80 = statistics.NormalDist().inv_cdf(0.80)   # 0.841621...


# --------------------------------------------------------------------------- one-level bootstrap


@dataclass(frozen=True)
class PairedResult:
    mean_diff: float         # mean over the common questions (and training seeds) of a − b
    ci_low: float
    ci_high: float
    n_questions: int
    share_positive: float    # share of resampled mean differences > 0
    alpha: float = 0.05      # the CI covers 1 − alpha
    n_resamples: int = 10_000
    n_seeds: int = 1         # training seeds resampled with the questions (two_level_bootstrap)
    means: tuple[float, ...] = field(default=(), repr=False, compare=False)   # the sorted resampled means

    def as_dict(self) -> dict[str, Any]:
        """The result as a JSON record: every field but the resampled means (n_seeds only when above 1)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("means", "n_seeds")}
        return {**out, "n_seeds": self.n_seeds} if self.n_seeds > 1 else out

    @property
    def verdict(self) -> str:
        """"holds" when the CI lies above 0, "reversed" when below, else "inconclusive"."""
        return "holds" if self.ci_low > 0 else "reversed" if self.ci_high < 0 else "inconclusive"

    @property
    def p_value(self) -> float:
        """Two-sided bootstrap p-value: 2 × the smaller share of resampled means on either side of 0
        (a mean of exactly 0 counts on both sides), capped at 1.

        With the nearest-rank CI this is consistent: ci_low > 0 ⇔ #(m ≤ 0) < ceil(R α/2) ⇔ p < α.
        """
        return tail_p(self.means, 0.0)

    @property
    def se(self) -> float:
        """The bootstrap standard error: the standard deviation of the resampled means."""
        return statistics.pstdev(self.means) if len(self.means) > 1 else 0.0


def tail_p(means: Sequence[float], at: float) -> float:
    """Two-sided bootstrap p-value of "the mean is ``at``": min(1, 2 min(#(m ≤ at), #(m ≥ at)) / R)."""
    if not means:
        raise ValueError("a p-value needs the resampled means (a result built by a bootstrap)")
    below = sum(m <= at for m in means)
    above = sum(m >= at for m in means)
    return min(1.0, 2 * min(below, above) / len(means))


def nearest_rank(sorted_values: list[float], p: float) -> float:
    """The p-quantile by nearest rank: the value of rank ceil(p * R) (1-based) among R sorted values,
    clipped to [1, R]; p * R is rounded to 9 decimals first, so float noise (0.975 * 10000 =
    9750.000000000002) does not move the rank."""
    if not sorted_values:
        raise ValueError("nearest_rank of no values")
    rank = math.ceil(round(p * len(sorted_values), 9))
    return sorted_values[min(len(sorted_values), max(1, rank)) - 1]


def _check(n_resamples: int, alpha: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")


def _result(point: float, means: list[float], n: int, alpha: float, n_seeds: int = 1) -> PairedResult:
    means.sort()
    return PairedResult(mean_diff=point, ci_low=nearest_rank(means, alpha / 2),
                        ci_high=nearest_rank(means, 1 - alpha / 2), n_questions=n,
                        share_positive=sum(m > 0 for m in means) / len(means), alpha=alpha,
                        n_resamples=len(means), n_seeds=n_seeds, means=tuple(means))


def paired_bootstrap(a: Mapping[str, float], b: Mapping[str, float], *, n_resamples: int = 10_000, seed: int = 0,
                     alpha: float = 0.05) -> PairedResult:
    """Mean of a − b over the questions both have, with a percentile bootstrap CI over questions.

    The rule: take the common questions in sorted order and their differences
    d = a[q] − b[q] (n of them). With ``rng = random.Random(seed)``, draw
    ``n_resamples`` resamples, each ``rng.choices(d, k=n)`` (n questions with
    replacement), and take each resample's mean. Sort those means; the CI is
    their `nearest_rank` quantiles at alpha/2 and 1 − alpha/2 (for 10,000
    resamples and alpha 0.05: the 250th and the 9,750th). ``share_positive`` is
    the share of resampled means > 0. Questions in only one of a, b are ignored.
    """
    _check(n_resamples, alpha)
    common = sorted(set(a) & set(b))
    if not common:
        raise DataError("the two conditions have no question in common")
    diffs = [a[q] - b[q] for q in common]
    n = len(diffs)
    rng = random.Random(seed)
    means = [sum(rng.choices(diffs, k=n)) / n for _ in range(n_resamples)]
    return _result(sum(diffs) / n, means, n, alpha)


def bootstrap_ci(units: Sequence[Any], statistic: Callable[[list[Any]], float | None], *, n_resamples: int = 1000,
                 seed: int = 0, alpha: float = 0.05) -> tuple[float, float] | None:
    """A percentile CI of any statistic of a sample, resampling its units (e.g. transcripts) with replacement.

    ``rng = random.Random(seed)``; each resample is ``rng.choices(units, k=len(units))``; a resample on
    which the statistic is undefined (None: an AUC without one of its classes) is left out; the CI is the
    `nearest_rank` quantiles at alpha/2 and 1 − alpha/2 of the rest; None when no resample is defined.
    """
    _check(n_resamples, alpha)
    if not units:
        return None
    rng = random.Random(seed)
    values = sorted(v for v in (statistic(rng.choices(units, k=len(units))) for _ in range(n_resamples))
                    if v is not None)
    return (nearest_rank(values, alpha / 2), nearest_rank(values, 1 - alpha / 2)) if values else None


# --------------------------------------------------------------------------- two-level bootstrap


def two_level_bootstrap(a: Sequence[Mapping[str, float]], b: Sequence[Mapping[str, float]], *,
                        n_resamples: int = 10_000, seed: int = 0, alpha: float = 0.05) -> PairedResult:
    """a − b where each side was trained at S seeds: ``a[s]`` is seed s's per-question values.

    Seed s of A is paired with seed s of B (the same tree and training seed).
    The point estimate is the mean over seeds and common questions of
    d[s][q] = a[s][q] − b[s][q]. One resample: draw n questions with replacement
    (``rng.choices`` over the sorted common questions), then S seeds with
    replacement (``rng.choices`` over 0..S−1); its value is the mean of d[s][q]
    over every drawn seed × drawn question. The questions are drawn once per
    resample, for all seeds together, because every seed answers the same
    questions (the design is crossed): a question that is hard for one seed's
    scorer is hard for the others'. With one seed there is nothing to draw and
    the result equals `paired_bootstrap` exactly (same seed, same stream).
    The unit stays the question; the seeds widen the CI by the training variance.
    """
    _check(n_resamples, alpha)
    if len(a) != len(b) or not a:
        raise DataError(f"two_level_bootstrap pairs seeds: got {len(a)} and {len(b)} seeds")
    common = sorted(set.intersection(*(set(x) for x in (*a, *b))))
    if not common:
        raise DataError("the two conditions have no question in common across their seeds")
    S, n = len(a), len(common)
    diffs = [[a_s[q] - b_s[q] for q in common] for a_s, b_s in zip(a, b)]
    per_seed_sum: list[float] = [0.0] * S
    rng = random.Random(seed)
    indices = range(n)
    means = []
    for _ in range(n_resamples):
        drawn = rng.choices(indices, k=n)
        seeds = rng.choices(range(S), k=S) if S > 1 else [0]
        for s in set(seeds):
            row = diffs[s]
            per_seed_sum[s] = sum(row[i] for i in drawn)
        means.append(sum(per_seed_sum[s] for s in seeds) / (S * n))
    point = sum(sum(row) for row in diffs) / (S * n)
    return _result(point, means, n, alpha, n_seeds=S)


# --------------------------------------------------------------------------- headroom


@dataclass(frozen=True)
class Headroom:
    share: float             # mean(learned − base) / mean(ceiling − base)
    ci_low: float
    ci_high: float
    gap: PairedResult        # ceiling − base: the headroom itself


def headroom_bootstrap(learned: Mapping[str, float], base: Mapping[str, float], ceiling: Mapping[str, float], *,
                       n_resamples: int = 10_000, seed: int = 0, alpha: float = 0.05) -> Headroom | None:
    """The share of the ceiling's gain over the base that a learned scorer recovers, with a bootstrap CI.

    On the questions all three have: share = mean(learned − base) / mean(ceiling − base). A resample
    draws n question indices with ``rng.choices`` (the same questions for both means) and takes the
    ratio; a resample whose ceiling gap is not above 0 is left out. None when the ceiling's own gap
    over the base (`paired_bootstrap`, same seed) does not have its CI above 0: there is no headroom
    to recover, and a ratio over noise says nothing.
    """
    _check(n_resamples, alpha)
    common = sorted(set(learned) & set(base) & set(ceiling))
    if not common:
        raise DataError("the three conditions have no question in common")
    gap = paired_bootstrap({q: ceiling[q] for q in common}, {q: base[q] for q in common},
                           n_resamples=n_resamples, seed=seed, alpha=alpha)
    if gap.ci_low <= 0:
        return None
    gained = [learned[q] - base[q] for q in common]
    room = [ceiling[q] - base[q] for q in common]
    n, rng, ratios = len(common), random.Random(seed), []
    for _ in range(n_resamples):
        drawn = rng.choices(range(n), k=n)
        total_room = sum(room[i] for i in drawn)
        if total_room > 0:
            ratios.append(sum(gained[i] for i in drawn) / total_room)
    ratios.sort()
    return Headroom(sum(gained) / sum(room), nearest_rank(ratios, alpha / 2), nearest_rank(ratios, 1 - alpha / 2),
                    gap)


# --------------------------------------------------------------------------- multiplicity


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order.

    Sort the m p-values ascending, p(1) ≤ … ≤ p(m); the adjusted p(i) is
    max over j ≤ i of min(1, (m − j + 1) p(j)). A comparison is rejected at
    family-wise level α when its adjusted p < α (equal p-values get equal
    adjusted values, whatever their order).
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def adjusted_verdict(result: PairedResult, adjusted_p: float) -> str:
    """The verdict after adjustment: "holds"/"reversed" by the sign of the mean when adjusted p < α."""
    if adjusted_p >= result.alpha:
        return "inconclusive"
    return "holds" if result.mean_diff > 0 else "reversed"


# --------------------------------------------------------------------------- equivalence


@dataclass(frozen=True)
class Equivalence:
    margin: float
    p_not_better: float      # H0: the true difference ≥ +margin (one-sided bootstrap p)
    p_not_worse: float       # H0: the true difference ≤ −margin
    alpha: float

    @property
    def not_better(self) -> bool:
        """A is not better than B by margin or more (non-superiority at level alpha)."""
        return self.p_not_better < self.alpha

    @property
    def equivalent(self) -> bool:
        """TOST: both one-sided tests reject, so |A − B| < margin at level alpha."""
        return max(self.p_not_better, self.p_not_worse) < self.alpha


def tost(result: PairedResult, margin: float) -> Equivalence:
    """Two one-sided tests of a bootstrapped comparison against ±margin, at the result's alpha.

    p_not_better = #(resampled means ≥ margin) / R and p_not_worse = #(means ≤ −margin) / R:
    "not better by margin or more" holds when p_not_better < α, "equivalent within ±margin" when
    both are below α (the TOST; at α = 0.05 it is the 90% interval lying inside (−margin, +margin)).
    """
    if margin <= 0:
        raise ValueError(f"the equivalence margin must be positive, got {margin}")
    if not result.means:
        raise ValueError("tost needs the resampled means (a result built by a bootstrap)")
    R = len(result.means)
    return Equivalence(margin=margin, p_not_better=sum(m >= margin for m in result.means) / R,
                       p_not_worse=sum(m <= -margin for m in result.means) / R, alpha=result.alpha)


# --------------------------------------------------------------------------- power


def mde(se: float, *, alpha: float = 0.05, power: float = 0.80) -> float:
    """The minimum detectable effect of a two-sided test at level alpha with the given power:
    (z_{1 − alpha/2} + z_{power}) × se — 2.8016 × se at the defaults (normal approximation)."""
    nd = statistics.NormalDist()
    return (nd.inv_cdf(1 - alpha / 2) + nd.inv_cdf(power)) * se


def power_at(effect: float, se: float, *, alpha: float = 0.05) -> float:
    """Power of the two-sided level-alpha test against a true difference ``effect`` (normal approximation):
    Φ(effect/se − z) + Φ(−effect/se − z), z = z_{1 − alpha/2}."""
    if se <= 0:
        return 1.0 if effect else alpha
    nd = statistics.NormalDist()
    z = nd.inv_cdf(1 - alpha / 2)
    return nd.cdf(effect / se - z) + nd.cdf(-effect / se - z)


# The questions a paired standard error (and so an MDE or a CI's width) needs: a command whose analysis takes
# one refuses fewer before any search (its --n / --sample_n), never after minutes of work.
MIN_QUESTIONS = 2
QUESTIONS_RULE = f"must be at least {MIN_QUESTIONS} (a standard error over questions needs two)"


def paired_se(diffs: Sequence[float]) -> float:
    """The standard error of a mean of paired differences: sample sd (n − 1) / sqrt(n)."""
    if len(diffs) < MIN_QUESTIONS:
        raise ValueError("a standard error needs at least two differences")
    return statistics.stdev(diffs) / math.sqrt(len(diffs))


# --------------------------------------------------------------------------- the original's handoff test


def paired_bootstrap_ci(a: Sequence[float], b: Sequence[float], *, n_resamples: int = 10_000,
                        seed: int = 0) -> tuple[float, float, float]:
    """mean(b - a) and its 95% bootstrap CI, resampling examples (pairs) with replacement.

    The resampling is the original's exactly: ``random.Random(seed)``, one
    ``randrange`` per drawn example, and the sorted means read at indices
    floor(0.025 (B - 1)) and ceil(0.975 (B - 1)), so the interval reproduces.
    It is kept apart from `paired_bootstrap` (whose draws and quantiles differ)
    because the handoff reports must match the original's numbers.
    """
    diff = [int(y) - int(x) for x, y in zip(a, b)]
    if not diff:
        return 0.0, 0.0, 0.0
    rng = random.Random(seed)
    n = len(diff)
    means = sorted(sum(diff[rng.randrange(n)] for _ in range(n)) / n for _ in range(max(1, n_resamples)))
    last = len(means) - 1
    return sum(diff) / n, means[max(0, math.floor(0.025 * last))], means[min(last, math.ceil(0.975 * last))]


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p: binomial test of the discordant counts against p = 1/2."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_accuracy(correct_a: Mapping[Any, bool], correct_b: Mapping[Any, bool], *, n_resamples: int = 10_000,
                    seed: int = 0) -> dict[str, float]:
    """Compare B against A on the examples both have (keys are example indices)."""
    keys = sorted(set(correct_a) & set(correct_b))
    a = [float(bool(correct_a[k])) for k in keys]
    b = [float(bool(correct_b[k])) for k in keys]
    delta, low, high = paired_bootstrap_ci(a, b, n_resamples=n_resamples, seed=seed)
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    return {
        "n_pairs": len(keys),
        "accuracy_a": sum(a) / len(a) if a else 0.0,
        "accuracy_b": sum(b) / len(b) if b else 0.0,
        "delta": delta,
        "ci_low": low,
        "ci_high": high,
        "only_a": only_a,
        "only_b": only_b,
        "mcnemar_p": mcnemar_exact_p(only_a, only_b),
    }


# --------------------------------------------------------------------------- one line


def _points(share: float) -> str:
    """A share as signed percentage points, one decimal ("+4.2"); a rounded zero is "+0.0"."""
    return f"{round(100 * share, 1) or 0.0:+.1f}"


def format_comparison(name: str, result: PairedResult) -> str:
    """One line: "<name>: +4.2 points [95% CI +1.0, +7.5] over 240 questions (holds)"; a two-level
    result says "over 240 questions x 3 training seeds"."""
    level = f"{round(100 * (1 - result.alpha), 6):g}%"
    seeds = f" x {result.n_seeds} training seeds" if result.n_seeds > 1 else ""
    return (f"{name}: {_points(result.mean_diff)} points [{level} CI {_points(result.ci_low)}, "
            f"{_points(result.ci_high)}] over {result.n_questions} questions{seeds} ({result.verdict})")
