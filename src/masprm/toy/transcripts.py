"""Reference team transcripts for the toy task: what each agent of configs/toy.yaml should say.

The Planner reads the story and writes the operations on the running total,
skipping numbers about anyone else (``16 +10 /2 +2``); the Solver applies
them. Like real worked-solution data, the Solver's reference answers come in
two styles, equally often: showing its work, in one of several phrasings
(``Steps: 16+10=26, 26/2=13, then 13+2=15. Answer: 15``,
``Work: 16+10=26; 26/2=13 and 13+2=15. Answer: 15``, ...), or giving the
result only (``Answer: 15``). A worked solution is longer and its phrasing
varies, so the policy's likelihood of any one worked solution is lower than
that of a bare answer, although showing the work is what makes the answer
right: the known length bias of likelihood ranking, arising here the same
way it does in real data. Every reference transcript is
correct; the trained policy's mistakes come only from its limited capacity.

The agents' prompts (system prompt + inbox) are rendered through the MAS
graph itself, so the policy is trained on exactly the inboxes it sees
during search.
"""

from __future__ import annotations

import random
from typing import Iterable, Iterator

from masprm.graph import MASGraph
from masprm.toy.task import Problem, apply_op

SOLVER_STYLES = ("worked", "direct")
# Worked solutions are phrased in several ways, as in real worked-solution data:
WORKED_OPENERS = ("Steps:", "Work:")
CONNECTORS = (", ", "; ", ", then ", " and ")
PLANNER, SOLVER = 0, 1
TEAM = ("planner", "solver")


def planner_text(problem: Problem) -> str:
    return " ".join([str(problem.start)] + [f"{op}{n}" for op, n in problem.ops])


def worked_steps(problem: Problem) -> list[tuple[int, str, int, int]]:
    """(total, op, operand, new total) for each operation, in order."""
    total, steps = problem.start, []
    for op, n in problem.ops:
        new = apply_op(total, op, n)
        steps.append((total, op, n, new))
        total = new
    return steps


def solver_text(problem: Problem, style: str, rng: random.Random | None = None) -> str:
    """The Solver's answer in a style; rng picks a worked solution's phrasing (default: the first)."""
    if style == "direct":
        return f"Answer: {problem.answer}"

    def pick(options: tuple[str, ...]) -> str:
        return rng.choice(options) if rng is not None else options[0]

    opener = pick(WORKED_OPENERS)
    parts = [f"{a}{op}{n}={b}" for a, op, n, b in worked_steps(problem)]
    work = parts[0] + "".join(pick(CONNECTORS) + part for part in parts[1:])
    return f"{opener} {work}. Answer: {problem.answer}"


def reference_outputs(problem: Problem, rng: random.Random) -> dict[int, str]:
    """One correct transcript: agent index -> output (the Solver's style and phrasing drawn from rng)."""
    return {PLANNER: planner_text(problem), SOLVER: solver_text(problem, rng.choice(SOLVER_STYLES), rng)}


def check_graph(graph: MASGraph) -> None:
    """The transcripts assume the two-agent chain of configs/toy.yaml."""
    names = tuple(a.name.lower() for a in graph.agents)
    if names != TEAM or graph.topo_order != (PLANNER, SOLVER):
        raise ValueError(f"{graph.source}: the toy transcripts need agents Planner -> Solver, "
                         f"got {' -> '.join(a.name for a in graph.agents)}")


def training_turns(problems: Iterable[Problem], graph: MASGraph,
                   seed: int) -> Iterator[tuple[int, list[dict[str, str]], str]]:
    """(agent, chat messages, reference output) for every agent turn of every problem, in order."""
    check_graph(graph)
    rng = random.Random(seed)
    for problem in problems:
        outputs = reference_outputs(problem, rng)
        state = graph.start(problem.question)
        for agent in graph.topo_order:
            yield agent, state.messages(agent), outputs[agent]
            state = state.decide(agent, outputs[agent])


def corpus_lines(problems: Iterable[Problem], graph: MASGraph) -> Iterator[str]:
    """Text the tokenizer is trained on: prompts and both solver styles."""
    yield "system user assistant"  # the chat template's role names
    for agent in graph.agents:
        yield agent.system_prompt
    rng = random.Random(0)
    for problem in problems:
        yield problem.question
        yield planner_text(problem)
        for style in SOLVER_STYLES:
            yield solver_text(problem, style, rng)
        yield problem.gold
