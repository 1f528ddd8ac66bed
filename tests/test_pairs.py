"""Stage 2 core (masprm.labels.mining): hand-built trees with hand-computed records and pairs."""

from __future__ import annotations

import json

import re

import pytest

from masprm.graph import MASGraph
from masprm.labels.mining import (Options, Preprocessor, TreeError, parse_tree, ppm_pairs, ppm_texts,
                          prm_records, Counts, split_sizes)
from masprm.search.node import Node, backup, node_to_json
from masprm.state_text import full_state_text, join_steps, local_state_text

from helpers_trees import DYLAN, GSM8K, Q, SINGLE, dylan_tree, gsm8k_tree, leaf, node, root, write_trees

# --------------------------------------------------------------------------- configs and tree builders

def fan_tree(values, texts=None, root_q=0.0):
    """A single-agent tree: the root's terminal children carry the given values."""
    texts = texts or [f"answer {i}" for i in range(len(values))]
    return root(root_q, *(leaf(0, t, v) for t, v in zip(texts, values)))


def pairs_of(tree_json, config=SINGLE, *, target_nodes=2, view="full", pos=4, neg=4, max_pairs=8):
    graph = MASGraph.from_dict(config) if view == "local" else None
    tree = parse_tree(tree_json, "t.json", graph)
    return ppm_pairs(tree, target_nodes=target_nodes, view=view, pos_topk=pos, neg_topk=neg, max_pairs=max_pairs)


def prm_of(tree_json, config=GSM8K, *, target_nodes=5, view="full"):
    graph = MASGraph.from_dict(config) if view == "local" else None
    counts = Counts()
    recs = prm_records(parse_tree(tree_json, "t.json", graph), target_nodes, view, counts)
    return recs, counts


def chosen_rejected(pairs):
    return [(p["chosen_actions"][-1], p["rejected_actions"][-1]) for p in pairs]


# --------------------------------------------------------------------------- PRM samples


def test_fixed_depth_full_view_records_and_counts():
    recs, counts = prm_of(gsm8k_tree())
    assert recs == [
        {"prompt": Q, "completions": ["read", "plan A", "solve A", "answer: 4"], "labels": [0.2, 0.5, 0.5, 1.0]},
        {"prompt": Q, "completions": ["read", "plan A", "solve A", "answer: 5"], "labels": [0.2, 0.5, 0.5, -1.0]},
        {"prompt": Q, "completions": ["read", "plan B", "solve B", "answer: 7"], "labels": [0.2, -1.0, -1.0, -1.0]},
    ]
    assert (counts.candidate_paths, counts.r_pos, counts.r_neg) == (3, 1, 2)


def test_fixed_depth_local_view_prompts_are_the_inboxes():
    recs, _ = prm_of(gsm8k_tree(), view="local")
    first_path = [(r["prompt"], r["completions"], r["labels"], r["meta"]) for r in recs[:4]]
    meta = lambda a, i: {"agent_idx": a, "step_index": i, "target_nodes": 5, "view": "local"}  # noqa: E731
    assert first_path == [
        (Q, ["read"], [0.2], meta(0, 0)),                      # Reader: the question
        (Q + "\n\nread", ["plan A"], [0.5], meta(1, 1)),       # Planner: question + Reader, by parent index
        ("plan A", ["solve A"], [0.5], meta(2, 2)),            # Solver: the Planner only
        (Q + "\n\nsolve A", ["answer: 4"], [1.0], meta(3, 3)),  # Verifier: question + Solver
    ]
    assert len(recs) == 12  # one record per step of each of the 3 paths (dedupe happens later)
    assert recs[9]["prompt"] == Q + "\n\nread" and recs[9]["completions"] == ["plan B"]


