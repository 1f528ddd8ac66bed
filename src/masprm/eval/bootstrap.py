"""Paired comparisons of two evaluated conditions over the questions both answered. Pure Python.

A condition is an experiment: a stage-4 log name without its trailing
`_<seed>`. Its records are the `.jsonl` sidecars of its COMPLETED seed logs,
grouped by question text (so one question has one record per seed, and
questions with the same text are one question). A question's value is the
mean over its records of a per-example metric (pass@1 by default); a crashed
record (one with an "error") counts 0 for every metric. Two conditions A and B
are compared on the questions both have: the mean over questions of A − B,
with a percentile bootstrap CI that resamples questions (`paired_bootstrap`).

    result = compare("logs", "toy_mcts_prm_<fp>_<model>", "toy_mcts_orm_<fp>_<model>")
    print(format_comparison("mcts_prm vs mcts_orm", result))
    # mcts_prm vs mcts_orm: +4.2 points [95% CI +1.0, +7.5] over 240 questions (holds)
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from masprm.eval.aggregate import split_experiment
from masprm.errors import DataError
from masprm.eval.logs import COMPLETED, LogFiles, log_status, read_records

Records = dict[str, list[dict]]   # question text -> its records, one per seed


# --------------------------------------------------------------------------- reading a condition


def load_condition(logs_dir: str | Path, experiment: str) -> Records:
    """Per question, its records across the seeds of ``experiment`` (COMPLETED logs only).

    Records are returned as written; read their values with `record_value`, which
    counts a crashed record as 0. Raises DataError when the experiment has no
    COMPLETED log, or a COMPLETED log has no records sidecar.
    """
    by_question: Records = {}
    logs = 0
    for path in sorted(Path(logs_dir).glob("*.txt"), key=lambda p: p.name):
        name, seed = split_experiment(path.stem)
        if name != experiment or seed is None or log_status(path) != COMPLETED:
            continue
        records = LogFiles(path.with_name(path.stem)).records
        if not records.is_file():
            raise DataError(f"{records}: missing, though {path.name} says COMPLETED")
        for record in read_records(records):
            by_question.setdefault(record["question"], []).append(record)
        logs += 1
    if not logs:
        raise DataError(f"{logs_dir}: no COMPLETED log of experiment {experiment!r} (<experiment>_<seed>.txt)")
    return by_question


def record_value(record: dict, metric: str) -> float:
    """A record's metric; 0 for a crashed record (its example counts as wrong)."""
    if record.get("error"):
        return 0.0
    try:
        return float(record["metrics"][metric])
    except (KeyError, TypeError):
        raise DataError(f"record {record.get('index')!r} has no metric {metric!r}") from None


def per_question(records_by_q: Records, metric: str = "pass@1") -> dict[str, float]:
    """Per question, the mean of ``metric`` over its records (the seeds)."""
    return {q: statistics.fmean(record_value(r, metric) for r in recs) for q, recs in records_by_q.items() if recs}


def gap_per_question(records_by_q: Records, low: str = "pass@1", high: str = "pass@5") -> dict[str, float]:
    """Per question, the Hit@1 -> Hit@5 gap: mean over seeds of ``high`` − ``low`` (pass@5 − pass@1)."""
    hi, lo = per_question(records_by_q, high), per_question(records_by_q, low)
    return {q: hi[q] - lo[q] for q in hi}


# --------------------------------------------------------------------------- the bootstrap


@dataclass(frozen=True)
class PairedResult:
    mean_diff: float         # mean over the common questions of a − b
    ci_low: float
    ci_high: float
    n_questions: int
    share_positive: float    # share of resampled mean differences > 0
    alpha: float = 0.05      # the CI covers 1 − alpha
    n_resamples: int = 10_000

    @property
    def verdict(self) -> str:
        """"holds" when the CI lies above 0, "reversed" when below, else "inconclusive"."""
        return "holds" if self.ci_low > 0 else "reversed" if self.ci_high < 0 else "inconclusive"


def nearest_rank(sorted_values: list[float], p: float) -> float:
    """The p-quantile by nearest rank: the value of rank ceil(p * R) (1-based) among R sorted values,
    clipped to [1, R]; p * R is rounded to 9 decimals first, so float noise (0.975 * 10000 =
    9750.000000000002) does not move the rank."""
    if not sorted_values:
        raise ValueError("nearest_rank of no values")
    rank = math.ceil(round(p * len(sorted_values), 9))
    return sorted_values[min(len(sorted_values), max(1, rank)) - 1]


def paired_bootstrap(a: dict[str, float], b: dict[str, float], *, n_resamples: int = 10_000, seed: int = 0,
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
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    common = sorted(set(a) & set(b))
    if not common:
        raise DataError("the two conditions have no question in common")
    diffs = [a[q] - b[q] for q in common]
    n = len(diffs)
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(n_resamples))
    return PairedResult(mean_diff=sum(diffs) / n, ci_low=nearest_rank(means, alpha / 2),
                        ci_high=nearest_rank(means, 1 - alpha / 2), n_questions=n,
                        share_positive=sum(m > 0 for m in means) / n_resamples, alpha=alpha,
                        n_resamples=n_resamples)


# --------------------------------------------------------------------------- comparing two experiments


def compare(logs_dir: str | Path, experiment_a: str, experiment_b: str, metric: str = "pass@1", seed: int = 0,
            n_resamples: int = 10_000) -> PairedResult:
    """``metric`` of A minus B per question (each the mean over its seeds), bootstrapped over questions."""
    return _compare(logs_dir, experiment_a, experiment_b, lambda recs: per_question(recs, metric), seed, n_resamples)


def compare_gaps(logs_dir: str | Path, experiment_a: str, experiment_b: str, seed: int = 0,
                 n_resamples: int = 10_000) -> PairedResult:
    """The Hit@1 -> Hit@5 gap (pass@5 − pass@1) of A minus that of B, per question, bootstrapped."""
    return _compare(logs_dir, experiment_a, experiment_b, gap_per_question, seed, n_resamples)


def _compare(logs_dir: str | Path, experiment_a: str, experiment_b: str,
             values: Callable[[Records], dict[str, float]], seed: int, n_resamples: int) -> PairedResult:
    a = values(load_condition(logs_dir, experiment_a))
    b = values(load_condition(logs_dir, experiment_b))
    return paired_bootstrap(a, b, n_resamples=n_resamples, seed=seed)


def _points(share: float) -> str:
    """A share as signed percentage points, one decimal ("+4.2"); a rounded zero is "+0.0"."""
    return f"{round(100 * share, 1) or 0.0:+.1f}"


def format_comparison(name: str, result: PairedResult) -> str:
    """One line: "<name>: +4.2 points [95% CI +1.0, +7.5] over 240 questions (holds)"."""
    level = f"{round(100 * (1 - result.alpha), 6):g}%"
    return (f"{name}: {_points(result.mean_diff)} points [{level} CI {_points(result.ci_low)}, "
            f"{_points(result.ci_high)}] over {result.n_questions} questions ({result.verdict})")
