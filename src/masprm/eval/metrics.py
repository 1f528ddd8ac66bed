"""Per-example and per-condition evaluation metrics. Pure Python.

pass@k, as the original computes it: the candidate list is the prediction,
then every candidate among the method's top PASS_TOP (5) whose text differs
from the prediction's (candidates are not deduplicated against each other);
an example counts for pass@k when any of the first k is correct. Accuracy is
pass@1.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

MAX_K = 10
PASS_TOP = 5      # candidates a method contributes to pass@k (the original's pass_k)
USAGE_KEYS = ("prompt_tokens", "generated_tokens", "scorer_tokens", "scorer_calls", "agent_runs")


def pass_candidates(prediction: str, candidates: Iterable[str], top: int = PASS_TOP) -> list[str]:
    """The prediction, then each of the first `top` candidates whose text is not the prediction's."""
    return [prediction] + [c for c in list(candidates)[:top] if c != prediction]


def pass_at_k_hits(prediction: str, candidates: Iterable[str], gold: str | None, *,
                   is_correct: Callable[[str, str | None], bool], max_k: int = MAX_K) -> list[int]:
    """hits[k-1] = 1 when one of the first k of `pass_candidates` is correct, for k = 1..max_k."""
    hits, found = [], False
    ranked = pass_candidates(prediction, candidates)
    for k in range(1, max_k + 1):
        if k <= len(ranked) and not found:
            found = is_correct(ranked[k - 1], gold)
        hits.append(int(found))
    return hits


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation (0, 0 for no values)."""
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def summarize_records(records: Sequence[dict], max_k: int = MAX_K) -> dict:
    """Condition metrics from per-example records.

    Every example counts in the denominator of accuracy and pass@k (a crashed
    example counts as wrong); token statistics use the examples that finished.
    """
    n = len(records)
    ok = [r for r in records if not r.get("error")]
    out: dict = {"n": n, "errors": n - len(ok)}
    for k in range(1, max_k + 1):
        out[f"pass@{k}"] = sum(r["metrics"][f"pass@{k}"] for r in ok) / n if n else 0.0
    out["accuracy"] = out["pass@1"]
    tokens = [r["metrics"]["generated_tokens"] for r in ok]
    out["tokens_mean"], out["tokens_std"] = mean_std(tokens)
    out["tokens_n"] = len(tokens)
    for key in USAGE_KEYS:
        out[f"{key}_total"] = sum(r["metrics"][key] for r in ok)
    out["prm_calls_mean"] = out["scorer_calls_total"] / len(ok) if ok else 0.0
    out["agent_runs_mean"] = out["agent_runs_total"] / len(ok) if ok else 0.0
    return out


# --------------------------------------------------------------------------- why a search missed

MISS_KINDS = ("not_generated", "not_chosen", "unknown")


def miss_kind(record: dict, is_correct: Callable[[str, str | None], bool]) -> str | None:
    """None for a hit (pass@1); for a miss, whether a right final answer was among those the search generated.

    "not_generated": no final answer the search produced (``extra.generated_answers``) is right, so the
    search never reached one; "not_chosen": one was, and the search returned another; "unknown": the
    record does not list what the search generated (a crashed example, or a log written before the list).
    """
    if record.get("correct") and not record.get("error"):
        return None
    generated = (record.get("extra") or {}).get("generated_answers")
    if generated is None or record.get("error"):
        return "unknown"
    return "not_chosen" if any(is_correct(answer, record.get("gold")) for answer in generated) else "not_generated"


def split_misses(records: Iterable[dict], is_correct: Callable[[str, str | None], bool]) -> dict[str, int]:
    """How many records hit, and how many misses are of each kind (`miss_kind`)."""
    counts = {"hits": 0, **{kind: 0 for kind in MISS_KINDS}}
    for record in records:
        counts[miss_kind(record, is_correct) or "hits"] += 1
    return counts


def results_table(conditions: Sequence[Any]) -> str:
    """The original's printed table: condition label, p@1..p@5, tokens mean±std (FAILED rows say so).

    A condition is anything with ``label``, ``method`` and ``summary`` (``masprm.eval.runner.Condition``)."""
    width = max([len(c.label or c.method) for c in conditions] + [len("Condition")]) + 2
    passes = "  ".join(f"{f'p@{k}':>6}" for k in range(1, 6))
    lines = ["#" * 80, "Table-4 style results", "#" * 80,
             f"{'Condition':<{width}}  {passes}   {'Tokens (avg±std)':>22}", "-" * (width + 32 + 10 * 5)]
    for c in conditions:
        s = c.summary
        row = "  ".join(f"{s[f'pass@{k}']:>6.3f}" for k in range(1, 6))
        status = "  FAILED" if s.get("status") == "FAILED" else ""
        lines.append(f"{c.label or c.method:<{width}}  {row}   {s['tokens_mean']:>8.1f}±{s['tokens_std']:<8.1f}{status}")
    lines.append("#" * 80)
    return "\n".join(lines)
