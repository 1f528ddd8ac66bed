"""The registry of evaluation methods and the context they run in.

A method is a search generator ``search(ctx, example)`` that yields model
requests and returns a `MethodResult`, registered under its CLI name. Every
model call goes through the context, which counts usage (prompt and
generated tokens, scorer tokens and calls, agent runs), so
no method does its own bookkeeping. Pure Python: no torch import.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Sequence

from masprm.errors import ConfigError
from masprm.graph import MASGraph
from masprm.interfaces import Generation, LogProb, Messages, Policy, Scorer, Usage
from masprm.eval.settings import check_settings_classes
from masprm.registry import Registry
from masprm.search.engine import LogProbs, RequestKeys, Sample, Score, drive

# What each scorer was trained as: the MASPRM (ppm pairs, --prm_dir), the ORM (outcome labels,
# --orm_dir), and the MASPRM that ranks handoff transcripts (--handoff_prm_dir).
SCORER_ROLES = ("masprm", "orm", "handoff_masprm")


@dataclass
class EvalContext:
    """Models, graph and settings for one example; counts usage as models are called.

    `sample`, `logprob` and `score` are search steps: a method writes
    ``gens = yield from ctx.sample(...)``; the engine (`masprm.search.engine`)
    serves the request, batched with other examples' requests or alone.
    """

    policy: Policy
    graph: MASGraph
    settings: Any                      # argparse.Namespace or any object with the flag attributes
    masprm: Scorer | None = None       # scorers by role (SCORER_ROLES)
    orm: Scorer | None = None
    handoff_masprm: Scorer | None = None
    rng: random.Random = field(default_factory=random.Random)
    usage: Usage = field(default_factory=Usage)
    keys: RequestKeys | None = None    # the example's random streams (None: the policy's own RNG)

    def sample(self, prompts: Sequence[Messages], n: int, *, temperature: float, top_p: float,
               max_new_tokens: int, batched: bool = False) -> Generator[Any, Any, list[list[Generation]]]:
        """n samples per prompt; each sample is one agent run, or each prompt with `batched` (handoff)."""
        keys = self.keys.next(len(prompts)) if self.keys is not None else None
        out = yield Sample(tuple(prompts), n, temperature, top_p, max_new_tokens, keys)
        for gens in out:
            self.usage.agent_runs += 1 if batched else len(gens)
            for g in gens:
                self.usage.generated_tokens += g.new_tokens
            if gens:  # the prompt is processed once per prompt, whatever n is
                self.usage.prompt_tokens += gens[0].prompt_tokens
        return out

    def logprob(self, requests: Sequence[tuple[Messages, str]]) -> Generator[Any, Any, list[LogProb]]:
        values = yield LogProbs(tuple(requests))
        # The original counts each scored completion's prompt and completion tokens as scorer tokens.
        self.usage.scorer_tokens += sum(lp.prompt_tokens + lp.completion_tokens for lp in values)
        return values

    def score(self, role: str, texts: Sequence[str], *, batched: bool = False) -> Generator[Any, Any, list[float]]:
        """One scorer call per text, or one for the whole batch with `batched` (handoff)."""
        if getattr(self, role) is None:
            raise RuntimeError(f"method needs a {role} scorer but none is loaded")
        scored = yield Score(role, tuple(texts))
        self.usage.scorer_calls += 1 if batched else len(texts)
        self.usage.scorer_tokens += sum(tokens for _, tokens in scored)
        return [value for value, _ in scored]


@dataclass
class MethodResult:
    prediction: str
    candidates: list[str]              # pass@k candidates, best first (prediction first)
    extra: dict[str, Any] = field(default_factory=dict)  # per-example method-specific metrics


@dataclass(frozen=True)
class Method:
    name: str
    search: Callable[[EvalContext, Any], Any]   # a search generator (masprm.search.engine) -> MethodResult
    needs: frozenset[str] = frozenset()   # subset of SCORER_ROLES
    family: str = "static"                # "static" or "handoff": the two cannot share a run
    summarize: Callable[[list[dict]], dict] | None = None  # per-condition extra metrics from records
    settings: tuple[type, ...] = ()       # settings dataclasses: their fields define a condition (its fingerprint)
    report: Callable[[dict], list[str]] | None = None  # the method's own text-log lines from its summary

    def run(self, ctx: EvalContext, example: Any) -> MethodResult:
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

    def decorator(fn: Callable[[EvalContext, Any], Any]):
        METHODS.register(name, Method(name, fn, frozenset(needs), family, summarize,
                                      check_settings_classes(settings), report))
        return fn

    return decorator
