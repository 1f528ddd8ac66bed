"""The static evaluation methods and scorer kinds, registered in the method registry.

single_pass, step-level beam search (sbs_*), inference MCTS (mcts_*) and
voters (voter_*) are implemented in `masprm.search`; this module says what
each scorer kind's value is (at a step, at an MCTS leaf, as a voter weight)
and registers one method per kind and family. Importing it also registers the
handoff methods when that package is present, so the registry is complete for
the CLI. Pure Python: no torch import.
"""

from __future__ import annotations

import importlib
import math
from typing import Any, Callable, Sequence

from masprm.eval.registry import EvalContext, register_method
from masprm.eval.settings import (LogProbSettings, MCTSSettings, ORMLeafSettings, PassSettings, SBSSettings,
                                  ViewSettings, VoterSettings)
from masprm.search.beam import Beam, sbs_family, single_pass
from masprm.search.expand import (SCORER_KINDS, Candidate, ScorerKind, Step, aggregate_logprob,
                                  ensure_logprobs, orm_values, prm_values)
from masprm.search.mcts import mcts_family
from masprm.search.node import Node
from masprm.search.vote import voter_family

register_method("single_pass", settings=(PassSettings,))(single_pass)


def scorers_needed(method: str, settings: Any) -> set[str]:
    """Scorer roles beyond the registry's static `needs` (`--orm_leaf` adds the ORM to mcts_prm)."""
    return {"orm"} if method == "mcts_prm" and getattr(settings, "orm_leaf", False) else set()


# --------------------------------------------------------------------------- scorer kinds

# What a scorer kind's value is at a step, at an MCTS leaf and as a voter run's log-weight.

def _score_prm(ctx: EvalContext, cands: Sequence[Candidate]) -> Step:
    values = yield from prm_values(ctx, [c.state for c in cands], [c.agent for c in cands])
    for c, v in zip(cands, values):
        c.score = v


def _score_logprob(ctx: EvalContext, cands: Sequence[Candidate]) -> Step:
    yield from ensure_logprobs(ctx, cands)
    for c in cands:
        c.score = aggregate_logprob([c.logprob], ctx.settings.logprob_agg)


def _score_zero(ctx: EvalContext, cands: Sequence[Candidate]) -> Step:
    # The ORM only judges finished transcripts; intermediate steps start neutral.
    for c in cands:
        c.score = 0.0
    return
    yield  # a search step that asks no model



def _leaf_prm(ctx: EvalContext, path: list[Node]) -> Step:
    if ctx.settings.orm_leaf:   # --orm_leaf: the PRM guides the search, the ORM values its leaves
        return (yield from _leaf_orm(ctx, path))
    return path[-1].info.get("score", 0.0)


def _leaf_logprob(ctx: EvalContext, path: list[Node]) -> Step:
    # Every node of a log-prob tree got its step log-prob when it was created.
    return aggregate_logprob([n.info["logprob"] for n in path[1:]], ctx.settings.logprob_agg)
    yield  # asks no model


def _leaf_orm(ctx: EvalContext, path: list[Node]) -> Step:
    leaf = path[-1]
    if "orm" not in leaf.info:   # a terminal leaf is revisited; score it once
        [leaf.info["orm"]] = yield from orm_values(ctx, [leaf.state])
    return leaf.info["orm"]


def _log_weights_prm(ctx: EvalContext, beams: list[Beam]) -> Step:
    # One forward over every step of every run: product of max(1e-6, (v + 1) / 2).
    steps = [c for b in beams for c in b.trail]
    values = iter((yield from prm_values(ctx, [c.state for c in steps], [c.agent for c in steps])))
    return [sum(math.log(max(1e-6, (next(values) + 1) / 2)) for _ in b.trail) for b in beams]


def _log_weights_logprob(ctx: EvalContext, beams: list[Beam]) -> Step:
    yield from ensure_logprobs(ctx, [c for b in beams for c in b.trail])
    return [aggregate_logprob([c.logprob for c in b.trail], ctx.settings.logprob_agg) for b in beams]


def _log_weights_orm(ctx: EvalContext, beams: list[Beam]) -> Step:
    values = yield from orm_values(ctx, [b.state for b in beams])
    return [-math.log1p(math.exp(-v)) for v in values]   # log sigmoid


def _log_weights_plain(ctx: EvalContext, beams: list[Beam]) -> Step:
    return [0.0] * len(beams)
    yield  # asks no model


# Each family's settings class and its method for a kind.
FAMILIES: dict[str, tuple[type, Callable[[EvalContext, Any, str], Step]]] = {
    "sbs": (SBSSettings, sbs_family), "mcts": (MCTSSettings, mcts_family), "voter": (VoterSettings, voter_family),
}


def register_scorer_kind(kind: ScorerKind) -> ScorerKind:
    """Register a scorer kind and its methods ``<family>_<name>`` for each of its families."""
    SCORER_KINDS.register(kind.name, kind)
    for family in kind.families:
        cls, run = FAMILIES[family]
        extra = kind.mcts_settings if family == "mcts" else ()
        register_method(f"{family}_{kind.name}", needs=kind.needs, settings=(cls, *kind.settings, *extra))(
            lambda ctx, example, _run=run, _kind=kind.name: _run(ctx, example, _kind))
    return kind


register_scorer_kind(ScorerKind("prm", _score_prm, _leaf_prm, _log_weights_prm, needs=("masprm",),
                                settings=(ViewSettings,), mcts_settings=(ORMLeafSettings,)))
register_scorer_kind(ScorerKind("logprob", _score_logprob, _leaf_logprob, _log_weights_logprob,
                                settings=(LogProbSettings,)))
register_scorer_kind(ScorerKind("orm", _score_zero, _leaf_orm, _log_weights_orm, families=("mcts", "voter"),
                                needs=("orm",), settings=(ViewSettings,)))
register_scorer_kind(ScorerKind("plain", weight=_log_weights_plain, families=("voter",)))


# --------------------------------------------------------------------------- handoff methods


def _register_handoff_methods() -> None:
    """The handoff package registers its methods on import; it is optional."""
    try:
        importlib.import_module("masprm.handoff.methods")
    except ModuleNotFoundError as err:
        if not (err.name or "").startswith("masprm.handoff"):
            raise


_register_handoff_methods()
