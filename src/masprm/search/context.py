"""What a search runs in and what it returns: the context of one example and its result.

A search (``masprm.search.beam``, ``mcts``, ``vote``, ...) is a generator
``search(ctx, example)`` that yields model requests and returns a
`SearchResult`. Every model call goes through the context, which counts usage
(prompt and generated tokens, scorer tokens and calls, agent runs), so no
search does its own bookkeeping. Pure Python: no torch import.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Generator, Sequence

from masprm.graph import MASGraph
from masprm.interfaces import Generation, LogProb, Messages, Policy, Scorer, Usage
from masprm.search.engine import JUDGE_ROLE, JudgeAsk, LogProbs, RequestKeys, Sample, Score, require_scorer


@dataclass
class SearchContext:
    """Models, graph and settings for one example; counts usage as models are called.

    It also serves a search run alone (``masprm.search.engine.drive(search, ctx)``): it is `Models`.

    `sample`, `logprob` and `score` are search steps: a method writes
    ``gens = yield from ctx.sample(...)``; the engine (`masprm.search.engine`)
    serves the request, batched with other examples' requests or alone.
    """

    policy: Policy
    graph: MASGraph
    settings: Any                      # the method's frozen settings: exactly the classes it declares
    scorers: dict[str, Scorer] = field(default_factory=dict)   # by role (masprm.roles.ROLES): the loaded ones
    rng: random.Random = field(default_factory=random.Random)
    usage: Usage = field(default_factory=Usage)
    keys: RequestKeys | None = None    # the example's random streams (None: the policy's own RNG)
    samples: Any = None                # a store of sampled passes to reuse (masprm.search.samples), or None
    finished: list[str] = field(default_factory=list)   # final answers of the finished candidates, in order
    example: Any = None                # the example searched (masprm.data.Example): the oracle kinds read its gold
    memo: dict[str, dict] = field(default_factory=dict)  # per kind, values it keeps for this example (true_value)
    judge_asked: int = 0               # judge requests so far (their random-stream keys when it samples)

    def scorer(self, role: str) -> Scorer:
        """The scorer of ``role`` (``masprm.roles.ROLES``); a RuntimeError when the method runs without it."""
        return require_scorer(self.scorers.get(role), role)

    def sample(self, prompts: Sequence[Messages], n: int, *, temperature: float, top_p: float,
               max_new_tokens: int, batched: bool = False) -> Generator[Any, Any, list[list[Generation]]]:
        """n samples per prompt; each sample is one agent run, or each prompt with `batched` (handoff)."""
        keys = self.keys.next(len(prompts)) if self.keys is not None else None
        out = yield Sample(tuple(prompts), n, temperature, top_p, max_new_tokens, keys)
        self.count_samples(out, batched=batched)
        return out

    def count_samples(self, out: Sequence[Sequence[Generation]], *, batched: bool = False) -> None:
        """The usage of sampled generations, per prompt (also for passes read back from a store)."""
        for gens in out:
            self.usage.agent_runs += 1 if batched else len(gens)
            for g in gens:
                self.usage.generated_tokens += g.new_tokens
            if gens:  # the prompt is processed once per prompt, whatever n is
                self.usage.prompt_tokens += gens[0].prompt_tokens

    def note_finished(self, states: Sequence[Any]) -> None:
        """Remember the final answer of each finished state a search generated (the misses split)."""
        self.finished.extend(s.final_answer() for s in states if s.is_terminal)

    def logprob(self, requests: Sequence[tuple[Messages, str]]) -> Generator[Any, Any, list[LogProb]]:
        values = yield LogProbs(tuple(requests))
        # The original counts each scored completion's prompt and completion tokens as scorer tokens.
        self.usage.scorer_tokens += sum(lp.prompt_tokens + lp.completion_tokens for lp in values)
        return values

    @property
    def judge(self) -> Policy | None:
        """The LLM judge (``masprm.search.judge``): a generative model in its role's slot of ``scorers``."""
        return self.scorers.get(JUDGE_ROLE)

    def ask_judge(self, prompt: Messages) -> Generator[Any, Any, str]:
        """The judge's reply to one prompt, counted: a call, its prompt and reply tokens (also scorer tokens).

        Its settings are the method's ``judge_max_new_tokens`` / ``judge_temperature``; a sampling judge
        (temperature > 0) draws from its own streams, keyed apart from the policy's by a negative request number.
        """
        s = self.settings
        self.judge_asked += 1
        keys = ((self.keys.seed, self.keys.example, -self.judge_asked, 0),) \
            if self.keys is not None and s.judge_temperature > 0 else None
        [reply] = yield JudgeAsk((prompt,), s.judge_max_new_tokens, s.judge_temperature, keys)
        tokens = reply.prompt_tokens + reply.new_tokens
        self.usage.judge_calls += 1
        self.usage.judge_tokens += tokens
        self.usage.scorer_tokens += tokens
        return reply.text

    def score(self, role: str, texts: Sequence[str], *, batched: bool = False) -> Generator[Any, Any, list[float]]:
        """One scorer call per text, or one for the whole batch with `batched` (handoff)."""
        self.scorer(role)   # a method without its scorer fails here, before its request
        scored = yield Score(role, tuple(texts))
        self.usage.scorer_calls += 1 if batched else len(texts)
        self.usage.scorer_tokens += sum(tokens for _, tokens in scored)
        return [value for value, _ in scored]


@dataclass
class SearchResult:
    prediction: str
    candidates: list[str]              # pass@k candidates, best first (prediction first)
    extra: dict[str, Any] = field(default_factory=dict)  # per-example method-specific metrics
