"""Reference scorers: scorer kinds that know the answer, the ceilings a learned scorer is measured against.

- ``oracle_outcome``: the gold check on a finished transcript (+1 right, −1 wrong); a partial one is 0
  (an outcome judge has nothing to say before the end).
- ``oracle_step``: the world's step labeller (``--step_oracle``, a `STEP_ORACLES` entry; by default the
  dataset's own, `default_step_oracle`): +1 while
  every message so far is right, −1 from the first wrong one. Only a world that can check each
  message has one (the toy world: `masprm.worlds.toy.oracle`).
- ``true_value``: 2 p̂ − 1, where p̂ is the share of ``--true_value_rollouts`` fresh single passes of
  the team from the prefix (at ``--true_value_temperature``) whose final answer is right; a finished
  transcript is its gold check. Values are kept per prefix in the example's context, so a search
  that asks about one prefix twice pays once.

They read the example the search answers (``ctx.example``: its question and gold answer), load no
scorer model, and serve SBS, MCTS and best-of-N like any kind (`step`, `leaf`, `steps`). The
rollouts are the scorer's work: their tokens count as scorer tokens and their answers are not
answers the search generated. Pure Python: no torch import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from masprm.answers import is_correct
from masprm.registry import Registry
from masprm.search.beam import Beam, beam_search
from masprm.search.expand import Candidate, SearchStep
from masprm.search.scorer_kinds import ScorerKind, register_scorer_kind

if TYPE_CHECKING:
    from masprm.graph import RoutingState
    from masprm.search.context import SearchContext
    from masprm.search.node import Node

# A world's step labeller: (question, messages so far in team order) -> whether each message is right.
StepOracle = Callable[[str, Sequence[str]], Sequence[bool]]
STEP_ORACLES: Registry[StepOracle] = Registry("step oracle")
STEP_ORACLES.register_provider("masprm.worlds:provide_step_oracles")   # each world's, spelt in its folder


def default_step_oracle(dataset: str | None) -> str:
    """The step labeller of a run that names none (``--step_oracle`` left open): the dataset's own where one is
    registered under its name (a toy_deep run is judged by toy_deep's; the toy world's knows none of its
    stories), else the toy world's, the default from before the datasets had their own (so such runs keep their
    fingerprints). Stage 4 resolves it before any fingerprint; a search context left open resolves it by its
    example's dataset."""
    return dataset if dataset is not None and dataset in STEP_ORACLES else "toy"


def _gold(ctx: SearchContext) -> str:
    if ctx.example is None:
        raise RuntimeError("an oracle scorer needs the example (its gold answer) in the search context")
    return ctx.example.gold


def outcome_value(ctx: SearchContext, state: RoutingState) -> float:
    """+1 / −1 by the gold check of a finished transcript, 0 for a partial one."""
    if not state.is_terminal:
        return 0.0
    return 1.0 if is_correct(state.final_answer(), _gold(ctx)) else -1.0


def step_value(ctx: SearchContext, state: RoutingState) -> float:
    """+1 when every message so far is right by the world's step labeller, else −1 (the root: +1)."""
    _gold(ctx)
    oracle = STEP_ORACLES[ctx.settings.step_oracle or default_step_oracle(ctx.example.meta.get("dataset"))]
    right = oracle(ctx.example.question, list(state.outputs.values()))
    return 1.0 if all(right) else -1.0


def true_values(ctx: SearchContext, states: Sequence[RoutingState]) -> SearchStep:
    """2 p̂ − 1 per state, p̂ from K single passes of the team from it; each prefix rolled out once."""
    s = ctx.settings
    memo = ctx.memo.setdefault("true_value", {})
    keys = [tuple(state.outputs.items()) for state in states]   # a prefix: its (agent, message) pairs
    todo_states = list({key: st for key, st in zip(keys, states) if key not in memo and not st.is_terminal}.values())
    if todo_states:
        k = s.true_value_rollouts
        before, finished = ctx.usage.as_dict(), len(ctx.finished)
        rollouts = yield from beam_search(ctx, [Beam(st) for st in todo_states for _ in range(k)],
                                          width=k * len(todo_states), branching=1, scorer=None,
                                          temperature=s.true_value_temperature)
        # The rollouts are the scorer's work, not the search's: move their usage, forget their answers.
        after = ctx.usage
        spent = (after.prompt_tokens - before["prompt_tokens"]) + (after.generated_tokens - before["generated_tokens"])
        after.prompt_tokens, after.generated_tokens = before["prompt_tokens"], before["generated_tokens"]
        after.agent_runs = before["agent_runs"]
        after.scorer_tokens += spent
        after.scorer_calls += len(rollouts)
        del ctx.finished[finished:]
        for i, st in enumerate(todo_states):
            right = sum(is_correct(b.state.final_answer(), _gold(ctx)) for b in rollouts[i * k:(i + 1) * k])
            memo[tuple(st.outputs.items())] = 2 * right / k - 1
    return [outcome_value(ctx, st) if st.is_terminal else memo[key] for st, key in zip(states, keys)]


# --------------------------------------------------------------------------- the kinds, from a value rule


def _kind(name: str, values: Callable[[SearchContext, Sequence[RoutingState]], SearchStep]) -> ScorerKind:
    """A scorer kind that values states alone: a step is the state it leads to, a leaf its own state."""

    def step(ctx: SearchContext, cands: Sequence[Candidate]) -> SearchStep:
        for c, v in zip(cands, (yield from values(ctx, [c.state for c in cands]))):
            c.score = v

    def leaf(ctx: SearchContext, path: list[Node]) -> SearchStep:
        [v] = yield from values(ctx, [path[-1].state])
        return v

    def steps(ctx: SearchContext, runs: list[Beam]) -> SearchStep:
        flat = yield from values(ctx, [c.state for b in runs for c in b.trail])
        it = iter(flat)
        return [[next(it) for _ in b.trail] for b in runs]

    return register_scorer_kind(ScorerKind(name, step, leaf, steps=steps))


def _each(rule: Callable[[SearchContext, RoutingState], float]) -> Callable[..., SearchStep]:
    def values(ctx: SearchContext, states: Sequence[RoutingState]) -> SearchStep:
        return [rule(ctx, st) for st in states]
        yield  # asks no model
    return values


ORACLE_OUTCOME = _kind("oracle_outcome", _each(outcome_value))
ORACLE_STEP = _kind("oracle_step", _each(step_value))
TRUE_VALUE = _kind("true_value", true_values)
ORACLE_KINDS = ("oracle_step", "oracle_outcome", "true_value")
