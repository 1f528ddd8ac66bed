"""Trees, show_tree and tree pictures name agents by their team's names (Reader, Planner, ...), resolved at
display time from the team a tree records; the tree files keep agent indices and stay byte for byte."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers_cli import run_module
from helpers_trees import DYLAN, GSM8K, gsm8k_tree, write_trees

from masprm.identity import file_identity
from masprm.plots.tree_plot import recorded_team_names, tree_png, tree_report, tree_text

SHOW_TREE = "masprm.stages.show_tree"


def checkout(tmp_path, team=GSM8K):
    """A laid-out checkout: configs/gsm8k.yaml and one tree in results/<run>/0.json recording that team by
    its relative path and content, as stage 1 records it."""
    (tmp_path / "configs").mkdir()
    config = tmp_path / "configs" / "gsm8k.yaml"
    config.write_text(yaml.safe_dump(team))
    tree = gsm8k_tree()
    tree["meta"].update(config="configs/gsm8k.yaml", config_identity=file_identity(config))
    [path] = write_trees(tmp_path / "results" / "gsm8k_res_train_m", [tree])
    return path, tree


def test_text_and_report_name_agents_by_the_team_and_by_index_without_one():
    tree = gsm8k_tree()
    names = ["Reader", "Planner", "Solver", "Verifier"]
    text = tree_text(tree, names=names)
    # gsm8k_tree: one Reader node, two Planner nodes, two Solver nodes, three Verifier leaves
    assert [text.count(f"-> {n}") for n in names] == [1, 2, 2, 3] and "agent " not in text
    assert tree_text(tree).count("-> agent 3") == 3
    assert "  step 4 Verifier: answer: 4" in tree_report(tree, k=1, names=names)


def test_the_recorded_team_is_found_from_the_working_folder_or_above_the_tree(tmp_path, monkeypatch):
    path, tree = checkout(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert recorded_team_names(tree, path) == ["Reader", "Planner", "Solver", "Verifier"]
    monkeypatch.chdir(path.parent)   # no configs/ here: found in the folder two levels above the tree
    assert recorded_team_names(tree, path) == ["Reader", "Planner", "Solver", "Verifier"]
    assert recorded_team_names(tree) is None   # no tree file to look above, nothing in the working folder


def test_a_team_edited_since_the_search_does_not_rename_the_agents(tmp_path, monkeypatch):
    path, tree = checkout(tmp_path)
    monkeypatch.chdir(tmp_path)
    edited = dict(GSM8K, agents=[{**a, "name": a["name"].upper()} for a in GSM8K["agents"]])
    (tmp_path / "configs" / "gsm8k.yaml").write_text(yaml.safe_dump(edited))
    assert recorded_team_names(tree, path) is None


def test_show_tree_names_agents_and_leaves_the_tree_file_as_it_was(tmp_path, monkeypatch, capsys):
    path, _ = checkout(tmp_path)
    before = path.read_bytes()
    monkeypatch.chdir(tmp_path)
    code, err, out = run_module(monkeypatch, capsys, SHOW_TREE, [str(path), "--text", "--max_depth", "2"])
    assert code == 0, err
    assert out.count("-> Reader") == 1 and out.count("-> Planner") == 2 and "-> agent" not in out
    code, err, _ = run_module(monkeypatch, capsys, SHOW_TREE, [str(path), "--out", str(tmp_path / "t.png")])
    assert code == 0, err
    assert path.read_bytes() == before


def test_show_tree_takes_a_team_by_mas_config_and_refuses_one_too_small(tmp_path, monkeypatch, capsys):
    path, _ = checkout(tmp_path)
    (tmp_path / "dylan.yaml").write_text(yaml.safe_dump(DYLAN))
    (tmp_path / "two.yaml").write_text(yaml.safe_dump({"agents": [{"name": "A"}, {"name": "B"}],
                                                       "edges": [[-1, 0], [0, 1]]}))
    code, err, out = run_module(monkeypatch, capsys, SHOW_TREE,
                                [str(path), "--text", "--mas_config", str(tmp_path / "dylan.yaml")])
    assert code == 0 and out.count("-> SolverA") == 1 and out.count("-> Refiner") == 3
    code, err, out = run_module(monkeypatch, capsys, SHOW_TREE,
                                [str(path), "--text", "--mas_config", str(tmp_path / "two.yaml")])
    assert code == 2 and len(err) == 1 and out == ""
    assert f"--mas_config {tmp_path / 'two.yaml'} has 2 agents, but the tree runs agent 3" in err[0]


def test_show_tree_without_the_team_shows_indices_and_says_why(tmp_path, monkeypatch, capsys):
    tree = gsm8k_tree()
    tree["meta"].update(config="configs/gone.yaml", config_identity="0" * 16)
    [path] = write_trees(tmp_path, [tree])
    monkeypatch.chdir(tmp_path)
    code, err, out = run_module(monkeypatch, capsys, SHOW_TREE, [str(path), "--text"])
    assert code == 0 and out.count("-> agent 3") == 3
    assert any("agents shown by index" in line and "configs/gone.yaml" in line for line in err)


def test_the_picture_labels_agents_by_name():
    tree = gsm8k_tree()
    by_index = tree_png(tree)
    # names that read like the index labels draw the same picture; the team's names draw another
    assert tree_png(tree, names=["agent 0", "agent 1", "agent 2", "agent 3"]) == by_index
    assert tree_png(tree, names=["Reader", "Planner", "Solver", "Verifier"]) != by_index
