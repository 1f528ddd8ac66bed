"""Services a run connects to, checked in seconds before any model loads: a Ray head that does not answer
(--ray_connect_timeout), wandb without a login in a run that cannot ask, an mlflow server that is down."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import time

import pytest

from helpers_cli import RUN_MCTS, stage1_args
from helpers_ray import free_port
from helpers_training import config, ppm_record, write_jsonl
from masprm.cli import error_line
from masprm.cluster import ClusterSettings, check_reachable
from masprm.errors import ConfigError
from masprm.train import tracking


def test_a_ray_head_that_refuses_is_one_line_naming_the_address_and_the_flag():
    address = f"127.0.0.1:{free_port()}"   # nothing listens there
    with pytest.raises(ConfigError) as err:
        check_reachable(ClusterSettings(ray_address=address))
    line = error_line(err.value, {"ray_address": "--ray_address", "ray_connect_timeout": "--ray_connect_timeout"})
    assert line.startswith(f"--ray_address {address}: nothing answers there within 30 s (Connection refused)")
    assert "--ray_connect_timeout" in line


def test_a_server_that_is_no_ray_head_gives_up_after_the_connect_timeout(monkeypatch):
    """It accepts the connection and says nothing: ray.init would wait for it for minutes."""
    pytest.importorskip("grpc")
    assert ClusterSettings().ray_connect_timeout <= 60
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        address = f"127.0.0.1:{server.getsockname()[1]}"
        monkeypatch.setenv("RAY_ADDRESS", address)
        start = time.monotonic()
        with pytest.raises(ConfigError, match=rf"^\$RAY_ADDRESS {address}: nothing answers there within 1 s "
                                              r"\(a server answers there, but no Ray head\)"):
            check_reachable(ClusterSettings(ray_connect_timeout=1))
        assert time.monotonic() - start < 5
    with pytest.raises(ConfigError, match="ray_connect_timeout must be > 0"):
        ClusterSettings(ray_connect_timeout=0)


def test_a_grpc_server_and_addresses_ray_resolves_pass():
    grpc = pytest.importorskip("grpc")
    from concurrent.futures import ThreadPoolExecutor

    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        check_reachable(ClusterSettings(ray_address=f"127.0.0.1:{port}"))
        check_reachable(ClusterSettings(ray_address=f"ray://127.0.0.1:{port}"))
    finally:
        server.stop(None)
    check_reachable(ClusterSettings(ray_address="auto"))   # Ray's own address file: not ours to probe


@pytest.mark.slow
def test_stage1_with_a_dead_ray_address_stops_in_one_line(tmp_path, tiny_model_dir):
    pytest.importorskip("ray")
    address = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(RUN_MCTS), *stage1_args(tmp_path, tiny_model_dir, n=1), "--no_plot",
                           "--ray_address", address, "--ray_connect_timeout", "5"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].endswith(
        f"error: --ray_address {address}: nothing answers there within 5 s (Connection refused); check the head's "
        "host and port (`ray status` on the head prints them), or raise --ray_connect_timeout")
    assert time.monotonic() - start < 120


# --------------------------------------------------------------------------- tracking integrations


@pytest.fixture
def no_wandb_login(monkeypatch, tmp_path):
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    monkeypatch.setattr(tracking, "_interactive", lambda: False)
    return tmp_path / "netrc"


def test_wandb_without_a_key_in_a_run_that_cannot_ask_is_refused(no_wandb_login, monkeypatch):
    assert "set WANDB_API_KEY (or run `wandb login` once), or WANDB_MODE=offline" in tracking.wandb_problem()
    with pytest.raises(ConfigError, match=r"^report_to wandb: wandb has no login"):
        tracking.check_trackers_start(["tensorboard", "wandb"])
    no_wandb_login.write_text("machine api.wandb.ai\n  login user\n  password abc\n")   # `wandb login`'s entry
    assert tracking.wandb_problem() is None
    no_wandb_login.unlink()
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert tracking.wandb_problem() is None
    monkeypatch.delenv("WANDB_MODE")
    monkeypatch.setenv("WANDB_API_KEY", "k")
    assert tracking.wandb_problem() is None
    monkeypatch.delenv("WANDB_API_KEY")
    monkeypatch.setattr(tracking, "_interactive", lambda: True)   # a terminal: wandb asks there
    assert tracking.wandb_problem() is None


def test_mlflow_pointed_at_a_server_that_is_down_is_refused(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.mlflow_problem() is None            # local ./mlruns
    port = free_port()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    assert tracking.mlflow_problem() == (
        f"mlflow's server at MLFLOW_TRACKING_URI=http://127.0.0.1:{port} does not answer (Connection refused): "
        f"start it (`mlflow server --host 0.0.0.0 --port {port}`), point MLFLOW_TRACKING_URI at a running one, or "
        "unset it to log to ./mlruns")
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen(1)
        assert tracking.mlflow_problem() is None


def test_training_with_wandb_and_no_login_stops_before_the_model_and_writes_nothing(no_wandb_login, monkeypatch,
                                                                                    tmp_path):
    """wandb counts as installed here (the test venv need not have it): the login check is what stops."""
    from transformers.integrations import integration_utils

    from masprm.train import train_scorer

    monkeypatch.setattr(integration_utils, "get_available_reporting_integrations", lambda: ["wandb", "tensorboard"])
    data = write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(random.Random(i)) for i in range(4)])
    model = tmp_path / "not_loaded"   # the check comes first: a missing model would be a later error
    cfg = config(tmp_path, data, model, "ppm", report_to=["wandb"])
    monkeypatch.setattr("masprm.train.trainer.check_local_model", lambda *a, **k: None)
    monkeypatch.setattr("masprm.train.trainer.check_model_serves", lambda *a, **k: None)
    with pytest.raises(ConfigError, match="^report_to wandb: wandb has no login"):
        train_scorer(cfg)
    assert not (tmp_path / "out_ppm").exists()
    monkeypatch.setattr(integration_utils, "get_available_reporting_integrations", lambda: ["wandb"])
    with pytest.raises(ConfigError, match="^report_to wandb: wandb has no login"):
        train_scorer(config(tmp_path, data, model, "ppm", report_to=["all"]))
