"""The batched search engine: searches state their model requests, one scheduler serves them.

A search is a generator function. Where it needs a model it yields a
request and receives the result::

    gens = yield Sample(prompts, n, temperature=0.7, top_p=0.95, max_new_tokens=256, keys=keys)
    values = yield Score("masprm", texts)

so every method reads top to bottom and exists once. `drive` serves one
search alone (one request, one model call); `run_batched` keeps up to
``batch_size`` searches in flight and answers all their compatible pending
requests (sampling with the same settings, log-probs, scoring by the same
scorer) with ONE model call, then hands each search its share. When a search
finishes, the next waiting one takes its slot, so no search waits for the
slowest of a wave.

Results do not depend on the batch: every sampling request carries its own
random-stream keys (`RequestKeys`), scorers and log-probs are per text, and
a search that raises is reported failed on its own while the others go on.
Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Hashable, Iterable, Iterator, Protocol, Sequence

from masprm.config import arg, require_each
from masprm.interfaces import Messages, Policy, Scorer

Search = Generator[Any, Any, Any]   # yields requests, receives their results, returns the outcome


class Models(Protocol):
    """What serves the requests: the policy, and the scorers by role (``masprm.roles.ROLES``)."""

    policy: Policy

    def scorer(self, role: str) -> Scorer:
        """The scorer of ``role``; a RuntimeError when none is loaded."""


@dataclass
class LoadedModels:
    """`Models` from a policy and the scorers at hand (a role without one is not loaded)."""

    policy: Policy
    scorers: dict[str, Scorer] = field(default_factory=dict)   # by role; the LLM judge in JUDGE_ROLE's slot

    def scorer(self, role: str) -> Scorer:
        return require_scorer(self.scorers.get(role), role)


def require_scorer(scorer: Scorer | None, role: str) -> Scorer:
    if scorer is None:
        raise RuntimeError(f"method needs a {role} scorer but none is loaded")
    return scorer


@dataclass(frozen=True)
class EngineSettings:
    """How a worker batches its searches (results never depend on them): the home of their flags."""

    search_batch_size: int = arg(16, flags=("--search_batch_size",),
                                 help="examples searched together per worker, their model calls batched "
                                      "(default: 16; 1 = one example at a time); results do not depend on it")
    max_batch_tokens: int = arg(262144, flags=("--max_batch_tokens",),
                                help="cap on the padded tokens (prompt + new tokens) of one policy call; "
                                     "bigger calls are split (default: 262144)")

    def __post_init__(self) -> None:
        require_each(self, ("search_batch_size", "max_batch_tokens"), lambda v: v >= 1, "must be at least 1")


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class Sample:
    """n samples per prompt; ``keys[i]`` names prompt i's own random stream."""

    prompts: tuple[Messages, ...]
    n: int
    temperature: float
    top_p: float
    max_new_tokens: int
    keys: tuple[tuple[int, ...], ...] | None = None

    def batch_key(self) -> Hashable:
        return ("sample", self.n, self.temperature, self.top_p, self.max_new_tokens)

    def size(self) -> int:
        return len(self.prompts)

    @staticmethod
    def call(models: Models, group: Sequence["Sample"]) -> list:
        first = group[0]
        keyed = all(r.keys is not None for r in group)
        return models.policy.sample([p for r in group for p in r.prompts], first.n,
                                    temperature=first.temperature, top_p=first.top_p,
                                    max_new_tokens=first.max_new_tokens,
                                    keys=[k for r in group for k in r.keys] if keyed else None)


@dataclass(frozen=True)
class LogProbs:
    """Teacher-forced log-prob of each (prompt, completion) pair."""

    pairs: tuple[tuple[Messages, str], ...]

    def batch_key(self) -> Hashable:
        return ("logprob",)

    def size(self) -> int:
        return len(self.pairs)

    @staticmethod
    def call(models: Models, group: Sequence["LogProbs"]) -> list:
        return models.policy.logprob([p for r in group for p in r.pairs])


@dataclass(frozen=True)
class Score:
    """The ``role`` scorer's value of each text."""

    role: str
    texts: tuple[str, ...]

    def batch_key(self) -> Hashable:
        return ("score", self.role)

    def size(self) -> int:
        return len(self.texts)

    @staticmethod
    def call(models: Models, group: Sequence["Score"]) -> list:
        """(value, tokens the scorer read) per text: the scorer reports each text's tokens (`last_tokens`)."""
        scorer = models.scorer(group[0].role)
        values = scorer.score_batch([t for r in group for t in r.texts])
        return list(zip(values, scorer.last_tokens))


JUDGE_ROLE = "judge"   # the LLM judge's slot among the models by role (masprm.search.judge)


