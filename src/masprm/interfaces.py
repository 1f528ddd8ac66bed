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
    """The agents' language model: everything search, tree generation and evaluation call on it."""

    def reseed(self, seed: int) -> None:
        """Reset the sampling RNG; called with ``seed + idx`` before each example."""

    def sample(self, prompts: Sequence[Messages], n: int, *, temperature: float, top_p: float,
               max_new_tokens: int, keys: Sequence[Sequence[int]] | None = None) -> list[list[Generation]]:
        """n samples for each prompt (one batched call): result[i] holds prompt i's n samples.

        ``keys[i]`` names prompt i's own random stream, so what a prompt samples does not
        depend on the other prompts of the call; None draws the streams from the policy's
        RNG (``reseed``).
        """

    def logprob(self, requests: Sequence[tuple[Messages, str]]) -> list[LogProb]:
        """Log-prob of each (prompt, completion) pair, batched."""


class Scorer(Protocol):
    """A reward model: maps state texts to values in [-1, 1]; everything the engine calls on it."""

    separator: str
    """The step separator the scorer was trained with: state texts are joined with it."""

    last_tokens: list[int]
    """The tokens the scorer read of each text of its last ``score_batch`` call (usage accounting)."""

    def score_batch(self, texts: Sequence[str]) -> list[float]:
        """One value per text, from one padded forward per batch; sets ``last_tokens``."""

    def count_tokens(self, text: str) -> int:
        """The tokens of a text before any truncation (the handoff PRM's context budget)."""


@dataclass
class Usage:
    """Per-example cost accounting."""

    prompt_tokens: int = 0
    generated_tokens: int = 0
    scorer_tokens: int = 0
    scorer_calls: int = 0
    agent_runs: int = 0
    # The LLM judge's work (masprm.search.judge); its tokens also count as scorer tokens.
    judge_calls: int = 0
    judge_tokens: int = 0
    judge_parse_failures: int = 0

    def add(self, other: "Usage") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        """Every count; the judge's only where a judge was asked, so other conditions' records stay as they were."""
        judged = self.judge_calls > 0
        return {name: getattr(self, name) for name in self.__dataclass_fields__
                if judged or not name.startswith("judge_")}