def test_local_view_routes_the_stripped_question():
    # The original's local records route the root text stripped: an inbox is the parents' texts joined by
    # a blank line, question first, with no whitespace around the question left over.
    question = "  What is 2 + 2?\n"
    tree = root(0.2, node(0, "read", 0.2, node(1, "plan A", 0.5, node(2, "solve A", 0.5,
                                                                    leaf(3, "answer: 4", 1.0)))),
                question=question)
    recs, _ = prm_of(tree, view="local")
    assert [(r["prompt"], r["completions"]) for r in recs] == [
        ("What is 2 + 2?", ["read"]),
        ("What is 2 + 2?\n\nread", ["plan A"]),        # unstripped: "  What is 2 + 2?\n\n\nread"
        ("plan A", ["solve A"]),
        ("What is 2 + 2?\n\nsolve A", ["answer: 4"]),
    ]


def test_paths_need_terminal_pm1_leaf_text_and_values():
    t = gsm8k_tree()
    solve_a = t["children"][0]["children"][0]["children"][0]
    solve_a["children"][0]["q_mean"] = 0.999            # not a graded ±1 leaf
    solve_a["children"][1]["is_terminal"] = False        # not terminal
    t["children"][0]["children"][1]["node_text"] = "   "  # an empty step on the third path
    recs, counts = prm_of(t)
    assert recs == [] and counts.candidate_paths == 3 and counts.r_pos + counts.r_neg == 0


def test_value_falls_back_to_q_sum_over_visits():
    t = gsm8k_tree()
    del t["children"][0]["q_mean"]
    t["children"][0].update(q_sum=3.0, visits=6)
    recs, _ = prm_of(t)
    assert recs[0]["labels"][0] == 0.5


def test_variable_depth_covers_both_branch_lengths():
    recs, counts = prm_of(dylan_tree(), DYLAN, target_nodes=0)
    assert [r["completions"] for r in recs] == [
        ["A says 3", "B says 4", "VERDICT: AGREE answer 3"],
        ["A says 3", "B says 4", "VERDICT: DISAGREE", "refined 4", "final 4"],
        ["A says 3", "B says 4", "VERDICT: DISAGREE", "refined 4", "final 3"],
    ]
    assert [r["labels"][-1] for r in recs] == [-1.0, 1.0, -1.0]
    assert (counts.candidate_paths, counts.r_pos, counts.r_neg) == (3, 1, 2)
    # A fixed depth of 5 nodes misses the short branch and cuts the long one before its leaf.
    fixed, fixed_counts = prm_of(dylan_tree(), DYLAN, target_nodes=5)
    assert fixed == [] and fixed_counts.candidate_paths == 1


def test_variable_depth_local_view_routes_conditional_edges():
    recs, _ = prm_of(dylan_tree(), DYLAN, target_nodes=0, view="local")
    by_step = {(r["meta"]["agent_idx"], r["completions"][0]): r["prompt"] for r in recs}
    assert by_step == {
        (0, "A says 3"): Q,
        (1, "B says 4"): Q,
        (2, "VERDICT: AGREE answer 3"): "A says 3\n\nB says 4",
        (2, "VERDICT: DISAGREE"): "A says 3\n\nB says 4",
        (3, "refined 4"): Q + "\n\nVERDICT: DISAGREE",   # the gated edge fired
        (4, "final 4"): "refined 4",
        (4, "final 3"): "refined 4",
    }


