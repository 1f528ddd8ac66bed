"""Reliability round 4 (issue 44): paths, outputs, logs and the command line, one principle per class,
in the shared core every command uses.

- paths: "" refused at parse time by the path argument type; every OSError of a named path
  (a name too long, a loop of links, a FIFO where a file goes) one line naming the flag, exit 2;
- outputs: worked out lexically, never through a link at or below the chosen output; library writers
  write new inodes; only this run's files get the umask's mode;
- logs: the aggregator counts a log only when each metric appears once, finite and in range, and
  its name carries a seed; anything else is named on stderr and left out of its row;
- a reader of stdout that goes away (`| head -c 1`) never stops a run.

Models, trees and state read back are in test_reliability4_models.py. Each command runs in this
process through ``run_cli`` (as its script calls it), or as a subprocess where stdout itself is under
test; "nothing outside, nothing lost" is checked by hashing the folders.
"""


from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from masprm.eval.aggregate import aggregate, read_logs
from masprm.eval.logs import render_log

from helpers import snapshot
from helpers_cli import run_module

REPO = Path(__file__).resolve().parents[1]
EXP = "gsm8k_single_pass_0123abcd45_tiny"


def summary(acc=0.5, tokens=100.0):
    s = {f"pass@{k}": acc for k in range(1, 11)}
    s.update(n=10, errors=0, tokens_mean=tokens, tokens_std=1.0, tokens_n=10, scorer_calls_total=0,
             agent_runs_total=30, prm_calls_mean=0.0, agent_runs_mean=3.0)
    return s


def log_text(**kw) -> str:
    return render_log(["=== START single_pass | dataset=gsm8k | N=10 | manifest=abc ==="], [], summary(**kw))


# --------------------------------------------------------------------------- class 3: "" is no path

@pytest.mark.parametrize("module, argv, flag", [
    ("masprm.stages.aggregate", ["--logs_dir", ""], "--logs_dir"),
    ("masprm.stages.aggregate", ["--out", ""], "--out"),
    ("masprm.stages.trees", ["--out_root", ""], "--out_root"),
    ("masprm.stages.preprocess", ["--input", ""], "--input"),
    ("masprm.stages.evaluate", ["--logs_dir", ""], "--logs_dir"),
    ("masprm.stages.train", ["--output-dir", " "], "--output-dir"),
    ("masprm.stages.show_tree", [""], "tree"),
    ("masprm.toy.report", ["--results", ""], "--results"),
])
def test_an_empty_path_is_refused_at_parse_time(tmp_path, monkeypatch, capsys, module, argv, flag):
    monkeypatch.chdir(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, module, argv)
    assert code == 2 and len(lines) == 1, lines
    assert f"argument {flag}" in lines[0] and "an empty path ('" in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- class 2: OSErrors of named paths

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


# --------------------------------------------------------------------------- class 14: a closed stdout

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


# --------------------------------------------------------------------------- class 10: impossible logs

@pytest.mark.parametrize("edit, problem", [
    (lambda t: t.replace("Accuracy (pass@1): 0.5000", "Accuracy (pass@1): nan"), "its pass@1 value is not a number"),
    (lambda t: t.replace("Accuracy (pass@1): 0.5000", "Accuracy (pass@1): n/a"), "its pass@1 value is not a number"),
    (lambda t: t.replace("Accuracy (pass@1): 0.5000", "Accuracy (pass@1): 3.75"),
     "its pass@1 value 3.75 is outside [0, 1]"),
    (lambda t: t.replace("Pass@5: 0.5000", "Pass@5: -0.1"), "its pass@5 value -0.1 is outside [0, 1]"),
    (lambda t: t.replace("Tokens: 100.0", "Tokens: -100.0"), "its tokens value -100 is outside [0, inf]"),
    (lambda t: t.replace("Mean PRM calls per example: 0.00", "Mean PRM calls per example: inf"),
     "its prm_calls value is not a number"),
    (lambda t: t.replace("Pass@3: 0.5000\n", "Pass@3: 0.5000\nPass@3: 0.9000\n"), "its pass@3 line is written 2 times"),
    (lambda t: "\n".join(ln for ln in t.splitlines() if not ln.startswith("Accuracy")) + "\n",
     "it has no pass@1 line"),
])
def test_an_impossible_log_is_skipped_and_named(tmp_path, edit, problem):
    (tmp_path / f"{EXP}_1.txt").write_text(log_text(acc=0.5))
    (tmp_path / f"{EXP}_2.txt").write_text(edit(log_text(acc=0.5)))
    (tmp_path / f"{EXP}_3.txt").write_text(log_text(acc=0.7))
    rows, skipped = aggregate(read_logs(tmp_path))
    assert skipped == [f"{EXP}_2 ({problem})"]
    assert rows[0].seeds == [1, 3] and rows[0].values["pass@1"] == [0.5, 0.7]   # Seeds = values averaged


