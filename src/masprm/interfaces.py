"""The two model interfaces the pure core talks to: a policy and a scorer.

Search, tree generation and evaluation only ever see these protocols, so
they run unchanged with a Hugging Face model, a scripted fake agent in a
test, or anything else that fits. Pure Python: no torch import here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

Messages = list[dict[str, str]]  # chat messages: [{"role": ..., "content": ...}, ...]


@dataclass(frozen=True)
class Generation:
    """One sampled completion."""

    text: str
    prompt_tokens: int = 0
    new_tokens: int = 0


@dataclass(frozen=True)
class LogProb:
    """Log-probability of a completion under teacher forcing."""

    logprob: float          # sum of the completion tokens' log-probs
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def avg_token(self) -> float:
        return self.logprob / max(1, self.completion_tokens)


class Policy(Protocol):
    """The agents' language model."""

    def reseed(self, seed: int) -> None:
        """Reset the sampling RNG; called with ``seed + idx`` before each example."""

    def sample(self, prompts: Sequence[Messages], n: int, *, temperature: float, top_p: float,
               max_new_tokens: int) -> list[list[Generation]]:
        """n samples for each prompt (one batched call): result[i] holds prompt i's n samples."""

    def logprob(self, requests: Sequence[tuple[Messages, str]]) -> list[LogProb]:
        """Log-prob of each (prompt, completion) pair, batched."""


class Scorer(Protocol):
    """A reward model: maps state texts to values in [-1, 1]."""

    def score_batch(self, texts: Sequence[str]) -> list[float]:
        """One value per text, from one padded forward per batch."""


@dataclass
class Usage:
    """Per-example cost accounting."""

    prompt_tokens: int = 0
    generated_tokens: int = 0
    scorer_tokens: int = 0
    scorer_calls: int = 0
    agent_runs: int = 0

    def add(self, other: "Usage") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
