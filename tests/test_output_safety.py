"""Outputs stay where the user chose and never go through a planted link; messages stay short.

The security cases of the third reliability round: atomic writes replace a
link instead of writing through it and create files as a plain ``open`` does
(the umask decides who can read them), lock files are never followed, a name
from the command line cannot climb out of the output folder, and an error
message quotes a user's value bounded however large the value is.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from masprm.errors import LINE_LIMIT, ConfigError, OutputError, quoted
from masprm.io import atomic_write_bytes, atomic_write_json, atomic_write_text, honour_umask, load_yaml
from masprm.run_folder import LOCK_FILE, SETTINGS_FILE, announce_holder, locked_folder, run_folder_name

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# --------------------------------------------------------------------------- atomic writes


def test_an_atomic_write_replaces_a_planted_link_and_leaves_its_target_alone(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").symlink_to(victim)
    atomic_write_json(out / "result.json", {"a": 1})
    assert victim.read_text() == "precious\n"
    assert not (out / "result.json").is_symlink() and (out / "result.json").read_text() == '{\n "a": 1\n}\n'
    assert sorted(p.name for p in out.iterdir()) == ["result.json"]   # no temporary file left behind


def test_a_picture_replaces_a_planted_link_and_writes_through_no_temporary_name(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from masprm.eval.budget_plot import save_png

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.png").symlink_to(victim)
    (out / ".results.png.tmp").symlink_to(victim)   # the fixed temporary name a plot writer once used
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    save_png(fig, out / "results.png")
    assert victim.read_text() == "precious\n"
    assert not (out / "results.png").is_symlink() and (out / "results.png").read_bytes().startswith(b"\x89PNG")
    assert sorted(p.name for p in out.iterdir()) == [".results.png.tmp", "results.png"]   # no temporary file left
    assert not plt.fignum_exists(fig.number)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_take_the_mode_a_plain_open_gives(tmp_path, mask, expected):
    with umask(mask):
        atomic_write_text(tmp_path / "a.txt", "x")
        atomic_write_bytes(tmp_path / "b.png", b"\x89PNG")
        with open(tmp_path / "plain.txt", "w") as fh:   # what the user's umask gives any program
            fh.write("x")
    assert mode(tmp_path / "plain.txt") == expected
    assert mode(tmp_path / "a.txt") == expected and mode(tmp_path / "b.png") == expected


def test_files_a_library_wrote_private_get_the_umask_mode(tmp_path):
    import torch
    from safetensors.torch import save_file

    (tmp_path / "checkpoint-2").mkdir()
    victim = tmp_path.parent / f"{tmp_path.name}_victim.txt"
    victim.write_text("x")
    os.chmod(victim, 0o600)
    (tmp_path / "link").symlink_to(victim)
    with umask(0o022):
        save_file({"w": torch.zeros(2)}, str(tmp_path / "checkpoint-2" / "model.safetensors"))
        assert mode(tmp_path / "checkpoint-2" / "model.safetensors") == 0o600   # safetensors' own choice
        assert honour_umask(tmp_path) == 1
    assert mode(tmp_path / "checkpoint-2" / "model.safetensors") == 0o644
    assert mode(victim) == 0o600   # a link is not followed


def test_a_full_disk_names_the_file_and_keeps_the_previous_one(tmp_path, monkeypatch):
    import masprm.io as io

    target = tmp_path / "samples.jsonl"
    target.write_text("finished before\n")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(io.os, "fsync", full)
    with pytest.raises(OutputError) as err:
        atomic_write_text(target, "new\n" * 1000)
    message = str(err.value)
    assert message.startswith(f"{target}: cannot be written (No space left on device); nothing finished was lost")
    assert target.read_text() == "finished before\n" and [p.name for p in tmp_path.iterdir()] == ["samples.jsonl"]


def test_a_write_past_the_file_size_limit_is_the_same_one_line_in_stage_2(tmp_path):
    """A real kernel refusal (ulimit -f: EFBIG) while stage 2 streams its outputs: one line, old outputs kept."""
    from helpers_trees import gsm8k_tree, write_trees

    write_trees(tmp_path / "gsm8k_res_x", [{**gsm8k_tree(), "node_text": f"What is {i} + 2?"} for i in range(4)])
    script = [sys.executable, str(REPO / "src" / "train" / "preprocess_data.py"), "--input",
              str(tmp_path / "gsm8k_res_x"), "--make-ppm"]
    assert subprocess.run(script, capture_output=True, text=True, timeout=120).returncode == 0
    outputs = {p: p.read_bytes() for p in tmp_path.glob("*.jsonl")}
    assert len(outputs) == 2 and all(len(data) > 400 for data in outputs.values())

    def small_files():
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (400, resource.RLIM_INFINITY))

    done = subprocess.run(script, capture_output=True, text=True, timeout=120, preexec_fn=small_files)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "cannot be written (File too large); nothing finished was lost: the previous file is unchanged" in lines[0]
    assert any(str(p) in lines[0] for p in outputs)
    assert {p: p.read_bytes() for p in tmp_path.glob("*.jsonl")} == outputs
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# --------------------------------------------------------------------------- locks and owned folders


def test_a_locked_folder_refuses_a_link_out_of_it_and_allows_one_inside(tmp_path):
    run = tmp_path / "run"
    (run / "sub").mkdir(parents=True)
    (run / "0.json").write_text("{}")
    (run / "sub" / "same.json").symlink_to("../0.json")   # stays inside: fine
    with locked_folder(run):
        pass
    (run / "sub" / "out.json").symlink_to(tmp_path / "victim.txt")   # leads out, even dangling
    with pytest.raises(ConfigError, match=r"^out_root .*run: sub/out.json is a link to .*victim.txt, outside"):
        with locked_folder(run):
            pass
    assert not (tmp_path / "victim.txt").exists()


def test_the_holder_file_is_replaced_not_followed(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "0.json").write_text('{"tree": 1}')
    (run / LOCK_FILE).symlink_to("0.json")   # inside the folder, so allowed; writing through it would clobber a tree
    with locked_folder(run):
        announce_holder(run)
        assert not (run / LOCK_FILE).is_symlink() and "pid" in (run / LOCK_FILE).read_text()
    assert (run / "0.json").read_text() == '{"tree": 1}'


def test_a_second_run_never_shows_a_linked_file_as_the_holder(tmp_path):
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom masprm.run_folder import locked_folder\n"
         "with locked_folder(sys.argv[1]) as f:\n    print('held', flush=True); time.sleep(120)\n", str(run)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        (run / "secret.txt").write_text("the password is hunter2\n")
        (run / LOCK_FILE).symlink_to("secret.txt")
        with pytest.raises(ConfigError) as err:
            with locked_folder(run):
                pass
        assert "holder unknown" in str(err.value) and "hunter2" not in str(err.value)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)


@pytest.mark.parametrize("split", ["../../escaped", "..", ".", "a/b", "a\\b", "", " train", "x\0y"])
def test_a_split_that_is_not_a_plain_name_never_becomes_a_folder_name(split):
    with pytest.raises(ConfigError, match="^split .*must be a plain split name") as err:
        run_folder_name("gsm8k", split, "Qwen/Qwen2.5-1.5B-Instruct", 4, 4.0, 3, 0.7, 0.95)
    assert err.value.setting == "split"
    assert run_folder_name("gsm8k", "train", "org/m", 1, 4.0, 2, 0.7, 0.95) == "gsm8k_res_train_org_m_r1_c4_cand2_t0p7_p0p95"


# --------------------------------------------------------------------------- bounded messages


def test_quoted_values_are_cut_whatever_their_size():
    bomb: list = ["A"] * 9
    for _ in range(12):   # 9**13 strings if it were printed whole
        bomb = [bomb] * 9
    started = time.perf_counter()
    shown = [quoted(v) for v in (bomb, "x" * 10**7, list(range(10**6)), {i: i for i in range(10**5)}, 10**5000)]
    assert time.perf_counter() - started < 1.0
    assert all(len(s) < 200 for s in shown)
    assert shown[1].endswith("... (10000000 characters)") and shown[2].endswith("(1000000 items)")
    assert quoted("short") == "'short'" and quoted(7) == "7"


def test_an_alias_bomb_is_refused_before_it_is_built():
    levels = ["handoff:\n  fixed_schedule: [&l0 [A, A, A, A, A, A, A, A, A]"]
    levels += [f", &l{k} [{', '.join([f'*l{k - 1}'] * 9)}]" for k in range(1, 9)]   # 9**9 strings
    text = "agents:\n  - name: A\nedges: [[-1, 0]]\n" + "".join(levels) + "]\n"
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=r"^bomb.yaml: not valid YAML \(its aliases expand to more than 100000"):
        load_yaml(text, "bomb.yaml")
    assert time.perf_counter() - started < 2.0
    # aliases that stay small are YAML as usual
    assert load_yaml("a: &x [1, 2]\nb: *x\n", "ok.yaml") == {"a": [1, 2], "b": [1, 2]}
    with pytest.raises(ConfigError, match="duplicate key 'a' at line 2 .first at line 1."):
        load_yaml("a: 1\na: 2\n", "dup.yaml")


def test_a_huge_value_in_a_config_gives_a_short_line(tmp_path):
    """No alias needed: a fixed schedule whose first entry is a list of 1,000 names (5,000 characters as
    text, so a message that quoted it whole would be over ten times the bound)."""
    from masprm.graph import load_mas_config
    from masprm.handoff.team import HandoffTeam

    config = tmp_path / "big.yaml"
    config.write_text(yaml.safe_dump({"agents": [{"name": "A"}], "edges": [],
                                      "handoff": {"fixed_schedule": [["A"] * 1_000]}}))
    with pytest.raises(ConfigError) as err:
        HandoffTeam.from_graph(load_mas_config(config))
    assert "is not an agent name" in str(err.value) and len(str(err.value)) < 400


def test_the_cli_line_is_bounded(monkeypatch, capsys):
    from masprm.cli import run_cli

    def main():
        raise ConfigError("x" * 10**6)

    monkeypatch.setattr(sys, "argv", ["tool.py"])
    with pytest.raises(SystemExit) as done:
        run_cli(main)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1 and len(err) <= LINE_LIMIT + 40


# --------------------------------------------------------------------------- a stage-1 folder without trees


def test_a_failed_first_run_does_not_block_a_valid_run_with_another_seed(workdir, tiny_model_dir, monkeypatch,
                                                                        capsys):
    from helpers_cli import call_main

    monkeypatch.chdir(workdir)
    base = ["--dataset", "gsm8k", "--data_file", "gsm8k.jsonl", "--model_id", str(tiny_model_dir), "--n", "1",
            "--n_rollouts", "1", "--n_candidates", "2", "--max_new_tokens", "4", "--no_plot", "--no_compile",
            "--mas_config", "configs/gsm8k.yaml"]
    for bad in (["--device_map", "tpu"], ["--attn_impl", "nonsense"]):
        code, _, err = call_main(monkeypatch, capsys, [*base, "--seed", "1", *bad])
        assert code == 2 and bad[0] in err
    assert not (workdir / "results").exists()   # every flag is checked before any output
    # A folder an older failure left: its settings recorded (seed 1), no tree. It claims nothing.
    run = workdir / "results" / run_folder_name("gsm8k", "train", str(tiny_model_dir), 1, 4.0, 2, 0.7, 0.95,
                                                "configs/gsm8k.yaml", max_new_tokens=4)
    run.mkdir(parents=True)
    (run / SETTINGS_FILE).write_text('{"seed": 1, "dataset": "gsm8k"}')
    code, out, err = call_main(monkeypatch, capsys, [*base, "--seed", "7"])
    assert code == 0, err
    assert (run / "0.json").is_file()
    code, _, err = call_main(monkeypatch, capsys, [*base, "--seed", "8"])   # now the folder holds a tree
    assert code == 2 and "--seed was 7, now 8" in err
