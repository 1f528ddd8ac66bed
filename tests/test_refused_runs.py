"""What a refused or killed run leaves: nothing written into a folder a command reads, a missing folder or an
unfinished scorer refused before any output, a killed writer's temporary file removed by the next writer,
no folder left by a run refused in a folder it created.

Each command runs in this process through ``run_cli`` (as its script calls it); "nothing outside, nothing
lost" is checked by hashing the folders.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import snapshot
from helpers_cli import run_module


@pytest.mark.parametrize("out", ["policy/report.json", "scorers/prm/report.json", "policy"])
def test_the_step_benchmark_never_writes_into_a_folder_it_reads(tmp_path, monkeypatch, capsys, out):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "config.json").write_text("{}")
    (tmp_path / "scorers" / "prm").mkdir(parents=True)
    (tmp_path / "scorers" / "orm").mkdir(parents=True)
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.instruments.stepbench",
                         ["--policy", "policy", "--prm_dir", "scorers/prm", "--orm_dir", "scorers/orm", "--out", out])
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"stepbench.py: error: --out {out}: "), lines[0]
    assert "the input folder" in lines[0] or "is a folder, not a file" in lines[0]
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("argv, line", [
    (["--results", "nothere"], "--results nothere: no such folder"),
    (["--docs", "nodocs"], "--docs nodocs: no such folder"),
    (["--check"], "--check compared nothing: no generated block in docs/**/*.md or its README has its source "
                  "(archives in archives, results in results, logs in logs/toy_demo)"),
])
def test_report_refuses_missing_folders_and_a_check_that_compared_nothing(tmp_path, monkeypatch, capsys, argv, line):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "docs" / "a.md").write_text("<!-- report: stepbench -->\nold\n<!-- /report -->\n")
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.published.blocks", argv)
    assert code == 2 and lines == [f"blocks.py: error: {line}"]
    assert snapshot(tmp_path) == before


def test_export_refuses_an_unfinished_scorer(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scorer").mkdir()
    (tmp_path / "scorer" / "adapter_config.json").write_text("{}")
    (tmp_path / "scorer" / "masprm_scorer.json").write_text(json.dumps({"mode": "ppm", "status": "training"}))
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.stages.export_scorer", ["scorer", "--merged", "merged"])
    assert code == 2 and lines == ["export_scorer.py: error: scorer scorer: its training did not finish "
                                   "(masprm_scorer.json says status 'training'); finish it with --resume before "
                                   "exporting it"]
    assert snapshot(tmp_path) == before


def test_a_killed_writer_s_temporary_file_is_removed_by_the_next_writer(tmp_path):
    from masprm.io import AtomicJsonlWriter

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)   # a process that has ended
    stale = tmp_path / f".pairs.jsonl.{dead}-0a1b2c3d.tmp"
    live = tmp_path / f".pairs.jsonl.{os.getpid()}-0a1b2c3d.tmp"   # a writer still running
    other = tmp_path / f".other.jsonl.{dead}-0a1b2c3d.tmp"           # another file's
    for path in (stale, live, other):
        path.write_text("half a file")
    with AtomicJsonlWriter(tmp_path / "pairs.jsonl") as out:
        out.write({"a": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name, "pairs.jsonl"])


def test_a_run_refused_in_a_folder_it_created_leaves_no_folder(tmp_path):
    from masprm.errors import ConfigError
    from masprm.run_folder import locked_folder

    with pytest.raises(ConfigError):
        with locked_folder(tmp_path / "new", "output_dir"):
            raise ConfigError("separator: refused")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "kept").mkdir()
    with pytest.raises(ConfigError):
        with locked_folder(tmp_path / "kept", "output_dir"):
            raise ConfigError("separator: refused")
    assert (tmp_path / "kept").is_dir()   # a folder that was there stays
    with locked_folder(tmp_path / "done", "output_dir") as folder:
        (folder / "adapter_model.safetensors").write_bytes(b"x")
    assert (tmp_path / "done" / "adapter_model.safetensors").is_file()
