"""The shipped MAS configs: topology, the answer line each team ends with, the gates, handoff."""

from __future__ import annotations

from pathlib import Path

import pytest

from masprm.answers import extract_letter, is_correct
from masprm.graph import load_mas_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

STATIC = ["gsm8k", "competition_math", "mmlu", "gpqa", "logiqa", "single", "gsm8k_refine", "gsm8k_dylan",
          "gsm8k2", "gsm8k3", "math_refine"]
HANDOFF = ["math_handoff8", "gsm8k_handoff8"]   # the latter: the team of the original's newer branch
ALL = STATIC + HANDOFF

# The original's agent names and token caps, config by config (its configs/*.yaml at 9480f74). The
# prompts are this project's own words; single's agent is spelled Assistant (the original: Assitant).
ORIGINAL_AGENTS = {
    "gsm8k": [("Reader", 1024), ("Planner", 1024), ("Solver", 1024), ("Verifier", 1024)],
    "competition_math": [("Reader", 1024), ("Planner", 1024), ("Solver", 1024), ("Verifier", 1024)],
    "gsm8k_refine": [("Reader", 512), ("Planner", 512), ("Solver", 1024), ("Verifier", 512), ("Refiner", 1024)],
    "gsm8k_dylan": [("SolverA_MathAnalyst", 512), ("SolverB_AlgebraSolver", 512),
                    ("SolverC_ArithmeticReasoner", 512), ("Judge", 384), ("RefinerA", 512), ("RefinerB", 512),
                    ("RefinerC", 512), ("FinalJudge", 256)],
    "mmlu": [("Angel", 1024), ("Devil", 1024), ("Judge", 1024)],
    "gpqa": [("Angel", 1024), ("Devil", 1024), ("Judge", 1024)],
    "logiqa": [("Constraint_Extractor", 1024), ("World_Builder", 1024), ("Query_Checker", 1024)],
    "single": [("Assistant", 1024)],
    "gsm8k2": [("Agent_Solver", 512), ("Agent_Evaluator", 256), ("Agent_Reflector", 256), ("Agent_Reviser", 512)],
    "gsm8k3": [("Reader", 512), ("Solver_A", 1024), ("Solver_B", 1024), ("Judge", 512)],
    "math_refine": [("Reader", 512), ("Planner", 512), ("Solver", 1536), ("Verifier", 768), ("Refiner", 1536)],
}


def config(name: str):
    return load_mas_config(CONFIGS / f"{name}.yaml")


def edges_of(graph) -> list[tuple[int, int]]:
    return sorted((e.src, e.dst) for e in graph.edges)


@pytest.mark.parametrize("name", STATIC)
def test_agent_names_and_token_caps_are_the_originals(name):
    graph = config(name)
    assert [(a.name, a.max_new_tokens) for a in graph.agents] == ORIGINAL_AGENTS[name]
    assert all(a.system_prompt.strip() for a in graph.agents)


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
    assert [a.name for a in graph.agents] == ["Constraint_Extractor", "World_Builder", "Query_Checker"]
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
    # The original's gate, regex (?i)verdict:\s*incorrect: a colon right after VERDICT, then only
    # whitespace before INCORRECT, any case. Markdown between the two keeps the Refiner off.
    for text, fires in [("VERDICT: INCORRECT\nwrong sum", True), ("verdict:incorrect", True),
                        ("Verdict:\n  Incorrect", True), ("**VERDICT:** incorrect", False),
                        ("VERDICT - INCORRECT", False), ("VERDICT: CORRECT\nAnswer: 5", False), ("", False)]:
        assert gated[0].condition.fires(text) is fires, text
    for needed in ("VERDICT: CORRECT", "VERDICT: INCORRECT"):
        assert needed in refine.agents[3].system_prompt

    dylan = config("gsm8k_dylan")
    assert len(dylan.agents) == 8
    gated = [e for e in dylan.edges if e.condition.kind != "always"]
    assert sorted((e.src, e.dst) for e in gated) == [(3, 4), (3, 5), (3, 6)]
    for e in gated:
        assert e.condition.fires("VERDICT: DISAGREE\nB is off") and not e.condition.fires("VERDICT: AGREE")
        assert not e.condition.fires("**Verdict:** disagree")   # (?i)verdict:\s*disagree, as the original
    assert edges_of(dylan) == sorted([(-1, 0), (-1, 1), (-1, 2), (-1, 3), (0, 3), (1, 3), (2, 3),
                                      (-1, 4), (0, 4), (3, 4), (-1, 5), (1, 5), (3, 5), (-1, 6), (2, 6),
                                      (3, 6), (-1, 7), (4, 7), (5, 7), (6, 7)])
    for needed in ("VERDICT: AGREE", "VERDICT: DISAGREE"):
        assert needed in dylan.agents[3].system_prompt


def test_the_originals_three_other_teams():
    solve_check = config("gsm8k2")   # Solver -> Evaluator -> Reflector -> Reviser, no gates
    assert edges_of(solve_check) == sorted([(-1, 0), (0, 1), (0, 2), (1, 2), (-1, 3), (2, 3)])
    assert all(e.condition.kind == "always" for e in solve_check.edges) and solve_check.sinks == (3,)
    assert solve_check.parents(2) == (0, 1) and solve_check.parents(3) == (-1, 2)

    two_solvers = config("gsm8k3")   # Reader -> two Solvers -> Judge, everyone reading the question
    assert edges_of(two_solvers) == sorted([(-1, 0), (-1, 1), (-1, 2), (0, 1), (0, 2), (-1, 3), (0, 3), (1, 3),
                                            (2, 3)])
    assert all(-1 in two_solvers.parents(a) for a in range(4)) and two_solvers.parents(3) == (-1, 0, 1, 2)
    assert all(e.condition.kind == "always" for e in two_solvers.edges)

    refine = config("math_refine")   # gsm8k_refine's topology and gate
    assert edges_of(refine) == edges_of(config("gsm8k_refine"))
    gated = [e for e in refine.edges if e.condition.kind != "always"]
    assert [(e.src, e.dst, str(e.condition)) for e in gated] == [(3, 4, r"regex:(?i)verdict:\s*incorrect")]
    state = refine.replay("Q", [(0, "r"), (1, "p"), (2, "s"), (3, "VERDICT: CORRECT\nFinal Answer: \\boxed{7}")])
    assert state.is_terminal and is_correct(state.final_answer(), "7")   # accepted: the Verifier answers
    state = refine.replay("Q", [(0, "r"), (1, "p"), (2, "s"), (3, "VERDICT: INCORRECT\nsign error")])
    assert state.next_runnable() == 4


