"""Sizing Ray workers from what each node has, the cluster settings, and the checks a worker makes (no Ray)."""

from __future__ import annotations

import re

import pytest

from masprm.cluster import ClusterSettings, capacity, check_node_paths, local_folders, plan_workers, share_that_fits
from masprm.errors import ConfigError


def nodes(*amounts: tuple[float, float]) -> list[dict[str, float]]:
    return [{"CPU": cpu, "GPU": gpu, "memory": 1e9} for cpu, gpu in amounts]


def test_a_worker_gets_the_largest_share_that_fits_inside_one_node():
    # 2 nodes x 8 CPUs, 3 workers: 5 each (16 // 3) would leave one unplaceable; 4 each puts 2 + 1 on them.
    assert share_that_fits([8, 8], 3) == 4.0
    assert share_that_fits([1, 1], 2) == 1.0      # one worker per single-CPU node
    assert share_that_fits([1, 1], 3) == 0.5      # more workers than cores: halves
    assert share_that_fits([2], 3) == 0.5         # not 2/3: that would not fit one GPU three times
    assert share_that_fits([1], 3) == pytest.approx(1 / 3)
    assert share_that_fits([0, 0], 2) == 0.0
    assert capacity([2, 1], 0.5, devices=True) == 6 and capacity([2], 2 / 3, devices=True) == 2
    assert capacity([2], 2 / 3) == 3              # CPUs pool within a node; GPUs do not


def test_cpu_workers_are_sized_per_node_not_from_the_cluster_total():
    plan = plan_workers(nodes((1, 0), (1, 0)), 2, 0.0, items=10)
    assert (plan.count, plan.cpus, plan.gpus) == (2, 1.0, 0.0)     # the total (2) would fit no node
    plan = plan_workers(nodes((8, 0), (8, 0)), 3, 0.0, items=10)
    assert (plan.count, plan.cpus) == (3, 4.0) and plan.bundle == {"CPU": 4.0}
    assert plan_workers(nodes((8, 0)), 4, 0.0, items=2).count == 2   # never more workers than items


def test_gpu_shares_come_from_the_cluster_gpus():
    # --workers 3 (share None) on a GPU-less head plus two 1-GPU nodes: half a GPU each, not 0.
    plan = plan_workers(nodes((4, 0), (8, 1), (8, 1)), 3, None, items=10)
    assert (plan.count, plan.gpus, plan.cpus) == (3, 0.5, 1.0)
    # no --workers, 0.5 GPU each: one per share on every node; a node with 1 CPU for 4 workers gives a quarter
    plan = plan_workers(nodes((8, 2), (1, 2)), None, 0.5, items=100)
    assert (plan.count, plan.gpus, plan.cpus) == (8, 0.5, 0.25)
    plan = plan_workers(nodes((2, 0), (2, 0)), None, 1.0, items=10)   # GPUs asked for, none there
    assert (plan.count, plan.gpus) == (1, 0.0) and "no GPU found" in plan.note


def test_gpu_workers_that_fit_no_node_are_refused_at_once():
    with pytest.raises(ConfigError, match=r"^2 workers x 2 GPUs each do not fit: a worker must fit one node "
                                          r".*the nodes' GPUs \(1\+1\) hold 0$"):
        plan_workers(nodes((8, 1), (8, 1)), 2, 2.0, items=10)
    with pytest.raises(ConfigError, match=r"^3 workers x 0.666667 GPUs each do not fit.*\(2\) hold 2$"):
        plan_workers(nodes((8, 2)), 3, 2 / 3, items=10)


