"""The method registry: every ``--methods`` name, what it searches with, what it needs, what defines it.

A method is a search generator ``search(ctx, example)`` (``masprm.search``)
registered under its CLI name with the scorer roles it loads and the settings
classes that define a condition. Those classes are all it may read: its
``ctx.settings`` is one frozen object with exactly their fields
(``Method.settings_for``), and the same values are the condition's settings in its
log fingerprint. The static methods are the literal table below, one row each;
the handoff methods are the rows of ``masprm.handoff.methods.HANDOFF_METHODS``.
Pure Python: no torch import.
"""

from __future__ import annotations

import argparse
import inspect
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from masprm.config import Needs, flag_fields
from masprm.errors import ConfigError
from masprm.eval.pool_metrics import pool_report_lines, selector_summary
from masprm.handoff.methods import HANDOFF_METHODS, handoff_search
from masprm.handoff.methods import report_lines as handoff_report, summarize as handoff_summary
from masprm.registry import Registry
from masprm.search.beam import sbs_family, single_pass
from masprm.search.best_of_n import best_of_n
from masprm.roles import ROLES
from masprm.search.context import SearchContext
from masprm.search.mcts import mcts_family
from masprm.search.judge import JUDGE_ROLE
from masprm.search.scorer_kinds import SCORER_KINDS
from masprm.search.settings import (BoNSettings, JudgeSettings, LogProbSettings, MCTSSettings, ORMLeafSettings,
                                    PassSettings, SBSSettings, StepOracleSettings, TrueValueSettings, ViewSettings,
                                    VoterSettings, check_settings_classes, combined_settings, extra_scorers,
                                    recorded_settings)
from masprm.search.vote import voter_family

ROUTINGS = ("static", "handoff")   # the team's routing: a MAS graph, or dynamic handoff (never mixed in a run)


@dataclass(frozen=True)
class Method:
    name: str
    search: Callable[[SearchContext, Any], Any]   # a search generator (masprm.search.engine) -> SearchResult
    needs: frozenset[str] = frozenset()   # scorer roles it loads (masprm.roles.ROLES), and the judge (JUDGE_ROLE)
    routing: str = "static"               # one of ROUTINGS: methods of both cannot share a run
    summarize: Callable[[list[dict]], dict] | None = None  # per-condition extra metrics from records
    settings: tuple[type, ...] = ()       # MethodSettings classes: all it reads, and its fingerprint
    report: Callable[[dict], list[str]] | None = None  # the method's own text-log lines from its summary
    family: str | None = None             # the search family of a scored method (FAMILIES)
    scorer_kind: str | None = None        # ... and the scorer kind it runs over (SCORER_KINDS)

    @property
    def source_file(self) -> str | None:
        """The file that defines the search (its code joins the condition's fingerprint)."""
        fn = self.search.func if isinstance(self.search, partial) else self.search
        return inspect.getsourcefile(fn)

    def settings_for(self, instances: Mapping[type, Any]) -> Any:
        """The method's frozen settings (its ``ctx.settings``) from the run's instance of each settings class."""
        return combined_settings(self.settings, instances)

    def recorded_settings(self, instances: Mapping[type, Any]) -> dict[str, Any]:
        """Its settings as a condition's fingerprint records them: opt-in options only when set."""
        return recorded_settings(self.settings, instances)

    def roles(self, instances: Mapping[type, Any]) -> tuple[str, ...]:
        """The scorer roles a condition loads: the method's own, plus those its settings' values add."""
        return tuple(sorted(self.needs | extra_scorers(self.settings, instances)))


METHODS: Registry[Method] = Registry("method")   # METHODS[name], METHODS.get(name), name in METHODS


def register_method(name: str, *, needs: Sequence[str] = (), routing: str = "static",
                    summarize: Callable[[list[dict]], dict] | None = None, settings: Sequence[type] = (),
                    report: Callable[[dict], list[str]] | None = None, family: str | None = None,
                    scorer_kind: str | None = None):
    """Decorator: register a search generator ``fn(ctx, example)`` as ``--methods name`` (a name is registered once)."""
    unknown = set(needs) - set(ROLES) - {JUDGE_ROLE}
    if unknown:
        raise ConfigError(f"unknown model roles {sorted(unknown)} (valid: {', '.join([*ROLES, JUDGE_ROLE])})")
    if routing not in ROUTINGS:
        raise ConfigError(f"unknown routing {routing!r} (expected one of {', '.join(ROUTINGS)})")

    def decorator(fn: Callable[[SearchContext, Any], Any]):
        METHODS.register(name, Method(name, fn, frozenset(needs), routing, summarize,
                                      check_settings_classes(settings), report, family, scorer_kind))
        return fn

    return decorator


