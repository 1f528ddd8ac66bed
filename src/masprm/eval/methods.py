"""The method registry: every ``--methods`` name, what it searches with, what it needs, what defines it.

A method is a search generator ``search(ctx, example)`` (``masprm.search``)
registered under its CLI name with the scorer roles it loads and the settings
classes whose fields define a condition (its log fingerprint). The static
methods are the literal table below, one row each; the handoff methods are
the rows of ``masprm.handoff.methods.HANDOFF_METHODS``. Pure Python: no torch import.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Sequence

from masprm.errors import ConfigError
from masprm.handoff.methods import HANDOFF_METHODS, HANDOFF_SETTINGS, handoff_search
from masprm.handoff.methods import report_lines as handoff_report, summarize as handoff_summary
from masprm.registry import Registry
from masprm.search.beam import sbs_family, single_pass
from masprm.search.best_of_n import best_of_n
from masprm.search.context import SCORER_ROLES, SearchContext, SearchResult
from masprm.search.engine import drive
from masprm.search.mcts import mcts_family
from masprm.search.scorer_kinds import SCORER_KINDS
from masprm.search.settings import (BoNSettings, LogProbSettings, MCTSSettings, ORMLeafSettings, PassSettings,
                                    SBSSettings, ViewSettings, VoterSettings, check_settings_classes)
from masprm.search.vote import voter_family


@dataclass(frozen=True)
class Method:
    name: str
    search: Callable[[SearchContext, Any], Any]   # a search generator (masprm.search.engine) -> SearchResult
    needs: frozenset[str] = frozenset()   # subset of SCORER_ROLES
    family: str = "static"                # "static" or "handoff": the two cannot share a run
    summarize: Callable[[list[dict]], dict] | None = None  # per-condition extra metrics from records
    settings: tuple[type, ...] = ()       # settings dataclasses: their fields define a condition (its fingerprint)
    report: Callable[[dict], list[str]] | None = None  # the method's own text-log lines from its summary

    @property
    def source_file(self) -> str | None:
        """The file that defines the search (its code joins the condition's fingerprint)."""
        fn = self.search.func if isinstance(self.search, partial) else self.search
        return inspect.getsourcefile(fn)

    def run(self, ctx: SearchContext, example: Any) -> SearchResult:
        """The method on one example alone, each request one model call."""
        return drive(self.search(ctx, example), ctx)


METHODS: Registry[Method] = Registry("method")   # METHODS[name], METHODS.get(name), name in METHODS


def register_method(name: str, *, needs: Sequence[str] = (), family: str = "static",
                    summarize: Callable[[list[dict]], dict] | None = None, settings: Sequence[type] = (),
                    report: Callable[[dict], list[str]] | None = None):
    """Decorator: register a search generator ``fn(ctx, example)`` as ``--methods name`` (a name is registered once)."""
    unknown = set(needs) - set(SCORER_ROLES)
    if unknown:
        raise ConfigError(f"unknown scorer roles {sorted(unknown)}")

    def decorator(fn: Callable[[SearchContext, Any], Any]):
        METHODS.register(name, Method(name, fn, frozenset(needs), family, summarize,
                                      check_settings_classes(settings), report))
        return fn

    return decorator


# --------------------------------------------------------------------------- the static methods

# A search family runs over a scorer kind (masprm.search.scorer_kinds): family -> search(ctx, example, kind).
FAMILY_SEARCHES: dict[str, Callable[..., Any]] = {"sbs": sbs_family, "mcts": mcts_family, "voter": voter_family,
                                                  "bon": best_of_n}


def register_scored_method(name: str, family: str, kind: str, settings: Sequence[type]) -> None:
    """Register ``name``: the ``family`` search valued by scorer kind ``kind``, defined by ``settings``."""
    register_method(name, needs=SCORER_KINDS[kind].needs, settings=settings)(
        partial(FAMILY_SEARCHES[family], kind=kind))


# name               family   scorer kind  settings (the condition's fingerprint)
STATIC_METHODS = (
    ("sbs_prm",         "sbs",   "prm",      (SBSSettings, ViewSettings)),
    ("sbs_logprob",     "sbs",   "logprob",  (SBSSettings, LogProbSettings)),
    ("mcts_prm",        "mcts",  "prm",      (MCTSSettings, ViewSettings, ORMLeafSettings)),
    ("mcts_logprob",    "mcts",  "logprob",  (MCTSSettings, LogProbSettings)),
    ("mcts_orm",        "mcts",  "orm",      (MCTSSettings, ViewSettings)),
    ("voter_plain",     "voter", "plain",    (VoterSettings,)),
    ("voter_prm",       "voter", "prm",      (VoterSettings, ViewSettings)),
    ("voter_logprob",   "voter", "logprob",  (VoterSettings, LogProbSettings)),
    ("voter_orm",       "voter", "orm",      (VoterSettings, ViewSettings)),
    ("bon_prm",         "bon",   "prm",      (BoNSettings, ViewSettings)),
    ("bon_orm",         "bon",   "orm",      (BoNSettings, ViewSettings)),
    ("bon_logprob",     "bon",   "logprob",  (BoNSettings, LogProbSettings)),
)

register_method("single_pass", settings=(PassSettings,))(single_pass)
for _row in STATIC_METHODS:
    register_scored_method(*_row)


def scorers_needed(method: str, settings: Any) -> set[str]:
    """Scorer roles beyond the registry's static `needs` (`--orm_leaf` adds the ORM to mcts_prm)."""
    return {"orm"} if method == "mcts_prm" and getattr(settings, "orm_leaf", False) else set()


# --------------------------------------------------------------------------- the handoff methods

for _name, _mode, _scorer, _needs in HANDOFF_METHODS:
    register_method(_name, needs=_needs, family="handoff", summarize=handoff_summary,
                    settings=HANDOFF_SETTINGS[_name], report=handoff_report)(handoff_search(_mode, _scorer))
