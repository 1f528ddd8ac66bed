"""A scripted two-agent world for the evaluation tests, and checks that it behaves as scripted.

Solver -> Finisher. The Solver's first sample for a prompt is "bad", later ones
are "good plan k"; the Finisher answers 7 (the gold) after a good plan and 5
after a bad one. The fake policy's log-prob is -len(text), so likelihood
prefers the short "bad" step: only a scorer that knows better finds the answer.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

from conftest import FakePolicy
from masprm.data import Example
from masprm.eval.registry import EvalContext
from masprm.graph import MASGraph

CHAIN = {
    "agents": [{"name": "Solver", "system_prompt": "solve"}, {"name": "Finisher", "system_prompt": "finish"}],
    "edges": [[-1, 0], [0, 1]],
}
GOLD = "7"
QUESTION = "What is 3 + 4?"


def chain_graph() -> MASGraph:
    return MASGraph.from_dict(CHAIN, source="<chain>")


def respond(messages, k, rng):
    if messages[0]["content"] == "solve":
        return "bad" if k == 0 else f"good plan {k}"
    return "Answer: 7" if "good" in messages[1]["content"] else "Answer: 5"


def scripted_solver(pattern):
    """A respond() whose Solver outputs follow `pattern` call after call (for voters: n=1 per prompt)."""
    calls = iter(range(10**6))

    def fn(messages, k, rng):
        if messages[0]["content"] == "solve":
            return pattern[next(calls) % len(pattern)]
        return respond(messages, k, rng)

    return fn


class FakeScorer:
    """score_batch via a rule on the text; records batch sizes; counts words as tokens."""

    separator = "</step>"

    def __init__(self, rule):
        self.rule = rule
        self.batches: list[int] = []
        self.texts: list[str] = []
        self.tokens_seen = 0

    def score_batch(self, texts):
        self.batches.append(len(texts))
        self.texts.extend(texts)
        self.last_tokens = [len(t.split()) for t in texts]   # per text, as HFScorer reports them
        self.tokens_seen += sum(self.last_tokens)
        return [self.rule(t) for t in texts]


def prefers_good(text: str) -> float:
    return 0.9 if "good" in text else -0.9


def prefers_bad(text: str) -> float:
    return -prefers_good(text)


def orm_prefers_seven(text: str) -> float:
    return 0.9 if "Answer: 7" in text else -0.9


@functools.lru_cache(maxsize=1)
def _defaults() -> dict:
    from experiments.compare_sbs_mcts import build_parser
    return vars(build_parser().parse_args([]))


def settings(**overrides) -> SimpleNamespace:
    """The CLI's defaults (the one source of them), with overrides."""
    return SimpleNamespace(**{**_defaults(), **overrides})


def make_ctx(policy, *, masprm=None, orm=None, **overrides) -> EvalContext:
    return EvalContext(policy=policy, graph=chain_graph(), settings=settings(**overrides), masprm=masprm, orm=orm)


def example(idx: int = 0) -> Example:
    return Example(idx, QUESTION, GOLD, {})


# --------------------------------------------------------------------------- the world is as scripted


def test_single_pass_of_the_scripted_world_is_wrong_and_counts_usage():
    from masprm.search.beam import single_pass
    from masprm.search.engine import drive

    policy = FakePolicy(respond)
    ctx = make_ctx(policy)
    result = drive(single_pass(ctx, example()), ctx)
    assert result.prediction == "Answer: 5"
    assert result.candidates == ["Answer: 5"]
    # Two agents, one sample each, one policy call each; tokens are words.
    assert policy.calls == [("sample", 1), ("sample", 1)]
    assert ctx.usage.agent_runs == 2
    assert ctx.usage.generated_tokens == len("bad".split()) + len("Answer: 5".split())
    assert ctx.usage.scorer_calls == 0
