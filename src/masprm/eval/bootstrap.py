"""Paired comparisons of two evaluated conditions over the questions both answered. Pure Python.

A condition is an experiment: a stage-4 log name without its trailing
`_<seed>`. Its records are the `.jsonl` sidecars of its COMPLETED seed logs,
grouped by question text (so one question has one record per seed, and
questions with the same text are one question). A question's value is the
mean over its records of a per-example metric (pass@1 by default); a crashed
record (one with an "error") counts 0 for every metric. Two conditions A and B
are compared on the questions both have: the mean over questions of A − B,
with a percentile bootstrap CI that resamples questions (`paired_bootstrap`,
which lives with the project's other paired statistics in `masprm.paired_stats`).

    result = compare("logs", "toy_mcts_prm_<fp>_<model>", "toy_mcts_orm_<fp>_<model>")
    print(format_comparison("mcts_prm vs mcts_orm", result))
    # mcts_prm vs mcts_orm: +4.2 points [95% CI +1.0, +7.5] over 240 questions (holds)
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Callable

from masprm.eval.aggregate import split_experiment
from masprm.errors import DataError
from masprm.eval.logs import COMPLETED, LogFiles, log_status, read_records
from masprm.paired_stats import PairedResult, format_comparison, nearest_rank, paired_bootstrap  # noqa: F401 (re-exported)

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
