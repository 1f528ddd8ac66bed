"""The scripted two-agent world of the evaluation tests: search methods run in-process on fakes.

A Solver -> Finisher chain (``chain_graph``) and its scripted answers (``respond``,
``scripted_solver``), the tests' one ``Scorer`` (``FakeScorer``) with its rules (``prefers_good``,
``prefers_bad``, ``orm_prefers_seven``), the runner's settings from the stage-4 CLI's defaults
(``settings``), the context a method runs in (``make_ctx``), one method on one example
(``run_method``) and that example (``example``, gold ``GOLD``). Use it for tests of the search
methods, the engine and stage 4's runner that need no model.
"""

from __future__ import annotations

import functools

from masprm.data import Example
from masprm.eval.methods import METHODS
from masprm.eval.settings import EvalSettings
from masprm.graph import MASGraph
from masprm.search.context import SearchContext
from masprm.search.engine import drive


# Solver -> Finisher. The Solver's first sample for a prompt is "bad", later ones are "good plan k";
# the Finisher answers 7 (the gold) after a good plan and 5 after a bad one. The fake policy's
# log-prob is -len(text), so likelihood prefers the short "bad" step: only a scorer that knows
# better finds the answer.

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
    """The tests' one `Scorer`: score_batch via a rule on the text; records each call's texts
    (``calls``) and sizes (``batches``); counts words as tokens."""

    separator = "</step>"

    def __init__(self, rule):
        self.rule = rule
        self.batches: list[int] = []
        self.calls: list[list[str]] = []
        self.texts: list[str] = []
        self.tokens_seen = 0
        self.last_tokens: list[int] = []

    def count_tokens(self, text):
        return len(text.split())

    def score_batch(self, texts):
        self.batches.append(len(texts))
        self.calls.append(list(texts))
        self.texts.extend(texts)
        self.last_tokens = [self.count_tokens(t) for t in texts]   # per text, as HFScorer reports them
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
    from masprm.stages.evaluate import build_parser
    return vars(build_parser().parse_args([]))


def settings(**overrides) -> EvalSettings:
    """The runner's settings from the CLI's defaults (the one source of them), with flag overrides."""
    return EvalSettings.from_args({**_defaults(), **overrides})


def make_ctx(method: str, policy, *, masprm=None, orm=None, **overrides) -> SearchContext:
    """The context `method` runs in on the chain world: its own settings (flag overrides applied)."""
    return SearchContext(policy=policy, graph=chain_graph(), settings=settings(**overrides).method_settings(method),
                         scorers={role: s for role, s in (("masprm", masprm), ("orm", orm)) if s is not None})


def run_method(method: str, ctx: SearchContext, ex: Example | None = None):
    """`method` on one example alone (each request one model call); its SearchResult."""
    return drive(METHODS[method].search(ctx, ex or example()), ctx)


def example(idx: int = 0) -> Example:
    return Example(idx, QUESTION, GOLD, {})