def test_local_view_leaves_out_only_the_subtree_that_does_not_follow_the_config(tmp_path):
    t = dylan_tree()
    agree = t["children"][0]["children"][0]["children"][0]
    agree["is_terminal"] = False
    agree["children"] = [leaf(3, "refined anyway", 1.0)]  # the refiner cannot run after AGREE
    tree = parse_tree(t, "t.json", MASGraph.from_dict(DYLAN))
    assert len(tree.off_config) == 1 and re.search(r"t.json: root/0/0/0/0: .*agent 3 .*no agent", tree.off_config[0])
    # The DISAGREE branch still gives its records and pairs; only the AGREE path is gone.
    recs = prm_records(tree, 0, "local", Counts())
    assert {r["completions"][0] for r in recs} == {"A says 3", "B says 4", "VERDICT: DISAGREE", "refined 4",
                                                  "final 4", "final 3"}
    bad = gsm8k_tree()
    bad["children"][0]["children"][1]["action_text"] = "plan B"  # no [agent i]: that branch only
    tree = parse_tree(bad, "t.json", MASGraph.from_dict(GSM8K))
    assert "root/0/1: action_text does not start with '[agent i]'" in tree.off_config[0]
    assert len(prm_records(tree, 5, "local", Counts())) == 8  # the two plan-A paths, 4 steps each
    assert parse_tree(bad, "t.json").off_config == []  # the full view does not need agent indices
    # Counted and named in the run's summary.
    prm, _, prep = run_all(write_trees(tmp_path, [bad, gsm8k_tree()]), view="local")
    assert prep.counts.off_config == 1 and prep.counts.trees == 2 and prep.counts.malformed == 0
    assert "left out 1 subtree(s)" in prep.off_config_summary() and "0.json: root/0/1" in prep.off_config_summary()


def test_variable_depth_meta_target_nodes_is_null():
    local = pairs_of(dylan_tree(), DYLAN, target_nodes=0, view="local")
    assert local and all(p["meta"]["target_nodes"] is None for p in local)
    recs, _ = prm_of(dylan_tree(), DYLAN, target_nodes=0, view="local")
    assert recs and all(r["meta"]["target_nodes"] is None for r in recs)
    assert pairs_of(gsm8k_tree(), GSM8K, target_nodes=5)[0]["meta"]["target_nodes"] == 5


@pytest.mark.parametrize("data, message", [
    ([1, 2], "must be a JSON object"),
    ({"children": []}, "no 'node_text'"),
    ({"node_text": Q, "children": {"a": 1}}, "'children' must be a list"),
    ({"node_text": Q, "children": [3]}, "root/0: a node must be a JSON object"),
    ({"node_text": Q, "q_mean": "high"}, "'q_mean' must be a number"),
])
def test_malformed_trees_say_where(data, message):
    with pytest.raises(TreeError, match=message):
        parse_tree(data, "bad.json")


# --------------------------------------------------------------------------- PPM pairs


def test_fixed_depth_pairs_full_view():
    pairs = pairs_of(gsm8k_tree(), target_nodes=5)
    assert pairs == [
        {"prompt": Q, "chosen_actions": ["read", "plan A"], "rejected_actions": ["read", "plan B"],
         "meta": {"step_index": 1, "shared_prefix_len": 1, "target_nodes": 5, "parent_visits": 6,
                  "pos_q": 0.5, "neg_q": -1.0, "q_gap": 1.5, "final_step_only_terminal": False}},
        {"prompt": Q, "chosen_actions": ["read", "plan A", "solve A", "answer: 4"],
         "rejected_actions": ["read", "plan A", "solve A", "answer: 5"],
         "meta": {"step_index": 3, "shared_prefix_len": 3, "target_nodes": 5, "parent_visits": 1,
                  "pos_q": 1.0, "neg_q": -1.0, "q_gap": 2.0, "final_step_only_terminal": True}},
    ]
    # N = 3: depth 1 is the final step and has no terminal child; deeper prefixes are never used.
    assert pairs_of(gsm8k_tree(), target_nodes=3) == []


def test_fixed_depth_pairs_local_view():
    pairs = pairs_of(gsm8k_tree(), GSM8K, target_nodes=5, view="local")
    assert [(p["prompt"], p["chosen_actions"], p["rejected_actions"], p["meta"]["agent_idx"],
             p["meta"]["view"]) for p in pairs] == [
        (Q + "\n\nread", ["plan A"], ["plan B"], 1, "local"),
        (Q + "\n\nsolve A", ["answer: 4"], ["answer: 5"], 3, "local"),
    ]


