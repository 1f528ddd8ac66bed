"""Step-level beam search (sbs_*) and the single pass.

The agents are decided in topological order; each kept beam proposes
`branching` candidates of the agent, one scorer call values them all, and the
`width` best beams survive. A single pass is the width-1, branching-1 case
without a scorer. Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from masprm.graph import RoutingState
from masprm.search.context import SearchContext, SearchResult
from masprm.search.expand import Candidate, SearchStep, propose
from masprm.search.scorer_kinds import score_candidates


@dataclass(frozen=True)
class Beam:
    state: RoutingState
    score: float = 0.0
    trail: tuple[Candidate, ...] = ()    # the candidates chosen so far, in order


def beam_search(ctx: SearchContext, beams: list[Beam], *, width: int, branching: int,
                scorer: str | None, temperature: float) -> SearchStep:
    """Decide the agents in topological order, `branching` candidates per beam, keep `width`.

    Beams for which the agent is not runnable are carried forward with their
    score. A candidate's score replaces its beam's score. Without a scorer
    only each beam's first candidate is kept and nothing is re-ranked.
    """
    for agent in ctx.graph.topo_order:
        active = [i for i, b in enumerate(beams) if b.state.is_runnable(agent)]
        if not active:
            continue
        proposals = yield from propose(ctx, [beams[i].state for i in active], agent, branching,
                                       temperature=temperature)
        if scorer:
            yield from score_candidates(ctx, scorer, [c for group in proposals for c in group])
        grown = dict(zip(active, proposals))
        next_beams: list[Beam] = []
        for i, beam in enumerate(beams):
            if i not in grown:
                next_beams.append(beam)
                continue
            kept = grown[i] if scorer else grown[i][:1]
            next_beams.extend(Beam(c.state, c.score if scorer else beam.score, beam.trail + (c,))
                              for c in kept)
        if scorer:
            next_beams.sort(key=lambda b: -b.score)   # stable: earlier beams win ties
        beams = next_beams[:width]
    return beams


def sbs(ctx: SearchContext, example: Any, *, width: int, branching: int, scorer: str | None) -> SearchStep:
    start = Beam(ctx.graph.start(example.question))
    beams = yield from beam_search(ctx, [start], width=width, branching=branching, scorer=scorer,
                        temperature=ctx.settings.sbs_temperature)
    answers = [b.state.final_answer() for b in beams]
    return SearchResult(answers[0], answers, {"beam_scores": [b.score for b in beams]})


def single_pass(ctx: SearchContext, example: Any) -> SearchStep:
    """One pass through the graph: each agent decided once from a single sample, no scorer."""
    return (yield from sbs(ctx, example, width=1, branching=1, scorer=None))


def sbs_family(ctx: SearchContext, example: Any, kind: str) -> SearchStep:
    return (yield from sbs(ctx, example, width=ctx.settings.b1, branching=ctx.settings.b2, scorer=kind))
