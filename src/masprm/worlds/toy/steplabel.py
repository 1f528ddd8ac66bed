"""Step labels for the toy team: is each message of a transcript right, judged against the story?

The toy world knows every story, so each message of a Reader -> Planner ->
Solver -> Verifier transcript can be checked for free. These labels serve
evaluation (where does a transcript first go wrong, and does a scorer see
it), and one row of the scorer lab only, the supervised ceiling
(``--labels step_truth``, `masprm.worlds.step_truth`); no other scorer is
trained on them.

Every message is judged against the TRUTH of the story, never against the
messages it was given: a Solver that faithfully applies a wrong plan is
wrong, and a Verifier that repairs an earlier error is right. The rules:

- Reader: right iff the integers of its message, in order, are exactly the
  numbers the story writes about the person (the start, then each operand
  that is written out; "the number doubles" writes none).
- Planner: right iff the message reads ``start op n op n ...`` and equals
  the story's start and operations.
- Solver: right iff its final answer is the true one and, when it shows
  work (any ``a<op>n=b`` equation), its equations are exactly the true
  steps in order.
- Verifier: right iff its final answer is the true one and every equation
  it writes is true arithmetic.

A final answer is the last ``Answer: <int>`` of a message. Nothing here
raises on arbitrary message text: text that cannot be read is an error of
the kind "unparsed", "no_numbers" or "no_answer".
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from masprm.worlds.toy.task import FIXED_OPERAND, Problem, apply_op
from masprm.worlds.toy.transcripts import worked_steps   # the true steps: (total, op, operand, new total)

AGENTS = ("Reader", "Planner", "Solver", "Verifier")

# The error kinds of each agent, in the order the rules below test them.
READER_KINDS = ("no_numbers", "distractor", "missing", "extra", "wrong_number")
PLANNER_KINDS = ("unparsed", "distractor", "wrong_start", "missing_op", "extra_op", "wrong_op", "wrong_operand")
SOLVER_KINDS = ("no_answer", "guess", "arithmetic", "wrong_plan", "answer_mismatch")
VERIFIER_KINDS = ("no_answer", "missed", "introduced", "wrong", "arithmetic")
ERROR_KINDS = dict(zip(AGENTS, (READER_KINDS, PLANNER_KINDS, SOLVER_KINDS, VERIFIER_KINDS)))

_INT = re.compile(r"-?\d+")
_ANSWER = re.compile(r"Answer:\s*([+-]?\d+)")
# An equation a<op>n=b; numbers may carry a minus sign (a slip can go below zero).
_EQUATION = re.compile(r"(-?\d+)\s*([-+*/])\s*(-?\d+)\s*=\s*(-?\d+)")
# A whole plan: a start, then operations with the symbol glued to (or spaced from) the operand.
_PLAN = re.compile(r"\s*(-?\d+)((?:\s*[-+*/]\s*-?\d+)*)\s*")
_PLAN_OP = re.compile(r"([-+*/])\s*(-?\d+)")

Equation = tuple[int, str, int, int]   # (total before, op symbol, operand, total after)


@dataclass(frozen=True)
class StepLabel:
    agent: str            # one of AGENTS
    correct: bool         # the message agrees with the story's truth
    kind: str | None      # None when correct, else one of ERROR_KINDS[agent]


@dataclass(frozen=True)
class TranscriptLabel:
    steps: tuple[StepLabel, ...]
    first_error: int | None   # index of the first incorrect step; None when every present step is right
    final_correct: bool       # the Verifier's final answer is the true one (False when it never spoke)
    repaired: bool            # a step before the Verifier was wrong, yet the final answer is right


# --------------------------------------------------------------------------- the story's truth


def written_numbers(problem: Problem) -> tuple[int, ...]:
    """The numbers the story writes about the person, in order: the start, then each written operand.

    An operand of a FIXED_OPERAND kind ("doubles") is not written. An
    operation without a recorded kind counts as written.
    """
    kinds = tuple(getattr(problem, "kinds", ()) or ())
    operands = [n for i, (_, n) in enumerate(problem.ops) if i >= len(kinds) or kinds[i] not in FIXED_OPERAND]
    return (problem.start, *operands)


def distractor_numbers(problem: Problem) -> frozenset[int]:
    """Integers the question writes that are not about the person (someone else's number)."""
    return frozenset(int(s) for s in re.findall(r"\d+", problem.question)) - set(written_numbers(problem))


# --------------------------------------------------------------------------- reading messages


def final_answer(text: str) -> int | None:
    """The last ``Answer: <int>`` of a message (a sign allowed), else None."""
    found = _ANSWER.findall(text or "")
    return int(found[-1]) if found else None


def equations(text: str) -> list[Equation]:
    """Every ``a<op>n=b`` the message writes, in order."""
    return [(int(a), op, int(n), int(b)) for a, op, n, b in _EQUATION.findall(text or "")]


def parse_plan(text: str) -> tuple[int, tuple[tuple[str, int], ...]] | None:
    """``11 +5 *2 -3`` -> (11, (("+", 5), ("*", 2), ("-", 3))); None when the whole message is not a plan."""
    m = _PLAN.fullmatch(text or "")
    if m is None:
        return None
    return int(m.group(1)), tuple((op, int(n)) for op, n in _PLAN_OP.findall(m.group(2)))


def _holds(step: Equation) -> bool:
    """Is ``a op n = b`` true under the task's arithmetic (integer division; by zero never holds)?"""
    a, op, n, b = step
    if op == "/" and n == 0:
        return False
    return apply_op(a, op, n) == b


def _is_subsequence(short: Sequence[int], long: Sequence[int]) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short)