def test_final_step_counts_only_terminal_children():
    # Depth N-2 = 0 is the final step: the better but unfinished child cannot be a positive.
    t = fan_tree([-1.0, 0.0, 1.0])
    t["children"][2]["is_terminal"] = False
    assert chosen_rejected(pairs_of(t)) == [("answer 1", "answer 0")]
    # With N = 3 depth 0 is not final, so all three compete.
    assert chosen_rejected(pairs_of(t, target_nodes=3)) == [("answer 2", "answer 0"), ("answer 1", "answer 0")]


def test_variable_depth_pairs_mixed_and_final_prefixes():
    pairs = pairs_of(dylan_tree(), DYLAN, target_nodes=0)
    assert [(p["chosen_actions"], p["rejected_actions"], p["meta"]["final_step_only_terminal"])
            for p in pairs] == [
        (["A says 3", "B says 4", "VERDICT: DISAGREE"], ["A says 3", "B says 4", "VERDICT: AGREE answer 3"], False),
        (["A says 3", "B says 4", "VERDICT: DISAGREE", "refined 4", "final 4"],
         ["A says 3", "B says 4", "VERDICT: DISAGREE", "refined 4", "final 3"], True),
    ]
    assert pairs[0]["meta"]["target_nodes"] is None  # variable depth: null, as the original
    local = pairs_of(dylan_tree(), DYLAN, target_nodes=0, view="local")
    assert [(p["prompt"], p["meta"]["agent_idx"]) for p in local] == [("A says 3\n\nB says 4", 2), ("refined 4", 4)]


@pytest.mark.parametrize("n, expected", [(2, (1, 1)), (3, (2, 1)), (5, (3, 2)), (9, (4, 4)), (1, (1, 1))])
def test_split_sizes(n, expected):
    assert split_sizes(n, pos_topk=4, neg_topk=4) == expected


def test_two_three_and_five_candidates():
    assert chosen_rejected(pairs_of(fan_tree([-1.0, 1.0]))) == [("answer 1", "answer 0")]
    assert chosen_rejected(pairs_of(fan_tree([0.0, 1.0, -1.0]))) == [("answer 1", "answer 2"), ("answer 0", "answer 2")]
    five = fan_tree([0.5, -1.0, 1.0, -0.5, 0.0], texts=["d", "a", "e", "b", "c"])
    # k_neg = 2 (a, b), k_pos = 3 (e, d, c): positives high to low, negatives low to high.
    assert chosen_rejected(pairs_of(five)) == [("e", "a"), ("e", "b"), ("d", "a"), ("d", "b"), ("c", "a"), ("c", "b")]
    assert chosen_rejected(pairs_of(five, pos=1, neg=1)) == [("e", "a")]
    assert chosen_rejected(pairs_of(five, pos=2, neg=4)) == [("e", "a"), ("e", "b"), ("d", "a"), ("d", "b")]


def test_duplicate_texts_keep_the_higher_value():
    t = fan_tree([-1.0, 0.0, 0.5], texts=["a  b", "c", " a b\n"])
    (pair,) = pairs_of(t)
    assert (pair["chosen_actions"], pair["rejected_actions"]) == (["a b"], ["c"])
    assert (pair["meta"]["pos_q"], pair["meta"]["neg_q"]) == (0.5, 0.0)
    assert pairs_of(fan_tree([1.0, -1.0], texts=["same", " same "])) == []  # one unique text: no pair


def test_pairs_need_a_strictly_better_positive():
    assert pairs_of(fan_tree([0.3, 0.3])) == []
    assert pairs_of(fan_tree([0.3, 0.3 + 1e-12])) == []
    assert chosen_rejected(pairs_of(fan_tree([0.3, 0.3, -1.0]))) == [("answer 1", "answer 2"), ("answer 0", "answer 2")]


