"""Route metrics of handoff runs and the paired policy-vs-PRM comparison (SPEC §10).

Per example (``route_metrics``): depth, roles that spoke, directed edges,
role revisits, the (speaker, recipient) transitions, parse failures, PRM
context sizes. Per condition (``summarize_routes``): Hit@T, depth mean and
median, unique agents and edges, revisit rate, route entropy
H(recipient | speaker) pooled over all turns of the condition, PRM context
tokens (median / p95), truncation and parse-failure rates, proposals per
example. Paired comparison: accuracy difference with a paired bootstrap CI
and the exact McNemar p-value. Pure Python + numpy.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Iterable, Sequence

import numpy as np

from masprm.handoff.team import PREFIX_TURNS, HandoffRun


def route_metrics(run: HandoffRun) -> dict[str, Any]:
    speakers = [t.speaker for t in run.turns]
    edges = [(t.speaker, t.recipient) for t in run.turns if not t.is_final]
    depth = len(run.turns)
    return {
        "depth": depth,
        "stop_reason": run.stop_reason,
        "transitions": [[t.speaker, t.recipient] for t in run.turns],   # FINAL included
        "unique_agents": len(set(speakers)),
        "unique_edges": len(set(edges)),
        "role_revisits": depth - len(set(speakers)),                     # turns by a role that spoke before
        "role_revisit_rate": (depth - len(set(speakers))) / depth if depth else 0.0,
        "proposals": run.proposals,
        "parse_failures": run.parse_failures,
        "fallback_turns": run.fallback_turns,
        "prm_context_tokens": [s["tokens"] for s in run.scored],
        "prm_truncated": sum(1 for s in run.scored if s["truncated"]),
    }


def conditional_entropy_bits(transitions: Iterable[Sequence[str]]) -> float:
    """H(recipient | speaker) in bits from (speaker, recipient) pairs."""
    by_speaker: dict[str, Counter] = defaultdict(Counter)
    for speaker, recipient in transitions:
        by_speaker[speaker][recipient] += 1
    total = sum(sum(c.values()) for c in by_speaker.values())
    h = 0.0
    for counts in by_speaker.values():
        n_s = sum(counts.values())
        for n_sr in counts.values():
            h -= (n_sr / total) * math.log2(n_sr / n_s)
    return h + 0.0  # no -0.0


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-quantile as an observed value (nearest rank); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(1, math.ceil(q * len(ordered))) - 1])


def summarize_routes(entries: Sequence[dict], n_examples: int | None = None) -> dict[str, float]:
    """Per-condition metrics from per-example handoff entries (``route_metrics`` + prefix correctness).

    Hit@T divides by ``n_examples`` when given, so examples without an entry
    (crashed ones) count as misses; the route metrics use the entries alone.
    """
    n = len(entries)
    out: dict[str, float] = {"handoff_examples": n}
    for t in PREFIX_TURNS:
        hits = sum(bool(e["prefix_correct"][str(t)]) for e in entries)
        out[f"hit_at_{t}"] = hits / (n_examples or n) if (n_examples or n) else 0.0
    if n == 0:
        return out
    depths = [e["depth"] for e in entries]
    context = [tok for e in entries for tok in e["prm_context_tokens"]]
    proposals = sum(e["proposals"] for e in entries)
    out.update({
        "depth_mean": float(np.mean(depths)),
        "depth_median": float(np.median(depths)),
        "unique_agents_mean": float(np.mean([e["unique_agents"] for e in entries])),
        "unique_edges_mean": float(np.mean([e["unique_edges"] for e in entries])),
        "role_revisit_rate": sum(e["role_revisits"] for e in entries) / max(1, sum(depths)),
        "route_entropy_bits": conditional_entropy_bits(tr for e in entries for tr in e["transitions"]),
        "prm_context_tokens_median": float(np.median(context)) if context else 0.0,
        "prm_context_tokens_p95": nearest_rank(context, 0.95),
        "prm_truncation_rate": sum(e["prm_truncated"] for e in entries) / len(context) if context else 0.0,
        "parse_failure_rate": sum(e["parse_failures"] for e in entries) / max(1, proposals),
        "fallback_turn_rate": sum(e["fallback_turns"] for e in entries) / max(1, sum(depths)),
        "proposals_per_example": proposals / n,
        "final_stop_rate": sum(e["stop_reason"] == "final" for e in entries) / n,
    })
    return out


# --------------------------------------------------------------------------- paired tests


def paired_bootstrap_ci(a: Sequence[float], b: Sequence[float], *, n_resamples: int = 10_000,
                        seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """mean(b - a) and its percentile bootstrap CI, resampling examples (pairs) with replacement."""
    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    if diff.size == 0:
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, diff.size, size=(n_resamples, diff.size))
    means = diff[picks].mean(axis=1)
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(diff.mean()), float(low), float(high)


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p: binomial test of the discordant counts against p = 1/2."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_accuracy(correct_a: dict[Any, bool], correct_b: dict[Any, bool], *, n_resamples: int = 10_000,
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
        "accuracy_a": float(np.mean(a)) if a else 0.0,
        "accuracy_b": float(np.mean(b)) if b else 0.0,
        "delta": delta,
        "ci_low": low,
        "ci_high": high,
        "only_a": only_a,
        "only_b": only_b,
        "mcnemar_p": mcnemar_exact_p(only_a, only_b),
    }
