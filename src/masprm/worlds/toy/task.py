"""The toy task: short GSM8K-style word problems the project generates itself.

A problem is a story about one person's items: a starting amount, then two
or three events, each one arithmetic operation on the running total (buys 5
more, gives away 4, the number doubles, splits them into 3 equal piles and
keeps one). Some stories also mention an irrelevant number about someone
else, so reading the question is real work. The gold answer is written in
GSM8K's ``#### N`` form.

Numbers stay small (every running total is a whole number in 1..50) so that
a model of a few hundred thousand parameters can learn the task on a CPU in
minutes, and still make mistakes. Everything is a pure function of a fixed world seed: the same questions on
every machine, no network. Questions are assigned to the splits by a hash of
their text, so ``sft`` (the policy's training transcripts), ``train`` (search
trees for the scorer) and ``test`` (evaluation, 240 questions, enough for
paired confidence intervals of a few points) never share a question.

Registers the dataset ``toy`` with ``masprm.data`` (``--dataset toy``).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Iterator

from masprm.data import LoadedData, check_fields, read_data_file, register_dataset, seeded_order, select_examples
from masprm.dataset_rows import gsm8k_gold
from masprm.errors import ConfigError

WORLD_SEED = 20251028
SPLITS = ("sft", "train", "test")
SPLIT_SIZES = {"sft": 24000, "train": 400, "test": 240}
MAX_VALUE = 50          # every running total stays in 1..MAX_VALUE
DISTRACTOR_SHARE = 0.35  # stories that also mention someone else's number

# (name, subject pronoun, object pronoun)
PEOPLE = [("Tom", "He", "him"), ("Mia", "She", "her"), ("Ali", "He", "him"), ("Sara", "She", "her"),
          ("Ben", "He", "him"), ("Lena", "She", "her"), ("Omar", "He", "him"), ("Ivy", "She", "her"),
          ("Ken", "He", "him"), ("Zoe", "She", "her"), ("Max", "He", "him"), ("Ada", "She", "her")]
ITEMS = ["apples", "books", "coins", "eggs", "cards", "pens", "cakes", "shells", "toys", "stamps",
         "marbles", "stickers"]

# Each event kind: (op, how the story says it). {n} is the operand, {P} the subject
# pronoun, {o} the object pronoun, {items} the item.
EVENTS = {
    "buy": ("+", "{P} buys {n} more."),
    "find": ("+", "{P} finds {n} more {items}."),
    "gift": ("+", "A friend gives {o} {n} {items}."),
    "give": ("-", "{P} gives away {n}."),
    "lose": ("-", "{P} loses {n} {items}."),
    "sell": ("-", "{P} sells {n} of them."),
    "double": ("*", "Then the number of {items} doubles."),
    "triple": ("*", "Then the number of {items} triples."),
    "times": ("*", "{P} ends up with {n} times as many."),
    "half": ("/", "{P} gives away half of them."),
    "split": ("/", "{P} splits them into {n} equal piles and keeps one."),
}
FIXED_OPERAND = {"double": 2, "triple": 3, "half": 2}
STARTS = ["{name} has {a} {items}.", "{name} starts with {a} {items}.", "{name} owns {a} {items}."]
DISTRACTORS = ["{other} has {m} {other_items}.", "{other} buys {m} {other_items}.",
               "{name}'s bag can hold {m} more."]
ASKS = ["How many {items} does {name} have now?", "How many {items} does {name} have in the end?"]


@dataclass(frozen=True)
class Problem:
    question: str
    start: int
    ops: tuple[tuple[str, int], ...]   # (op symbol, operand), applied left to right
    answer: int
    distractor: bool
    kinds: tuple[str, ...] = ()          # the event kind of each op (EVENTS' keys)

    @property
    def written(self) -> tuple[int, ...]:
        """The numbers the story writes about the person, in order: the start and each written operand.

        Events with a fixed operand ("the number doubles") write no number.
        """
        return (self.start,) + tuple(n for (_, n), kind in zip(self.ops, self.kinds) if kind not in FIXED_OPERAND)

    @property
    def gold(self) -> str:
        return f"#### {self.answer}"

    def row(self) -> dict:
        """The problem as a record in GSM8K's schema (question, worked answer ending in ``#### N``)."""
        total, lines = self.start, []
        for op, n in self.ops:
            new = apply_op(total, op, n)
            lines.append(f"{total} {op} {n} = {new}")
            total = new
        return {"question": self.question, "answer": "\n".join(lines + [self.gold])}


def apply_op(total: int, op: str, n: int) -> int:
    if op == "+":
        return total + n
    if op == "-":
        return total - n
    if op == "*":
        return total * n
    return total // n


def _legal_operand(kind: str, total: int, used: set[int], rng: random.Random) -> int | None:
    """An operand that keeps the running total a whole number in 1..MAX_VALUE.

    A number the story writes out differs from every number already written
    (``used``), so "which number belongs here" always has one answer.
    """
    op = EVENTS[kind][0]
    if kind in FIXED_OPERAND:
        choices = [FIXED_OPERAND[kind]]
    elif op == "+":
        choices = list(range(2, 10))
    elif op == "-":
        choices = list(range(1, min(9, total - 1) + 1))
    elif op == "*":
        choices = [2, 3, 4]
    else:
        choices = [2, 3]
    choices = [n for n in choices if 1 <= apply_op(total, op, n) <= MAX_VALUE
               and (op != "/" or total % n == 0) and (kind in FIXED_OPERAND or n not in used)]
    return rng.choice(choices) if choices else None


