"""Joining a cluster started by `ray start --head` (stage 1 by --ray_address, stage 4 by $RAY_ADDRESS, both run as
a user runs them), and runs without an address that a left-over address file in Ray's temp folder must not send
anywhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import files_under
from helpers_cli import EVAL_SCRIPT, FAST, RUN_MCTS, stage1_args
from helpers_ray import free_port, ray_ships, ray_temp_dir
from masprm.parallel import map_examples

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """`ray start --head --block` on a free port, with its own temp folder; stopped (SIGTERM) at the end."""
    temp = ray_temp_dir()
    folder = tmp_path_factory.mktemp("head")
    log = (folder / "ray_start.log").open("w")
    cmd = [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", f"--port={free_port()}",
           f"--temp-dir={temp}", "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false",
           f"--dashboard-agent-listen-port={free_port()}", "--disable-usage-stats"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}   # Ray's defaults: a token is asked for
    env.update(RAY_TMPDIR=str(temp), PYTHONPATH="")   # workers get masprm from the run only
    proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        address_file, deadline = temp / "ray_current_cluster", time.monotonic() + 180
        while not address_file.is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert address_file.is_file(), (folder / "ray_start.log").read_text()[-3000:]
        yield address_file.read_text().strip()
    finally:
        proc.terminate()   # --block: the head stops every process it started
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def run(script: Path, args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """A stage script as a user runs it; Ray's own variables only as given here."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**base, **env})


def test_stage1_joins_the_cluster_given_by_ray_address(head, tiny_model_dir, tmp_path):
    args = stage1_args(tmp_path, tiny_model_dir, n=2) + ["--no_plot", "--ray_address", head]
    done = run(RUN_MCTS, args, tmp_path, RAY_AUTH_MODE="token")   # `ray start` asks for its token by default
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"ray: joined the Ray cluster at {head}: 1 node, CPU 2, GPU 0" in done.stdout
    trees = [Path(name).name for name in files_under(tmp_path / "results") if name.endswith(".json")]
    assert sorted(trees) == ["0.json", "1.json"]


def test_stage4_joins_the_cluster_given_by_RAY_ADDRESS(head, tiny_model_dir, tmp_path):
    stage1 = stage1_args(tmp_path, tiny_model_dir)
    args = ["--dataset", "gsm8k", "--data_file", stage1[stage1.index("--data_file") + 1], "--mas_config",
            stage1[stage1.index("--mas_config") + 1], "--gen_model_id", str(tiny_model_dir), "--methods",
            "single_pass", *FAST, "--logs_dir", "logs"]   # no --workers: sized on the cluster
    done = run(EVAL_SCRIPT, args, tmp_path, RAY_ADDRESS=head, RAY_AUTH_MODE="token")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"ray: joined the Ray cluster at {head}: 1 node, CPU 2, GPU 0" in done.stdout
    logs = files_under(tmp_path / "logs")
    assert len(logs) == 4 and any(b"COMPLETED" in text for name, text in logs.items() if name.endswith(".txt"))


def test_joining_without_the_clusters_token_is_one_line(head, tiny_model_dir, tmp_path):
    args = stage1_args(tmp_path, tiny_model_dir, n=1) + ["--no_plot", "--ray_address", head]
    done = run(RUN_MCTS, args, tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"run_mcts.py: error: --ray_address {head}: the cluster asks for its authentication token: set "
        "RAY_AUTH_MODE=token, with the token in $RAY_AUTH_TOKEN, $RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token")


def plus_one(state, item: int) -> int:
    return item + 1


def nothing() -> None:
    return None


@pytest.mark.parametrize("left_over", ["stale", "live"])
def test_an_address_file_left_in_rays_temp_folder_does_not_decide_where_a_run_goes(head, monkeypatch, capsys,
                                                                                  left_over):
    # `ray start` writes <temp>/ray/ray_current_cluster and `ray stop` leaves it: Ray's own default would try to
    # join whatever it names (a dead port, or a cluster this run has nothing to do with).
    temp = ray_temp_dir()
    try:
        (temp / "ray").mkdir()
        (temp / "ray" / "ray_current_cluster").write_text("127.0.0.1:1" if left_over == "stale" else head)
        monkeypatch.setenv("RAY_TMPDIR", str(temp))
        for name in ("RAY_ADDRESS", "RAY_AUTH_MODE"):   # a local ray.init sets RAY_AUTH_MODE here: undo it after
            monkeypatch.delenv(name, raising=False)
        ray_ships(__name__)
        got = sorted(result for _, result, _ in map_examples(nothing, plus_one, [1, 2, 3], workers=2, use_ray=True,
                                                             progress=False))
        assert got == [2, 3, 4]
        assert "ray: started a private local Ray instance: 1 node" in capsys.readouterr().out
    finally:
        shutil.rmtree(temp, ignore_errors=True)