# --------------------------------------------------------------------------- the static methods

@dataclass(frozen=True)
class SearchFamily:
    """A search algorithm that runs over any scorer kind (docs/glossary.md): one record each.

    ``search(ctx, example, kind)`` is the algorithm (one file in ``masprm.search``); ``budget`` names the
    settings that scale its work and ``budget_format`` how a plot point or table cell names their values.
    """

    name: str
    search: Callable[..., Any]
    budget: tuple[str, ...] = ()
    budget_format: str = ""

    def budget_label(self, settings: Mapping[str, Any]) -> str:
        """"10 sims", "3x5", "k=5" from a condition's settings; "" when one is missing."""
        return self.budget_format.format(**settings) if all(k in settings for k in self.budget) else ""


def runs_mcts(names: Sequence[str]) -> bool:
    """Any of the methods `names` searches with MCTS (reads MCTSSettings), so the MCTS options apply to
    its run (stage 4 refuses them otherwise: they would go unused)."""
    return any(MCTSSettings in METHODS[name].settings for name in names)


FAMILIES: Registry[SearchFamily] = Registry("search family")


def register_family(family: SearchFamily) -> SearchFamily:
    return FAMILIES.register(family.name, family)


#               name     search          budget settings              budget label
for _family in (("sbs",   sbs_family,   ("b1", "b2"),          "{b1}x{b2}"),
                ("mcts",  mcts_family,  ("n_simulations",),    "{n_simulations} sims"),
                ("voter", voter_family, ("voter_k",),          "k={voter_k}"),
                ("bon",   best_of_n,    ("bon_n",),            "N={bon_n}")):
    register_family(SearchFamily(*_family))


# Selectors over a shared pool of passes (their records keep it: masprm.eval.pool_metrics); the judge's
# counts are reported wherever it is asked.
POOLED_FAMILIES = ("voter", "bon")


def register_scored_method(name: str, family: str, kind: str, settings: Sequence[type]) -> None:
    """Register ``name``: the ``family`` search valued by scorer kind ``kind``, defined by ``settings``."""
    reported = family in POOLED_FAMILIES or kind == JUDGE_ROLE
    register_method(name, needs=SCORER_KINDS[kind].needs, settings=settings, family=family, scorer_kind=kind,
                    summarize=selector_summary if reported else None,
                    report=pool_report_lines if reported else None)(partial(FAMILIES[family].search, kind=kind))


# name               family   scorer kind  settings (all it reads; the condition's fingerprint)
STATIC_METHODS = (
    ("sbs_prm",         "sbs",   "masprm",   (SBSSettings, ViewSettings)),
    ("sbs_logprob",     "sbs",   "logprob",  (SBSSettings, LogProbSettings)),
    ("mcts_prm",        "mcts",  "masprm",   (MCTSSettings, ViewSettings, ORMLeafSettings)),
    ("mcts_logprob",    "mcts",  "logprob",  (MCTSSettings, LogProbSettings)),
    ("mcts_orm",        "mcts",  "orm",      (MCTSSettings, ViewSettings)),
    ("voter_plain",     "voter", "plain",    (VoterSettings,)),
    ("voter_prm",       "voter", "masprm",   (VoterSettings, ViewSettings)),
    ("voter_logprob",   "voter", "logprob",  (VoterSettings, LogProbSettings)),
    ("voter_orm",       "voter", "orm",      (VoterSettings, ViewSettings)),
    ("bon_prm",         "bon",   "masprm",   (BoNSettings, ViewSettings)),
    ("bon_orm",         "bon",   "orm",      (BoNSettings, ViewSettings)),
    ("bon_logprob",     "bon",   "logprob",  (BoNSettings, LogProbSettings)),
    # reference scorers (masprm.search.oracles): ceilings, not methods to deploy
    ("sbs_oracle_step",     "sbs",  "oracle_step",    (SBSSettings, StepOracleSettings)),
    ("mcts_oracle_step",    "mcts", "oracle_step",    (MCTSSettings, StepOracleSettings)),
    ("bon_oracle_step",     "bon",  "oracle_step",    (BoNSettings, StepOracleSettings)),
    ("sbs_oracle_outcome",  "sbs",  "oracle_outcome", (SBSSettings,)),
    ("mcts_oracle_outcome", "mcts", "oracle_outcome", (MCTSSettings,)),
    ("bon_oracle_outcome",  "bon",  "oracle_outcome", (BoNSettings,)),
    ("sbs_true_value",      "sbs",  "true_value",     (SBSSettings, TrueValueSettings)),
    ("mcts_true_value",     "mcts", "true_value",     (MCTSSettings, TrueValueSettings)),
    ("bon_true_value",      "bon",  "true_value",     (BoNSettings, TrueValueSettings)),
    # the original newer branch's LLM judge (masprm.search.judge): over the voters' pool, guiding MCTS
    ("pooled_judge",    "voter", "judge",    (VoterSettings, JudgeSettings)),
    ("mcts_judge",      "mcts",  "judge",    (MCTSSettings, JudgeSettings)),
)