def make_problem(rng: random.Random, event_counts: tuple[int, ...] = (2, 3),
                 distractor_share: float = DISTRACTOR_SHARE) -> Problem:
    """One random problem: one of `event_counts` events, maybe (`distractor_share`) one distractor sentence."""
    while True:
        name, pronoun, obj = rng.choice(PEOPLE)
        items = rng.choice(ITEMS)
        start = rng.randint(2, 12)
        n_events = rng.choice(event_counts)
        total, ops, kinds_used, sentences, used = start, [], [], [], {start}
        for _ in range(n_events):
            kinds = list(EVENTS)
            rng.shuffle(kinds)
            for kind in kinds:
                n = _legal_operand(kind, total, used, rng)
                if n is not None:
                    break
            else:
                break
            op, story = EVENTS[kind]
            if kind not in FIXED_OPERAND:
                used.add(n)
            total = apply_op(total, op, n)
            ops.append((op, n))
            kinds_used.append(kind)
            sentences.append(story.format(n=n, P=pronoun, o=obj, items=items))
        if len(ops) < n_events:
            continue
        sentences.insert(0, rng.choice(STARTS).format(name=name, a=start, items=items))
        distractor = rng.random() < distractor_share
        if distractor:
            other = rng.choice([p[0] for p in PEOPLE if p[0] != name])
            other_items = rng.choice([i for i in ITEMS if i != items])
            m = rng.choice([m for m in range(2, 13) if m not in used])
            text = rng.choice(DISTRACTORS).format(other=other, m=m, other_items=other_items, name=name)
            # first or last, so a pronoun never follows the other person's sentence
            sentences.insert(rng.choice((0, len(sentences))), text)
        sentences.append(rng.choice(ASKS).format(items=items, name=name))
        return Problem(" ".join(sentences), start, tuple(ops), total, distractor, tuple(kinds_used))


@dataclass(frozen=True)
class TaskWorld:
    """A generated world of word problems: its seed, its stories' shape and its splits.

    A question's split is decided by a hash of its text (``buckets``: each split
    takes the hash buckets 0..99 below its bound, in order), so no question is
    in two splits; a split holds the first ``sizes`` problems of its kind in
    generation order, identical on every machine.
    """

    name: str
    seed: int
    buckets: tuple[tuple[str, int], ...]       # (split, upper bound of its hash buckets), bounds ascending
    sizes: tuple[tuple[str, int], ...]         # (split, number of problems)
    event_counts: tuple[int, ...] = (2, 3)
    distractor_share: float = DISTRACTOR_SHARE

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(split for split, _ in self.sizes)

    def size(self, split: str) -> int:
        return dict(self.sizes)[split]

    def split_of(self, question: str) -> str:
        """Which split a question belongs to, from a hash of its text (so splits are disjoint)."""
        bucket = int(hashlib.sha256(question.encode()).hexdigest()[:8], 16) % 100
        return next(split for split, bound in self.buckets if bucket < bound)

    def problems(self) -> Iterator[Problem]:
        """Every distinct problem of the world, in generation order, without end."""
        rng = random.Random(self.seed)
        seen: set[str] = set()
        while True:
            problem = make_problem(rng, self.event_counts, self.distractor_share)
            if problem.question not in seen:
                seen.add(problem.question)
                yield problem

    def iter_split(self, split: str) -> Iterator[Problem]:
        """The problems of one split, in generation order, without end."""
        if split not in self.splits:
            raise ValueError(f"unknown {self.name} split {split!r} (expected one of {', '.join(self.splits)})")
        return (problem for problem in self.problems() if self.split_of(problem.question) == split)

    def load(self, split: str, *, n: int | None = None, seed: int = 42,
             data_file: str | Path | None = None) -> LoadedData:
        """``--dataset <name>``: the generated split (or a local file in GSM8K's schema), in seeded order."""
        if data_file:
            rows = read_data_file(data_file)
            check_fields(rows, ("question", "answer"), str(data_file), self.name)
        elif split in self.splits:
            rows = [problem.row() for problem in generate_split(split, self)]
        else:
            raise ConfigError(f"{self.name} has splits {', '.join(self.splits)} (got {split!r})", setting="split")
        return select_examples(rows, seeded_order(len(rows), seed), n=n, gold=gsm8k_gold,
                               question=lambda row: str(row.get("question") or "").strip(),
                               meta=lambda i, row: {"dataset": self.name, "split": split, "source_index": i})


TOY = TaskWorld("toy", WORLD_SEED, (("test", 2), ("train", 6), ("sft", 100)), tuple(SPLIT_SIZES.items()))


def split_of(question: str) -> str:
    """Which toy split a question belongs to."""
    return TOY.split_of(question)


def iter_split(split: str, world: TaskWorld = TOY) -> Iterator[Problem]:
    """The problems of one split of `world`, in generation order, without end (identical on every machine)."""
    return world.iter_split(split)


@lru_cache(maxsize=None)
def generate_split(split: str, world: TaskWorld = TOY) -> tuple[Problem, ...]:
    """The fixed problems of one split of `world` (its size of them)."""
    return tuple(islice(world.iter_split(split), world.size(split)))


@register_dataset("toy")
def load_toy(split: str, *, n: int | None = None, seed: int = 42,
             data_file: str | Path | None = None) -> LoadedData:
    """``--dataset toy``: the generated split (or a local file in GSM8K's schema), in seeded order."""
    return TOY.load(split, n=n, seed=seed, data_file=data_file)
