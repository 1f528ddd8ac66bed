"""--labels step_truth (masprm.worlds.step_truth): each message's own verdict from its toy world's step truth, on
hand-built trees whose labels were worked out by hand from the stories; other datasets refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from masprm.labels import LABEL_SCHEMES
from masprm.labels.mining import Options, parse_tree
from masprm.labels.scheme import LabelContext
from masprm.worlds.toy_deep.data import TOY_DEEP
from masprm.worlds.step_truth import StepTruthInput, check_input
from masprm.worlds.toy.task import TOY, generate_split
from masprm.cli import UsageError

from helpers import REPO
from helpers_trees import gsm8k_tree, leaf, node, write_trees
from masprm.tree_schema import tree_node

# toy_deep's first train question: "Ben starts with 4 cakes. He loses 3 cakes. A friend gives him 9 cakes. He
# loses 8 cakes. He gives away 1. Then the number of cakes doubles. ..." -> 4 -3 +9 -8 -1 *2 = 2
DEEP = generate_split("train", TOY_DEEP)[0]
RIGHT = ["Numbers: 4 3 9 8 1", "Plan: 4 -3 +9 -8 -1 *2", "Now 4-3=1.", "Now 1+9=10.", "Now 10-8=2.",
         "Now 2-1=1.", "Now 1*2=2.", "Checked. Answer: 2"]
# The Reader misreads 8 as 7 (wrong), the Planner writes the story's plan from the question (right), and the
# team follows it to the true answer: one wrong message, then seven right ones.
MISREAD = ["Numbers: 4 3 9 7 1", *RIGHT[1:]]
# Op2 slips (1+9=11 is false: wrong); Op3..Op5 do true arithmetic on the wrong total, which is not the story's
# step (11-8=3, not 10-8=2: wrong), and the Verifier repeats the wrong total 4 (wrong): right, right, right,
# then five wrong.
SLIP = [*RIGHT[:3], "Now 1+9=11.", "Now 11-8=3.", "Now 3-1=2.", "Now 2*2=4.", "Checked. Answer: 4"]


def chain(texts, start_agent=0, last_q=1.0):
    """One path of nodes (agent i says texts[i]); the last is a terminal with value last_q."""
    *inner, last = texts
    built = leaf(start_agent + len(inner), last, last_q)
    for i in reversed(range(len(inner))):
        built = node(start_agent + i, inner[i], 0.0, built)
    return built


def tree_of(question, dataset, *children, root_q=0.2):
    return {**tree_node(steps=[], action=None, is_terminal=False, final_answer=None, visits=10, q_sum=root_q * 10,
                        q_mean=root_q, node_text=question, children=children),
            "meta": {"dataset": dataset, "gold": "2"}}


def deep_tree():
    """root -> {right Reader -> right Planner -> Op1 -> {the right rest (+1), Op2's slip (-1)}, misreading Reader
    -> the right rest (+1)}: three graded paths of 8 messages."""
    op1 = node(2, RIGHT[2], 0.0, chain(RIGHT[3:], 3, 1.0), chain(SLIP[3:], 3, -1.0))
    return tree_of(DEEP.question, "toy_deep", node(0, RIGHT[0], 0.0, node(1, RIGHT[1], 0.0, op1)),
                   chain(MISREAD, 0, 1.0))


def labelled(tree_json, world, target_nodes):
    scheme = LABEL_SCHEMES["step_truth"]
    ctx = LabelContext(Options(target_nodes=target_nodes), StepTruthInput(world))
    return scheme.records(parse_tree(tree_json, "t.json"), ctx), ctx


def test_toy_deep_transcripts_get_each_messages_own_verdict():
    recs, ctx = labelled(deep_tree(), "toy_deep", 9)
    got = {tuple(r["completions"]): r["labels"] for r in recs}
    assert got == {tuple(RIGHT): [1.0] * 8,
                   tuple(SLIP): [1.0] * 3 + [-1.0] * 5,
                   tuple(MISREAD): [-1.0] + [1.0] * 7}
    assert all(r["prompt"] == DEEP.question for r in recs)
    # 8 + 3 + 7 right messages, 5 + 1 wrong; the misread path's 7 are right after a wrong message
    assert (ctx.notes["right"], ctx.notes["wrong"], ctx.notes["right_after_error"]) == (18, 6, 7)


def test_toy_world_transcripts_get_the_toy_labellers_verdict():
    # the toy world's first train question: Mia owns 12 shells, loses 4, doubles, doubles -> 32
    problem = generate_split("train", TOY)[0]
    assert problem.answer == 32
    right = ["12 4", "12 -4 *2 *2", "Answer: 32", "Answer: 32"]
    # the Solver guesses 30 (wrong), the Verifier repairs it (right); the Planner drops an operation (wrong:
    # missing_op), whose Solver follows it to 16 (wrong), and the Verifier repeats 16 (wrong: missed)
    guess = [*right[:2], "Answer: 30", "Answer: 32"]
    short = ["12 4", "12 -4 *2", "Answer: 16", "Answer: 16"]
    tree = tree_of(problem.question, "toy", node(0, "12 4", 0.0, node(1, right[1], 0.0, chain(right[2:], 2, 1.0),
                                                                     chain(guess[2:], 2, 1.0)),
                                                node(1, short[1], 0.0, chain(short[2:], 2, -1.0))))
    recs, _ = labelled(tree, "toy", 5)
    assert {tuple(r["completions"]): r["labels"] for r in recs} == {
        tuple(right): [1.0] * 4, tuple(guess): [1.0, 1.0, -1.0, 1.0], tuple(short): [1.0, -1.0, -1.0, -1.0]}


def test_the_records_follow_the_prm_root_window(tmp_path):
    # the root value 0.9 is outside the default [-0.7, 0.7]: nothing from the tree; inside [-1, 1]: its 3 paths
    from masprm.labels.scheme import LabelRunner
    tree = deep_tree()
    tree["q_mean"], tree["q_sum"] = 0.9, 9.0
    [path] = write_trees(tmp_path, [tree])
    closed = LabelRunner(LABEL_SCHEMES["step_truth"], Options(target_nodes=9), StepTruthInput("toy_deep"))
    assert closed.label_file(path) == [] and closed.output.outside_window == 1
    opened = LabelRunner(LABEL_SCHEMES["step_truth"], Options(target_nodes=9, prm_root_window=(-1.0, 1.0)),
                         StepTruthInput("toy_deep"))
    assert len(opened.label_file(path)) == 3


def test_the_world_is_the_trees_recorded_dataset_and_others_are_refused(tmp_path):
    [deep] = write_trees(tmp_path / "a", [deep_tree()])
    assert check_input([deep], deep.parent) == StepTruthInput("toy_deep")
    [gsm] = write_trees(tmp_path / "gsm8k_res_x", [{**gsm8k_tree(), "meta": {"dataset": "gsm8k"}}])
    with pytest.raises(UsageError, match=r"dataset 'gsm8k' \(meta.dataset of .*toy worlds \(toy, toy_deep\)"):
        check_input([gsm], gsm.parent)
    # no meta.dataset: the run folder's name tells
    bare = {k: v for k, v in deep_tree().items() if k != "meta"}
    [named] = write_trees(tmp_path / "toy_deep_res_train_x", [bare])
    assert check_input([named], named.parent) == StepTruthInput("toy_deep")
    [nothing] = write_trees(tmp_path / "elsewhere", [bare])
    with pytest.raises(UsageError, match="no dataset"):
        check_input([nothing], nothing.parent)


def test_a_question_the_world_does_not_know_is_one_line_naming_the_tree():
    tree = tree_of("How many apples?", "toy_deep", chain(RIGHT, 0, 1.0))
    with pytest.raises(UsageError, match=r"tree t.json: the toy_deep step oracle knows no story"):
        labelled(tree, "toy_deep", 9)


def test_stage2_refuses_other_trees_in_one_line_before_writing(tmp_path):
    run = tmp_path / "results" / "gsm8k_res_x"
    write_trees(run, [{**gsm8k_tree(), "meta": {"dataset": "gsm8k"}}])
    out = subprocess.run([sys.executable, str(REPO / "src/train/preprocess_data.py"), "--input", str(run),
                          "--labels", "step_truth"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--labels step_truth" in lines[0] and "'gsm8k'" in lines[0]
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["gsm8k_res_x"]   # nothing written


def test_stage2_writes_the_toy_deep_records(tmp_path):
    run = tmp_path / "results" / "toy_deep_res_train_x"
    write_trees(run, [deep_tree()])
    out = subprocess.run([sys.executable, str(REPO / "src/train/preprocess_data.py"), "--input", str(run),
                          "--labels", "step_truth", "--target-nodes", "9"], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in
            (tmp_path / "results" / "labels_step_truth_toy_deep_res_train_x.jsonl").read_text().splitlines()]
    assert sorted(r["labels"] for r in rows) == sorted([[1.0] * 8, [1.0] * 3 + [-1.0] * 5, [-1.0] + [1.0] * 7])
    assert all(r["meta"]["label_scheme"] == "step_truth" for r in rows)
    assert "right after an earlier wrong message 7" in out.stdout + out.stderr
