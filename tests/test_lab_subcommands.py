"""The lab's sub-commands (plan, run, pilot, report) are today's flag forms under their names: the same settings,
the same plan byte for byte, `python -m masprm.lab` the same command; a mode flag on a sub-command is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from masprm.lab import command as lab

REPO = Path(__file__).resolve().parents[1]
PLANS = REPO / "tests" / "fixtures" / "world_runs"


@pytest.mark.parametrize("sub, flags", [
    (["plan"], ["--dry_run"]),
    (["plan", "--world", "toy_deep", "--explore"], ["--world", "toy_deep", "--explore", "--dry_run"]),
    (["run", "--jobs", "1"], ["--jobs", "1"]),
    (["pilot", "--world", "toy_deep", "--dry_run"], ["--pilot", "--world", "toy_deep", "--dry_run"]),
    (["report", "archives/x", "--world", "toy_deep"], ["--report_from", "archives/x", "--world", "toy_deep"]),
])
def test_a_sub_command_is_its_flag_form(sub, flags):
    assert lab.parse(sub) == lab.parse(flags)


@pytest.mark.parametrize("argv", [["plan", "--dry_run"], ["plan", "--pilot"], ["run", "--report_from", "x"],
                                  ["pilot", "--explore"], ["report"], ["report", "x", "--no_archive"]])
def test_a_sub_command_refuses_the_modes_it_is_not(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        lab.parse(argv)
    assert stop.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) <= 2


def run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """A command in an empty checkout-like folder (the README's scripts there, no outputs)."""
    for name in ("src", "aggregator.py"):
        if not (tmp_path / name).exists():
            (tmp_path / name).symlink_to(REPO / name)
    return subprocess.run([sys.executable, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_plan_prints_the_golden_plan_and_python_m_runs_the_same_command(tmp_path):
    golden = (PLANS / "toy_lab_dry_run.txt").read_text()
    for argv in (("src/lab.py", "plan"), ("-m", "masprm.lab", "plan")):
        proc = run(tmp_path, *argv)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == golden, argv
    proc = run(tmp_path, "-m", "masprm.lab", "--help")
    assert proc.returncode == 0 and "{plan,run,pilot,report}" in proc.stdout
