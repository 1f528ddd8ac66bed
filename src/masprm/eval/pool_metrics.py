"""Pool metrics: how a selector over a shared pool of passes (voters, best-of-N, the LLM judge) uses it.

A record of such a condition keeps its pool in ``extra["pool"]``: each pass's final
answer and the selector's score of it (a voter's log-weight, best-of-N's aggregate,
the judge's log-weight; None for -inf, ranked lowest). From them, per condition:

- ``oracle_hit_at_k``: the share of questions where some pass of the pool (k of
  them, ``pool_size_mean``) is right: the best any selector could do;
- ``accuracy_given_solvable``: the selector's accuracy on those questions only;
- ``candidate_auc_per_question``: the rank AUC of the scores against the passes'
  correctness within one question, averaged over the questions that have both
  right and wrong passes (``auc_questions`` of them); and ``candidate_auc_pooled``,
  the AUC over every pass of every question at once, as the original reports it.
  Both, because they answer different questions: selection only ever compares
  passes of one question, which the per-question AUC measures; the pooled AUC
  also rewards scores that rank the passes of easy questions above those of hard
  ones, so a scorer can look better pooled without choosing any better;
- ``judge_calls_mean`` and ``judge_parse_failure_rate`` (judge conditions, ``judge_summary``).

An undefined value (no solvable question, no question with both classes) is None.

The selector's wall-clock latency is not recorded: examples share batched model
calls, so one example's time is not its own, and records stay byte-for-byte
reproducible. Pure Python.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

POOL_KEY = "pool"

# The aggregator's reading of these lines (masprm.eval.aggregate): a column each, in its CSV only when a row
# has it, so the original's logs still give the original's columns.
OPTIONAL_LINES = {
    "oracle_hit_at_k": r"Oracle Hit@k \(k = [^)]*\):",
    "acc_given_solvable": r"Selection accuracy given a solvable pool:",
    "auc_per_question": r"Candidate AUC per question \(mean of \d+\):",
    "auc_pooled": r"Candidate AUC pooled over questions:",
    "judge_calls": r"Judge calls per example:",
    "judge_parse_failure_rate": r"Judge parse-failure rate:",
}
# What each can be (the aggregator skips a log with a value outside): shares and AUCs in [0, 1], calls >= 0.
# An undefined value is written "N/A" (``_number``) and left out of its mean.
OPTIONAL_RANGES = {key: (0.0, math.inf) if key == "judge_calls" else (0.0, 1.0) for key in OPTIONAL_LINES}
UNDEFINED = "N/A"


def rank_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Mann-Whitney AUC, tied scores sharing their average rank; NaN without both classes."""
    pos = sum(1 for x in labels if x)
    neg = len(labels) - pos
    if not pos or not neg:
        return math.nan
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2 + 1
        i = j + 1
    positive_ranks = sum(r for r, x in zip(ranks, labels) if x)
    return (positive_ranks - pos * (pos + 1) / 2) / (pos * neg)


def with_pool_verdicts(extra: dict, is_correct: Callable[[str, str | None], bool], gold: str | None) -> dict:
    """A record's extra with each pooled pass judged by the run's own checker (the one pass@k used)."""
    if POOL_KEY not in extra:
        return extra
    pool = extra[POOL_KEY]
    return {**extra, POOL_KEY: {**pool, "correct": [bool(is_correct(a, gold)) for a in pool["answers"]]}}


def pool_summary(records: Sequence[dict], is_correct: Callable[[str, str | None], bool]) -> dict:
    """The pool metrics of a condition's records (module docstring); {} when no record has a pool."""
    pooled = [r for r in records if not r.get("error") and POOL_KEY in (r.get("extra") or {})]
    if not pooled:
        return {}
    solvable = right = 0
    per_question, all_scores, all_labels, sizes = [], [], [], []
    for r in pooled:
        pool = r["extra"][POOL_KEY]
        # Labelled by the run's own --answer_checker when it ran (the runner stores them); else `is_correct`.
        labels = pool.get("correct") or [bool(is_correct(a, r.get("gold"))) for a in pool["answers"]]
        sizes.append(len(labels))
        if any(labels):
            solvable += 1
            right += bool(r.get("correct"))
        scores = [-math.inf if v is None else v for v in pool["scores"]]
        auc = rank_auc(scores, labels)
        if not math.isnan(auc):
            per_question.append(auc)
        all_scores += scores
        all_labels += labels
    out = {"pool_examples": len(pooled), "pool_size_mean": sum(sizes) / len(sizes),
           "oracle_hit_at_k": solvable / len(pooled),
           "accuracy_given_solvable": right / solvable if solvable else math.nan,
           "candidate_auc_per_question": sum(per_question) / len(per_question) if per_question else math.nan,
           "auc_questions": len(per_question), "candidate_auc_pooled": rank_auc(all_scores, all_labels)}
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in out.items()}   # JSON has no NaN


def judge_summary(records: Sequence[dict]) -> dict:
    """Judge calls per example and the share of replies that could not be read (any judge condition)."""
    ok = [r for r in records if not r.get("error") and r["metrics"].get("judge_calls")]
    calls = sum(r["metrics"]["judge_calls"] for r in ok)
    if not calls:
        return {}
    return {"judge_calls_mean": calls / len(ok),
            "judge_parse_failure_rate": sum(r["metrics"].get("judge_parse_failures", 0) for r in ok) / calls}


def selector_summary(records: Sequence[dict]) -> dict:
    """A pooled or judged condition's extra summary: its pool metrics and its judge's counts."""
    from masprm.answers import is_correct

    return {**pool_summary(records, is_correct), **judge_summary(records)}


def _number(value: float | None) -> str:
    return UNDEFINED if value is None else f"{value:.4f}"


def pool_report_lines(summary: dict) -> list[str]:
    """The text-log lines of the pool metrics (read back by the aggregator's POOL_LINES)."""
    x = summary.get("extra") or {}
    lines = []
    if "oracle_hit_at_k" in x:
        lines += [f"Oracle Hit@k (k = {x['pool_size_mean']:g}): {_number(x['oracle_hit_at_k'])}",
                  f"Selection accuracy given a solvable pool: {_number(x['accuracy_given_solvable'])}",
                  f"Candidate AUC per question (mean of {x['auc_questions']}): "
                  f"{_number(x['candidate_auc_per_question'])}",
                  f"Candidate AUC pooled over questions: {_number(x['candidate_auc_pooled'])}"]
    if "judge_calls_mean" in x:
        lines += [f"Judge calls per example: {_number(x['judge_calls_mean'])}",
                  f"Judge parse-failure rate: {_number(x['judge_parse_failure_rate'])}"]
    return lines