@dataclass(frozen=True)
class JudgeAsk:
    """One reply of the LLM judge per prompt (``masprm.search.judge``): greedy at temperature 0."""

    prompts: tuple[Messages, ...]
    max_new_tokens: int
    temperature: float = 0.0
    keys: tuple[tuple[int, ...], ...] | None = None

    def batch_key(self) -> Hashable:
        return ("judge", self.max_new_tokens, self.temperature)

    def size(self) -> int:
        return len(self.prompts)

    @staticmethod
    def call(models: Models, group: Sequence["JudgeAsk"]) -> list:
        judge = models.scorer(JUDGE_ROLE)   # a generative model in the judge role's slot
        first = group[0]
        keyed = all(r.keys is not None for r in group)
        out = judge.sample([p for r in group for p in r.prompts], 1, temperature=first.temperature, top_p=1.0,
                           max_new_tokens=first.max_new_tokens,
                           keys=[k for r in group for k in r.keys] if keyed else None)
        return [gens[0] for gens in out]


Request = Sample | LogProbs | Score | JudgeAsk


@dataclass
class RequestKeys:
    """Random-stream keys of one search: (seed, example, request number, prompt number).

    The request number counts this search's own sampling requests, so a key
    never depends on which other searches share a call.
    """

    seed: int
    example: int
    count: int = 0

    def next(self, n_prompts: int) -> tuple[tuple[int, ...], ...]:
        self.count += 1
        return tuple((self.seed, self.example, self.count, i) for i in range(n_prompts))


# --------------------------------------------------------------------------- serving requests


@dataclass
class CallStats:
    """What the engine asked of the models: calls, rows, and calls per request kind."""

    calls: int = 0
    rows: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, rows: int) -> None:
        self.calls += 1
        self.rows += rows
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1


def serve(models: Models, group: Sequence[Request], stats: CallStats | None = None) -> list[list]:
    """One model call for a group of compatible requests; each request's part of the result."""
    flat = type(group[0]).call(models, group)
    if stats is not None:
        stats.add(group[0].batch_key()[0], len(flat))
    out, start = [], 0
    for request in group:
        out.append(list(flat[start:start + request.size()]))
        start += request.size()
    return out


def drive(search: Search, models: Models, stats: CallStats | None = None) -> Any:
    """Run one search on its own: each request is one model call."""
    try:
        request = next(search)
        while True:
            [result] = serve(models, [request], stats)
            request = search.send(result)
    except StopIteration as done:
        return done.value


@dataclass
class _Slot:
    item: Any
    search: Search
    request: Request


def run_batched(models: Models, jobs: Iterable[tuple[Any, Callable[[], Search]]], batch_size: int,
                stats: CallStats | None = None) -> Iterator[tuple[Any, Any, BaseException | None]]:
    """Yield ``(item, result, error)`` per job as searches finish, ``batch_size`` in flight.

    Each round serves every pending request: compatible ones (same
    ``batch_key``) go into one call, groups in the order their first search
    entered. A call that raises is retried request by request, so only the
    searches whose own request fails get the error (thrown in at their yield).
    """
    queue = iter(jobs)
    active: list[_Slot] = []

    def advance(item: Any, search: Search, send: Callable[[], Any]) -> Iterator[tuple[Any, Any, Any]]:
        try:
            request = send()
        except StopIteration as done:
            yield item, done.value, None
        except Exception as err:   # this search fails; the others go on
            yield item, None, err
        else:
            active.append(_Slot(item, search, request))

    while True:
        while len(active) < max(1, batch_size):
            job = next(queue, None)
            if job is None:
                break
            item, start = job
            try:
                search = start()
            except Exception as err:
                yield item, None, err
                continue
            yield from advance(item, search, lambda s=search: next(s))
        if not active:
            return
        groups: dict[Hashable, list[_Slot]] = {}
        for slot in active:
            groups.setdefault(slot.request.batch_key(), []).append(slot)
        answers: dict[int, tuple[Any, BaseException | None]] = {}
        for group in groups.values():
            try:
                parts = serve(models, [s.request for s in group], stats)
                answers.update((id(s), (part, None)) for s, part in zip(group, parts))
            except Exception:
                for s in group:   # find which request is to blame
                    try:
                        answers[id(s)] = (serve(models, [s.request], stats)[0], None)
                    except Exception as err:
                        answers[id(s)] = (None, err)
        served, active = active, []
        for slot in served:   # in the order the searches entered, so calls keep a stable row order
            part, error = answers[id(slot)]
            if error is not None:   # the search may turn its failed request into a result of its own
                yield from advance(slot.item, slot.search, lambda s=slot.search, e=error: s.throw(e))
            else:
                yield from advance(slot.item, slot.search, lambda s=slot.search, p=part: s.send(p))
