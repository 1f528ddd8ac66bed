"""The shipped MAS configs: topology, the answer line each team ends with, the gates, handoff."""

from __future__ import annotations

from pathlib import Path

import pytest

from masprm.answers import extract_letter, is_correct
from masprm.graph import load_mas_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

STATIC = ["gsm8k", "competition_math", "mmlu", "gpqa", "logiqa", "single", "gsm8k_refine", "gsm8k_dylan"]
ALL = STATIC + ["math_handoff8"]


def config(name: str):
    return load_mas_config(CONFIGS / f"{name}.yaml")


def edges_of(graph) -> list[tuple[int, int]]:
    return sorted((e.src, e.dst) for e in graph.edges)


@pytest.mark.parametrize("name", ALL)
def test_config_loads_with_prompts(name):
    graph = config(name)
    for agent in graph.agents:
        assert len(agent.system_prompt.split()) >= 15, f"{name}: {agent.name} has almost no prompt"
        assert agent.max_new_tokens <= 1024


def test_gsm8k_topology():
    for name in ("gsm8k", "competition_math"):
        graph = config(name)
        assert [a.name for a in graph.agents] == ["Reader", "Planner", "Solver", "Verifier"]
        assert edges_of(graph) == sorted([(-1, 0), (-1, 1), (0, 1), (1, 2), (-1, 3), (2, 3)])
        assert graph.sinks == (3,)


@pytest.mark.parametrize("name", ["mmlu", "gpqa"])
def test_debate_topology(name):
    graph = config(name)
    assert len(graph.agents) == 3 and graph.agents[2].name == "Judge"
    assert edges_of(graph) == sorted([(-1, 0), (-1, 1), (-1, 2), (0, 2), (1, 2)])
    assert "Final Answer: X" in graph.agents[2].system_prompt


def test_logiqa_topology():
    graph = config("logiqa")
    assert [a.name for a in graph.agents] == ["Constraint Extractor", "World Builder", "Query Checker"]
    assert edges_of(graph) == sorted([(-1, 0), (0, 1), (-1, 2), (1, 2)])
    assert "Final Answer: X" in graph.agents[2].system_prompt


def test_single_topology():
    graph = config("single")
    assert len(graph.agents) == 1 and edges_of(graph) == [(-1, 0)]


def test_refine_and_dylan_gates():
    refine = config("gsm8k_refine")
    assert [a.name for a in refine.agents] == ["Reader", "Planner", "Solver", "Verifier", "Refiner"]
    gated = [e for e in refine.edges if e.condition.kind != "always"]
    assert [(e.src, e.dst) for e in gated] == [(3, 4)]
    for text, fires in [("VERDICT: INCORRECT\nwrong sum", True), ("**VERDICT:** incorrect", True),
                        ("VERDICT: CORRECT\nAnswer: 5", False), ("", False)]:
        assert gated[0].condition.fires(text) is fires
    for needed in ("VERDICT: CORRECT", "VERDICT: INCORRECT"):
        assert needed in refine.agents[3].system_prompt

    dylan = config("gsm8k_dylan")
    assert len(dylan.agents) == 8
    gated = [e for e in dylan.edges if e.condition.kind != "always"]
    assert sorted((e.src, e.dst) for e in gated) == [(3, 4), (3, 5), (3, 6)]
    for e in gated:
        assert e.condition.fires("VERDICT: DISAGREE\nB is off") and not e.condition.fires("VERDICT: AGREE")
    assert edges_of(dylan) == sorted([(-1, 0), (-1, 1), (-1, 2), (-1, 3), (0, 3), (1, 3), (2, 3),
                                      (-1, 4), (0, 4), (3, 4), (-1, 5), (1, 5), (3, 5), (-1, 6), (2, 6),
                                      (3, 6), (-1, 7), (4, 7), (5, 7), (6, 7)])
    for needed in ("VERDICT: AGREE", "VERDICT: DISAGREE"):
        assert needed in dylan.agents[3].system_prompt


