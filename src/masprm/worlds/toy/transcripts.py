"""Reference team transcripts for the toy task: what each agent of configs/toy.yaml should say.

The team is shaped like configs/gsm8k.yaml (Reader -> Planner -> Solver ->
Verifier, the question also going to the Planner and the Verifier), and each
message can be right or wrong on its own:

- the Reader lists the numbers the story writes about the person, in order,
  leaving out anyone else's (``16 10 2``);
- the Planner writes the start and each operation (``16 +10 /2 +2``);
- the Solver applies them, showing its work (``Steps: 16+10=26, 26/2=13,
  then 13+2=15. Answer: 15``, in several phrasings) or giving the result only
  (``Answer: 15``), equally often, as in real worked-solution data;
- the Verifier redoes the Solver's shown work and states the final answer
  (``Redo: 16+10=26, 26/2=13, 13+2=15. Answer: 15``), or restates a bare
  answer it has no work to check against (``Answer: 15``).

A worked solution is longer and its phrasing varies, so the policy's
likelihood of any one worked path is lower than that of a bare answer,
although showing the work is what makes the answer right: the known length
bias of likelihood ranking, arising here the same way it does in real data.
Every reference transcript is correct and carries no verdict; the trained
policy's mistakes (and the Verifier's occasional repairs) come only from its
limited capacity.

The agents' prompts (system prompt + inbox) are rendered through the MAS
graph itself, so the policy is trained on exactly the inboxes it sees
during search.
"""

from __future__ import annotations

import random
from typing import Iterable, Iterator, Sequence

from masprm.graph import MASGraph
from masprm.worlds.toy.task import Problem, apply_op

SOLVER_STYLES = ("worked", "direct")
# Worked solutions are phrased in several ways, as in real worked-solution data:
WORKED_OPENERS = ("Steps:", "Work:")
CONNECTORS = (", ", "; ", ", then ", " and ")
VERIFIER_OPENER = "Redo:"
READER, PLANNER, SOLVER, VERIFIER = 0, 1, 2, 3
TEAM = ("reader", "planner", "solver", "verifier")


def reader_text(problem: Problem) -> str:
    return " ".join(str(n) for n in problem.written)


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


def verifier_text(problem: Problem, style: str) -> str:
    """The Verifier's answer after a Solver of this style: the work redone in one phrasing, or the bare answer."""
    if style == "direct":
        return f"Answer: {problem.answer}"
    work = ", ".join(f"{a}{op}{n}={b}" for a, op, n, b in worked_steps(problem))
    return f"{VERIFIER_OPENER} {work}. Answer: {problem.answer}"


def reference_outputs(problem: Problem, rng: random.Random) -> dict[int, str]:
    """One correct transcript: agent index -> output (the Solver's style and phrasing drawn from rng)."""
    style = rng.choice(SOLVER_STYLES)
    return {READER: reader_text(problem), PLANNER: planner_text(problem), SOLVER: solver_text(problem, style, rng),
            VERIFIER: verifier_text(problem, style)}


def check_graph(graph: MASGraph) -> None:
    """The transcripts assume the four-agent team of configs/toy.yaml."""
    names = tuple(a.name.lower() for a in graph.agents)
    if names != TEAM or graph.topo_order != (READER, PLANNER, SOLVER, VERIFIER):
        raise ValueError(f"{graph.source}: the toy transcripts need agents Reader -> Planner -> Solver -> "
                         f"Verifier, got {' -> '.join(a.name for a in graph.agents)}")


def training_turns(problems: Iterable[Problem], graph: MASGraph,
                   seed: int) -> Iterator[tuple[int, list[dict[str, str]], str]]:
    """(agent, chat messages, reference output) for every agent turn of every problem, in order."""
    check_graph(graph)
    rng = random.Random(seed)
    for problem in problems:
        outputs = reference_outputs(problem, rng)
        yield from rendered_turns(graph, problem.question, [outputs[agent] for agent in graph.topo_order])


def rendered_turns(graph: MASGraph, question: str,
                   outputs: Sequence[str]) -> Iterator[tuple[int, list[dict[str, str]], str]]:
    """(agent, chat messages, output) for each agent of a transcript (outputs in team order), its prompt
    rendered through the graph exactly as search renders it."""
    state = graph.start(question)
    for agent, output in zip(graph.topo_order, outputs):
        yield agent, state.messages(agent), output
        state = state.decide(agent, output)


def corpus_lines(problems: Iterable[Problem], graph: MASGraph) -> Iterator[str]:
    """Text the tokenizer is trained on: prompts and every agent's outputs in both solver styles."""
    yield "system user assistant"  # the chat template's role names
    for agent in graph.agents:
        yield agent.system_prompt
    rng = random.Random(0)
    for problem in problems:
        yield problem.question
        yield reader_text(problem)
        yield planner_text(problem)
        for style in SOLVER_STYLES:
            yield solver_text(problem, style, rng)
            yield verifier_text(problem, style)
        yield problem.gold
