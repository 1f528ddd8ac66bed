"""The four dynamic-routing conditions as evaluation methods.

    handoff_fixed   the config's fixed schedule, proposals ranked by policy log-prob
    handoff_random  a seeded random recipient each turn, ranked by policy log-prob
    handoff_policy  each proposal picks its recipient, ranked by policy log-prob
    handoff_prm     each proposal picks its recipient, ranked by the handoff PRM

Each example's route metrics and prefix answers go to ``extra["handoff"]``
of its record; ``summarize`` turns a condition's records into the route
metrics and ``paired_comparison`` compares handoff_policy with handoff_prm.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Generator, Sequence

from masprm.answers import is_correct
from masprm.search.context import SearchContext, SearchResult
from masprm.handoff.scoring import logprob_selector, prm_selector
from masprm.handoff.stats import route_metrics, summarize_routes
from masprm.paired_stats import paired_accuracy
from masprm.handoff.settings import (HandoffLogProbSettings, HandoffPRMSettings, RandomRouteSettings,
                                    TurnSettings)
from masprm.handoff.team import PREFIX_TURNS, ROUTE_MODES, HandoffPlan, HandoffTeam, run_handoff
from masprm.search.settings import PassSettings

EXTRA_KEY = "handoff"
PAIRED_TURNS = (8, 12)
PAIRED = ("handoff_policy", "handoff_prm")   # (baseline, treatment) of the paired comparison

# How a turn's proposals are ranked: each ranking reads its own setting (declared by the methods using it).
RANKINGS = {
    "logprob": lambda ctx: logprob_selector(ctx, ctx.settings.handoff_logprob_agg),
    "masprm": lambda ctx: prm_selector(ctx, ctx.settings.prm_context_length),
}


def run_condition(ctx: SearchContext, example: Any, *, mode: str, ranking: str) -> Generator[Any, Any, SearchResult]:
    team = HandoffTeam.from_graph(ctx.graph)
    route = ROUTE_MODES[mode]
    plan = HandoffPlan.resolve(ctx.settings, team,
                               random_fixed_horizon=route.draws_final and ctx.settings.random_fixed_horizon)
    run = yield from run_handoff(ctx, team, plan, example.question, mode=mode, select=RANKINGS[ranking](ctx))
    prefix = run.prefix_answers(PREFIX_TURNS)
    entry = {
        "route_mode": mode,
        **route_metrics(run, len(team.roles)),
        "prefix_answers": {str(t): a for t, a in prefix.items()},
        "prefix_depths": {str(t): min(t, len(run.turns)) for t in PREFIX_TURNS},
        "prefix_correct": {str(t): is_correct(a, example.gold) for t, a in prefix.items()},
        "turns": [{"speaker": t.speaker, "recipient": t.recipient, "message": t.message,
                   "current_answer": t.current_answer, "raw": t.raw, "parsed": t.parsed} for t in run.turns],
    }
    return SearchResult(prediction=run.answer, candidates=[run.answer], extra={EXTRA_KEY: entry})


def handoff_entry(record: dict) -> dict | None:
    """The handoff part of a per-example record, wherever the runner put ``extra``."""
    for holder in (record.get("extra"), record.get("metrics"), record):
        if isinstance(holder, dict) and isinstance(holder.get(EXTRA_KEY), dict):
            return holder[EXTRA_KEY]
    return None


def summarize(records: Sequence[dict]) -> dict:
    """Per-condition route metrics of all records; Hit@T counts a crashed example as a miss."""
    entries = [e for e in map(handoff_entry, records) if e is not None]
    return summarize_routes(entries, n_examples=len(records))


def report_lines(summary: dict) -> list[str]:
    """The original's handoff lines of a condition's text log (none when no example finished)."""
    x = summary.get("extra") or {}
    if not x.get("handoff_examples"):
        return []
    return [
        *(f"Hit@1 at {t} messages: {x[f'hit_at_{t}']:.4f}" for t in PREFIX_TURNS),
        f"Realized depth (mean/median): {x['realized_depth_mean']:.2f}/{x['realized_depth_median']:.2f}",
        f"Unique agents / directed edges (mean): {x['unique_agents_mean']:.2f}/"
        f"{x['unique_directed_role_edges_mean']:.2f}",
        f"Role revisit rate (mean): {x['role_revisit_rate_mean']:.4f}",
        f"Route entropy H(recipient|speaker), bits: {x['route_entropy_bits']:.4f}",
        f"PRM context tokens (median/p95): {x['prm_context_token_median']:.1f}/{x['prm_context_token_p95']:.1f}",
        f"PRM truncation rate: {x['prm_truncation_rate']:.4f}",
        f"Action parse-failure rate: {x['parse_failure_rate']:.4f}",
        f"Batched policy calls / proposals per example: {summary['agent_runs_mean']:.2f}/"
        f"{x['agent_proposals_mean']:.2f}",
    ]


def _prefix_correct(records: Sequence[dict], t: int) -> dict[Any, bool]:
    out = {}
    for r in records:
        entry = handoff_entry(r)
        out[r.get("index", r.get("idx"))] = bool(entry and entry["prefix_correct"][str(t)])
    return out


def paired_comparison(records_policy: Sequence[dict], records_prm: Sequence[dict], *, seed: int = 0,
                      n_resamples: int = 10_000) -> dict:
    """handoff_prm minus handoff_policy at T = 8 and 12, paired by example index.

    Gives the accuracy difference with a paired bootstrap 95% CI
    (``n_resamples`` resamples seeded ``seed + T``, as the original) and the
    exact McNemar p-value.
    """
    out: dict[str, float] = {}
    for t in PAIRED_TURNS:
        r = paired_accuracy(_prefix_correct(records_policy, t), _prefix_correct(records_prm, t),
                            n_resamples=n_resamples, seed=seed + t)
        out["n_pairs"] = r["n_pairs"]
        out.update({f"t{t}_policy_accuracy": r["accuracy_a"], f"t{t}_prm_accuracy": r["accuracy_b"],
                    f"t{t}_paired_accuracy_delta": r["delta"], f"t{t}_paired_bootstrap_ci_low": r["ci_low"],
                    f"t{t}_paired_bootstrap_ci_high": r["ci_high"], f"t{t}_policy_only": r["only_a"],
                    f"t{t}_prm_only": r["only_b"], f"t{t}_mcnemar_exact_p": r["mcnemar_p"]})
    return out


def compare_handoff_conditions(records_by_method: dict[str, Sequence[dict]], *, seed: int = 0) -> dict | None:
    """The paired comparison when both handoff_policy and handoff_prm have records, else None."""
    if not all(records_by_method.get(m) for m in PAIRED):
        return None
    return paired_comparison(*(records_by_method[m] for m in PAIRED), seed=seed)


def paired_log_lines(result: dict) -> list[str]:
    """The original's paired lines in handoff_prm's text log (just before its status; the original's follow it)."""
    lines = []
    for t in PAIRED_TURNS:
        lines += [f"T={t} paired dynamic PRM-policy accuracy delta (95% bootstrap CI): "
                  f"{result[f't{t}_paired_accuracy_delta']:.4f} [{result[f't{t}_paired_bootstrap_ci_low']:.4f}, "
                  f"{result[f't{t}_paired_bootstrap_ci_high']:.4f}]",
                  f"T={t} McNemar exact: policy-only={result[f't{t}_policy_only']}, "
                  f"prm-only={result[f't{t}_prm_only']}, p={result[f't{t}_mcnemar_exact_p']:.6f}"]
    return lines


def format_paired_comparison(result: dict) -> list[str]:
    """Printable lines, one per T, as the original prints them."""
    return [f"T={t} dynamic MASPRM \u2212 policy: \u0394={result[f't{t}_paired_accuracy_delta']:.3f}, "
            f"95% CI [{result[f't{t}_paired_bootstrap_ci_low']:.3f}, {result[f't{t}_paired_bootstrap_ci_high']:.3f}], "
            f"McNemar p={result[f't{t}_mcnemar_exact_p']:.4g}"
            for t in PAIRED_TURNS]


def prefix_table(rows: Sequence[tuple[str, dict]], width: int) -> list[str]:
    """The printed "Dynamic-handoff prefix results" table: (condition name, summary) per row."""
    lines = ["Dynamic-handoff prefix results",
             f"{'Condition':<{width}}  {'Hit@4':>7}  {'Hit@8':>7}  {'Hit@12':>7}  {'Depth':>7}"]
    for name, summary in rows:
        x = summary.get("extra") or {}
        lines.append(f"{name:<{width}}  {x.get('hit_at_4', 0.0):>7.3f}  {x.get('hit_at_8', 0.0):>7.3f}  "
                     f"{x.get('hit_at_12', 0.0):>7.3f}  {x.get('realized_depth_mean', 0.0):>7.2f}")
    return lines


def handoff_search(mode: str, ranking: str):
    """The search of one handoff condition: route `mode`, proposals ranked by `ranking` (RANKINGS)."""
    return partial(run_condition, mode=mode, ranking=ranking)


# name               route mode  ranked by  scorer roles          settings (the condition's fingerprint)
HANDOFF_METHODS = (
    ("handoff_fixed",  "fixed",    "logprob", (),                    (PassSettings, TurnSettings, HandoffLogProbSettings)),
    ("handoff_random", "random",   "logprob", (),                    (PassSettings, TurnSettings, HandoffLogProbSettings,
                                                                      RandomRouteSettings)),
    ("handoff_policy", "free",     "logprob", (),                    (PassSettings, TurnSettings, HandoffLogProbSettings)),
    ("handoff_prm",    "free",     "masprm",  ("handoff_masprm",),   (PassSettings, TurnSettings, HandoffPRMSettings)),
)