def test_per_tree_cap_spans_prefixes():
    t = root(0.0, node(0, "s1", 0.0, leaf(1, "x", 1.0), leaf(1, "y", -1.0)),
             node(0, "s2", -1.0, leaf(1, "z", -1.0)))
    two = {"agents": [{"name": "a"}, {"name": "b"}], "edges": [[-1, 0], [0, 1]]}
    assert [(p["chosen_actions"], p["rejected_actions"]) for p in pairs_of(t, two, target_nodes=3)] == [
        (["s1"], ["s2"]), (["s1", "x"], ["s1", "y"])]
    assert [(p["chosen_actions"], p["rejected_actions"]) for p in pairs_of(t, two, target_nodes=3, max_pairs=1)] == [
        (["s1"], ["s2"])]


def test_ppm_texts_use_the_last_differing_step():
    rec = {"prompt": "Q", "chosen_actions": ["a", "b"], "rejected_actions": ["a", "c"]}
    assert ppm_texts(rec) == ("Qa</step>b</step>", "Qa</step>c</step>")
    assert ppm_texts(rec, sep="<s>") == ("Qa<s>b<s>", "Qa<s>c<s>")
    early = {"prompt": "Q", "chosen_actions": ["a", "b", "x"], "rejected_actions": ["c", "b", "x"]}
    assert ppm_texts(early) == ("Qa</step>", "Qc</step>")
    with pytest.raises(ValueError, match="identical"):
        ppm_texts({"prompt": "Q", "chosen_actions": ["a"], "rejected_actions": ["a"]})
    with pytest.raises(ValueError, match="steps"):
        ppm_texts({"prompt": "Q", "chosen_actions": ["a"], "rejected_actions": ["a", "b"]})


# --------------------------------------------------------------------------- many trees: windows and dedupe


def run_all(paths, config=GSM8K, **options):
    opts = Options(**options)
    prep = Preprocessor(opts, MASGraph.from_dict(config) if opts.view == "local" else None)
    prm, ppm = [], []
    for p in paths:
        a, b = prep.process_file(p)
        prm += a
        ppm += b
    return prm, ppm, prep


def test_root_window_edges(tmp_path):
    trees = [gsm8k_tree(q) for q in (0.7, -0.7, 0.7000001, -0.70001, 0.0)]
    trees[-1]["q_mean"] = None
    trees[-1]["visits"] = 0  # no value at all: outside every window
    paths = write_trees(tmp_path, trees)
    prm, ppm, prep = run_all(paths, make_ppm=True, dedupe=False)
    assert len(prm) == 2 * 3 and prep.counts.prm.outside_window == 3
    assert len(ppm) == 2 * 2 and prep.counts.ppm.outside_window == 3
    # The PPM window is the flag's; the PRM window stays [-0.7, 0.7].
    prm, ppm, prep = run_all(paths, make_ppm=True, dedupe=False, ppm_root_window=(0.7, 0.8))
    assert len(prm) == 6 and len(ppm) == 2 * 2 and prep.counts.ppm.outside_window == 3


def test_dedupe_across_trees_keeps_first_and_counts(tmp_path):
    paths = write_trees(tmp_path, [gsm8k_tree(), gsm8k_tree(), fan_tree([1.0, -1.0])])
    prm, ppm, prep = run_all(paths, make_ppm=True)
    c = prep.counts
    assert (len(prm), c.prm.made, c.prm.duplicates, c.prm.kept) == (3, 6, 3, 3)
    assert (len(ppm), c.ppm.made, c.ppm.duplicates, c.ppm.kept) == (3, 5, 2, 3)
    prm, ppm, _ = run_all(paths, make_ppm=True, dedupe=False)
    assert (len(prm), len(ppm)) == (6, 5)
    # Local view: shared upstream steps of different paths are the same sample.
    prm, _, prep = run_all(paths[:1], view="local")
    assert prep.counts.prm.made == 12 and len(prm) == 8


def test_dedupe_key_rounds_labels_to_4_decimals(tmp_path):
    a, b = gsm8k_tree(), gsm8k_tree()
    b["children"][0]["q_mean"] = 0.20001  # rounds to 0.2: the same sample
    c = gsm8k_tree()
    c["children"][0]["q_mean"] = 0.2001   # a different label
    prm, _, _ = run_all(write_trees(tmp_path, [a, b, c]))
    assert [r["labels"][0] for r in prm] == [0.2, 0.2, 0.2, 0.2001, 0.2001, 0.2001]


