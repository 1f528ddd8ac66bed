"""Fresh policy samples for labels: a transcript replayed with some agents' messages sampled again.

Label schemes that need more than the tree (Shapley credit over agents, and
the rollout-based labels built on the same pieces) ask a ``RolloutSource``
for fresh samples. A replay walks a recorded transcript in its order; at each
message it either keeps the recorded text or samples the same agent afresh
from the state reached so far (one policy call per message index for every
replay of the batch, as the step benchmark samples its passes). The agents'
order is the recorded one: a fixed team (the toy world's chain) routes every
replay the same way.

A completion keeps a recorded prefix and samples every agent still to speak
(Math-Shepherd's and OmegaPRM's rollouts from a step); completions are cached
by prefix, so each prefix is paid for once per run. The source counts what
it cost (agent runs and generated tokens), so a scheme can report its extra
policy cost next to the tree-derived schemes'. Its state after each tree (call
count, usage, the completions the tree cached) goes into stage 2's progress
file (``masprm.labels.progress``), so a stopped run resumes to the same samples.
Pure Python: no torch import; the policy is any ``masprm.interfaces.Policy``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from masprm.graph import MASGraph, RoutingState
from masprm.interfaces import Policy, Usage
from masprm.search.context import SearchContext
from masprm.search.engine import RequestKeys, drive
from masprm.search.expand import SearchStep, propose

Message = tuple[int, str]   # (agent, text) as the transcript recorded it


def replay(ctx: SearchContext, question: str, messages: Sequence[Message], keeps: Sequence[frozenset[int]],
           temperature: float) -> SearchStep:
    """One replay per entry of ``keeps``: the messages of the agents in it kept, every other one sampled
    afresh from the replay's own state at its turn. Returns the final state of each replay, in order."""
    states = [ctx.graph.start(question) for _ in keeps]
    for agent, text in messages:
        fresh = [i for i, keep in enumerate(keeps) if agent not in keep]
        for i, keep in enumerate(keeps):
            if agent in keep:
                states[i] = states[i].decide(agent, text)
        if fresh:
            proposals = yield from propose(ctx, [states[i] for i in fresh], agent, 1, temperature=temperature)
            for i, [cand] in zip(fresh, proposals):
                states[i] = cand.state
    return states


def complete(ctx: SearchContext, question: str, prefixes: Sequence[Sequence[Message]], k: int,
             temperature: float) -> SearchStep:
    """``k`` fresh completions of every prefix: its recorded messages kept, every agent still to speak
    sampled (the agents due at one turn from one policy call each). Returns the final states, k per prefix."""
    states = [ctx.graph.replay(question, list(p)) for p in prefixes for _ in range(k)]
    for _ in range(2 * ctx.graph.n_agents + 1):   # every turn adds one agent's message: a bounded walk
        due: dict[int, list[int]] = {}
        for i, state in enumerate(states):
            agent = state.next_runnable()
            if agent is not None:
                due.setdefault(agent, []).append(i)
        if not due:
            break
        for agent, rows in sorted(due.items()):
            proposals = yield from propose(ctx, [states[i] for i in rows], agent, 1, temperature=temperature)
            for i, [cand] in zip(rows, proposals):
                states[i] = cand.state
    return states


@dataclass
class RolloutSource:
    """A policy, the team and the grader, serving label schemes' replays (one search per call).

    ``grade(question, final_answer)`` is the outcome of a finished transcript in [-1, 1] (the dataset's
    gold check). Each call draws from its own random streams, keyed by ``seed`` and a running count, so
    a run of the same trees in the same order samples the same texts.
    """

    policy: Policy
    graph: MASGraph
    grade: Callable[[str, str], float]
    settings: Any                      # what `propose` reads: top_p, max_new_tokens
    temperature: float = 0.7
    seed: int = 0
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    cache: dict = field(default_factory=dict)   # (question, prefix) -> the final answers of its completions
    filled: list = field(default_factory=list, repr=False)   # cache keys (re)filled since the last progress_state

    def _context(self) -> SearchContext:
        ctx = SearchContext(self.policy, self.graph, self.settings, keys=RequestKeys(self.seed, self.calls),
                            usage=self.usage)
        self.calls += 1
        return ctx

    def completions(self, question: str, prefixes: Sequence[Sequence[Message]], k: int) -> list[list[str]]:
        """The final answers of ``k`` completions of each prefix, cached by prefix: a prefix met again (by
        another path of the tree, or another scheme on the same source) costs nothing."""
        keys = [(question, tuple(map(tuple, p))) for p in prefixes]
        todo = list(dict.fromkeys(key for key in keys if len(self.cache.get(key, ())) < k))
        if todo:
            ctx = self._context()
            states = drive(complete(ctx, question, [list(key[1]) for key in todo], k, self.temperature), ctx)
            for j, key in enumerate(todo):
                self.cache[key] = [s.final_answer() for s in states[j * k:(j + 1) * k]]
            self.filled.extend(todo)
        return [self.cache[key][:k] for key in keys]

    def replay(self, question: str, messages: Sequence[Message], keeps: Sequence[frozenset[int]]) -> list[float]:
        """The outcome of each replay (see `replay`)."""
        ctx = self._context()
        states: list[RoutingState] = drive(replay(ctx, question, messages, keeps, self.temperature), ctx)
        return [self.grade(question, s.final_answer()) for s in states]

    # -- a stopped run resumes (masprm.labels.progress): the state the next tree's samples depend on

    def progress_state(self) -> dict:
        """The call count (it keys every later call's random streams), the usage, and the completions cached
        since the last call, as JSON."""
        added = [[question, [list(m) for m in prefix], self.cache[(question, prefix)]]
                 for question, prefix in dict.fromkeys(self.filled)]
        self.filled.clear()
        return {"calls": self.calls, "usage": asdict(self.usage), "cache": added}

    def resume_state(self, state: dict) -> None:
        """Back to where ``progress_state`` was taken (its cache entries added to the cache)."""
        self.calls = state["calls"]
        for name, value in state["usage"].items():
            setattr(self.usage, name, value)
        for question, prefix, answers in state["cache"]:
            self.cache[(question, tuple((agent, text) for agent, text in prefix))] = answers
