"""The deep toy world (``toy_deep``): longer stories, one checkable operation per agent, errors that compound.

The toy world (`masprm.worlds.toy.task`) decides its outcome at the Solver's step and
makes its early errors per question, so a process scorer has little room to
beat an outcome scorer there (docs/toy_world.md). This world is built for
that room:

- a story has exactly ``k`` events (k = 5 by default: stories of 5 events;
  the k = 3 design has 3), each one arithmetic operation, and most stories
  (``DISTRACTOR_SHARE``) also mention someone else's number;
- the team is Reader -> Planner -> Op1 ... Opk -> Verifier
  (``configs/toy_deep.yaml``): the Reader lists the person's numbers (the
  early, decisive choice: leave out the other person's), the Planner writes
  the operations, each Op agent applies one operation to the total the
  previous one reached, and the Verifier states the final answer. No agent
  can answer without the work before it (no bare-answer shortcut), and an
  early error runs through every later message;
- every message comes in a few phrasings (as real LLM messages are almost
  never identical), so sampled siblings are seldom one text.

The policy's early errors are made to vary from sample to sample (not per
question) by its training: ``target_noise`` of its SFT transcripts carry a
plausible misreading by the Reader or a wrong operation by the Planner, which
the later agents follow faithfully (`masprm.worlds.train_policy`). Questions,
splits (``sft``, ``dev``, ``train``, ``test``, by a hash of the question) and
reference transcripts are pure functions of the world seed.

The dataset ``toy_deep`` (its splits' sizes and the power computation) is `masprm.worlds.toy_deep.data`; this
module is what the policy is trained from (its code is in the shipped policy's build fingerprint).
"""

from __future__ import annotations

import random
import re
from typing import Iterable, Iterator, Sequence

from masprm.graph import MASGraph
from masprm.worlds.toy.task import FIXED_OPERAND, Problem, TaskWorld, apply_op
from masprm.worlds.toy.transcripts import rendered_turns, worked_steps

K = 5                        # the Op agents of the registered world (the one design trained yet: docs/toy_world.md)
DESIGNS = (3, 5)             # the values of k compared on dev
TARGET_NOISE = 0.6           # the default build's share of SFT transcripts with an early mistake (PolicySpec)
# How far a misread number or a slipped Op result is off: 1 to 9 either way, so that two errors seldom cancel
# (with 1 or 2, a later slip undid an earlier one often enough that 6% of passes ended right after a wrong
# message: docs/toy_world.md, "Which policy the world needs: a synthetic team").
SLIPS = tuple(d for d in range(-9, 10) if d)
OP_NOISE_SHARE = 0.85        # an Op agent's SFT noise as a share of the early agents' (target_noise): more early
                             # errors than late ones (the headroom gate (b) asks early choices to matter more)
DISTRACTOR_SHARE = 0.6       # stories that also mention someone else's number
# Phrasings of each message (a message's words carry no number, so the numbers read the same in all of them).
READER_OPENERS = ("Numbers:", "Read:", "Values:", "Noted:")
READER_SEPARATORS = (" ", ", ")
PLANNER_OPENERS = ("Plan:", "Ops:", "Steps:")
OP_OPENERS = ("Now", "Then", "Next", "So")
VERIFIER_OPENERS = ("Checked.", "Done.", "Final.")


def deep_world(k: int = K, test: int = 0) -> TaskWorld:
    """The deep world with k events per story (and k Op agents) and `test` test questions.

    The test split's size comes from the power computation (`masprm.worlds.toy_deep.data`); the other
    splits, and so the policy's SFT problems, do not depend on it.
    """
    sizes = (("sft", 24000), ("dev", 300), ("train", 400), ("test", test))
    return TaskWorld(f"toy_deep{'' if k == K else k}", 20251204 + k,
                     (("test", 4), ("dev", 6), ("train", 10), ("sft", 100)), sizes, (k,), DISTRACTOR_SHARE)


# --------------------------------------------------------------------------- the team and its messages


def team(k: int) -> tuple[str, ...]:
    """The agents' names, in order: Reader, Planner, Op1 .. Opk, Verifier."""
    return ("Reader", "Planner", *(f"Op{i}" for i in range(1, k + 1)), "Verifier")


def check_graph(graph: MASGraph) -> None:
    """The transcripts assume a team of configs/toy_deep.yaml's shape (any k >= 1)."""
    names = tuple(a.name for a in graph.agents)
    k = len(names) - 3
    if k < 1 or names != team(k) or graph.topo_order != tuple(range(len(names))):
        raise ValueError(f"{graph.source}: the deep toy transcripts need agents Reader -> Planner -> Op1 ... Opk "
                         f"-> Verifier, got {' -> '.join(names)}")


def _pick(rng: random.Random | None, options: tuple[str, ...]) -> str:
    return rng.choice(options) if rng is not None else options[0]


def reader_text(numbers: Sequence[int], rng: random.Random | None = None) -> str:
    return f"{_pick(rng, READER_OPENERS)} {_pick(rng, READER_SEPARATORS).join(str(n) for n in numbers)}"


def planner_text(start: int, ops: Sequence[tuple[str, int]], rng: random.Random | None = None) -> str:
    return " ".join([_pick(rng, PLANNER_OPENERS), str(start)] + [f"{op}{n}" for op, n in ops])


