"""Step labels for the deep toy team (`masprm.worlds.toy_deep.task`): which message of a transcript is the first wrong one.

Every message is judged against the TRUTH of the story, as in the toy
world's labeller (`masprm.worlds.toy.steplabel`, whose Reader, Planner and answer
rules are reused), never against the messages it was given: an Op agent
that faithfully applies a wrong plan or a wrong total is wrong.

- Reader: right iff the integers of its message, in order, are exactly the
  numbers the story writes about the person (`steplabel.reader_error`);
- Planner: right iff, after its opening word (``Plan:``), the message is the
  story's start and operations (`steplabel.planner_error`);
- Op i: right iff it writes exactly one equation and it is the story's i-th
  true step ``a<op>n=b``. Error kinds: "no_equation", "arithmetic" (a false
  equation), "wrong_input" (true arithmetic on another total or operation
  than the story's i-th step), "extra" (more than one equation);
- Verifier: right iff its final ``Answer: N`` is the true answer
  (`steplabel.verifier_error`: "missed" when it repeats the last Op agent's
  wrong total, "introduced" when that total was right).

Nothing here raises on arbitrary message text. Registered as ``--step_oracle
toy_deep`` (`masprm.search.oracles.STEP_ORACLES`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

from masprm.errors import DataError
from masprm.worlds.toy_deep.data import TOY_DEEP
from masprm.worlds.toy_deep.task import DESIGNS, K, deep_world
from masprm.worlds.toy.steplabel import (ERROR_KINDS, TranscriptLabel, _holds, equations, label_messages, planner_error,
                                  reader_error, verifier_error)
from masprm.worlds.toy.task import Problem, TaskWorld, generate_split
from masprm.worlds.toy.transcripts import worked_steps

OP_KINDS = ("no_equation", "extra", "arithmetic", "wrong_input")
_OPENER = re.compile(r"^\s*[A-Za-z]+:\s*")   # a plan's opening word ("Plan:", "Ops:", "Steps:")


def op_error(problem: Problem, i: int, text: str) -> str | None:
    """None when the message is the story's i-th step (0-based), else the error kind."""
    work = equations(text)
    if not work:
        return "no_equation"
    if len(work) > 1:
        return "extra"
    if not _holds(work[0]):
        return "arithmetic"
    steps = worked_steps(problem)
    return None if i < len(steps) and work[0] == steps[i] else "wrong_input"


def _total_said(op_message: str) -> str:
    """The total the last Op agent reached, as an answer the Verifier's rule compares with ("Answer: b")."""
    work = equations(op_message)
    return f"Answer: {work[-1][3]}" if work else ""


def team_names(k: int) -> tuple[str, ...]:
    return ("Reader", "Planner", *(f"Op{i}" for i in range(1, k + 1)), "Verifier")


def error_kinds(k: int = K) -> dict[str, tuple[str, ...]]:
    """Each agent's error kinds, team order: the toy labeller's for the Reader, Planner and Verifier, OP_KINDS
    for every Op agent (`steplabel.summarize` counts them)."""
    return {name: OP_KINDS if name.startswith("Op") else ERROR_KINDS[name] for name in team_names(k)}


def label_transcript(problem: Problem, outputs: Sequence[str]) -> TranscriptLabel:
    """Label each message present (team order: Reader, Planner, Op1..Opk, Verifier; k = the story's events)."""
    names = team_names(len(problem.ops))

    def judge(i: int, text: str, texts: list[str]) -> str | None:
        if i == 0:
            return reader_error(problem, text)
        if i == 1:
            return planner_error(problem, _OPENER.sub("", text, count=1))
        if i < len(names) - 1:
            return op_error(problem, i - 2, text)
        return verifier_error(problem, text, _total_said(texts[-2]))

    return label_messages(problem, outputs, names, judge, f"a deep toy transcript of {len(problem.ops)} operations")


@lru_cache(maxsize=4)
def _stories(world: TaskWorld) -> dict[str, Problem]:
    # Search runs on the dev, train and test questions; the SFT split is left out (24,000 stories to generate).
    return {p.question: p for split in world.splits if split != "sft" for p in generate_split(split, world)}


def story_of(question: str) -> Problem:
    """The deep toy problem whose question is ``question`` (dev, train or test split of a design in DESIGNS)."""
    for k in DESIGNS:
        problem = _stories(TOY_DEEP if k == K else deep_world(k)).get(question.strip())
        if problem is not None:
            return problem
    raise DataError(f"the toy_deep step oracle knows no story for the question {question[:60]!r}")


def deep_step_oracle(question: str, messages: Sequence[str]) -> list[bool]:
    """Whether each message so far (team order) is right."""
    return [step.correct for step in label_transcript(story_of(question), messages).steps]
