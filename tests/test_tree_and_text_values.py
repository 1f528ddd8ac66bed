"""What a tree or a text read back may hold: one tree reader checks values for every consumer; a string
that cannot be written back as UTF-8 (a lone surrogate) is refused by file:line in every reader."""

from __future__ import annotations

import json

import pytest

from helpers import snapshot
from helpers_cli import run_module


def _tree(**root_changes) -> dict:
    from helpers_trees import gsm8k_tree

    tree = gsm8k_tree()
    tree["children"][0].update(root_changes)
    if tree["children"][0].get("q_mean") == "drop":
        del tree["children"][0]["q_mean"]
    return tree


@pytest.mark.parametrize("change, problem", [
    ({"q_mean": 5.0}, "root/0: 'q_mean' is 5, outside [-1, 1]"),
    ({"q_mean": -1.5}, "root/0: 'q_mean' is -1.5, outside [-1, 1]"),
    ({"q_mean": "drop", "q_sum": 9.0, "visits": 3}, "root/0: 'q_sum / visits' is 3, outside [-1, 1]"),
    ({"visits": -2}, "root/0: 'visits' must be a whole number >= 0, got -2"),
    ({"visits": 1.5}, "root/0: 'visits' must be a whole number >= 0, got 1.5"),
    ({"node_text": ["a", "list"]}, "root/0: 'node_text' must be a string, got list"),
    ({"action_text": 3}, "root/0: 'action_text' must be a string, got int"),
    ({"steps": ["ok", 2]}, "root/0: 'steps' must be a list of strings"),
])
def test_one_tree_reader_checks_values_for_every_consumer(tmp_path, change, problem):
    from masprm.errors import TreeError
    from masprm.tree_schema import check_search_tree, read_tree

    tree = _tree(**change)
    (tmp_path / "0.json").write_text(json.dumps(tree))
    with pytest.raises(TreeError) as stage2:           # stage 2's reader
        read_tree(tmp_path / "0.json", "0.json")
    with pytest.raises(TreeError) as show:             # show_tree's and the plots' check
        check_search_tree(tree, "0.json")
    assert str(stage2.value) == f"0.json: {problem}" and str(show.value) == f"0.json: {problem}"


def test_show_tree_refuses_a_list_as_node_text_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "0.json").write_text(json.dumps(_tree(node_text=["a"])))
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.stages.show_tree", ["0.json", "--text"])
    assert code == 2 and lines == ["show_tree.py: error: 0.json: root/0: 'node_text' must be a string, got list"]
    assert snapshot(tmp_path) == before


def test_the_demo_trees_values_pass(tmp_path):
    """Values at the edges of the range are accepted: +-1, 0 visits, null texts."""
    from masprm.tree_schema import check_search_tree

    check_search_tree(_tree(q_mean=-1.0, visits=0, final_answer=None), "t")
    check_search_tree(_tree(q_mean="drop", q_sum=-3.0, visits=3), "t")


@pytest.mark.parametrize("reader", ["tree", "jsonl", "json", "records"])
def test_a_lone_surrogate_is_refused_naming_file_and_line(tmp_path, reader):
    from masprm.errors import DataError, TreeError
    from masprm.io import iter_jsonl, read_json
    from masprm.train.data import load_records
    from masprm.tree_schema import read_tree_json

    good = '{"prompt": "p", "completions": ["a \\ud83d\\ude00 b"], "labels": [1.0]}'   # a valid pair: an emoji
    bad = '{"prompt": "p", "completions": ["a \\ud800 b"], "labels": [1.0]}'
    if reader == "tree":
        path = tmp_path / "0.json"
        path.write_text('{"visits": 1,\n "node_text": "q \\ud83d\\ude00",\n "children": [],\n'
                        ' "meta": "\\udc00 alone"}')
        with pytest.raises(TreeError, match=r"^0.json:4: a string holds a lone surrogate \(\\udc00\)"):
            read_tree_json(path, "0.json")
        return
    path = tmp_path / ("d.json" if reader == "json" else "d.jsonl")
    path.write_text(f"[{good},\n{bad}]\n" if reader == "json" else f"{good}\n{good}\n{bad}\n")
    line = 2 if reader == "json" else 3
    expected = rf"^{path}:{line}: a string holds a lone surrogate \(\\ud800\), which cannot be written as UTF-8"
    with pytest.raises(DataError, match=expected if reader != "records" else r"lone surrogate"):
        if reader == "json":
            read_json(path)
        elif reader == "jsonl":
            list(iter_jsonl(path))
        else:
            load_records(path, "prm")
