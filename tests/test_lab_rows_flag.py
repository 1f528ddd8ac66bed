"""`make lab ... --rows NAME ...`: some rows of a family, with what they are measured against and what they need."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import flag
from masprm.errors import ConfigError
from masprm.stages import demo
from masprm.lab import command as lab, plan as lab_plan


@pytest.fixture
def plan(monkeypatch, tmp_path):
    monkeypatch.setattr(lab_plan, "ROOT", tmp_path)   # nothing there: no task is done
    monkeypatch.setattr(demo, "ROOT", tmp_path)

    def plan(**flags):
        tasks, notes, rows, done = lab.plan(lab.LabArgs(**flags))
        return {t.name: t for t in tasks}, notes, rows
    return plan


def test_the_rows_named_come_with_the_masprm_the_orm_and_the_ensemble_active_labels_need(plan):
    everything = plan(rollout_rows=True, train_seeds=[42])[0]
    tasks, notes, rows = plan(rollout_rows=True, train_seeds=[42], rows=["mc_rollouts_active+prm", "shapley-prm"])
    # the active scheme's labels wait for the ensemble row's heads: it is trained (and evaluated) too
    assert [r.name for r in rows] == ["MASPRM", "ORM", "mc+ensemble", "shapley+prm", "mc_rollouts_active+prm"]
    assert "train_mc-ensemble" in tasks["labels_mc_rollouts_active"].after
    assert not any("mc-prm" in name or "traj" in name or "labels_mc_rollouts_uniform" == name for name in tasks)
    # the conditions without a scorer (the single pass, the oracles) run as in the whole family
    assert {n for n in everything if n.startswith("eval_no_scorer")} == {n for n in tasks if n.startswith("eval_no_")}
    assert {"eval_mc-orm_search", "eval_masprm-ppm_search", "eval_shapley-prm_search"} <= set(tasks)
    # the compute-matched sweep measures the MASPRM and the ORM: left out, and the note says so
    assert any(n.startswith("sweep") for n in everything) and not any(n.startswith("sweep") for n in tasks)
    assert "the family's other rows and the compute-matched sweep: --rows ran 5 rows (those it names, the MASPRM, " \
           "the ORM and the rows they need)" in notes   # the report lists it under "not run"
    # every command of the selection is the whole family's, its logs and reports under names of their own (a
    # run of some rows never replaces the family's), and its step benchmark reads its rows only
    own = [x for t in tasks.values() for x in t.cmd if "toy_lab" in x]
    assert own and all("toy_lab_rows" in x for x in own)
    assert all([x.replace("toy_lab_rows", "toy_lab") for x in task.cmd] == everything[name].cmd
               for name, task in tasks.items() if name != "stepbench")
    bench = tasks["stepbench"].cmd
    assert [bench[i + 1].split("=")[0] for i, x in enumerate(bench) if x == "--scorer"] == \
        ["masprm-ppm", "mc-orm", "mc-ensemble", "shapley-prm", "mc_rollouts_active-prm"]
    assert flag(bench, "--out") == ["results/toy_lab_rows_stepbench.json"]


def test_rows_by_slug_or_name_and_none_means_every_row(plan):
    by_name = plan(train_seeds=[42], rows=["mc+traj-min"])[2]
    assert [r.name for r in by_name] == [r.name for r in plan(train_seeds=[42], rows=["mc-traj-min"])[2]] \
        == ["MASPRM", "ORM", "mc+traj-min"]
    assert len(plan(train_seeds=[42])[2]) > 10


def test_an_unknown_row_or_a_rollout_row_without_its_flag_is_one_line_naming_the_flag():
    with pytest.raises(ConfigError, match=r"^rows: no row 'mc\+nope' in the toy world's family; valid: MASPRM, "
                                          r"masprm-ppm, ORM, mc-orm, mc\+prm, mc-prm, ") as err:
        lab.LabArgs(rows=["mc+nope"])
    assert err.value.setting == "rows" and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"^rows: shapley\+prm: label scheme 'shapley' needs fresh policy samples "
                                          r".*\(add --rollout_rows\)$"):
        lab.LabArgs(rows=["shapley+prm"])
    with pytest.raises(ConfigError, match="in the toy_deep world's exploratory family"):
        lab.LabArgs(world="toy_deep", explore=True, rows=["mc+nope"])
    assert lab.LabArgs(rows=["shapley+prm"], rollout_rows=True).rows == ["shapley+prm"]
    with pytest.raises(ConfigError, match="^rows: the pilot runs its primary comparison only"):
        lab.LabArgs(world="toy_deep", pilot=True, rows=["mc+prm"])


def test_a_run_of_some_rows_reports_under_its_own_names(tmp_path):
    out = subprocess.run([sys.executable, "src/lab.py", "--rows", "mc+prm", "--train_seeds", "42", "--dry_run"],
                         capture_output=True, text=True, cwd=Path(__file__).parents[1], check=True).stdout
    assert "# then the report: results/toy_lab_rows.md, results/toy_lab_rows_claims.txt, results/toy_lab_rows.png" \
        in out
    assert "--logs_dir logs/toy_lab_rows " in out and "--logs_dir logs/toy_lab " not in out


def test_a_rollout_row_left_out_gives_its_worlds_stage_2_cost():
    from masprm.lab.rows import LAB_SCORERS, left_out
    from masprm.worlds.runs import WORLD_RUNS
    shapley = next(s for s in LAB_SCORERS if s.scheme == "shapley")
    # the toy world's measured 3,477 CPU s; toy_deep's own 6,842 (masprm/worlds/toy_deep/costs.yaml)
    assert "its stage 2 about 58 CPU minutes per training seed" in left_out(shapley, rollout_rows=False)
    deep = shapley.in_world(WORLD_RUNS["toy_deep"])
    assert "its stage 2 about 114 CPU minutes per training seed" in left_out(deep, rollout_rows=False)
    assert left_out(deep, rollout_rows=True) is None