# The final-line format each team's answering agents are told to use, filled in as a
# model that follows the prompt would, must be scored right by the answer checker.
NUMERIC_FINAL = {
    "gsm8k": [3], "competition_math": [3], "single": [0], "gsm8k_refine": [2, 3, 4],
    "gsm8k_dylan": [0, 1, 2, 3, 4, 5, 6, 7],
}
LETTER_FINAL = {"mmlu": [0, 1, 2], "gpqa": [0, 1, 2], "logiqa": [2], "single": [0]}


@pytest.mark.parametrize("name,agents", sorted(NUMERIC_FINAL.items()))
def test_numeric_answer_line_is_what_the_checker_reads(name, agents):
    graph = config(name)
    for a in agents:
        prompt = graph.agents[a].system_prompt
        line = next(l.strip() for l in prompt.splitlines() if l.strip().startswith("Answer: <"))
        answer = "Some working: 3 + 4 = 7, then 7 * 6.\n" + line.replace("<number>", "42").replace("<value>", "42")
        assert is_correct(answer, "42") and not is_correct(answer, "7"), f"{name}: {graph.agents[a].name}"


@pytest.mark.parametrize("name,agents", sorted(LETTER_FINAL.items()))
def test_letter_answer_line_is_what_the_checker_reads(name, agents):
    graph = config(name)
    for a in agents:
        prompt = graph.agents[a].system_prompt
        line = next(l.strip() for l in prompt.splitlines() if l.strip().startswith("Final Answer: X"))
        answer = "A looks tempting but fails; B is a trap.\n" + line.replace("X", "C")
        assert extract_letter(answer) == "C" and is_correct(answer, "C"), f"{name}: {graph.agents[a].name}"


def test_upstream_roles_do_not_answer():
    # Reader / Planner must not end with an answer line: the Solver and Verifier do that
    for name in ("gsm8k", "competition_math", "gsm8k_refine"):
        graph = config(name)
        for a in (0, 1):
            assert "Answer:" not in graph.agents[a].system_prompt
            assert "Do not" in graph.agents[a].system_prompt


# --------------------------------------------------------------------------- the handoff team


def test_handoff_section():
    graph = config("math_handoff8")
    roles = [a.name for a in graph.agents]
    # the original's eight roles, token caps and schedule
    assert roles == ["Problem Analyst", "Algebraist", "Geometer", "Number Theorist", "Combinatorialist",
                     "Independent Solver", "Critic", "Finalizer"]
    assert [a.max_new_tokens for a in graph.agents] == [512] * 7 + [256]
    section = graph.handoff
    schedule = section["fixed_schedule"]
    assert section["initial_role"] == schedule[0] == "Problem Analyst"
    assert schedule == roles[:7] + roles[:4] + ["Finalizer"]
    assert set(schedule) == set(roles)                                  # every role gets a turn
    assert all(a != b for a, b in zip(schedule, schedule[1:]))         # no self-handoff in the schedule
    assert 1 <= section["min_turns"] <= section["max_turns"] == 12
    assert "FINAL" not in [r.upper() for r in roles]


def test_handoff_roles_are_told_the_protocol():
    graph = config("math_handoff8")
    for agent in graph.agents:
        prompt = agent.system_prompt
        fields = [prompt.index(f"{f}:") for f in ("SPEAKER", "RECIPIENT", "MESSAGE", "CURRENT_ANSWER")]
        assert fields == sorted(fields), agent.name
        assert f"SPEAKER: {agent.name}\n" in prompt


def test_handoff_section_is_accepted_by_the_handoff_team():
    team_module = pytest.importorskip("masprm.handoff.team")
    graph = config("math_handoff8")
    team = team_module.HandoffTeam.from_graph(graph)
    assert team.initial_role == "Problem Analyst"
    assert len(team.fixed_schedule) == 12 and team.fixed_schedule[-1] == "Finalizer"
    assert (team.min_turns, team.max_turns) == (graph.handoff["min_turns"], graph.handoff["max_turns"])
