"""Scorer kinds: what a scorer's value is at a step, at an MCTS leaf and as a voter run's weight.

A search family (beam search, MCTS, voters) is written once over a scorer
kind's name; the kind says how to value what the family asks about:

- ``step(ctx, candidates)`` sets each candidate's ``score`` (beam search and
  MCTS expansions);
- ``leaf(ctx, path)`` values a finished (or dead-end) MCTS path;
- ``weight(ctx, runs)`` gives each voter run its log-weight. As in the
  original, a run's steps with empty text are dropped first (``spoken_trail``,
  ``spoken_state``);
- ``steps(ctx, runs)`` gives every step of each finished run its value
  (best-of-N aggregates them with `aggregate_steps`): for the MASPRM the
  value of the state after the step (what SBS reads), for the ORM its value
  of that same prefix state (so ``last`` is the classic ORM reranker, and
  ``min`` asks the ORM about every prefix), for the log-prob the step's own
  log-prob (``--logprob_agg``);
- ``log_prob(value)`` reads one step value as the log of a probability, for
  the ``prod`` aggregate: tanh values v in [-1, 1] as log(max(1e-6, (v + 1) / 2))
  (the voters' rule), a log-prob as itself.

Each is a search step (it may yield model requests). ``needs`` names the
scorer roles the kind reads (``masprm.roles.ROLES``).
The built-in kinds are registered here, so any search can be run without
the evaluation package. Pure Python: no torch import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from masprm.registry import Registry
from masprm.search.expand import (Candidate, SearchStep, aggregate_logprob, ensure_logprobs, orm_values,
                                  masprm_values)

if TYPE_CHECKING:
    from masprm.graph import RoutingState
    from masprm.search.beam import Beam
    from masprm.search.context import SearchContext
    from masprm.search.node import Node


STEP_AGGS = ("min", "prod", "mean", "last")   # how a finished run's step values become one score


def tanh_log_prob(value: float) -> float:
    """A tanh value in [-1, 1] as a log-probability: log(max(1e-6, (v + 1) / 2)), the voters' rule."""
    return math.log(max(1e-6, (value + 1) / 2))


def identity_log_prob(value: float) -> float:
    """A value that already is a log-probability (the policy's log-prob)."""
    return value


@dataclass(frozen=True)
class ScorerKind:
    """One way to score trajectories, as one record: what the search families ask of it."""

    name: str
    step: Callable[..., SearchStep] | None = None
    leaf: Callable[..., SearchStep] | None = None
    weight: Callable[..., SearchStep] | None = None
    needs: tuple[str, ...] = ()
    steps: Callable[..., SearchStep] | None = None     # (ctx, runs) -> per run, the value after each step
    log_prob: Callable[[float], float] = tanh_log_prob   # a step value as a log-probability (prod)


SCORER_KINDS: Registry[ScorerKind] = Registry("scorer kind")


def register_scorer_kind(kind: ScorerKind) -> ScorerKind:
    SCORER_KINDS.register(kind.name, kind)
    return kind


def spoken_trail(beam: Beam) -> tuple[Candidate, ...]:
    """A voter run's steps as the original weighs them: the empty texts dropped, the rest handed in
    order to whichever agent runs next from the question (a no-op when no text is empty)."""
    if all(c.text for c in beam.trail):
        return beam.trail
    state, steps = beam.state.graph.start(beam.state.question), []
    for text in (c.text for c in beam.trail if c.text):
        agent = state.next_runnable()
        if agent is None:
            break
        steps.append(Candidate(state, agent, text, state.decide(agent, text)))
        state = steps[-1].state
    return tuple(steps)


def spoken_state(beam: Beam) -> RoutingState:
    """A voter run's final state without its empty steps (each text kept with its own agent), as the
    original's ORM weight reads it."""
    if all(c.text for c in beam.trail):
        return beam.state
    return beam.state.graph.replay(beam.state.question, [(c.agent, c.text) for c in beam.trail if c.text])


def aggregate_steps(values: Sequence[float], agg: str, log_prob: Callable[[float], float] = tanh_log_prob) -> float:
    """One score from a finished run's step values: the smallest, the product (a sum of `log_prob`s),
    the mean, or the last; -inf for a run without steps (it ranks last)."""
    if not values:
        return -math.inf
    if agg == "min":
        return min(values)
    if agg == "prod":
        return sum(log_prob(v) for v in values)
    if agg == "mean":
        return sum(values) / len(values)
    if agg == "last":
        return values[-1]
    raise ValueError(f"unknown step aggregation {agg!r} (expected one of {', '.join(STEP_AGGS)})")


def score_candidates(ctx: SearchContext, kind: str, cands: Sequence[Candidate]) -> SearchStep:
    """Set `score` on every candidate with one batched call of the `kind` scorer."""
    if cands:
        yield from SCORER_KINDS[kind].step(ctx, cands)


# --------------------------------------------------------------------------- the MASPRM


def _score_masprm(ctx: SearchContext, cands: Sequence[Candidate]) -> SearchStep:
    values = yield from masprm_values(ctx, [c.state for c in cands], [c.agent for c in cands])
    for c, v in zip(cands, values):
        c.score = v


