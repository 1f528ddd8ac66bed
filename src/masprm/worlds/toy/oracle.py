"""The toy world's step oracle: each message of a transcript judged against its story (`masprm.worlds.toy.steplabel`).

Registered lazily as ``--step_oracle toy`` (`masprm.search.oracles.STEP_ORACLES`): the search knows
the question, and the toy world finds its story by the question's text among its generated splits.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

from masprm.errors import DataError
from masprm.worlds.toy.steplabel import label_transcript
from masprm.worlds.toy.task import SPLITS, Problem, generate_split


@lru_cache(maxsize=1)
def _stories() -> dict[str, Problem]:
    # Search runs on the tree and test questions; the SFT split is left out (24,000 stories to generate).
    return {p.question: p for split in SPLITS if split != "sft" for p in generate_split(split)}


def story_of(question: str) -> Problem:
    """The toy problem whose question is ``question`` (train or test split)."""
    problem = _stories().get(question.strip())
    if problem is None:
        raise DataError(f"the toy step oracle knows no story for the question {question[:60]!r}")
    return problem


def toy_step_oracle(question: str, messages: Sequence[str]) -> list[bool]:
    """Whether each message so far (Reader, Planner, Solver, Verifier order) is right."""
    return [step.correct for step in label_transcript(story_of(question), messages).steps]
