"""The shared search core: batched candidate generation and batched scoring.

Every search method (single pass, step-level beam search, MCTS, voters;
training MCTS shares the token cap)
grows trajectories the same way: for a set of states waiting on the same
agent, sample candidates for all of them in ONE policy call, then score all
candidates in ONE scorer forward (or one batched log-prob call). The methods
differ only in which candidates they keep. Pure Python: no torch import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generator, Iterable, Sequence

from masprm.graph import MASGraph, RoutingState
from masprm.interfaces import LogProb
from masprm.state_text import state_text

if TYPE_CHECKING:   # the context is only named in annotations; training MCTS runs without it
    from masprm.search.context import SearchContext

SearchStep = Generator[Any, Any, Any]   # a search step: yields model requests (masprm.search.engine)
LOGPROB_AGGS = ("sum", "avg_token", "avg_step")   # how a path's log-prob is aggregated (aggregate_logprob)


@dataclass(eq=False)
class Candidate:
    """One sampled output of `agent` given `parent`, and the state it leads to."""

    parent: RoutingState
    agent: int
    text: str
    state: RoutingState
    new_tokens: int = 0
    prompt_tokens: int = 0
    score: float = 0.0                 # set by a step scorer
    logprob: LogProb | None = None     # set when a log-prob was needed


# --------------------------------------------------------------------------- generation


def token_cap(graph: MASGraph, agent: int, cap: int | None) -> int:
    """The agent's own max_new_tokens, lowered to `cap` when one is given (None: no cap)."""
    own = graph.agents[agent].max_new_tokens
    return own if cap is None else min(cap, own)


def propose(ctx: SearchContext, states: Sequence[RoutingState], agent: int, n: int, *,
            temperature: float) -> SearchStep:
    """n candidates of `agent` for each state, from one batched policy call."""
    prompts = [s.messages(agent) for s in states]
    sampled = yield from ctx.sample(prompts, n, temperature=temperature, top_p=ctx.settings.top_p,
                         max_new_tokens=token_cap(ctx.graph, agent, ctx.settings.max_new_tokens))
    proposals = [[Candidate(s, agent, g.text, s.decide(agent, g.text), g.new_tokens, g.prompt_tokens) for g in gens]
                 for s, gens in zip(states, sampled)]
    ctx.note_finished([c.state for group in proposals for c in group])
    return proposals


def drop_duplicate_texts(cands: Sequence[Candidate], known: Iterable[str] = ()) -> list[Candidate]:
    """The candidates whose text is new: not an earlier candidate's, nor one of the `known` texts."""
    seen: set[str] = set(known)
    kept = []
    for c in cands:
        if c.text not in seen:
            seen.add(c.text)
            kept.append(c)
    return kept


def propose_distinct(ctx: SearchContext, state: RoutingState, agent: int, n: int, *, temperature: float,
                     tries: int = 0, known: Iterable[str] = ()) -> SearchStep:
    """Up to n candidates of `agent` with distinct texts, none of them a `known` text.

    One draw of n samples; while fewer than n of them are new, up to `tries` more draws of the number
    still missing (stopping when the policy returns nothing). Every draw is an ordinary sampling request
    on its own random stream, so its agent runs and tokens are counted like any other; with tries = 0 this
    is the original's rule: one draw, duplicates merged.
    """
    seen, kept, missing = set(known), [], n
    for _ in range(tries + 1):
        [proposed] = yield from propose(ctx, [state], agent, missing, temperature=temperature)
        new = drop_duplicate_texts(proposed, seen)
        seen.update(c.text for c in new)
        kept.extend(new)
        missing = n - len(kept)
        if missing == 0 or not proposed:
            break
    return kept


# --------------------------------------------------------------------------- log-probs


def aggregate_logprob(steps: Sequence[LogProb], agg: str) -> float:
    """A path's log-prob: summed, per generated token, or per step."""
    total = sum(lp.logprob for lp in steps)
    if agg == "sum":
        return total
    if agg == "avg_token":
        return total / max(1, sum(lp.completion_tokens for lp in steps))
    if agg == "avg_step":
        return total / max(1, len(steps))
    raise ValueError(f"unknown log-prob aggregation {agg!r} (expected one of {', '.join(LOGPROB_AGGS)})")


def ensure_logprobs(ctx: SearchContext, cands: Sequence[Candidate]) -> SearchStep:
    """Fill in missing log-probs with one batched call."""
    missing = [c for c in cands if c.logprob is None]
    if missing:
        values = yield from ctx.logprob([(c.parent.messages(c.agent), c.text) for c in missing])
        for c, lp in zip(missing, values):
            c.logprob = lp


def softmax(values: Sequence[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


# --------------------------------------------------------------------------- scoring


def masprm_values(ctx: SearchContext, states: Sequence[RoutingState], agents: Sequence[int | None]) -> SearchStep:
    """MASPRM value of each state (in --view_mode, for the agent that last spoke), one forward."""
    sep = ctx.scorer("masprm").separator
    view = ctx.settings.view_mode
    return (yield from ctx.score("masprm", [state_text(s, view, a, sep) for s, a in zip(states, agents)]))


def orm_values(ctx: SearchContext, states: Sequence[RoutingState]) -> SearchStep:
    """ORM value of each finished state in --view_mode (local: the last decided agent's view), one forward."""
    sep = ctx.scorer("orm").separator
    return (yield from ctx.score("orm", [state_text(s, ctx.settings.view_mode, None, sep) for s in states]))
