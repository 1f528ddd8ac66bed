"""Reference transcripts: correct, unmarked, and rendered through the team graph."""

import random
import re

import pytest

from masprm.answers import is_correct
from masprm.graph import MASGraph, load_mas_config
from masprm.worlds.toy.task import apply_op, generate_split
from masprm.worlds.toy.transcripts import (CONNECTORS, PLANNER, READER, SOLVER, VERIFIER, VERIFIER_OPENER, WORKED_OPENERS,
                                    check_graph, corpus_lines, planner_text, reader_text, reference_outputs,
                                    solver_text, training_turns, verifier_text)

CONFIG = "configs/toy.yaml"


@pytest.fixture(scope="module")
def graph():
    return load_mas_config(CONFIG)


def run_plan(plan: str) -> int:
    start, *ops = plan.split()
    total = int(start)
    for op in ops:
        total = apply_op(total, op[0], int(op[1:]))
    return total


def test_every_reference_agent_output_is_right():
    for p in generate_split("train"):
        numbers = [int(n) for n in reader_text(p).split()]
        assert numbers[0] == p.start and all(str(n) in p.question for n in numbers)
        assert len(numbers) == 1 + sum(kind not in ("double", "triple", "half") for kind in p.kinds)
        plan = planner_text(p)
        assert plan.split()[0] == str(p.start) and len(plan.split()) == len(p.ops) + 1
        assert run_plan(plan) == p.answer
        for style in ("worked", "direct"):
            assert is_correct(solver_text(p, style), str(p.answer))
            assert is_correct(verifier_text(p, style), str(p.answer))


def test_the_reader_lists_only_the_persons_written_numbers():
    p = next(p for p in generate_split("test") if p.distractor and "double" in p.kinds)
    numbers = [int(n) for n in reader_text(p).split()]
    other = [int(n) for n in re.findall(r"\d+", p.question) if int(n) not in numbers]
    assert other, "the distractor's number is left out"
    assert len(numbers) < len(p.ops) + 1, "the doubling writes no number"


def test_the_verifier_redoes_a_worked_solution_and_restates_a_bare_one():
    p = next(p for p in generate_split("train") if len(p.ops) == 3)
    worked = verifier_text(p, "worked")
    assert worked.startswith(VERIFIER_OPENER + " ") and worked.endswith(f". Answer: {p.answer}")
    assert re.findall(r"(\d+[-+*/]\d+=\d+)", worked) == re.findall(r"(\d+[-+*/]\d+=\d+)", solver_text(p, "worked"))
    assert verifier_text(p, "direct") == solver_text(p, "direct") == f"Answer: {p.answer}"
    rng = random.Random(3)
    for _ in range(20):   # the Verifier follows the Solver's style in every reference transcript
        out = reference_outputs(p, rng)
        assert out[VERIFIER].startswith(VERIFIER_OPENER) == (not out[SOLVER].startswith("Answer:"))


def test_worked_solutions_show_each_running_total_in_varied_phrasings():
    p = next(p for p in generate_split("train") if len(p.ops) == 3)
    rng = random.Random(0)
    phrasings = {solver_text(p, "worked", rng) for _ in range(200)}
    assert len(phrasings) == len(WORKED_OPENERS) * len(CONNECTORS) ** 2
    for worked in phrasings:
        assert worked.split()[0] in WORKED_OPENERS and worked.endswith(f". Answer: {p.answer}")
        steps = re.findall(r"(\d+)([-+*/])(\d+)=(\d+)", worked)
        assert len(steps) == 3
        assert int(steps[0][0]) == p.start and int(steps[-1][3]) == p.answer
        for (a, op, b, c), (next_a, *_) in zip(steps, steps[1:] + [(str(p.answer),)]):
            assert apply_op(int(a), op, int(b)) == int(c) == int(next_a)
    assert solver_text(p, "worked") == solver_text(p, "worked")  # no rng: one fixed phrasing
    assert solver_text(p, "direct") == f"Answer: {p.answer}"


def test_both_solver_styles_are_equally_common_and_carry_no_verdict():
    rng = random.Random(0)
    outputs = [reference_outputs(p, rng) for p in generate_split("train")]
    direct = sum(o[SOLVER].startswith("Answer:") for o in outputs) / len(outputs)
    assert 0.4 < direct < 0.6
    words = {w.lower() for o in outputs for text in o.values() for w in re.findall(r"[A-Za-z]+", text)}
    assert not words & {"wrong", "incorrect", "correct", "mistake", "error", "check", "verified", "ok"}


def test_training_turns_use_the_inboxes_the_graph_delivers(graph):
    problems = generate_split("test")[:3]
    turns = list(training_turns(problems, graph, seed=0))
    assert len(turns) == 4 * len(problems)
    p = problems[0]
    (reader, reader_msgs, reader_out), (planner, planner_msgs, planner_out), (solver, solver_msgs, solver_out), \
        (verifier, verifier_msgs, _) = turns[:4]
    assert (reader, planner, solver, verifier) == (READER, PLANNER, SOLVER, VERIFIER)
    assert reader_msgs == graph.start(p.question).messages(READER)
    assert reader_msgs[1]["content"] == p.question and reader_out == reader_text(p)
    assert planner_msgs[1]["content"] == f"{p.question}\n\n{reader_out}"     # question skip-edge + the Reader
    assert solver_msgs[1]["content"] == planner_out == planner_text(p)       # the plan only
    assert verifier_msgs[1]["content"] == f"{p.question}\n\n{solver_out}"   # question skip-edge + the Solver
    assert solver_msgs[0]["content"] == graph.agents[SOLVER].system_prompt
    assert [t[2] for t in training_turns(problems, graph, seed=0)] == [t[2] for t in turns]


def test_corpus_covers_prompts_and_both_styles(graph):
    p = generate_split("test")[0]
    lines = list(corpus_lines([p], graph))
    assert graph.agents[0].system_prompt in lines
    assert solver_text(p, "direct") in lines
    assert any(line.endswith(f". Answer: {p.answer}") and "=" in line for line in lines)


def test_other_teams_are_refused():
    other = MASGraph.from_dict({"agents": [{"name": "Solo", "system_prompt": "x"}], "edges": [[-1, 0]]})
    with pytest.raises(ValueError, match="Reader -> Planner -> Solver -> Verifier"):
        check_graph(other)
