"""The toy tools and the lab take their flags as the stages do: the ranges their analysis needs, outputs never
inside what they read, every refusal one line with exit 2 before any work (the headroom and compute-match
tools' own cases are in test_toy_headroom.py and test_compute_match.py)."""

from __future__ import annotations

import pytest

from helpers import snapshot
from helpers_cli import run_module
from masprm.worlds import WORLDS


@pytest.mark.parametrize("world", ["toy", "toy_deep"])
def test_a_build_into_the_shipped_policy_it_copies_is_refused(tmp_path, monkeypatch, capsys, world):
    """The build copies the shipped policy into <out>/policy: an --out inside the shipped folder would change
    the policy every fresh clone starts from."""
    shipped = WORLDS[world].shipped_dir
    before = snapshot(shipped)
    monkeypatch.chdir(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.worlds.build",
                                ["--world", world, "--out", str(shipped / "again")])
    assert code == 2 and lines == [f"build.py: error: --out {shipped}/again: is inside the input folder {shipped} "
                                   "(`shipped policy`); writing there would change what the run reads: choose an "
                                   "output outside it"]
    assert snapshot(shipped) == before and not any(tmp_path.iterdir())


@pytest.mark.parametrize("n", ["1", "0"])
def test_the_lab_on_fewer_questions_than_its_paired_statistics_need_is_refused(tmp_path, monkeypatch, capsys, n):
    monkeypatch.chdir(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.lab.command", ["--sample_n", n, "--dry_run"])
    assert code == 2 and lines == [f"command.py: error: --sample_n must be at least 2 (a standard error over questions "
                                   f"needs two), got {n}"]
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("make, said", [
    (lambda logs: (logs / "toy_sbs_prm_ab_policy_14.txt").write_bytes(b"=== START sbs \xe9\nCOMPLETED\n"),
     "toy_sbs_prm_ab_policy_14.txt: the stage-4 log is not UTF-8 text (byte 0xe9 at offset 14); save it as UTF-8"),
    (lambda logs: (logs / "toy_sbs_prm_ab_policy_14.txt").mkdir(),
     "toy_sbs_prm_ab_policy_14.txt: a folder, where a stage-4 log goes; move it out of the logs folder"),
])
def test_the_claims_read_their_logs_through_the_checked_reader(tmp_path, monkeypatch, capsys, make, said):
    """The demo's claims place conditions by their manifests as the lab's cells do: one reader, one line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    make(tmp_path / "logs")
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.instruments.claims", ["--logs_dir", "logs", "--out", "c.txt"])
    assert code == 2 and lines == [f"claims.py: error: logs/{said}"]
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("module", ["masprm.lab.command", "masprm.stages.demo"])
def test_scorers_trained_on_one_question_are_refused_before_any_tree_is_grown(tmp_path, monkeypatch, capsys, module):
    """Stage 3 holds out whole questions to pick a checkpoint: --n_train 1 once ran stages 1 and 2 first."""
    monkeypatch.chdir(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, module, ["--n_train", "1", "--dry_run"])
    assert code == 2 and lines == [f"{module.rsplit('.', 1)[-1]}.py: error: --n_train must be at least 2 (each "
                                   "scorer holds out whole training questions to pick its checkpoint), got 1"]
    assert not any(tmp_path.iterdir())


TOOLS = ["masprm.worlds.build", "masprm.instruments.claims", "masprm.lab.compute_match", "masprm.lab.power",
         "masprm.instruments.synthetic_team", "masprm.instruments.headroom", "masprm.instruments.labelbench", "masprm.published.blocks",
         "masprm.instruments.stepbench", "masprm.lab.command"]
PATH_NAMES = ("out", "policy", "trees", "labels", "mas_config", "docs", "results", "archives")


def test_every_path_flag_of_the_tools_takes_the_stages_path_type():
    """A flag naming a file or folder refuses "" at parse time, as the stages' do (masprm.paths.PathText)."""
    import dataclasses
    import importlib
    import typing
    from pathlib import Path

    from masprm.config import flag_fields
    from masprm.paths import PathText

    checked, loose = [], []
    for name in TOOLS:
        module = importlib.import_module(name)
        for cls in {v for v in vars(module).values() if dataclasses.is_dataclass(v) and isinstance(v, type)}:
            hints = typing.get_type_hints(cls)
            for field in flag_fields(cls):
                if field.name in PATH_NAMES or field.name.endswith(("_dir", "_file")):
                    kinds = set(typing.get_args(hints[field.name])) or {hints[field.name]}
                    (checked if kinds & {Path, PathText} else loose).append(f"{name}: {field.name}")
    assert not loose and len(checked) >= 15, (loose, checked)


def _no_work(monkeypatch, module: str, *functions: str) -> None:
    """Each named function of ``module`` (the tool's expensive work) fails the test if it is reached."""
    import importlib

    for name in functions:
        monkeypatch.setattr(importlib.import_module(module), name,
                            lambda *a, **k: pytest.fail(f"{module}: work began before the refusal"))


@pytest.mark.parametrize("labels_name, record, scheme", [
    ("labels_x.jsonl", '{"prompt": "q", "meta": {"label_scheme": "first_error"}}', "first_error"),
    ("prm_samples_run.jsonl", '{"prompt": "q"}', "mc"),   # today's file, no meta: named by its file
])
def test_labelbench_checks_its_default_out_before_the_report(tmp_path, monkeypatch, capsys, labels_name, record,
                                                             scheme):
    """The default --out is named by the scheme the records name: it is worked out from the first record and
    checked before the trees are read (the report once took minutes, then was refused)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trees").mkdir()
    (tmp_path / labels_name).write_text(record + "\n")
    (tmp_path / "results").write_text("a file where the default report's folder goes\n")
    _no_work(monkeypatch, "masprm.instruments.labelbench", "label_report", "tree_problems")
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.instruments.labelbench",
                                ["--trees", "trees", "--labels", labels_name])
    assert code == 2 and lines == [f"labelbench.py: error: --out results/toy_labelbench_{scheme}.json: "
                                   f"{tmp_path}/results is a file, so no folder can be made there"]
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("argv, said", [
    (["--samples", "0"], "--samples must be at least 1, got 0"),
    (["--calibration_samples", "0"], "--calibration_samples must be at least 1, got 0"),
    (["--out", "policy/report.json"], "--out policy/report.json: is inside the input folder policy (--policy); "
                                      "writing there would change what the run reads: choose an output outside it"),
])
def test_stepbench_refuses_before_any_model_loads(tmp_path, monkeypatch, capsys, argv, said):
    """The step benchmark's counts and its report are checked before the policy or a scorer loads, and its
    report never lands inside the policy it reads (the policy's identity would change)."""
    monkeypatch.chdir(tmp_path)
    for folder in ("policy", "prm"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "config.json").write_text("{}\n")
    _no_work(monkeypatch, "masprm.instruments.stepbench", "load_policy", "load_scorer_folder", "sample_split")
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.instruments.stepbench",
                                ["--policy", "policy", "--scorer", "masprm=prm", *argv])
    assert code == 2 and lines == [f"stepbench.py: error: {said}"]
    assert snapshot(tmp_path) == before