def test_unreadable_trees_are_counted_and_named(tmp_path):
    paths = write_trees(tmp_path, [gsm8k_tree(), "{not json", "[1, 2]", {"node_text": Q, "children": 5}])
    prm, _, prep = run_all(paths)
    assert len(prm) == 3 and prep.counts.malformed == 3 and prep.counts.trees == 1
    report = prep.malformed_summary()
    assert "1.json: not valid JSON" in report and "2.json" in report and "3.json: root: 'children'" in report


def test_empty_results_say_why(tmp_path):
    _, _, prep = run_all(write_trees(tmp_path, [gsm8k_tree(0.9), gsm8k_tree(-0.95)]), make_ppm=True)
    assert "every tree's root value is outside [-0.7, 0.7]" in prep.why_no_prm()
    assert "outside the window [-0.7, 0.7]" in prep.why_no_ppm()
    _, _, prep = run_all(write_trees(tmp_path / "b", [gsm8k_tree()]), target_nodes=4)
    assert "none of the 2 paths of exactly 4 nodes" in prep.why_no_prm()
    _, _, prep = run_all(write_trees(tmp_path / "c", ["oops"]))
    assert prep.why_no_prm() == "no PRM samples: no tree could be read"


# --------------------------------------------------------------------------- trees as stage 1 writes them


def scripted_tree(config, question, outputs_for, reward):
    """Expand every node with scripted candidates, back up each terminal path once (the tree format of masprm.tree_schema).

    Returns (tree JSON, {path texts: (agent, the inbox that agent saw, state after)}).
    """
    graph = MASGraph.from_dict(config)
    top = Node(graph.start(question))
    seen = {}

    def expand(n):
        if n.is_terminal:
            backup(n.path(), reward(n))
            return
        agent = n.state.next_runnable()
        for text in outputs_for(agent, n.state):
            child = n.add_child(agent, text)
            key = tuple(x.text for x in child.path()[1:])
            seen[key] = (agent, n.state.user_content(agent) or question, child.state)
            expand(child)

    expand(top)
    return json.loads(json.dumps(node_to_json(top))), seen


def dylan_outputs(agent, state):
    return {0: ["x = 3", "x = 4"], 1: ["x = 4"], 2: ["VERDICT: AGREE", "VERDICT: DISAGREE"],
            3: ["refined: 4", "refined: 3"], 4: ["Final: 4"]}[agent]


def test_stage1_shaped_trees_agree_with_routing_and_inference_layout():
    tree, seen = scripted_tree(DYLAN, "Find x.", dylan_outputs,
                               reward=lambda n: 1.0 if "4" in n.state.final_answer() else -1.0)
    for view in ("full", "local"):
        recs, counts = prm_of(tree, DYLAN, target_nodes=0, view=view)
        assert counts.candidate_paths == counts.r_pos + counts.r_neg == 6
        for r in recs:
            if view == "full":
                agent, inbox, state = seen[tuple(r["completions"])]
                # Training text == what the scorer sees at inference for that state.
                assert join_steps(r["prompt"], r["completions"]) == full_state_text(state)
        if view == "local":
            by_prompt = {(r["meta"]["agent_idx"], r["prompt"], r["completions"][0]) for r in recs}
            expected = {(a, inbox, key[-1]) for key, (a, inbox, _) in seen.items()}
            assert by_prompt == expected  # every step of every graded path, with the inbox it saw
            texts = {join_steps(r["prompt"], r["completions"]) for r in recs}
            assert texts == {local_state_text(state, a) for a, _, state in seen.values()}
    pairs = pairs_of(tree, DYLAN, target_nodes=0, view="local")
    assert pairs and all(p["meta"]["pos_q"] > p["meta"]["neg_q"] for p in pairs)