register_method("single_pass", settings=(PassSettings,))(single_pass)
for _row in STATIC_METHODS:
    register_scored_method(*_row)


# --------------------------------------------------------------------------- the handoff methods

for _name, _mode, _ranking, _needs, _settings in HANDOFF_METHODS:
    register_method(_name, needs=_needs, routing="handoff", summarize=handoff_summary, settings=_settings,
                    report=handoff_report)(handoff_search(_mode, _ranking))


def method_facts(method: str, roles: Sequence[str]) -> dict:
    """What a condition of ``method`` is, as its manifest records it for the reports: family, scorer kind,
    the scorer roles it loads and its family's budget settings (the reports read these, never the name)."""
    record = METHODS[method]
    family = FAMILIES.get(record.family) if record.family else None
    return {"family": record.family, "scorer_kind": record.scorer_kind, "routing": record.routing,
            "scorer_roles": list(roles), "budget_keys": list(family.budget) if family else []}


def budget_label(facts: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """The budget of a condition from its facts and settings ("3x5"), "" for a method without one."""
    family = FAMILIES.get(facts.get("family") or "")
    return family.budget_label(settings) if family else ""


def settings_classes() -> tuple[type, ...]:
    """Every settings class a registered method declares, in registration order (their flags are stage 4's)."""
    return tuple(dict.fromkeys(cls for method in METHODS.values() for cls in method.settings))


def method_flag_needs() -> dict[str, Needs]:
    """Each method flag that not every registered method reads -> its ``Needs``: a method in ``--methods``
    that reads it (given for a run of none, it would go unused: ``--distinct_tries`` without MCTS). Worked out
    from the registry, so a new method's flags are checked at once."""
    readers: dict[str, list[str]] = {}
    for name, method in METHODS.items():
        for setting in dict.fromkeys(f.name for cls in method.settings for f in flag_fields(cls)):
            readers.setdefault(setting, []).append(name)
    return {setting: Needs(f"{_method_names(names)} in `methods`",
                           lambda parsed, names=frozenset(names): bool(names & set(getattr(parsed, "methods", ()))))
            for setting, names in readers.items() if len(names) < len(METHODS)}


def _method_names(names: Sequence[str]) -> str:
    """``names`` as a user reads them: a whole name prefix (every ``mcts_...``) as ``mcts_*``."""
    parts: list[str] = []
    for name in names:
        prefix = name.split("_")[0] + "_"
        family = [m for m in METHODS if m.startswith(prefix)]
        part = prefix + "*" if len(family) > 1 and set(family) <= set(names) else name
        if part not in parts:
            parts.append(part)
    if len(parts) > 1:
        return "one of " + ", ".join(parts)
    return f"a method named {parts[0]}" if "*" in parts[0] else parts[0]


def flags_read_by(methods: Sequence[str], tokens: Sequence[str]) -> list[str]:
    """``tokens`` (each ``--flag`` with the values up to the next flag: a switch has none) less the method flags
    no method of ``methods`` reads: a planned command passes only settings its methods act on (stage 4 refuses
    the others: ``method_flag_needs``)."""
    needs, run = method_flag_needs(), argparse.Namespace(methods=list(methods))
    starts = [i for i, token in enumerate(tokens) if token.startswith("--")]
    kept: list[str] = []
    for start, end in zip(starts, [*starts[1:], len(tokens)]):
        need = needs.get(tokens[start].lstrip("-").replace("-", "_"))
        if need is None or need.ok(run):
            kept += tokens[start:end]
    return kept