def op_text(step: tuple[int, str, int, int], rng: random.Random | None = None) -> str:
    a, op, n, b = step
    return f"{_pick(rng, OP_OPENERS)} {a}{op}{n}={b}."


def verifier_text(answer: int, rng: random.Random | None = None) -> str:
    return f"{_pick(rng, VERIFIER_OPENERS)} Answer: {answer}"


def transcript(problem: Problem, rng: random.Random | None = None, *,
               start: int | None = None, ops: Sequence[tuple[str, int]] | None = None,
               numbers: Sequence[int] | None = None, slips: Sequence[int] = ()) -> list[str]:
    """A team transcript (one message per agent) that follows a reading and a plan faithfully.

    Without `numbers`, `start` and `ops` it is the problem's reference transcript; with them, the
    transcript of a team whose Reader read `numbers` and whose Planner wrote `start` and `ops`.
    `slips` (one per operation, 0: none) moves an Op agent's result: its equation is false and the
    next Op agent goes on from the total it wrote.
    """
    start = problem.start if start is None else start
    ops = problem.ops if ops is None else tuple(ops)
    numbers = problem.written if numbers is None else numbers
    steps = worked_steps(Problem(problem.question, start, tuple(ops), 0, problem.distractor, problem.kinds))
    if any(slips):
        total, steps = start, []
        for (op, n), slip in zip(ops, slips):
            steps.append((total, op, n, apply_op(total, op, n) + slip))
            total = steps[-1][3]
    return ([reader_text(numbers, rng), planner_text(start, ops, rng)] + [op_text(s, rng) for s in steps]
            + [verifier_text(steps[-1][3], rng)])


# --------------------------------------------------------------------------- noisy SFT targets


def _others(problem: Problem) -> list[int]:
    """Integers of the question that are not the person's written numbers (someone else's)."""
    return sorted({int(s) for s in re.findall(r"\d+", problem.question)} - set(problem.written))


def misread(problem: Problem, rng: random.Random) -> tuple[list[int], int, list[tuple[str, int]]]:
    """A plausible misreading: someone else's number (when the story has one) or a written number off by 1 to 9.

    Returns the numbers read, and the start and operations a Planner builds from them.
    """
    numbers = list(problem.written)
    i = rng.randrange(len(numbers))
    others = _others(problem)
    if others and rng.random() < 0.5:
        numbers[i] = rng.choice(others)
    else:
        numbers[i] = max(1, numbers[i] + rng.choice(SLIPS))
        if numbers[i] == problem.written[i]:   # 1 - 1 clipped to 1: read one more instead
            numbers[i] += 1
    it = iter(numbers[1:])
    ops = [(op, n if kind in FIXED_OPERAND else next(it)) for (op, n), kind in zip(problem.ops, problem.kinds)]
    return numbers, numbers[0], ops


SWAPPED = {"+": "-", "-": "+", "*": "/", "/": "*"}


def noisy_transcript(problem: Problem, rng: random.Random, noise: float) -> list[str]:
    """The reference transcript, except that with probability `noise` each the Reader misreads and the
    Planner writes one operation the wrong way round, and with `noise` x OP_NOISE_SHARE each Op agent's
    result is off by 1 to 9 (never below 1 when it can be kept there); the later agents follow what they
    are given. The Verifier states the last total.

    A policy sampled at temperature 0.7 spreads a target's `noise` over its many wrong variants and so
    errs less often than `noise` (docs/toy_world.md: the error profile each build reaches).
    """
    numbers, start, ops = list(problem.written), problem.start, list(problem.ops)
    if rng.random() < noise:
        numbers, start, ops = misread(problem, rng)
    if rng.random() < noise:
        i = rng.randrange(len(ops))
        ops[i] = (SWAPPED[ops[i][0]], ops[i][1])
    slips, total = [], start
    for op, n in ops:
        right = apply_op(total, op, n)
        # never below 1 (a misreading can already have taken the total below 1: then upwards)
        slip = (rng.choice([d for d in SLIPS if right + d >= 1] or [d for d in SLIPS if d > 0])
                if rng.random() < noise * OP_NOISE_SHARE else 0)
        slips.append(slip)
        total = right + slip
    return transcript(problem, rng, start=start, ops=ops, numbers=numbers, slips=slips)


def training_turns(problems: Iterable[Problem], graph: MASGraph, seed: int,
                   noise: float = 0.0) -> Iterator[tuple[int, list[dict[str, str]], str]]:
    """(agent, chat messages, target output) for every agent turn of every problem's (noisy) transcript."""
    check_graph(graph)
    rng = random.Random(seed)
    for problem in problems:
        yield from rendered_turns(graph, problem.question, noisy_transcript(problem, rng, noise))


def reference_outputs(problem: Problem, rng: random.Random) -> dict[int, str]:
    """One correct transcript: agent index -> output (its phrasings drawn from rng)."""
    return dict(enumerate(transcript(problem, rng)))


def corpus_lines(problems: Iterable[Problem], graph: MASGraph) -> Iterator[str]:
    """Text the tokenizer is trained on: prompts, questions and every phrasing of the agents' messages."""
    yield "system user assistant"
    for agent in graph.agents:
        yield agent.system_prompt
    yield " ".join(READER_OPENERS + READER_SEPARATORS + PLANNER_OPENERS + OP_OPENERS + VERIFIER_OPENERS)
    rng = random.Random(0)
    for problem in problems:
        yield problem.question
        yield from transcript(problem, rng)
        yield problem.gold
