"""Worlds as folders, families as recipes: a world's facts come from its own folder (its records, its measured
costs), a lab family is one data file, a bad one is one clear error, and every world's team reaches its report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from masprm.errors import ConfigError
from masprm.lab import command as lab, recipe
from masprm.lab.estimate import world_seconds
from masprm.worlds import WORLDS
from masprm.worlds.runs import WORLD_RUNS

WORLDS_DIR = Path(__file__).resolve().parents[1] / "src" / "masprm" / "worlds"


@pytest.fixture
def recipes_dir(tmp_path, monkeypatch):
    """A recipes folder of the test's own, holding the shipped recipes; read afresh, forgotten after."""
    folder = tmp_path / "recipes"
    shutil.copytree(recipe.RECIPES, folder)
    monkeypatch.setattr(recipe, "RECIPES", folder)
    yield folder
    recipe.recipes_in.cache_clear()


def test_a_world_is_its_folder():
    # every world folder with a world module is registered, under its name, and nothing else is
    folders = sorted(p.parent.name for p in WORLDS_DIR.glob("*/world.py"))
    assert folders == list(WORLDS.names()) == list(WORLD_RUNS.names()) == ["toy", "toy_deep"]
    for name in folders:
        assert WORLD_RUNS[name].folder == WORLDS_DIR / name and WORLDS[name].name == name
        assert world_seconds(name) == WORLD_RUNS[name].costs()["seconds"]   # its costs.yaml, read by the estimate
    assert world_seconds("toy")["sbs_3x5"] == 64.0 and world_seconds("toy_deep")["mcts"] == 273.0
    assert world_seconds("toy_deep")["search_factor_causal_lm"] == 852.5 / 369.0


def test_the_shipped_recipes_are_the_worlds_families():
    found = recipe.recipes()
    assert list(found) == ["toy", "toy_deep", "toy_deep_explore"]
    assert recipe.world_recipe("toy") is found["toy"] and found["toy"].sweep is not None
    assert recipe.world_recipe("toy_deep", "explore") is found["toy_deep_explore"]
    assert recipe.world_recipe("toy", "explore") is None
    assert found["toy_deep"].rows == ("masprm-ppm", "mc-orm", "mc-prm") and found["toy_deep"].sweep is None


def test_adding_a_family_is_one_recipe_file(recipes_dir, capsys):
    (recipes_dir / "toy_small.yaml").write_text(
        "world: toy\nlab: small\nrows: [masprm-ppm, mc-orm, mc-prm]\nbon_aggs: [last]\nbon_objectives: all\n"
        "sweep: none\nbenchmarks: false\ntrain_seeds: [42]\nnotes: [a family of three rows]\n")
    assert lab.main(["--recipe", "toy_small", "--dry_run"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("#   ") and " -> " in line]
    assert len(rows) == 3 and all("training seed 42" in line for line in rows)
    assert "lab: a family of three rows" in out and "--logs_dir logs/toy_small" in out
    assert "stepbench" not in out and "sweep_" not in out
    assert "# then the report: results/toy_small.md" in out


@pytest.mark.parametrize("text, error", [
    ("world: toy\nlab: lab2\nrows: [no-such-row]\nbon_aggs: [last]\nbon_objectives: all\nsweep: none\n",
     "rows: no row 'no-such-row'"),
    ("world: mars\nlab: lab2\nrows: all\nbon_aggs: [last]\nbon_objectives: all\nsweep: none\n", "world: unknown world"),
    ("world: toy\nlab: lab2\nrows: all\nbon_aggs: [mean]\nbon_objectives: all\nsweep: none\n", "bon_aggs must be"),
    ("world: toy\nlab: lab2\nrows: all\nbon_aggs: [last]\nbon_objectives: all\nsweep: none\nseeds: [1]\n",
     "unknown setting(s) seeds"),
    ("world: toy\nlab: lab\nrows: all\nbon_aggs: [last]\nbon_objectives: all\nsweep: none\n", "are both the toy"),
    ("world: toy\nrows: all\n", "no lab"),
    ("- a list\n", "a recipe is a mapping"),
])
def test_a_bad_recipe_is_one_clear_error(recipes_dir, text, error):
    (recipes_dir / "bad.yaml").write_text(text)
    with pytest.raises(ConfigError, match=error.replace("(", r"\(").replace(")", r"\)")):
        recipe.recipes()


def test_a_recipe_runs_on_its_own_world_only():
    with pytest.raises(ConfigError, match="toy_deep_explore runs on the toy_deep world; add --world toy_deep"):
        lab.LabArgs(recipe="toy_deep_explore")
    with pytest.raises(ConfigError, match="--recipe names the family itself"):
        lab.LabArgs(world="toy_deep", recipe="toy_deep_explore", explore=True)
    # the exploratory recipe named is --explore, the same family on the same paths
    named, explore = lab.LabArgs(world="toy_deep", recipe="toy_deep_explore"), lab.LabArgs(world="toy_deep", explore=True)
    assert lab.lab_recipe(named) == lab.lab_recipe(explore) and lab.lab_world(named) == lab.lab_world(explore)


def test_every_worlds_team_reaches_its_report():
    from masprm.lab.report import table_records, world_agents
    from masprm.lab.rows import LAB_SCORERS
    deep = world_agents({"name": "toy_deep"})
    assert deep == ("Reader", "Planner", "Op1", "Op2", "Op3", "Op4", "Op5", "Verifier")
    assert world_agents(None) == world_agents({"name": "toy"}) == ("Reader", "Planner", "Solver", "Verifier")
    row = next(s for s in LAB_SCORERS if (s.scheme, s.objective) == ("mc", "prm")).in_world(WORLD_RUNS["toy_deep"])
    report = {"auc_by_agent": {a: 0.5 + i / 100 for i, a in enumerate(deep)}}
    head, records = table_records([row], {}, None, {"mc": report}, agents=deep)
    assert head[3] == "label AUC R / P / O1 / O2 / O3 / O4 / O5 / V"
    assert records[0]["cells"][head[3]] == "0.50 / 0.51 / 0.52 / 0.53 / 0.54 / 0.55 / 0.56 / 0.57"
    assert table_records([row], {}, None, {})[0][3] == "label AUC R / P / S / V"   # the toy world's, as before


def test_the_readmes_lab_summary_shows_the_worlds_team(tmp_path):
    """The summary block keeps the lab table's label AUC column whatever the team (the report names its agents)."""
    from masprm.published.blocks import lab_summary
    head = "label AUC R / P / O1 / O2 / O3 / O4 / O5 / V"
    cells = {"scorer": "mc+prm", head: "0.50 / 0.51 / 0.52 / 0.53 / 0.54 / 0.55 / 0.56 / 0.57"}
    (tmp_path / "toy_deep_lab.json").write_text(json.dumps({"columns": list(cells), "made_by": {},
                                                            "rows": [{"slug": "mc-prm", "cells": cells, "logs": {}}]}))
    text = lab_summary(tmp_path / "toy_deep_lab.md", tmp_path / "toy_deep_lab_claims.json")
    assert head in text.splitlines()[0] and cells[head] in text


def test_a_bad_recipe_stops_the_command_in_one_line(recipes_dir, monkeypatch, capsys):
    import sys
    (recipes_dir / "bad.yaml").write_text("world: mars\n")
    monkeypatch.setattr(sys, "argv", ["lab.py", "plan"])
    with pytest.raises(SystemExit) as stop:
        lab.cli()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1 and "bad.yaml: no lab" in err