def test_the_cluster_address_is_the_flag_then_ray_address(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert ClusterSettings().address is None                          # a private local instance
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert ClusterSettings().address == "10.0.0.5:6379"
    assert ClusterSettings(ray_address="10.0.0.9:6379").address == "10.0.0.9:6379"
    with pytest.raises(ConfigError, match="ray_start_timeout must be > 0") as err:
        ClusterSettings(ray_start_timeout=0)
    assert err.value.setting == "ray_start_timeout"
    with pytest.raises(ConfigError, match="ray_retries must be >= 0"):
        ClusterSettings(ray_retries=-1)


def test_local_folders_are_absolute_and_hub_ids_left_out(tmp_path, monkeypatch):
    (tmp_path / "model").mkdir()
    monkeypatch.chdir(tmp_path)
    got = local_folders({"model_id": "model", "prm_dir": None, "base": "Qwen/Qwen2.5-1.5B-Instruct"})
    assert got == {"model_id": str(tmp_path / "model")}


def test_a_folder_a_node_cannot_read_is_one_line_naming_the_shared_path_rule(tmp_path):
    check_node_paths({"model_id": str(tmp_path)})   # readable: nothing to say
    missing = str(tmp_path / "only_on_the_driver")
    with pytest.raises(ConfigError) as err:
        check_node_paths({"gen_model_id": missing})
    message = str(err.value)
    assert err.value.setting == "gen_model_id" and "\n" not in message
    assert re.fullmatch(rf"gen_model_id {re.escape(missing)}: not readable on the Ray node \S+; a local folder "
                        r"must be on a path every node can read \(a shared file system\), or give a hub id, "
                        r"which every node fetches itself", message)


def test_stage4_workers_get_absolute_model_folders_named_by_their_flags(tmp_path, monkeypatch):
    from masprm.eval.runner import ModelSpec, for_workers

    for name in ("policy", "prm", "base"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path)
    specs = {"policy": ModelSpec("policy", "policy", setting="gen_model_id"),
             "masprm": ModelSpec("scorer", "prm", "base", setting="prm_dir"),
             "orm": ModelSpec("scorer", "Org/orm", "Qwen/Qwen2.5-1.5B-Instruct", setting="orm_dir")}
    on_workers, folders = for_workers(specs)
    assert folders == {"gen_model_id": str(tmp_path / "policy"), "prm_dir": str(tmp_path / "prm"),
                       "prm_base_model_id": str(tmp_path / "base")}
    assert on_workers["masprm"] == ModelSpec("scorer", str(tmp_path / "prm"), str(tmp_path / "base"), setting="prm_dir")
    assert on_workers["orm"] == specs["orm"]          # hub ids: every node fetches them itself


@pytest.mark.parametrize("cause, problem", [
    ("Failed to connect to GCS. Unauthenticated: InvalidAuthToken", "the cluster asks for its authentication "
     "token: set RAY_AUTH_MODE=token, with the token in $RAY_AUTH_TOKEN, $RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token"),
    ("Failed to connect to GCS within 20 seconds", "cannot join a Ray cluster there (Failed to connect to Ray "
     "cluster at 10.0.0.5:6379)"),
])
def test_a_cluster_that_cannot_be_joined_is_one_line_naming_where_the_address_came_from(monkeypatch, cause, problem):
    from masprm.cluster import ray_session

    ray = pytest.importorskip("ray")

    def refuse(**kw):   # what ray.init raises when the head refuses or does not answer
        try:
            raise RuntimeError(cause)
        except RuntimeError as err:
            raise ConnectionError(f"Failed to connect to Ray cluster at {kw['address']}") from err

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setenv("RAY_BACKEND_LOG_LEVEL", "error")   # ray_session sets it: put back after
    with pytest.raises(ConfigError) as err, ray_session(ClusterSettings(ray_address="10.0.0.5:6379"), local_cpus=1):
        pass
    assert str(err.value) == f"ray_address 10.0.0.5:6379: {problem}" and err.value.setting == "ray_address"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    with pytest.raises(ConfigError) as err, ray_session(ClusterSettings(), local_cpus=1):
        pass
    assert str(err.value) == f"$RAY_ADDRESS 10.0.0.5:6379: {problem}" and err.value.setting is None
