"""toy_deep's dev pilot (`lab --pilot`, masprm.lab.pilot) and the power computation it ends with
(masprm.lab.power) on hand-written logs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import flag
from helpers_stage4_logs import write_stage4_log
from masprm.stages import demo
from masprm.lab import command as lab, pilot as lab_pilot, plan as lab_plan
from masprm.lab.command import LabArgs
from masprm.lab import power as deep_power

PILOT_LOGS = "logs/toy_deep_pilot"
# (MASPRM, ORM) of each training seed: the demo's at 42, the lab's replica rows at 7 and 99
SCORERS = {42: ("checkpoints/toy_deep-ppm", "checkpoints/toy_deep-orm"),
           7: ("checkpoints/toy_deep-lab-masprm-ppm-s7", "checkpoints/toy_deep-lab-mc-orm-s7"),
           99: ("checkpoints/toy_deep-lab-masprm-ppm-s99", "checkpoints/toy_deep-lab-mc-orm-s99")}


def without(cmd: list[str], names: tuple[str, ...]) -> list[str]:
    """The command less the named flags and their values."""
    out, skip = [], False
    for x in cmd:
        skip = x in names or (skip and not x.startswith("--"))
        out += [] if skip else [x]
    return out


@pytest.fixture
def plan(monkeypatch, tmp_path):
    monkeypatch.setattr(lab_plan, "ROOT", tmp_path)   # nothing there: no task is done
    monkeypatch.setattr(demo, "ROOT", tmp_path)
    args = LabArgs(world="toy_deep", pilot=True)
    tasks, done = lab_pilot.pilot_plan(args)
    return args, {t.name: t for t in tasks}, done


def test_the_pilot_runs_the_primary_comparison_on_dev_per_training_seed(plan):
    args, tasks, done = plan
    assert not done
    # the trees search the train split, the evaluations the dev split: nothing names the test split
    assert {flag(t.cmd, "--split")[0] for t in tasks.values() if "--split" in t.cmd} == {"train", "dev"}
    assert not [t for t in tasks.values() if "test" in t.cmd]
    evals = {name: t.cmd for name, t in tasks.items() if name.startswith("pilot_")}
    assert sorted(evals) == ["pilot_s42", "pilot_s7", "pilot_s99"]
    lab_tasks = {t.name: t for t in lab.plan(args)[0]}
    for seed, (masprm, orm) in SCORERS.items():
        cmd = evals[f"pilot_s{seed}"]
        assert flag(cmd, "--dataset") == ["toy_deep"] and flag(cmd, "--split") == ["dev"]
        assert flag(cmd, "--seeds") == ["14", "24", "42"] and flag(cmd, "--methods") == ["mcts_prm", "mcts_orm"]
        assert flag(cmd, "--prm_dir") == [masprm] and flag(cmd, "--orm_dir") == [orm]
        assert flag(cmd, "--logs_dir") == [PILOT_LOGS]
        # no method of the pilot reads the step labeller (stage 4 refuses a flag no method of the run reads)
        assert "--step_oracle" not in cmd and flag(cmd, "--pw_k") == ["3"]
        assert flag(cmd, "--n_simulations") == ["10"] and flag(cmd, "--max_children") == ["3"]
        # every other setting is the lab's test evaluation of the same MASPRM (its search command)
        row = "masprm-ppm" + ("" if seed == 42 else f"_s{seed}")
        mine = ("--split", "--methods", "--logs_dir", "--orm_dir", "--orm_base_model_id")
        # ... less what only its SBS and best-of-N methods read (the pilot runs MCTS alone)
        others = ("--b1", "--b2", "--sbs_temperature", "--bon_n", "--step_agg")
        assert without(cmd, mine) == without(lab_tasks[f"eval_{row}_search"].cmd, mine + others)
        waits = set(tasks[f"pilot_s{seed}"].after)
        assert waits == (set() if seed == 42 else {f"train_masprm-ppm_s{seed}", f"train_mc-orm_s{seed}"})
    # the replica seeds' trees, stage 2 and two scorers each: the full lab's own commands, so it reuses them
    built = sorted(set(tasks) - set(evals) - {"power"})
    assert built == sorted(f"{kind}_s{s}" for s in (7, 99) for kind in ("trees", "stage2", "train_masprm-ppm",
                                                                       "train_mc-orm"))
    assert all(tasks[name].cmd == lab_tasks[name].cmd and tasks[name].after == lab_tasks[name].after
               for name in built)
    power = tasks["power"]
    assert power.cmd[-4:] == ["--logs_dir", PILOT_LOGS, "--out", "results/toy_deep_power.json"]
    assert set(power.after) == set(evals) and list(tasks)[-1] == "power"


def test_the_pilot_starts_while_the_test_split_is_empty_once_the_preregistration_is_committed(monkeypatch, tmp_path):
    from masprm.cli import UsageError
    from masprm.running import commands
    for module in (lab, demo, commands, lab_pilot):
        monkeypatch.setattr(module, "ROOT", tmp_path)
    prepared, ran = [], []
    monkeypatch.setattr(demo, "prepare_scorers", lambda c, args: prepared.append(args.world))
    monkeypatch.setattr(lab_pilot, "run_tasks", lambda tasks, jobs, folder: ran.extend(t.name for t in tasks))
    monkeypatch.chdir(tmp_path)
    # not before the pre-registration's commit (no git here: "none"): one line, nothing started or written
    with pytest.raises(UsageError, match="docs/preregistration.md has no commit yet"):
        lab.main(["--world", "toy_deep", "--pilot"])
    assert not prepared and not ran and list(tmp_path.iterdir()) == []
    monkeypatch.setattr(lab_pilot, "preregistration_commit", lambda path: "1" * 40)
    assert lab.main(["--world", "toy_deep", "--pilot"]) == 0
    assert prepared == ["toy_deep"] and ran[-1] == "power" and len(ran) == 4 * 2 + 3 + 1


def test_the_toy_world_has_no_pilot(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["lab.py", "--pilot", "--dry_run"])
    with pytest.raises(SystemExit) as stop:
        lab.cli()
    captured = capsys.readouterr()
    assert stop.value.code == 2 and captured.out == "" and len(captured.err.splitlines()) == 1
    assert "the toy world has no pilot" in captured.err


# --------------------------------------------------------------------------- the power computation's CLI

QUESTIONS = ("q1", "q2", "q3", "q4")


def write_log(folder: Path, method: str, scorer: str, seed: int, correct: list[int], split: str = "dev",
              settings: dict | None = None) -> None:
    role = {"mcts_prm": "masprm", "mcts_orm": "orm"}[method]
    records = [{"index": i, "question": q, "gold": "7", "prediction": f"Answer: {7 if c else 5}", "correct": bool(c),
                "metrics": {"pass@1": c}, "extra": {"generated_answers": [f"Answer: {7 if c else 5}"]}, "error": None}
               for i, (q, c) in enumerate(zip(QUESTIONS, correct))]
    definition = {"method": method, "settings": settings or {}, "data": {"dataset": "toy_deep", "split": split},
                  "models": {"policy": {"id": "artifacts/toy_deep/policy"}, role: {"id": scorer}}}
    fingerprint = f"{Path(scorer).name}{split}{len(settings or {})}"
    write_stage4_log(folder / f"toy_deep_{method}_{fingerprint}_policy_{seed}", records,
                     {"condition": method, "seed": seed, "definition": definition}, label=method, dataset="toy_deep",
                     summary={"pass@1": sum(correct) / 4})


def test_the_power_cli_on_hand_written_pilot_logs(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    logs = tmp_path / PILOT_LOGS
    logs.mkdir(parents=True)
    for seed, folders in SCORERS.items():
        for folder in folders:
            (tmp_path / folder).mkdir(parents=True)
            (tmp_path / folder / "masprm_scorer.json").write_text(json.dumps({"settings": {"seed": seed}}))
    # per question, MASPRM minus ORM, each the mean over search seeds 14 and 24:
    # seed 42: 1 1 1 1, seed 7: 0 0 0 0, seed 99: (1 1 .5 0) - (0 0 .5 0) = 1 1 0 0
    runs = {42: ([[1, 1, 1, 1]] * 2, [[0, 0, 0, 0]] * 2), 7: ([[1, 0, 1, 0]] * 2, [[1, 0, 1, 0]] * 2),
            99: ([[1, 1, 1, 0], [1, 1, 0, 0]], [[0, 0, 1, 0], [0, 0, 0, 0]])}
    for seed, (masprm_runs, orm_runs) in runs.items():
        for search_seed, masprm, orm in zip((14, 24), masprm_runs, orm_runs):
            write_log(logs, "mcts_prm", SCORERS[seed][0], search_seed, masprm)
            write_log(logs, "mcts_orm", SCORERS[seed][1], search_seed, orm)
    # not the pilot's: the test split, and the MASPRM with ORM leaves
    write_log(logs, "mcts_prm", SCORERS[7][0], 14, [1, 1, 1, 1], split="test")
    write_log(logs, "mcts_prm", SCORERS[7][0], 14, [1, 1, 1, 1], settings={"orm_leaf": True})
    assert deep_power.main(["--logs_dir", PILOT_LOGS, "--out", "results/power.json"]) == 0
    record = json.loads((tmp_path / "results/power.json").read_text())
    # by hand (tests/test_toy_deep.py): sd_q = sqrt(1/27), tau2 = 2/9; tau2 / 3 > SE*^2: the cap, MDE
    # 2.801585 x sqrt((1/27) / 3000 + (2/9) / 3) = 2.801585 x sqrt(0.0740864) = 2.801585 x 0.272188 = 76.26 points
    assert record["sd_q"] == pytest.approx((1 / 27) ** 0.5) and record["tau2"] == pytest.approx(2 / 9)
    assert (record["training_seeds"], record["dev_questions"], record["test_questions"], record["reached"]) == \
        ([7, 42, 99], 4, 3000, False)
    assert record["mde"] == pytest.approx(0.76256, abs=1e-5)
    assert not [key for key in record if "mean" in key or "diff" in key]     # variance quantities only
    out = capsys.readouterr().out
    assert "test questions N = 3000: MDE at 80% power 76.26 points" in out and "no N up to the cap 3000" in out
    assert "DEV_POWER = (0.19245" in out


def test_the_power_cli_needs_two_seeds_and_the_scorers_training_seed(monkeypatch, tmp_path):
    from masprm.cli import UsageError
    from masprm.errors import DataError
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    write_log(tmp_path / "logs", "mcts_prm", "ppm", 14, [1, 0, 0, 0])
    write_log(tmp_path / "logs", "mcts_orm", "orm", 14, [0, 0, 0, 0])
    with pytest.raises(DataError, match="orm: its masprm_scorer.json records no training seed"):
        deep_power.main(["--logs_dir", "logs", "--out", "power.json"])
    for folder in ("ppm", "orm"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "masprm_scorer.json").write_text(json.dumps({"settings": {"seed": 42}}))
    with pytest.raises(UsageError, match="for 1 training seed\\(s\\); the power rule needs at least 2"):
        deep_power.main(["--logs_dir", "logs", "--out", "power.json"])
    assert not (tmp_path / "power.json").exists()
