"""The four dynamic-routing conditions as evaluation methods (SPEC §10).

    handoff_fixed   the config's fixed schedule, proposals ranked by policy log-prob
    handoff_random  a seeded random recipient each turn, ranked by policy log-prob
    handoff_policy  each proposal picks its recipient, ranked by policy log-prob
    handoff_prm     each proposal picks its recipient, ranked by the handoff PRM

Each example's route metrics and prefix answers go to ``extra["handoff"]``
of its record; ``summarize`` turns a condition's records into the route
metrics and ``paired_comparison`` compares handoff_policy with handoff_prm.
"""

from __future__ import annotations

from typing import Any, Sequence

from masprm.answers import is_correct
from masprm.eval.registry import EvalContext, MethodResult, register_method
from masprm.handoff.scoring import logprob_selector, prm_selector
from masprm.handoff.stats import paired_accuracy, route_metrics, summarize_routes
from masprm.handoff.team import PREFIX_TURNS, HandoffSettings, HandoffTeam, run_handoff

EXTRA_KEY = "handoff"
PAIRED_TURNS = (8, 12)
PAIRED = ("handoff_policy", "handoff_prm")   # (baseline, treatment) of the paired comparison

# The flags that define each condition (its log fingerprint); the config's handoff
# section is part of the MAS config, which the fingerprint covers by content.
_COMMON = ("handoff_candidates", "min_turns", "max_turns", "allow_self_handoff", "handoff_temperature",
           "sbs_temperature", "top_p", "max_new_tokens")
_SETTINGS: dict[str, tuple[str, ...]] = {
    "handoff_fixed": _COMMON + ("handoff_logprob_agg",),
    "handoff_random": _COMMON + ("handoff_logprob_agg", "random_fixed_horizon"),
    "handoff_policy": _COMMON + ("handoff_logprob_agg",),
    "handoff_prm": _COMMON + ("prm_context_length",),
}


def run_condition(ctx: EvalContext, example: Any, *, mode: str, scorer: str) -> MethodResult:
    team = HandoffTeam.from_graph(ctx.graph)
    settings = HandoffSettings.from_flags(ctx.settings, team)
    select = (prm_selector(ctx, settings.prm_context_length) if scorer == "prm"
              else logprob_selector(ctx, settings.logprob_agg))
    run = run_handoff(ctx, team, settings, example.question, mode=mode, select=select)
    prefix = run.prefix_answers(PREFIX_TURNS)
    entry = {
        "route_mode": mode,
        **route_metrics(run),
        "prefix_answers": {str(t): a for t, a in prefix.items()},
        "prefix_correct": {str(t): is_correct(a, example.gold) for t, a in prefix.items()},
        "turns": [{"speaker": t.speaker, "recipient": t.recipient, "message": t.message,
                   "current_answer": t.current_answer, "parsed": t.parsed} for t in run.turns],
    }
    return MethodResult(prediction=run.answer, candidates=[run.answer], extra={EXTRA_KEY: entry})


def handoff_entry(record: dict) -> dict | None:
    """The handoff part of a per-example record, wherever the runner put ``extra``."""
    for holder in (record.get("extra"), record.get("metrics"), record):
        if isinstance(holder, dict) and isinstance(holder.get(EXTRA_KEY), dict):
            return holder[EXTRA_KEY]
    return None


def summarize(records: Sequence[dict]) -> dict:
    """Per-condition route metrics; Hit@T counts a crashed example as a miss."""
    entries = [e for e in map(handoff_entry, records) if e is not None]
    return summarize_routes(entries, n_examples=len(records))


def _prefix_correct(records: Sequence[dict], t: int) -> dict[Any, bool]:
    out = {}
    for r in records:
        entry = handoff_entry(r)
        out[r.get("index", r.get("idx"))] = bool(entry and entry["prefix_correct"][str(t)])
    return out


def paired_comparison(records_policy: Sequence[dict], records_prm: Sequence[dict], *, seed: int = 0,
                      n_resamples: int = 10_000) -> dict:
    """handoff_prm minus handoff_policy at T = 8 and 12, paired by example index.

    Gives the accuracy difference with a paired percentile-bootstrap 95% CI
    (``n_resamples`` resamples from ``seed``) and the exact McNemar p-value.
    """
    out: dict[str, float] = {}
    for t in PAIRED_TURNS:
        r = paired_accuracy(_prefix_correct(records_policy, t), _prefix_correct(records_prm, t),
                            n_resamples=n_resamples, seed=seed)
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


def format_paired_comparison(result: dict) -> list[str]:
    """Printable lines, one per T."""
    return [f"T={t} handoff_prm - handoff_policy: delta={result[f't{t}_paired_accuracy_delta']:+.3f} "
            f"95% CI [{result[f't{t}_paired_bootstrap_ci_low']:+.3f}, {result[f't{t}_paired_bootstrap_ci_high']:+.3f}] "
            f"McNemar p={result[f't{t}_mcnemar_exact_p']:.4g} (n={result['n_pairs']})"
            for t in PAIRED_TURNS]


def _register(name: str, mode: str, scorer: str) -> None:
    needs = ("handoff_prm",) if scorer == "prm" else ()
    register_method(name, needs=needs, family="handoff", summarize=summarize, settings=_SETTINGS[name])(
        lambda ctx, example: run_condition(ctx, example, mode=mode, scorer=scorer))


for _name, _mode, _scorer in (("handoff_fixed", "fixed", "logprob"), ("handoff_random", "random", "logprob"),
                              ("handoff_policy", "free", "logprob"), ("handoff_prm", "free", "prm")):
    _register(_name, _mode, _scorer)