def test_a_log_without_a_seed_in_its_name_is_not_counted(tmp_path):
    (tmp_path / f"{EXP}_1.txt").write_text(log_text())
    (tmp_path / f"{EXP}.txt").write_text(log_text())
    rows, skipped = aggregate(read_logs(tmp_path))
    assert skipped == [f"{EXP} (its name carries no seed (_<seed> before .txt))"]
    assert [r.seeds for r in rows] == [[1]]


def test_the_aggregator_command_names_impossible_logs_on_stderr(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / f"{EXP}_1.txt").write_text(log_text())
    (tmp_path / "logs" / f"{EXP}_2.txt").write_text(log_text().replace("Pass@5: 0.5000", "Pass@5: 7"))
    code, lines, out = run_module(monkeypatch, capsys, "masprm.stages.aggregate", ["--logs_dir", "logs", "--no_plot"])
    assert code == 0 and lines == [f"skipped 1 log(s) that cannot be counted: {EXP}_2 "
                                   "(its pass@5 value 7 is outside [0, 1])"]
    assert f"{EXP},1," in (tmp_path / "aggregated_results.csv").read_text()


def test_only_impossible_logs_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / f"{EXP}_2.txt").write_text(log_text().replace("Pass@5: 0.5000", "Pass@5: 7"))
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.stages.aggregate", ["--logs_dir", "logs"])
    assert code == 2 and lines == [f"aggregate.py: error: --logs_dir logs: no COMPLETED logs (*.txt); 1 cannot be "
                                   f"counted: {EXP}_2 (its pass@5 value 7 is outside [0, 1]); nothing written"]
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- class 1: links and inodes

def test_a_run_folder_that_is_a_link_is_refused(tmp_path):
    from masprm.errors import ConfigError
    from masprm.run_folder import locked_folder

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "run").symlink_to(tmp_path / "elsewhere")
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=r"^out_root .*/out/run: is a link to .*/elsewhere; a folder the run owns"):
        with locked_folder(tmp_path / "out" / "run"):
            pass
    assert snapshot(tmp_path) == before


def test_outputs_of_a_linked_input_go_next_to_the_link(tmp_path):
    from masprm.stages.preprocess import output_paths

    (tmp_path / "store" / "gsm8k_res_real").mkdir(parents=True)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "gsm8k_res_x").symlink_to(tmp_path / "store" / "gsm8k_res_real")
    prm, ppm = output_paths(tmp_path / "mine" / "gsm8k_res_x", "full")
    assert prm == tmp_path / "mine" / "prm_samples_gsm8k_res_x.jsonl"
    assert ppm == tmp_path / "mine" / "ppm_pairs_gsm8k_res_x.jsonl"


def test_a_library_writer_makes_new_inodes_and_only_its_own_files_change_mode(tmp_path):
    from masprm.io import honour_umask, process_umask
    from masprm.outputs import file_snapshot, library_output

    out = tmp_path / "scorer"
    out.mkdir()
    backup = tmp_path / "backup.safetensors"
    backup.write_bytes(b"old weights")
    os.link(backup, out / "adapter_model.safetensors")   # a hard link to a backup
    (tmp_path / "victim").write_text("outside")
    (out / "README.md").symlink_to(tmp_path / "victim")   # a planted link
    (out / "key").write_text("secret")
    os.chmod(out / "key", 0o600)                          # the user's private file
    before = file_snapshot(out)
    with library_output(out) as saving:                  # what save_pretrained does: open(name, "wb")
        for name in ("adapter_model.safetensors", "README.md"):
            with open(saving / name, "wb") as fh:
                fh.write(b"new")
            os.chmod(saving / name, 0o600)
    (out / "checkpoint-1").mkdir()
    (out / "checkpoint-1" / "optimizer.pt").write_bytes(b"x")
    os.chmod(out / "checkpoint-1" / "optimizer.pt", 0o600)
    honour_umask(out, before=before)
    assert backup.read_bytes() == b"old weights" and (tmp_path / "victim").read_text() == "outside"
    assert (out / "adapter_model.safetensors").read_bytes() == b"new" and not (out / "README.md").is_symlink()
    assert (out / "key").stat().st_mode & 0o777 == 0o600                  # not this run's: untouched
    mode = 0o666 & ~process_umask()
    assert (out / "checkpoint-1" / "optimizer.pt").stat().st_mode & 0o777 == mode
    assert (out / "adapter_model.safetensors").stat().st_mode & 0o777 == mode
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "adapter_model.safetensors", "checkpoint-1", "key"]