# --------------------------------------------------------------------------- one rule per agent


def reader_error(problem: Problem, text: str) -> str | None:
    """None when the message's integers are the written numbers exactly, else the error kind.

    Taking someone else's number wins over the shape of the list; a shorter
    list that keeps the truth's order is "missing", a longer one that contains
    it in order is "extra"; anything else is "wrong_number".
    """
    truth = list(written_numbers(problem))
    got = [int(s) for s in _INT.findall(text or "")]
    if got == truth:
        return None
    if not got:
        return "no_numbers"
    if set(got) & distractor_numbers(problem):
        return "distractor"
    if len(got) < len(truth) and _is_subsequence(got, truth):
        return "missing"
    if len(got) > len(truth) and _is_subsequence(truth, got):
        return "extra"
    return "wrong_number"


def planner_error(problem: Problem, text: str) -> str | None:
    """None when the message is the story's plan, else the error kind.

    "distractor": at some position the plan writes someone else's number where
    the truth has another one (a fixed operand such as the 2 of "doubles" that
    happens to equal the distractor is not counted). Then, in order: a wrong
    start, fewer or more operations than the story, an operation whose symbol
    differs while every operand is right, and any other operand difference.
    """
    plan = parse_plan(text)
    if plan is None:
        return "unparsed"
    start, ops = plan
    if (start, ops) == (problem.start, problem.ops):
        return None
    truth = [problem.start] + [n for _, n in problem.ops]
    got = [start] + [n for _, n in ops]
    others = distractor_numbers(problem)
    if any(g in others and (i >= len(truth) or g != truth[i]) for i, g in enumerate(got)):
        return "distractor"
    if start != problem.start:
        return "wrong_start"
    if len(ops) < len(problem.ops):
        return "missing_op"
    if len(ops) > len(problem.ops):
        return "extra_op"
    if [n for _, n in ops] == [n for _, n in problem.ops]:
        return "wrong_op"
    return "wrong_operand"


def solver_error(problem: Problem, text: str) -> str | None:
    """None when the final answer is true and any shown work is the true steps, else the error kind.

    Without equations the message is a direct answer: missing -> "no_answer",
    wrong -> "guess". With equations: a false one -> "arithmetic"; true ones
    that are not the story's steps -> "wrong_plan"; the right work with no
    answer -> "no_answer", with another answer -> "answer_mismatch".
    """
    answer, work = final_answer(text), equations(text)
    if not work:
        if answer is None:
            return "no_answer"
        return None if answer == problem.answer else "guess"
    if not all(_holds(step) for step in work):
        return "arithmetic"
    if work != worked_steps(problem):
        return "wrong_plan"
    if answer is None:
        return "no_answer"
    return None if answer == problem.answer else "answer_mismatch"


