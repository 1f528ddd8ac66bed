"""The MAS graph engine driven by scripted agents, checked against a from-scratch reference."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Callable

import pytest

from masprm.errors import MasprmError
from masprm.graph import QUESTION, ConfigError, MASGraph, RoutingState, load_mas_config, parse_edge_rule

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
SHIPPED = sorted(CONFIGS.glob("*.yaml"))

Agent = Callable[[int, str], str]   # (agent index, inbox text) -> output


def make_graph(edges, n_agents: int | None = None, names=None) -> MASGraph:
    n = n_agents if n_agents is not None else 1 + max(max(e[0], e[1]) for e in edges)
    names = names or [f"A{i}" for i in range(n)]
    return MASGraph.from_dict({"agents": [{"name": nm, "system_prompt": f"you are {nm}"} for nm in names],
                               "edges": edges})


# --------------------------------------------------------------------------- a reference implementation of the routing rule


def reference_inbox(graph: MASGraph, question: str, outputs: dict[int, str], agent: int) -> dict[int, str]:
    """What has been delivered to `agent`, recomputed from scratch from the decided outputs."""
    got = {}
    for e in graph.edges:
        if e.dst != agent:
            continue
        source_text = question if e.src == QUESTION else outputs.get(e.src)
        if source_text is not None and e.condition.fires(source_text):
            got[e.src] = source_text
    return got


def reference_user_content(graph, question, outputs, agent) -> str:
    got = reference_inbox(graph, question, outputs, agent)
    return "\n\n".join(got[p] for p in sorted(got)).strip()


def reference_next(graph, question, outputs) -> int | None:
    for a in graph.topo_order:
        if a in outputs:
            continue
        got = reference_inbox(graph, question, outputs, a)
        if all(p in got for p in graph.parents(a)):
            return a
    return None


def reference_final(graph, question, outputs) -> str:
    sinks = [a for a in range(graph.n_agents) if not any(e.src == a for e in graph.edges)]
    spoken = [a for a in sinks if a in outputs]
    if len(spoken) == 1:
        return outputs[spoken[0]]
    if spoken:
        return "\n\n".join(f"[agent {a}] {outputs[a]}" for a in spoken)
    decided = [a for a in graph.topo_order if a in outputs]
    return outputs[decided[-1]] if decided else question


def drive(graph: MASGraph, question: str, agent: Agent):
    """Run a trajectory with scripted agents; check every step against the reference."""
    state = graph.start(question)
    inboxes: dict[int, str] = {}
    while True:
        nxt = state.next_runnable()
        assert nxt == reference_next(graph, question, state.outputs)
        if nxt is None:
            break
        inbox = state.user_content(nxt)
        assert inbox == reference_user_content(graph, question, state.outputs, nxt)
        assert state.messages(nxt) == [{"role": "system", "content": graph.agents[nxt].system_prompt},
                                       {"role": "user", "content": inbox}]
        inboxes[nxt] = inbox
        before = (dict(state.outputs), {a: dict(b) for a, b in state.inbox.items()})
        new = state.decide(nxt, agent(nxt, inbox))
        assert (state.outputs, state.inbox) == before          # decide never mutates the old state
        state = new
    assert state.is_terminal
    assert state.final_answer() == reference_final(graph, question, state.outputs)
    replay = graph.replay(question, list(state.outputs.items()))
    assert replay.outputs == state.outputs and replay.inbox == state.inbox
    return state, inboxes


def echo(a: int, inbox: str) -> str:
    return f"out{a}"


# --------------------------------------------------------------------------- topological order


@pytest.mark.parametrize("edges,n,order", [
    ([[-1, 1], [-1, 2], [2, 0], [1, 0]], 3, (1, 2, 0)),
    ([[-1, 3], [3, 1], [3, 2], [1, 0], [2, 0]], 4, (3, 1, 2, 0)),
    ([[0, 3], [1, 2]], 4, (0, 1, 2, 3)),        # a FIFO queue would give 0, 1, 3, 2
    ([[-1, 2], [2, 0], [0, 1]], 3, (2, 0, 1)),
    ([[-1, 0]], 3, (0, 1, 2)),                  # agents with no edges at all still get an order
])
def test_topological_order_is_min_heap_kahn_ignoring_question_edges(edges, n, order):
    assert make_graph(edges, n).topo_order == order


def test_parents_and_children_sorted():
    g = make_graph([[2, 3], [-1, 3], [0, 3], [1, 3], [-1, 0], [0, 2], [0, 1]])
    assert g.parents(3) == (-1, 0, 1, 2)
    assert g.children(0) == (1, 2, 3)
    assert g.children(QUESTION) == (0, 3)
    assert g.sinks == (3,)


# --------------------------------------------------------------------------- inbox, runnable, terminal


def test_inbox_question_first_then_parent_index_blank_line_joined():
    g = make_graph([[2, 3], [-1, 3], [0, 3], [-1, 0], [-1, 2], [-1, 1]], 4)
    state = g.start("  Q?  ")
    assert not state.is_runnable(3)
    state = state.decide(2, "two\n")
    assert not state.is_runnable(3)                    # parent 0 has not delivered yet
    state = state.decide(0, " zero")
    assert state.user_content(3) == "Q?  \n\n zero\n\ntwo"
    assert state.is_runnable(3)


def test_runnable_needs_every_parent_and_no_parents_means_runnable():
    g = make_graph([[-1, 1], [0, 2], [1, 2]], 3)
    state = g.start("q")
    assert state.is_runnable(0) and state.is_runnable(1) and not state.is_runnable(2)
    assert state.user_content(0) == ""               # no parents: runnable, empty inbox
    state = state.decide(0, "a")
    assert not state.is_runnable(2) and state.next_runnable() == 1
    state = state.decide(1, "b")
    assert state.next_runnable() == 2 and not state.is_runnable(0)
    state = state.decide(2, "c")
    assert state.is_terminal and state.next_runnable() is None
    with pytest.raises(ValueError):
        state.decide(2, "again")


def test_conditions_skip_agents_and_shorten_trajectories():
    g = make_graph([[-1, 0], [0, 1, "contains:go on"], [0, 2, "not_contains:go on"], [1, 3], [2, 3]], 4)
    state, inboxes = drive(g, "q", lambda a, inbox: "GO ON" if a == 0 else f"out{a}")
    assert list(state.outputs) == [0, 1]              # 2 skipped, so 3 never gets both parents
    state, _ = drive(g, "q", lambda a, inbox: "stop" if a == 0 else f"out{a}")
    assert list(state.outputs) == [0, 2]


@pytest.mark.parametrize("condition,text,fires", [
    (None, "anything", True), ("", "x", True), ("always", "x", True),
    ("contains:Verdict", "the VERDICT is", True), ("contains:verdict", "nothing", False),
    ("not_contains:Stop", "please STOP", False), ("not_contains:stop", "go", True),
    ("regex:\\d+", "abc 12", True), ("regex:Yes", "yes", False), ("regex:(?i)Yes", "yes", True),
    ("not_regex:^\\s*$", "  ", False), ("not_regex:^\\s*$", "text", True),
])
def test_conditions(condition, text, fires):
    assert parse_edge_rule(condition, "here").fires(text) is fires


def test_the_question_reaches_every_child_of_the_root_and_its_edges_take_no_condition():
    g = make_graph([[-1, 0], [-1, 1], [0, 1, "contains:math"]], 2)
    state = g.start("poetry")
    assert state.user_content(0) == "poetry" and state.inbox[1] == {QUESTION: "poetry"}
    for cond in ("contains:math", "regex:x"):
        with pytest.raises(ConfigError, match=r"edge \[-1, 1\]: a question edge .* cannot have a condition"):
            make_graph([[-1, 0], [-1, 1, cond]], 2)
    assert make_graph([[-1, 0, "always"], [-1, 1, ""]], 2).start("q").inbox[1] == {QUESTION: "q"}


# --------------------------------------------------------------------------- final answers


def test_final_answer_one_sink():
    g = make_graph([[-1, 0], [0, 1]])
    state, _ = drive(g, "q", echo)
    assert state.final_answer() == "out1"


def test_final_answer_several_sinks_in_sink_order():
    g = make_graph([[-1, 2], [2, 1], [2, 0]])
    state, _ = drive(g, "q", echo)
    assert g.sinks == (0, 1)
    assert state.final_answer() == "[agent 0] out0\n\n[agent 1] out1"


def test_final_answer_one_of_several_sinks_spoke():
    g = make_graph([[-1, 2], [2, 1, "contains:left"], [2, 0, "contains:right"]])
    state, _ = drive(g, "q", lambda a, inbox: "go right" if a == 2 else f"out{a}")
    assert state.final_answer() == "out0"


def test_final_answer_no_sink_output_uses_last_agent_in_topological_order():
    # topological order 2, 0, 1: the last producing agent is 0, though 2 has the larger index
    g = make_graph([[-1, 2], [2, 0], [0, 1, "contains:go"]])
    state, _ = drive(g, "q", lambda a, inbox: "stop here" if a == 0 else f"out{a}")
    assert list(state.outputs) == [2, 0]
    assert state.final_answer() == "stop here"


def test_final_answer_nothing_produced_is_the_question():
    # Question edges are unconditional, so a start state always has a runnable agent; only a state
    # with nothing decided yet has no output to answer with.
    state = make_graph([[-1, 0]]).start("the question")
    assert not state.is_terminal and state.final_answer() == "the question"


# --------------------------------------------------------------------------- incremental = replay


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_random_trajectories_match_replay_and_reference(path):
    graph = load_mas_config(path)
    rng = random.Random(path.stem)
    vocabulary = ["VERDICT: CORRECT", "VERDICT: INCORRECT", "VERDICT: AGREE", "VERDICT: DISAGREE",
                  "Answer: 7", "Final Answer: B", "", "  padded  "]
    for trial in range(6):
        state, inboxes = drive(graph, f"question {trial}", lambda a, inbox: rng.choice(vocabulary) + f" #{a}")
        assert list(state.outputs) == [a for a in graph.topo_order if a in state.outputs]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_config_runs_to_the_end(path):
    graph = load_mas_config(path)
    state, inboxes = drive(graph, "What is 6 * 7?", echo)
    assert state.outputs, f"{path.name}: no agent ran"
    for a, inbox in inboxes.items():
        if QUESTION in graph.parents(a):
            assert inbox.startswith("What is 6 * 7?")


# --------------------------------------------------------------------------- the conditional shipped configs


def refine_agent(verdict: str) -> Agent:
    texts = {0: "Facts: 6 groups of 7.", 1: "1. Multiply 6 by 7.", 2: "6 * 7 = 48\nAnswer: 48",
             3: verdict, 4: "Fixed: 6 * 7 = 42\nAnswer: 42"}
    return lambda a, inbox: texts[a]


def test_gsm8k_refine_accepted_skips_the_refiner():
    graph = load_mas_config(CONFIGS / "gsm8k_refine.yaml")
    state, inboxes = drive(graph, "Q", refine_agent("VERDICT: CORRECT\nAnswer: 48"))
    assert list(state.outputs) == [0, 1, 2, 3]
    assert state.final_answer() == "VERDICT: CORRECT\nAnswer: 48"
    assert inboxes[3] == "Q\n\n6 * 7 = 48\nAnswer: 48"
    assert inboxes[1] == "Q\n\nFacts: 6 groups of 7."
    assert inboxes[2] == "1. Multiply 6 by 7."


def test_gsm8k_refine_rejected_runs_the_refiner():
    graph = load_mas_config(CONFIGS / "gsm8k_refine.yaml")
    critique = "VERDICT: INCORRECT\nThe product 6 * 7 is wrong."
    state, inboxes = drive(graph, "Q", refine_agent(critique))
    assert list(state.outputs) == [0, 1, 2, 3, 4]
    assert inboxes[4] == f"Q\n\n6 * 7 = 48\nAnswer: 48\n\n{critique}"   # question, draft, critique
    assert state.final_answer() == "Fixed: 6 * 7 = 42\nAnswer: 42"


def dylan_agent(verdict: str) -> Agent:
    texts = {0: "A: 42", 1: "B: 40", 2: "C: 42", 3: verdict, 4: "RA: 42", 5: "RB: 42", 6: "RC: 42",
             7: "Answer: 42"}
    return lambda a, inbox: texts[a]


def test_gsm8k_dylan_agreement_stops_after_the_judge():
    graph = load_mas_config(CONFIGS / "gsm8k_dylan.yaml")
    state, inboxes = drive(graph, "Q", dylan_agent("VERDICT: AGREE\nAnswer: 42"))
    assert list(state.outputs) == [0, 1, 2, 3]
    assert inboxes[3] == "Q\n\nA: 42\n\nB: 40\n\nC: 42"
    assert state.final_answer() == "VERDICT: AGREE\nAnswer: 42"
    assert state.is_terminal and not any(state.is_runnable(a) for a in (4, 5, 6, 7))


def test_gsm8k_dylan_disagreement_runs_the_refinement_round():
    graph = load_mas_config(CONFIGS / "gsm8k_dylan.yaml")
    verdict = "VERDICT: DISAGREE\nSolver B miscounted."
    state, inboxes = drive(graph, "Q", dylan_agent(verdict))
    assert list(state.outputs) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert inboxes[4] == f"Q\n\nA: 42\n\n{verdict}"       # question, own draft, critique
    assert inboxes[5] == f"Q\n\nB: 40\n\n{verdict}"
    assert inboxes[7] == "Q\n\nRA: 42\n\nRB: 42\n\nRC: 42"
    assert state.final_answer() == "Answer: 42"


def test_dylan_gate_is_the_originals_colon_pattern():
    graph = load_mas_config(CONFIGS / "gsm8k_dylan.yaml")
    gate = next(e for e in graph.edges if (e.src, e.dst) == (3, 4)).condition
    assert not gate.fires("**VERDICT:** DISAGREE")   # (?i)verdict:\s*disagree: markdown in between stops it
    assert gate.fires("verdict: disagree") and gate.fires("VERDICT:DISAGREE")
    assert not gate.fires("VERDICT: AGREE\nAnswer: 3")


# --------------------------------------------------------------------------- validation errors


@pytest.mark.parametrize("config,expected", [
    ({"agents": [{"name": "A"}], "edges": [[0, 5]]}, "edge [0, 5]: target 5 is outside 0..0"),
    ({"agents": [{"name": "A"}], "edges": [[0, -1]]}, "edge [0, -1]: target -1 is outside 0..0"),
    ({"agents": [{"name": "A"}], "edges": [[-2, 0]]}, "edge [-2, 0]: source -2 is outside -1..0"),
    ({"agents": [{"name": "A"}], "edges": [[3, 0]]}, "edge [3, 0]: source 3 is outside -1..0"),
    ({"agents": [{"name": "A"}], "edges": [[-1, 0, "startswith:x"]]},
     "edge [-1, 0]: unknown condition 'startswith'"),
    ({"agents": [{"name": "A"}], "edges": [[-1, 0, "contains"]]}, "edge [-1, 0]: condition 'contains' is missing ':'"),
    ({"agents": [{"name": "A"}], "edges": [[-1, 0, "regex:(unclosed"]]}, "edge [-1, 0]: invalid regex '(unclosed'"),
    ({"agents": [{"name": "A"}], "edges": [[-1, 0, 7]]}, "edge [-1, 0]: condition must be a string"),
    ({"agents": [{"name": "A"}, {"name": "B"}], "edges": [[0, 1], [1, 0]]}, "cycle among agents 0 (A), 1 (B)"),
    ({"agents": [{"name": "A"}], "edges": [[0, 0]]}, "cycle among agents 0 (A)"),
    ({"agents": [{"name": "A"}], "edges": [[-1, 0], [-1, 0, "contains:x"]]}, "edge [-1, 0]: duplicate edge"),
    ({"agents": [], "edges": []}, "'agents' is empty"),
    ({"edges": [[-1, 0]]}, "'agents' is empty or missing"),
    ({"agents": [{"system_prompt": "x"}]}, "agent 0: missing 'name'"),
    ({"agents": [{"name": "A", "max_new_tokens": 0}]}, "agent 0 (A): 'max_new_tokens' must be an integer in 1..131072, got 0"),
    ({"agents": [{"name": "A"}], "edges": [[-1, "0"]]}, "src and dst must be integers"),
    ({"agents": [{"name": "A"}], "edges": [[-1]]}, "expected [src, dst] or [src, dst, condition]"),
])
def test_validation_errors_are_one_line_naming_the_edge_or_agent(config, expected, tmp_path):
    import yaml

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as err:
        load_mas_config(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: ") and expected in msg and "\n" not in msg
    assert isinstance(err.value, MasprmError)            # the CLIs turn it into one line + exit 2


def test_mapping_edges_and_defaults():
    g = MASGraph.from_dict({"agents": [{"name": "A"}, {"name": "B", "max_new_tokens": 64}],
                            "edges": [{"src": -1, "dst": 0}, {"src": 0, "dst": 1, "condition": "contains:ok"}]})
    assert [(e.src, e.dst, str(e.condition)) for e in g.edges] == [(-1, 0, "always"), (0, 1, "contains:ok")]
    assert [a.max_new_tokens for a in g.agents] == [512, 64]


def test_missing_and_unparsable_config_files(tmp_path):
    with pytest.raises(ConfigError, match="MAS config not found"):
        load_mas_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML") as err:
        load_mas_config(bad)
    assert "\n" not in str(err.value)


def test_routing_state_is_reusable_across_branches():
    # a search tree expands one state into several children; siblings must not see each other
    g = make_graph([[-1, 0], [0, 1], [-1, 1]])
    root = g.start("q").decide(0, "shared")
    left, right = root.decide(1, "left"), root.decide(1, "right")
    assert left.final_answer() == "left" and right.final_answer() == "right"
    assert root.next_runnable() == 1 and 1 not in root.outputs
    assert isinstance(left, RoutingState)