def test_a_failed_library_write_changes_nothing(tmp_path):
    from masprm.outputs import library_output

    out = tmp_path / "scorer"
    out.mkdir()
    (out / "adapter_model.safetensors").write_bytes(b"finished")
    before = snapshot(tmp_path)
    with pytest.raises(RuntimeError):
        with library_output(out) as saving:
            (saving / "adapter_model.safetensors").write_bytes(b"half")
            raise RuntimeError("killed while saving")
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- classes 12 and 13

@pytest.mark.parametrize("out", ["policy/report.json", "scorers/prm/report.json", "policy"])
def test_the_step_benchmark_never_writes_into_a_folder_it_reads(tmp_path, monkeypatch, capsys, out):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "config.json").write_text("{}")
    (tmp_path / "scorers" / "prm").mkdir(parents=True)
    (tmp_path / "scorers" / "orm").mkdir(parents=True)
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.toy.stepbench",
                         ["--policy", "policy", "--prm_dir", "scorers/prm", "--orm_dir", "scorers/orm", "--out", out])
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"stepbench.py: error: --out {out}: "), lines[0]
    assert "the input folder" in lines[0] or "is a folder, not a file" in lines[0]
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("argv, line", [
    (["--results", "nothere"], "--results nothere: no such folder"),
    (["--docs", "nodocs"], "--docs nodocs: no such folder"),
    (["--check"], "--check compared nothing: no generated block in docs/*.md or its README has its source "
                  "(results in results, logs in logs/toy_demo)"),
])
def test_report_refuses_missing_folders_and_a_check_that_compared_nothing(tmp_path, monkeypatch, capsys, argv, line):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "docs" / "a.md").write_text("<!-- report: stepbench -->\nold\n<!-- /report -->\n")
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.toy.report", argv)
    assert code == 2 and lines == [f"report.py: error: {line}"]
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


# --------------------------------------------------------------------------- minor: what a killed or refused run leaves

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


@pytest.mark.slow
def test_the_declared_difference_for_impossible_logs(tmp_path):
    """docs/differences.md: the original averaged 0.5, 0.9 and 3.75 to 1.72; the impossible log is left out."""
    for seed, acc in ((1, 0.5), (2, 0.9), (3, 0.5)):
        (tmp_path / f"{EXP}_{seed}.txt").write_text(log_text(acc=acc))
    text = (tmp_path / f"{EXP}_3.txt").read_text().replace("Accuracy (pass@1): 0.5000", "Accuracy (pass@1): 3.75")
    (tmp_path / f"{EXP}_3.txt").write_text(text)
    [row], skipped = aggregate(read_logs(tmp_path))
    assert round((0.5 + 0.9 + 3.75) / 3, 2) == 1.72                     # the original's mean
    assert row.seeds == [1, 2] and round(row.mean("pass@1"), 4) == 0.7   # ours: the possible values only
    assert skipped == [f"{EXP}_3 (its pass@1 value 3.75 is outside [0, 1])"]


# --------------------------------------------------------------------------- class 1: a link at each depth of each output
# The one rule (masprm.outputs.check_no_linked_folders, applied by check_output_dir and check_output_file):
# no folder at or below the chosen output is a link. Each command's output gets a link at each depth: the
# output itself (to a folder, or leading nowhere), a folder in it, a folder two levels down; for a file
# output, a folder still to be made for it.

def _inputs_of_every_command(root: Path) -> None:
    import random

    from helpers_training import ppm_record, write_jsonl
    from helpers_trees import write_trees, gsm8k_tree

    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "victim.txt").write_text("a file outside every output\n")
    (root / "logs").mkdir()
    (root / "logs" / f"{EXP}_1.txt").write_text(log_text())
    write_jsonl(root / "pairs.jsonl", [ppm_record(random.Random(i)) for i in range(4)])
    (root / "policy").mkdir()
    (root / "policy" / "config.json").write_text("{}")
    for name in ("prm", "orm"):
        (root / "scorers" / name).mkdir(parents=True)
    write_trees(root / "results" / "gsm8k_res_x", [gsm8k_tree()])