ORIGINAL_SHAPE = """agents:
  - name: Reader
    system_prompt: "You are the Reader. Restate the question."
    max_new_tokens: 1024
  - name: Solver
    system_prompt: "You are the Solver. Compute the result."
    max_new_tokens: 1024
  - name: Verifier
    system_prompt: |
      You are the Verifier.
      VERDICT: CORRECT or VERDICT: INCORRECT
    max_new_tokens: 512
  - name: Refiner
    system_prompt: "You are the Refiner. Fix the result."
    max_new_tokens: 1024

# Edges (src, dst). Use -1 for ROOT (Question).
edges:
  - [-1, 0]            # Q -> Reader
  - [ 0, 1]
  - [-1, 2]
  - [ 1, 2]
  - [-1, 3]
  - [ 2, 3, "regex:(?i)verdict:\\\\s*incorrect"]  # Verifier -> Refiner (only when INCORRECT)
"""


def test_a_config_in_the_originals_shape_loads_as_written(tmp_path):
    # one-line prompts, bracket-padded edges, comments and a double-quoted YAML regex: the original's files
    path = tmp_path / "original_shape.yaml"
    path.write_text(ORIGINAL_SHAPE)
    graph = load_mas_config(path)
    assert [(a.name, a.system_prompt, a.max_new_tokens) for a in graph.agents[:2]] == [
        ("Reader", "You are the Reader. Restate the question.", 1024),
        ("Solver", "You are the Solver. Compute the result.", 1024)]
    (gate,) = [e for e in graph.edges if e.condition.kind != "always"]
    assert (gate.src, gate.dst, gate.condition.arg) == (2, 3, r"(?i)verdict:\s*incorrect")
    accepted = graph.replay("Q", [(0, "q again"), (1, "5"), (2, "VERDICT: CORRECT")])
    rejected = graph.replay("Q", [(0, "q again"), (1, "5"), (2, "Verdict: incorrect, 6")])
    assert accepted.is_terminal and accepted.final_answer() == "VERDICT: CORRECT"
    assert rejected.next_runnable() == 3 and rejected.messages(3)[1]["content"] == "Q\n\nVerdict: incorrect, 6"


# The final-line format each team's answering agents are told to use, filled in as a
# model that follows the prompt would, must be scored right by the answer checker.
NUMERIC_FINAL = {
    "gsm8k": [3], "competition_math": [3], "single": [0], "gsm8k_refine": [2, 3, 4],
    "gsm8k_dylan": [0, 1, 2, 3, 4, 5, 6, 7], "gsm8k2": [0, 3], "gsm8k3": [1, 2, 3], "math_refine": [2, 3, 4],
}
LETTER_FINAL = {"mmlu": [0, 1, 2], "gpqa": [0, 1, 2], "logiqa": [2], "single": [0]}


@pytest.mark.parametrize("name,agents", sorted(NUMERIC_FINAL.items()))
def test_numeric_answer_line_is_what_the_checker_reads(name, agents):
    graph = config(name)
    for a in agents:
        prompt = graph.agents[a].system_prompt
        line = next(l.strip() for l in prompt.splitlines()
                    if "Answer: " in l and ("<number>" in l or "<value>" in l))
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


@pytest.mark.parametrize("name", HANDOFF)
def test_handoff_section(name):
    graph = config(name)
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


@pytest.mark.parametrize("name", HANDOFF)
def test_handoff_roles_are_told_the_protocol(name):
    graph = config(name)
    for agent in graph.agents:
        prompt = agent.system_prompt
        fields = [prompt.index(f"{f}:") for f in ("SPEAKER", "RECIPIENT", "MESSAGE", "CURRENT_ANSWER")]
        assert fields == sorted(fields), agent.name
        assert f"SPEAKER: {agent.name}\n" in prompt


@pytest.mark.parametrize("name", HANDOFF)
def test_handoff_section_is_accepted_by_the_handoff_team(name):
    team_module = pytest.importorskip("masprm.handoff.team")
    graph = config(name)
    team = team_module.HandoffTeam.from_graph(graph)
    assert team.initial_role == "Problem Analyst"
    assert len(team.fixed_schedule) == 12 and team.fixed_schedule[-1] == "Finalizer"
    assert (team.min_turns, team.max_turns) == (graph.handoff["min_turns"], graph.handoff["max_turns"])


def test_the_gsm8k_handoff_team_is_told_about_word_problems():
    math, gsm8k = config("math_handoff8"), config("gsm8k_handoff8")
    for m, g in zip(math.agents, gsm8k.agents):
        assert (m.name, m.max_new_tokens) == (g.name, g.max_new_tokens) and m.system_prompt != g.system_prompt
        assert "word problem" in g.system_prompt and "competition" not in g.system_prompt
        assert "a single number, no units" in g.system_prompt
    assert math.handoff == gsm8k.handoff
