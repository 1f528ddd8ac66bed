"""A reader of stdout that goes away (`| head -c 1`) never stops a run: the work is done all the same."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import REPO
from helpers_stage4_logs import EXP, log_text


def test_a_closed_stdout_never_stops_a_run(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / f"{EXP}_1.txt").write_text(log_text())
    read, write = os.pipe()
    os.close(read)   # `| head -c 0`: every write to stdout meets a closed pipe
    proc = subprocess.run([sys.executable, str(REPO / "aggregator.py"), "--logs_dir", str(logs), "--out",
                           str(tmp_path / "t.csv"), "--no_plot"], stdout=write, stderr=subprocess.PIPE, text=True,
                          timeout=120)
    os.close(write)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert (tmp_path / "t.csv").read_text().startswith("Experiment,Seeds")   # the work was done


@pytest.mark.slow
def test_a_closed_stdout_never_stops_a_verbose_stage1_run(tmp_path, tiny_model_dir):
    """--verbose prints each tree's report as it is written; the reader gone (`| head -c 1`), stage 1 still
    builds every tree. Unbuffered, every write meets the closed pipe at once, the first before any tree."""
    from helpers_cli import RUN_MCTS, stage1_args

    args = stage1_args(tmp_path, tiny_model_dir, n=3) + ["--out_root", str(tmp_path / "results"), "--verbose"]
    read, write = os.pipe()
    os.close(read)
    proc = subprocess.run([sys.executable, str(RUN_MCTS), *args], stdout=write, stderr=subprocess.PIPE, text=True,
                          timeout=600, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    os.close(write)
    assert proc.returncode == 0 and "Error" not in proc.stderr, proc.stderr[-2000:]
    [run] = (tmp_path / "results").iterdir()
    assert sorted(p.name for p in run.glob("*.json")) == ["0.json", "1.json", "2.json"]
