"""Stage-1 run folders: one run at a time, the same defining settings on a rerun, corrupt trees rebuilt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from masprm.errors import ConfigError
from masprm.run_folder import LOCK_FILE, SETTINGS_FILE, check_or_record_settings, locked_folder
from masprm.eval.tree_runner import run_trees
from helpers_cli import SMOKE, STAGE1_ROWS, call_main
from helpers_stage1_jobs import EXAMPLES, make_job, random_team

REPO = Path(__file__).resolve().parents[1]
SETTINGS = {"seed": 42, "dataset": "gsm8k", "split": "train", "data_file": {"path": "/d/a.jsonl", "identity": "aa"},
            "model": {"path": "/m/tiny", "identity": "m1"}, "max_new_tokens": None,
            "mas_config": {"path": "/c/gsm8k.yaml", "identity": "c1"}}


def test_settings_are_recorded_and_every_difference_is_named(tmp_path):
    check_or_record_settings(tmp_path, SETTINGS)                   # a new folder: recorded
    assert json.loads((tmp_path / SETTINGS_FILE).read_text()) == SETTINGS
    (tmp_path / "0.json").write_text("{}")            # a record claims the folder once it holds a tree
    check_or_record_settings(tmp_path, SETTINGS)
    moved = {**SETTINGS, "data_file": {"path": "/elsewhere/a.jsonl", "identity": "aa"}}
    check_or_record_settings(tmp_path, moved)    # the same content, wherever it lies now
    assert json.loads((tmp_path / SETTINGS_FILE).read_text()) == SETTINGS
    other = {**SETTINGS, "max_new_tokens": 64, "model": {"path": "/m2/tiny", "identity": "m2"}}
    with pytest.raises(ConfigError) as err:
        check_or_record_settings(tmp_path, other)
    message = str(err.value)
    assert "`max_new_tokens` was None, now 64" in message and "`model_id` was /m/tiny [m1], now /m2/tiny [m2]" in message
    assert "seed" not in message and "\n" not in message


def test_the_policys_4bit_format_is_part_of_the_record(tmp_path):
    from masprm.models.options import ModelFlags
    from masprm.stages.trees import policy_weights

    assert policy_weights(ModelFlags(load_in_4bit=True)) == "4-bit fp4"            # the original's default
    assert policy_weights(ModelFlags(load_in_4bit=True, bnb_4bit_quant_type="nf4")) == "4-bit nf4"
    assert policy_weights(ModelFlags()) == "dtype auto"
    check_or_record_settings(tmp_path, {**SETTINGS, "policy_weights": "4-bit nf4"})
    (tmp_path / "0.json").write_text("{}")
    with pytest.raises(ConfigError, match="`load_in_4bit` was '4-bit nf4', now '4-bit fp4'"):
        check_or_record_settings(tmp_path, {**SETTINGS, "policy_weights": "4-bit fp4"})
    check_or_record_settings(tmp_path, SETTINGS)   # a record from before the key was kept: not compared


def test_a_record_without_trees_claims_nothing(tmp_path):
    """A first run that failed before its first tree binds no later run: its record is replaced."""
    check_or_record_settings(tmp_path, SETTINGS)
    other = {**SETTINGS, "seed": 7}
    check_or_record_settings(tmp_path, other)
    assert json.loads((tmp_path / SETTINGS_FILE).read_text()) == other


def test_trees_without_a_record_of_their_settings_are_refused(tmp_path):
    (tmp_path / "0.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"holds trees but no record of the settings that made them .*`out_root`"):
        check_or_record_settings(tmp_path, SETTINGS)
    assert not (tmp_path / SETTINGS_FILE).exists()


def test_a_corrupt_tree_is_rebuilt_with_one_line(tmp_path, fake_policy):
    job = make_job(tmp_path, plot=False)
    assert run_trees(job, lambda: random_team(fake_policy), EXAMPLES[:3], log=lambda s: None) == (3, [])
    good = (tmp_path / "1.json").read_text()
    (tmp_path / "1.json").write_text(good[: len(good) // 2])          # cut short (e.g. a full disk)
    (tmp_path / "2.json").write_text(json.dumps({"hello": "world"}))  # not a tree
    lines = []
    assert run_trees(job, lambda: random_team(fake_policy), EXAMPLES[:3], log=lines.append) == (2, [])
    assert [ln for ln in lines if "building it again" in ln] == [
        f"{tmp_path / '1.json'}: unreadable (JSONDecodeError); building it again",
        f"{tmp_path / '2.json'}: not a search tree; building it again"]
    assert (tmp_path / "1.json").read_text() == good  # seeded per example: the same tree again


def test_a_lock_dies_with_its_holder(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom masprm.run_folder import announce_holder, locked_folder\n"
         "with locked_folder(sys.argv[1]) as f:\n    announce_holder(f); print('held', flush=True); time.sleep(120)\n",
         str(tmp_path / "run")], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=rf"run is in use by another run \(pid {holder.pid} on .*\); wait"):
            with locked_folder(tmp_path / "run"):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    with locked_folder(tmp_path / "run"):  # the kernel released the lock of the killed process
        pass
    assert not (tmp_path / "run" / LOCK_FILE).exists()


# Stage 1 as a user runs it, except that once it holds its folder it says so and waits for a line on stdin.
HOLD_AFTER_LOCK = """
import sys
from masprm.cli import run_cli
from masprm.stages import trees

announce = trees.announce_holder


def announce_and_wait(folder):
    announce(folder)
    print("held", flush=True)
    sys.stdin.readline()


trees.announce_holder = announce_and_wait
sys.argv = ["run_mcts.py", *sys.argv[1:]]
run_cli(trees.main)
"""


@pytest.mark.slow
def test_two_runs_on_one_folder_the_second_is_refused_and_the_first_finishes(workdir, tiny_model_dir,  # noqa: F811
                                                                             monkeypatch, capsys):
    (workdir / "two.jsonl").write_text("".join(json.dumps(r) + "\n" for r in STAGE1_ROWS[:2]))   # both usable
    args = SMOKE + ["--model_id", str(tiny_model_dir), "--data_file", "two.jsonl", "--no_plot"]
    first = subprocess.Popen([sys.executable, "-c", HOLD_AFTER_LOCK, *args], cwd=workdir, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})
    try:
        for line in first.stdout:   # the event: the first run holds the folder
            if line.strip() == "held":
                break
        else:
            pytest.fail(f"the first run ended without taking its folder: {first.communicate()}")
        [folder] = [workdir / "results" / f"gsm8k_res_train_{Path(tiny_model_dir).name}_r2_c4_cand3_t0p7_p0p95"]
        assert (folder / LOCK_FILE).exists()

        monkeypatch.chdir(workdir)
        second = list(args)
        second[second.index("--seed") + 1] = "7"
        code, _, err = call_main(monkeypatch, capsys, second)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, lines
        assert f"{folder.relative_to(workdir)} is in use by another run (pid {first.pid} on " in lines[0]
        assert "--out_root" in lines[0]

        _, stderr = first.communicate("go\n", timeout=600)   # let the first run go on
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=30)
    assert first.returncode == 0, stderr[-2000:]
    trees = [json.loads((folder / f"{i}.json").read_text()) for i in range(2)]
    assert all(t["meta"]["seed"] == 42 and t["meta"]["index"] == i for i, t in enumerate(trees))
    assert not (folder / LOCK_FILE).exists()
