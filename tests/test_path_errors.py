"""A path named on the command line that cannot be used: "" refused at parse time by the path argument type;
every OSError of a named path (a name too long, a loop of links, a FIFO where a file goes) one line naming
the flag, exit 2; a log that is no file is named, never opened.

Each command runs in this process through ``run_cli`` (as its script calls it); "nothing outside, nothing
lost" is checked by hashing the folders.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import snapshot
from helpers_cli import run_module
from helpers_stage4_logs import EXP, log_text


@pytest.mark.parametrize("module, argv, flag", [
    ("masprm.stages.aggregate", ["--logs_dir", ""], "--logs_dir"),
    ("masprm.stages.aggregate", ["--out", ""], "--out"),
    ("masprm.stages.trees", ["--out_root", ""], "--out_root"),
    ("masprm.stages.preprocess", ["--input", ""], "--input"),
    ("masprm.stages.evaluate", ["--logs_dir", ""], "--logs_dir"),
    ("masprm.stages.train", ["--output-dir", " "], "--output-dir"),
    ("masprm.stages.show_tree", [""], "tree"),
    ("masprm.published.blocks", ["--results", ""], "--results"),
])
def test_an_empty_path_is_refused_at_parse_time(tmp_path, monkeypatch, capsys, module, argv, flag):
    monkeypatch.chdir(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, module, argv)
    assert code == 2 and len(lines) == 1, lines
    assert f"argument {flag}" in lines[0] and "an empty path ('" in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == []


def _loop(folder: Path) -> str:
    (folder / "loop").symlink_to("loop")
    return "loop"


@pytest.mark.parametrize("module, flag, make, expected", [
    ("masprm.stages.aggregate", "--logs_dir", _loop, "--logs_dir loop: it is a loop of symbolic links"),
    ("masprm.stages.aggregate", "--logs_dir", lambda f: "n" * 300,
     f"--logs_dir {'n' * 300}: a name in it is too long for the file system"),
    ("masprm.stages.aggregate", "--out", lambda f: "n" * 300 + ".csv",
     f"--out {'n' * 300}.csv: a name in it is too long for the file system"),
    ("masprm.stages.trees", "--out_root", lambda f: "loop/results",
     "--out_root loop/results: it is a loop of symbolic links"),
    ("masprm.stages.trees", "--out_root", lambda f: "n" * 300,
     f"--out_root {'n' * 300}: a name in it is too long for the file system"),
    ("masprm.stages.preprocess", "--input", lambda f: "loop/x", "--input loop/x: it is a loop of symbolic links"),
])
def test_an_os_error_on_a_named_path_is_one_line_naming_the_flag(tmp_path, monkeypatch, capsys, module, flag,
                                                                  make, expected):
    monkeypatch.chdir(tmp_path)
    _loop(tmp_path) if make is not _loop else None
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / f"{EXP}_1.txt").write_text(log_text())
    value = make(tmp_path)
    argv = {"--out": ["--logs_dir", "logs", "--out", value]}.get(flag, [flag, value])
    if module == "masprm.stages.trees":
        argv += ["--dataset", "gsm8k", "--n", "1"]
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, module, argv)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].endswith(expected), lines[0]
    assert snapshot(tmp_path) == before


def test_a_fifo_a_folder_or_a_dangling_link_among_the_logs_is_named_never_opened(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / f"{EXP}_1.txt").write_text(log_text(acc=0.5))
    (logs / f"{EXP}_2.txt").write_text(log_text(acc=0.7))
    os.mkfifo(logs / f"{EXP}_3.txt")             # a reader would wait on it forever
    (logs / f"{EXP}_4.txt").mkdir()
    (logs / f"{EXP}_5.txt").symlink_to("nowhere")
    code, lines, out = run_module(monkeypatch, capsys, "masprm.stages.aggregate", ["--logs_dir", "logs", "--no_plot"])
    assert code == 0
    assert lines == [f"skipped 3 log(s) that cannot be counted: {EXP}_3 (a named pipe); {EXP}_4 (a folder); "
                     f"{EXP}_5 (no such file or folder)"]
    rows = list(__import__("csv").reader((tmp_path / "aggregated_results.csv").read_text().splitlines()))
    assert rows[1][:4] == [EXP, "2", "0.6000", "0.1414"]   # mean of 0.5, 0.7; sample std 0.2/sqrt(2)


def test_the_path_checker_turns_each_os_error_into_one_config_error(tmp_path):
    from masprm.errors import ConfigError
    from masprm.paths import check_input_dir, check_input_file

    (tmp_path / "loop").symlink_to("loop")
    os.mkfifo(tmp_path / "pipe.jsonl")
    (tmp_path / "folder.jsonl").mkdir()
    cases = [(check_input_file, tmp_path / "loop", "it is a loop of symbolic links"),
             (check_input_file, tmp_path / ("x" * 300), "a name in it is too long for the file system"),
             (check_input_file, tmp_path / "pipe.jsonl", "is a named pipe, not a file"),
             (check_input_file, tmp_path / "folder.jsonl", "is a folder, not a file"),
             (check_input_file, tmp_path / "none", "no such file"),
             (check_input_dir, tmp_path / "pipe.jsonl", "is a file, not a folder"),
             (check_input_dir, tmp_path / "loop" / "x", "it is a loop of symbolic links")]
    for check, path, problem in cases:
        with pytest.raises(ConfigError) as caught:
            check(path, "data_file")
        assert str(caught.value) == f"data_file {path}: {problem}" and caught.value.setting == "data_file"


def test_an_unreadable_named_file_is_one_line_naming_the_flag(tmp_path, monkeypatch):
    """EACCES from deep inside a command (here: opening a data file) is traced back to the flag that named it."""
    import errno

    from masprm.cli import PARSED_PATHS, path_error_line

    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(PARSED_PATHS, "data_file", "data/q.jsonl")
    err = PermissionError(errno.EACCES, "Permission denied", "data/q.jsonl")
    assert path_error_line(err, {"data_file": "--data_file"}) == "--data_file data/q.jsonl: permission denied"
    inner = OSError(errno.ENAMETOOLONG, "File name too long", str(tmp_path / "data/q.jsonl/x"))
    monkeypatch.setitem(PARSED_PATHS, "data_file", "data/q.jsonl")
    assert path_error_line(inner, {"data_file": "--data_file"}) == (
        f"--data_file data/q.jsonl ({tmp_path}/data/q.jsonl/x): a name in it is too long for the file system")
    assert path_error_line(OSError(errno.EACCES, "x", "/elsewhere/f"), {}) is None   # no flag named it
