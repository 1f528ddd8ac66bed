"""A synthetic deep team: the `toy_deep` team played by rules with set error rates, to design the world.

    python -m masprm.instruments.synthetic_team --reader 0.3 --planner 0.2 --op 0.1 --verifier 0.02 --n 100
    python -m masprm.instruments.synthetic_team --reader 0.1 0.3 0.5 --op 0.05 0.15 --n 100 --out results/deep_synthetic.json

The headroom gates (`masprm.instruments.headroom`) depend on the world *and* on how its policy errs: how often
each agent is wrong, and whether an error is sampled or fixed per question. A trained policy gives one
point of that space per build (minutes of training each); this team gives any point at once, so the
question "which policy would reach the gates in this world?" is answered before a policy is trained
towards it. Each agent does its job on what it was given, as the trained policy's SFT transcripts do,
and errs independently per sample with its rate:

- Reader (``--reader``): a plausible misreading (`deep_task.misread`: someone else's number, or a
  written number off by 1 to 9, `deep_task.SLIPS`);
- Planner (``--planner``): the operations of the reading it was given, one of them the wrong way round
  (`deep_task.SWAPPED`, as in the noisy SFT targets);
- Op i (``--op``, each): the i-th operation of the plan applied to the total it was given, with the
  result off by 1 to 9 (a false equation);
- Verifier (``--verifier``): the last total off by 1.

Every message is drawn in one of the world's phrasings, so siblings are seldom one text. Sampling
temperature does not change the rates (they *are* the policy). The questions are the world's dev
split (never test); no learned scorer is involved. Pure Python: no torch import.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from masprm.checks import check_output_file, check_seeds
from masprm.cli import ArgumentParser, check, run_cli
from masprm.config import add_config_args, arg, config_from_args, require_each
from masprm.graph import load_mas_config
from masprm.interfaces import Generation, LogProb, Messages
from masprm.io import atomic_write_json
from masprm.paired_stats import MIN_QUESTIONS, QUESTIONS_RULE
from masprm.paths import PathText
from masprm.search.engine import LoadedModels
from masprm.worlds.toy_deep.label import story_of
from masprm.worlds.toy_deep import task as deep_task
from masprm.instruments import headroom
from masprm.worlds.toy_deep.task import SWAPPED, misread, op_text, planner_text, reader_text, verifier_text
from masprm.worlds.toy.task import FIXED_OPERAND, apply_op
from masprm.worlds import WORLDS

_PLAN = re.compile(r"([-+*/])(\d+)")
_TOTAL = re.compile(r"=(-?\d+)")


@dataclass(frozen=True)
class ErrorRates:
    """Each agent's chance of a wrong message, per sample (an Op agent's: each of them)."""

    reader: float = 0.0
    planner: float = 0.0
    op: float = 0.0
    verifier: float = 0.0


def _slip(rng: random.Random) -> int:
    return rng.choice(deep_task.SLIPS)


class SyntheticDeepTeam:
    """A `Policy` that plays the deep team (any k) by rule, erring at `rates`."""

    def __init__(self, rates: ErrorRates, seed: int = 0):
        self.rates = rates
        self.rng = random.Random(seed)

    def reseed(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def sample(self, prompts: Sequence[Messages], n: int, *, temperature: float = 1.0, top_p: float = 1.0,
               max_new_tokens: int = 64, keys=None) -> list[list[Generation]]:
        out = []
        for i, messages in enumerate(prompts):
            # A keyed prompt draws from its own stream (as the real policies' rows do): same keys, same samples.
            rng = self.rng if keys is None else random.Random(repr(tuple(keys[i])))
            prompt_tokens = sum(len(m["content"].split()) for m in messages)
            texts = [self.respond(messages, rng) for _ in range(n)]
            out.append([Generation(t, prompt_tokens, len(t.split())) for t in texts])
        return out

    def logprob(self, requests: Sequence[tuple[Messages, str]]) -> list[LogProb]:
        """Every message equally likely (the rates, not the text, are the policy)."""
        return [LogProb(0.0, sum(len(m["content"].split()) for m in messages), len(text.split()))
                for messages, text in requests]

    def respond(self, messages: Messages, rng: random.Random) -> str:
        role = messages[0]["content"].split(":")[0]
        blocks = messages[-1]["content"].split("\n\n")   # what the agent was given, in the graph's order
        r = self.rates
        if role == "Reader":
            problem = story_of(blocks[0])
            numbers = misread(problem, rng)[0] if rng.random() < r.reader else list(problem.written)
            return reader_text(numbers, rng)
        if role == "Planner":
            problem = story_of(blocks[0])
            read = [int(x) for x in re.findall(r"\d+", blocks[-1])] or [problem.start]
            operands = iter(read[1:])
            ops = [(op, n if kind in FIXED_OPERAND else next(operands, n))
                   for (op, n), kind in zip(problem.ops, problem.kinds)]
            if rng.random() < r.planner:
                i = rng.randrange(len(ops))
                ops[i] = (SWAPPED[ops[i][0]], ops[i][1])
            return planner_text(read[0], ops, rng)
        if role == "Verifier":
            said = _TOTAL.findall(blocks[-1])
            total = int(said[-1]) if said else 0
            return verifier_text(total + (rng.choice((-1, 1)) if rng.random() < r.verifier else 0), rng)
        i = int(role[2:]) - 1                           # Op i+1: the plan, then the previous Op's total
        plan = _PLAN.findall(blocks[0].split(" ", 2)[-1])
        said = _TOTAL.findall(blocks[-1]) if len(blocks) > 1 else []
        total = int(said[-1]) if said else int(blocks[0].split()[1])
        op, n = plan[i] if i < len(plan) else ("+", "0")
        result = apply_op(total, op, int(n))
        if rng.random() < r.op:
            result += _slip(rng)
        return op_text((total, op, int(n), result), rng)


# --------------------------------------------------------------------------- the command


@dataclass(frozen=True)
class SyntheticArgs:
    world: str = arg("toy_deep", flags=("--world",), help="a deep toy world (its dev split)")
    reader: tuple[float, ...] = arg((0.3,), flags=("--reader",), nargs="+", help="Reader error rate(s)")
    planner: tuple[float, ...] = arg((0.1,), flags=("--planner",), nargs="+", help="Planner error rate(s)")
    op: tuple[float, ...] = arg((0.1,), flags=("--op",), nargs="+", help="each Op agent's error rate(s)")
    verifier: tuple[float, ...] = arg((0.02,), flags=("--verifier",), nargs="+", help="Verifier error rate(s)")
    n: int = arg(100, flags=("--n",), help="dev questions, at least 2 (a standard error needs two; default 100)")
    seed: int = arg(14, flags=("--seed",), help="search seed (and the question order)")
    simulations: int = arg(10, flags=("--simulations",), help="MCTS simulations (the demo's 10)")
    out: PathText | None = arg(None, flags=("--out",), help="JSON of every point's report (optional)")

    def __post_init__(self) -> None:
        require_each(self, ("simulations",), lambda v: v >= 1, "must be at least 1")
        require_each(self, ("n",), lambda v: v >= MIN_QUESTIONS, QUESTIONS_RULE)
        for name in ("reader", "planner", "op", "verifier"):
            check(all(0.0 <= x <= 1.0 for x in getattr(self, name)), f"--{name}: rates are between 0 and 1")
        check_seeds(self)


def main() -> int:
    p = ArgumentParser(description="Headroom gates of a deep toy world played by a synthetic team with set error rates.")
    add_config_args(p, SyntheticArgs)
    args = config_from_args(SyntheticArgs, p.parse_args())
    check(args.world in WORLDS and args.world.startswith("toy_deep"),
          f"--world: a deep toy world ({', '.join(w for w in WORLDS.names() if w.startswith('toy_deep'))})")
    world = WORLDS[args.world]
    if args.out is not None:
        check_output_file(args.out, "out", inputs={"team config": world.config})
    graph = load_mas_config(world.config)
    examples = headroom.questions(world, "dev", args.n, args.seed)
    reports = []
    for point in itertools.product(args.reader, args.planner, args.op, args.verifier):
        rates = ErrorRates(*point)
        report = headroom.measure(LoadedModels(SyntheticDeepTeam(rates, args.seed)), graph, args.world, examples,
                                  seeds=(args.seed,), sims=args.simulations, batch_size=32)
        report["rates"] = rates.__dict__
        reports.append(report)
        print(f"rates {rates.__dict__}")
        print("\n".join("  " + line for line in headroom.report_lines(report)[1:]))
    if args.out is not None:
        atomic_write_json(Path(args.out), reports)
    return 0


if __name__ == "__main__":
    run_cli(main)
