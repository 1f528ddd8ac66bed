"""Outputs are worked out lexically, never through a link at or below the chosen output; library writers
write new inodes; only this run's files get the umask's mode.

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
    "lab": ("masprm.lab.command", [], "logs"),
}
FILE_OUTPUTS = {   # command -> (module, argv with OUT for its output file, the output's flag, the file's name)
    "stage5": ("masprm.stages.aggregate", ["--logs_dir", "logs", "--out", "OUT"], "--out", "t.csv"),
    "stepbench": ("masprm.instruments.stepbench", ["--policy", "policy", "--prm_dir", "scorers/prm", "--orm_dir",
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
        import masprm.lab.command as lab

        monkeypatch.setattr(lab, "ROOT", tmp_path)
        monkeypatch.setattr(demo, "Command", None)   # never starts a command (the lab's first: demo.prepare_scorers)
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