FOLDER_OUTPUTS = {   # command -> (module, argv with OUT for its output folder, the output's flag)
    "stage1": ("masprm.stages.trees", ["--out_root", "OUT", "--dataset", "gsm8k", "--n", "1"], "--out_root"),
    "stage3": ("masprm.stages.train", ["--mode", "ppm", "--data_dir", "pairs.jsonl", "--model-id", "policy",
                                        "--output-dir", "OUT", "--max-steps", "1", "--quiet"], "--output-dir"),
    "stage4": ("masprm.stages.evaluate", ["--methods", "single_pass", "--dataset", "gsm8k", "--logs_dir", "OUT"],
               "--logs_dir"),
    "lab": ("masprm.stages.lab", [], "logs"),
}
FILE_OUTPUTS = {   # command -> (module, argv with OUT for its output file, the output's flag, the file's name)
    "stage5": ("masprm.stages.aggregate", ["--logs_dir", "logs", "--out", "OUT"], "--out", "t.csv"),
    "stepbench": ("masprm.toy.stepbench", ["--policy", "policy", "--prm_dir", "scorers/prm", "--orm_dir",
                                           "scorers/orm", "--out", "OUT"], "--out", "report.json"),
    "show_tree": ("masprm.stages.show_tree", ["results/gsm8k_res_x/0.json", "--out", "OUT"], "--out", "tree.png"),
    "export": ("masprm.stages.export_scorer", ["scorers/prm", "--merged", "OUT"], "--merged", None),
}
# (where the link is, relative to the output; what it points to, relative to the link's folder)
FOLDER_DEPTHS = [("", "elsewhere"), ("", "elsewhere/not_yet"), ("sub", "../elsewhere"), ("a/b", "../../elsewhere"),
                 ("a/b", "../../elsewhere/not_yet")]


def _place_link(root: Path, out: str, at: str, target: str) -> Path:
    link = root / out / at if at else root / out
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


@pytest.mark.parametrize("depth, target", FOLDER_DEPTHS, ids=lambda v: v or "itself")
@pytest.mark.parametrize("command", sorted(FOLDER_OUTPUTS))
def test_a_link_at_any_depth_of_a_folder_output_is_refused(tmp_path, monkeypatch, capsys, command, depth, target):
    module, argv, flag = FOLDER_OUTPUTS[command]
    monkeypatch.chdir(tmp_path)
    _inputs_of_every_command(tmp_path)
    out = "out"
    if command == "lab":   # the lab's output is its logs folder under the checkout: here, under tmp_path
        import masprm.stages.demo as demo
        import masprm.stages.lab as lab

        monkeypatch.setattr(lab, "ROOT", tmp_path)
        monkeypatch.setattr(demo, "Job", None)   # never starts a command (the lab's first: demo.prepare_scorers)
        out = lab.LOGS
    if not depth:
        target = "../" * out.count("/") + target
    _place_link(tmp_path, out, depth, target)
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, module, [out if a == "OUT" else a for a in argv])
    assert code == 2 and len(lines) == 1, lines
    shown = f"{flag} {tmp_path / out if command == 'lab' else out}: {depth + ' ' if depth else ''}is a link to "
    assert shown in lines[0] and "no folder at or below an output may be a link" in lines[0], lines[0]
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("depth", ["new", "a/new"])
@pytest.mark.parametrize("command", sorted(FILE_OUTPUTS))
def test_a_link_where_a_folder_of_a_file_output_is_to_be_made_is_refused(tmp_path, monkeypatch, capsys, command,
                                                                          depth):
    module, argv, flag, name = FILE_OUTPUTS[command]
    monkeypatch.chdir(tmp_path)
    _inputs_of_every_command(tmp_path)
    out = f"{depth}/{name}" if name else depth
    link = _place_link(tmp_path, depth, "", "../" * depth.count("/") + "elsewhere/not_yet")
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, module, [out if a == "OUT" else a for a in argv])
    assert code == 2 and len(lines) == 1, lines
    assert f"{flag} {out}: " in lines[0] and f"is a link to {os.readlink(link)}" in lines[0], lines[0]
    assert "no folder at or below an output may be a link" in lines[0], lines[0]
    assert snapshot(tmp_path) == before


def test_a_link_to_a_file_below_an_output_is_allowed_and_never_written_through(tmp_path):
    from masprm.io import atomic_write_text
    from masprm.outputs import check_output_dir

    (tmp_path / "out" / "a").mkdir(parents=True)
    (tmp_path / "victim.txt").write_text("kept\n")
    (tmp_path / "out" / "a" / "f.txt").symlink_to(tmp_path / "victim.txt")
    check_output_dir(tmp_path / "out", "out_root")   # files are written as new inodes: the link is replaced
    atomic_write_text(tmp_path / "out" / "a" / "f.txt", "new\n")
    assert (tmp_path / "victim.txt").read_text() == "kept\n"


def test_a_library_writer_never_takes_over_a_temporary_folder_it_did_not_make(tmp_path, monkeypatch):
    from masprm.errors import ConfigError
    from masprm.outputs import library_output

    monkeypatch.setattr("masprm.outputs.secrets.token_hex", lambda n: "same")
    (tmp_path / ".save.same.tmp").mkdir()                      # another writer's, by every name tried
    (tmp_path / ".save.same.tmp" / "theirs.bin").write_bytes(b"x")
    with pytest.raises(ConfigError, match="no new temporary folder could be made there"):
        with library_output(tmp_path):
            pass
    assert (tmp_path / ".save.same.tmp" / "theirs.bin").read_bytes() == b"x"