def verifier_error(problem: Problem, text: str, solver_text: str | None) -> str | None:
    """None when the final answer is true and every equation holds, else the error kind.

    A wrong answer is "missed" when it is the Solver's answer (the error went
    through), "introduced" when the Solver's answer was right, else "wrong".
    A right answer beside a false equation is "arithmetic".
    """
    answer = final_answer(text)
    if answer is None:
        return "no_answer"
    if answer != problem.answer:
        solver_answer = final_answer(solver_text or "")
        if solver_answer == answer:
            return "missed"
        if solver_answer == problem.answer:
            return "introduced"
        return "wrong"
    if not all(_holds(step) for step in equations(text)):
        return "arithmetic"
    return None


# --------------------------------------------------------------------------- a transcript


def label_transcript(problem: Problem, outputs: Sequence[str]) -> TranscriptLabel:
    """Label each message present (team order); a transcript shorter than the team is unfinished.

    ``final_correct`` needs the Verifier's message; ``repaired`` means a step
    before the Verifier was wrong and the final answer is nevertheless right.
    """
    def judge(i: int, text: str, texts: list[str]) -> str | None:
        if i == 0:
            return reader_error(problem, text)
        if i == 1:
            return planner_error(problem, text)
        if i == 2:
            return solver_error(problem, text)
        return verifier_error(problem, text, texts[2])

    return label_messages(problem, outputs, AGENTS, judge, "a toy transcript")


def label_messages(problem: Problem, outputs: Sequence[str], agents: Sequence[str],
                   judge: Callable[[int, str, list[str]], str | None], what: str) -> TranscriptLabel:
    """A transcript's label from a rule per message (``judge(index, text, all texts)`` -> error kind or None),
    for a team of `agents` whose last one states the final answer (`what` names it in the error)."""
    if len(outputs) > len(agents):
        raise ValueError(f"{what} has at most {len(agents)} messages, got {len(outputs)}")
    texts = [text if isinstance(text, str) else "" for text in outputs]
    steps = tuple(StepLabel(agents[i], kind is None, kind) for i, kind in
                  enumerate(judge(i, text, texts) for i, text in enumerate(texts)))
    first_error = next((i for i, s in enumerate(steps) if not s.correct), None)
    final_correct = len(texts) == len(agents) and final_answer(texts[-1]) == problem.answer
    repaired = final_correct and first_error is not None and first_error < len(agents) - 1
    return TranscriptLabel(steps, first_error, final_correct, repaired)


def summarize(labels: Iterable[TranscriptLabel], kinds: dict[str, tuple[str, ...]] = ERROR_KINDS) -> dict:
    """Counts for a report: transcripts, correct ones, first errors by agent, repairs, error kinds per agent.

    ``error_kinds`` counts every wrong step (not only the first) under its
    agent; every agent and kind is listed, zeros included, in a fixed order
    (`kinds`: each agent's kinds in team order, the toy team's by default).
    """
    agents = tuple(kinds)
    labels = list(labels)
    first = Counter(label.steps[label.first_error].agent for label in labels if label.first_error is not None)
    found = Counter((s.agent, s.kind) for label in labels for s in label.steps if not s.correct)
    return {
        "transcripts": len(labels),
        "correct": sum(label.first_error is None for label in labels),
        "final_correct": sum(label.final_correct for label in labels),
        "repaired": sum(label.repaired for label in labels),
        "unfinished": sum(len(label.steps) < len(agents) for label in labels),
        "first_error": {agent: first[agent] for agent in agents},
        "error_kinds": {agent: {kind: found[agent, kind] for kind in kinds[agent]} for agent in agents},
    }
