"""Route metrics of handoff runs and the paired policy-vs-PRM comparison.

Per example (``route_metrics``), with the original's names: depth, the roles
that spoke, directed edges, role revisits, within-trajectory edge entropy
(plain and normalised by log2 of the possible edges), parse failures, PRM
evaluations and context sizes (kept and untruncated), plus the (speaker,
recipient) transitions and fallback turns. Per condition (``summarize_routes``):
Hit@T, depth mean and median, unique agents and edges, the mean of the
per-example revisit rates, route entropy H(recipient | speaker) pooled over the
routed (non-FINAL) turns, PRM context tokens (median / p95), truncation and
parse-failure rates, proposals. The paired comparison (accuracy difference
with the original's bootstrap CI and the exact McNemar p-value) lives with the
project's other paired statistics in `masprm.paired_stats`. Pure Python + numpy.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Iterable, Sequence

import numpy as np

from masprm.handoff.protocol import FINAL
from masprm.handoff.team import PREFIX_TURNS, HandoffRun
from masprm.paired_stats import mcnemar_exact_p, paired_accuracy, paired_bootstrap_ci  # noqa: F401 (re-exported)


def edge_entropy_bits(edges: Sequence[tuple[str, str]]) -> float:
    """Entropy in bits of the directed edges' empirical distribution (0 for none)."""
    counts = Counter(edges)
    total = sum(counts.values())
    return -sum(c / total * math.log2(c / total) for c in counts.values()) + 0.0 if total else 0.0


def route_metrics(run: HandoffRun, n_roles: int) -> dict[str, Any]:
    """One run's route metrics; ``n_roles`` is the team size (for the normalised entropy)."""
    speakers = [t.speaker for t in run.turns]
    active = list(dict.fromkeys(speakers))
    edges = [(t.speaker, t.recipient) for t in run.turns if not t.is_final]
    depth = len(run.turns)
    revisits = max(0, depth - len(active))
    entropy = edge_entropy_bits(edges)
    possible = max(1, n_roles * max(1, n_roles - 1))
    context = [s["tokens"] for s in run.scored]
    truncations = sum(1 for s in run.scored if s["truncated"])
    return {
        "depth": depth,
        "stop_reason": run.stop_reason,
        "active_roles": active,
        "unique_agents": len(active),
        "directed_role_edges": [f"{a} -> {b}" for a, b in edges],
        "unique_directed_role_edges": len(set(edges)),
        "transitions": [[t.speaker, t.recipient] for t in run.turns],   # FINAL included
        "role_revisits": revisits,                                       # turns by a role that spoke before
        "role_revisit_rate": revisits / depth if depth else 0.0,
        "route_entropy_bits": entropy,                                   # within this trajectory
        "route_entropy_normalized": entropy / math.log2(possible) if possible > 1 else 0.0,
        "agent_proposals": run.proposals,
        "parse_failures": run.parse_failures,
        "parse_failure_rate": run.parse_failures / run.proposals if run.proposals else 0.0,
        "fallback_turns": run.fallback_turns,
        "prm_evaluations": len(run.scored),
        "prm_context_tokens": context,
        "prm_original_context_tokens": [s.get("full_tokens", s["tokens"]) for s in run.scored],
        "prm_context_token_median": float(np.median(context)) if context else 0.0,
        "prm_context_token_p95": observed_quantile(context, 0.95),
        "prm_truncations": truncations,
        "prm_truncation_rate": truncations / len(context) if context else 0.0,
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


def observed_quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of unsorted values as one of them (nearest rank); 0 for no values. (The bootstrap's
    ``masprm.paired_stats.nearest_rank`` takes sorted values and refuses none.)"""
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
    proposals = sum(e["agent_proposals"] for e in entries)
    routed = (tr for e in entries for tr in e["transitions"] if tr[1] != FINAL)
    out.update({
        "realized_depth_mean": float(np.mean(depths)),
        "realized_depth_median": float(np.median(depths)),
        "unique_agents_mean": float(np.mean([e["unique_agents"] for e in entries])),
        "unique_directed_role_edges_mean": float(np.mean([e["unique_directed_role_edges"] for e in entries])),
        "role_revisit_rate_mean": float(np.mean([e["role_revisit_rate"] for e in entries])),
        "route_entropy_bits": conditional_entropy_bits(routed),
        "within_trajectory_edge_entropy_bits_mean": float(np.mean([e["route_entropy_bits"] for e in entries])),
        "prm_context_token_median": float(np.median(context)) if context else 0.0,
        "prm_context_token_p95": observed_quantile(context, 0.95),
        "prm_truncation_rate": sum(e["prm_truncations"] for e in entries) / len(context) if context else 0.0,
        "parse_failure_rate": sum(e["parse_failures"] for e in entries) / proposals if proposals else 0.0,
        "agent_proposals_total": float(proposals),
        "agent_proposals_mean": proposals / n,
        "fallback_turn_rate": sum(e["fallback_turns"] for e in entries) / max(1, sum(depths)),
        "final_stop_rate": sum(e["stop_reason"] == "final" for e in entries) / n,
    })
    return out