def _leaf_masprm(ctx: SearchContext, path: list[Node]) -> SearchStep:
    if ctx.settings.orm_leaf:   # --orm_leaf: the PRM guides the search, the ORM values its leaves
        return (yield from _leaf_orm(ctx, path))
    return path[-1].info.get("score", 0.0)


def _per_run(trails: Sequence[Sequence[Candidate]], flat: Sequence[float]) -> list[list[float]]:
    """Values of every step of every run, in one flat list, cut back into one list per run."""
    values = iter(flat)
    return [[next(values) for _ in trail] for trail in trails]


def _masprm_step_values(ctx: SearchContext, trails: Sequence[Sequence[Candidate]]) -> SearchStep:
    # One forward over every step of every run: the value of the state after each step.
    steps = [c for trail in trails for c in trail]
    return _per_run(trails, (yield from masprm_values(ctx, [c.state for c in steps], [c.agent for c in steps])))


def _steps_masprm(ctx: SearchContext, beams: list[Beam]) -> SearchStep:
    return (yield from _masprm_step_values(ctx, [b.trail for b in beams]))


def _log_weights_masprm(ctx: SearchContext, beams: list[Beam]) -> SearchStep:
    # The product of max(1e-6, (v + 1) / 2) over the run's spoken steps.
    trails = [spoken_trail(b) for b in beams]
    return [sum(map(tanh_log_prob, values)) for values in (yield from _masprm_step_values(ctx, trails))]


# --------------------------------------------------------------------------- the policy's log-prob


def _score_logprob(ctx: SearchContext, cands: Sequence[Candidate]) -> SearchStep:
    yield from ensure_logprobs(ctx, cands)
    for c in cands:
        c.score = aggregate_logprob([c.logprob], ctx.settings.logprob_agg)


def _leaf_logprob(ctx: SearchContext, path: list[Node]) -> SearchStep:
    # Every node of a log-prob tree got its step log-prob when it was created.
    return aggregate_logprob([n.info["logprob"] for n in path[1:]], ctx.settings.logprob_agg)
    yield  # asks no model


def _steps_logprob(ctx: SearchContext, beams: list[Beam]) -> SearchStep:
    yield from ensure_logprobs(ctx, [c for b in beams for c in b.trail])
    return [[aggregate_logprob([c.logprob], ctx.settings.logprob_agg) for c in b.trail] for b in beams]


def _log_weights_logprob(ctx: SearchContext, beams: list[Beam]) -> SearchStep:
    trails = [spoken_trail(b) for b in beams]
    yield from ensure_logprobs(ctx, [c for trail in trails for c in trail])
    return [aggregate_logprob([c.logprob for c in trail], ctx.settings.logprob_agg) for trail in trails]


# --------------------------------------------------------------------------- the ORM


def _score_zero(ctx: SearchContext, cands: Sequence[Candidate]) -> SearchStep:
    # The ORM only judges finished transcripts; intermediate steps start neutral.
    for c in cands:
        c.score = 0.0
    return
    yield  # a search step that asks no model


def _leaf_orm(ctx: SearchContext, path: list[Node]) -> SearchStep:
    leaf = path[-1]
    if "orm" not in leaf.info:   # a terminal leaf is revisited; score it once
        [leaf.info["orm"]] = yield from orm_values(ctx, [leaf.state])
    return leaf.info["orm"]


def _steps_orm(ctx: SearchContext, beams: list[Beam]) -> SearchStep:
    # The ORM's value of each prefix state, as it values a finished one (one forward for all).
    steps = [c for b in beams for c in b.trail]
    return _per_run([b.trail for b in beams], (yield from orm_values(ctx, [c.state for c in steps])))


def _log_weights_orm(ctx: SearchContext, beams: list[Beam]) -> SearchStep:
    values = yield from orm_values(ctx, [spoken_state(b) for b in beams])
    return [-math.log1p(math.exp(-v)) for v in values]   # log sigmoid


# --------------------------------------------------------------------------- no scorer


def _log_weights_plain(ctx: SearchContext, beams: list[Beam]) -> SearchStep:
    return [0.0] * len(beams)
    yield  # asks no model


register_scorer_kind(ScorerKind("masprm", _score_masprm, _leaf_masprm, _log_weights_masprm, needs=("masprm",),
                                steps=_steps_masprm))
register_scorer_kind(ScorerKind("logprob", _score_logprob, _leaf_logprob, _log_weights_logprob,
                                steps=_steps_logprob, log_prob=identity_log_prob))
register_scorer_kind(ScorerKind("orm", _score_zero, _leaf_orm, _log_weights_orm, needs=("orm",), steps=_steps_orm))
register_scorer_kind(ScorerKind("plain", weight=_log_weights_plain))
# The LLM judge (pooled_judge, mcts_judge): its own model, not a trained scorer (masprm.search.judge).
SCORER_KINDS.register_lazy("judge", "masprm.search.judge:JUDGE_KIND")
