"""`make lab-explore WORLD=toy_deep`: the exploratory family of a world beside its pre-registered lab — its own
paths, its seeds, its order (after the lab's report), and the refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers import flag
from masprm.cli import UsageError
from masprm.stages import demo
from masprm.running import commands as command_runner   # test_world_runs' commands() parses a plan
from masprm.lab import command as lab
from masprm.lab.rows import LAB_SCORERS
from masprm.lab.recipe import world_recipe
from masprm.worlds.runs import WORLD_RUNS
from test_world_runs import TOY_PATHS, commands, dry_run, oracle_step, value


def test_the_exploratory_record_has_its_own_logs_and_results_and_shares_the_scorers():
    deep = WORLD_RUNS["toy_deep"]
    explore = lab.lab_world(lab.LabArgs(world="toy_deep", explore=True))
    assert lab.lab_world(lab.LabArgs(world="toy_deep")) == deep
    assert explore.lab_files == {"logs": "logs/toy_deep_explore", "report": "results/toy_deep_explore.md",
                                 "claims": "results/toy_deep_explore_claims.txt", "plot": "results/toy_deep_explore.png",
                                 "stepbench": "results/toy_deep_explore_stepbench.json",
                                 "labelbench": "results/toy_deep_explore_labelbench"}
    # the lab's own paths are unchanged; a row both run is trained once, in the lab's folder
    assert deep.lab_files["logs"] == "logs/toy_deep_lab" and deep.lab_files["report"] == "results/toy_deep_lab.md"
    assert explore.lab_checkpoints == deep.lab_checkpoints == "checkpoints/toy_deep-lab-"
    family = lab.lab_recipe(lab.LabArgs(world="toy_deep", explore=True))
    assert family == world_recipe("toy_deep", "explore") and family.exploratory and not world_recipe("toy_deep").exploratory
    assert explore.preregistration is None and explore.report_record() == {"name": "toy_deep", "test_questions": 423}
    assert family.train_seeds == (42,) and family.search_seeds == (42,)


def test_the_seeds_default_to_the_family_and_a_flag_still_wins():
    assert (lab.LabArgs(world="toy_deep", explore=True).seeds, lab.LabArgs(world="toy_deep", explore=True).train_seeds) \
        == ([42], [42])
    assert (lab.LabArgs(world="toy_deep").seeds, lab.LabArgs(world="toy_deep").train_seeds) == ([14, 24, 42], [42, 7, 99])
    assert lab.LabArgs(world="toy_deep", explore=True, seeds=[14, 42]).seeds == [14, 42]
    assert lab.LabArgs().seeds == list(demo.SEEDS) and lab.LabArgs().train_seeds == [42, 7, 99]


def test_the_exploratory_plan_is_every_row_at_one_seed_in_its_own_folder(tmp_path):
    proc = dry_run(tmp_path, "lab.py", "--world", "toy_deep", "--explore")
    assert proc.returncode == 0, proc.stderr
    out, cmds = proc.stdout, commands(proc.stdout)
    assert not [c for c in cmds for x in c if any(p in x for p in TOY_PATHS)]
    evals = [c for c in cmds if c[1].endswith("compare_sbs_mcts.py")]
    # every evaluation in the exploratory folder (never the demo's or the lab's), at search seed 42 only
    assert evals and all(value(c, "--logs_dir") == ["logs/toy_deep_explore"] and flag(c, "--seeds") == ["42"]
                         and value(c, "--step_oracle") == (["toy_deep"] if oracle_step(c) else []) for c in evals)
    # every row the default lab plans (the rollout rows need --rollout_rows), at training seed 42, no replica trees
    rows = [line.split(" -> ")[0].strip("# ") for line in out.splitlines() if line.startswith("#   ") and " -> " in line]
    assert len(rows) == len(LAB_SCORERS) - 6 and all(r.endswith(", training seed 42") for r in rows)
    trained = {value(c, "--output-dir")[0] for c in cmds if c[1].endswith("trainer.py")}
    assert not [c for c in cmds if "--out_root" in c] and not [d for d in trained if d.endswith(("-s7", "-s99"))]
    # the confirmatory rows' scorers are reused where they are (the demo's and the lab's folders)
    assert {"checkpoints/toy_deep-ppm", "checkpoints/toy_deep-orm", "checkpoints/toy_deep-lab-mc-prm",
            "checkpoints/toy_deep-lab-first_error-pqm"} <= trained
    methods = {m for c in evals for m in flag(c, "--methods")}
    assert {"bon_prm", "sbs_prm", "mcts_prm", "mcts_orm", "bon_orm"} <= methods       # every row ranks passes
    assert "lab: exploratory: not in the pre-registered family" in out
    assert "# then the report: results/toy_deep_explore.md, results/toy_deep_explore_claims.txt" in out
    assert "# the report records the commit" not in out


def test_the_toy_world_has_no_exploratory_family(tmp_path):
    proc = dry_run(tmp_path, "lab.py", "--explore")
    assert proc.returncode == 2 and proc.stdout == "" and len(proc.stderr.splitlines()) == 1
    assert "explore: the toy world has no exploratory family" in proc.stderr
    proc = dry_run(tmp_path, "lab.py", "--world", "toy_deep", "--explore", "--pilot")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and "--explore and --pilot" in proc.stderr


def test_the_exploratory_run_waits_for_the_labs_report(tmp_path, monkeypatch, capsys):
    """Its rows repeat the lab's comparisons at one seed: nothing starts before the lab's own report exists."""
    def started(*args, **kwargs):
        raise RuntimeError("a command started")

    for m in (demo, lab, command_runner):
        monkeypatch.setattr(m, "ROOT", tmp_path)
    monkeypatch.setattr(demo, "Command", started)   # the report is looked for under the lab's folder (ROOT), not the cwd
    monkeypatch.setattr(sys, "argv", ["lab", "--world", "toy_deep", "--explore"])
    with pytest.raises(SystemExit) as stop:
        lab.cli()
    captured = capsys.readouterr()
    assert stop.value.code == 2 and captured.out == "" and len(captured.err.splitlines()) == 1
    assert "--explore: results/toy_deep_lab.json is not there: the exploratory family runs after the toy_deep " \
           "lab's own report" in captured.err and "make lab WORLD=toy_deep" in captured.err
    assert list(tmp_path.iterdir()) == []                                   # nothing written
    # the docs are never read for it: claims published there do not stand in for the report's results file
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "scorer_lab.md").write_text("<!-- report: toy_deep-lab-claims -->\nvs ORM\n<!-- /report -->\n")
    with pytest.raises(UsageError, match="results/toy_deep_lab.json is not there"):
        lab.main(["--world", "toy_deep", "--explore"])
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "toy_deep_lab.json").write_text("{}\n")
    with pytest.raises(RuntimeError, match="a command started"):        # with the report the run goes on
        lab.main(["--world", "toy_deep", "--explore"])


def test_the_recipe_of_a_world_without_an_exploratory_family_is_refused():
    from types import SimpleNamespace
    from masprm.errors import ConfigError
    with pytest.raises(ConfigError, match="the toy world has no exploratory lab recipe"):
        lab.lab_recipe(SimpleNamespace(world="toy", explore=True))


def test_an_exploratory_lab_never_asks_the_demos_folder():
    from types import SimpleNamespace
    args = SimpleNamespace(world="toy_deep", explore=True, sample_n=None, seeds=[42], sbs_budget=[3, 5])
    assert not lab.reuse_demo(args) and lab.reuse_demo(SimpleNamespace(**{**vars(args), "explore": False}))
