"""The shared example runner: in-process and on local Ray actors (CPU only)."""

from __future__ import annotations

import json
import logging
import os
import signal
from functools import partial

import pytest

from helpers_ray import ray_ships
from masprm.errors import ConfigError, ModelError
from masprm.data import Example
from masprm.graph import MASGraph
from masprm import parallel
from masprm.cluster import ClusterSettings, runtime_env
from masprm.parallel import map_examples
from masprm.eval.tree_runner import TreeJob, run_trees
from masprm.search.train_mcts import TreeSearchSettings

ITEMS = list(range(8))


# Module-level, so Ray actors can unpickle them by reference.
def make_state(offset: int) -> dict:
    return {"offset": offset, "setups": 1}


def add_offset(state: dict, item: int) -> int:
    if item == 3:
        raise ValueError(f"item {item} is broken")
    return item + state["offset"]


def bad_setup() -> None:
    raise ModelError("model_id nowhere: no such model folder", setting="model_id")


def crashing_setup() -> None:
    raise RuntimeError("out of memory")


def collect(outcomes):
    return {item: (result, error) for item, result, error in outcomes}


def check_outcomes(got: dict) -> None:
    assert sorted(got) == ITEMS  # every item exactly once
    assert all(got[i] == (i + 100, None) for i in ITEMS if i != 3)
    result, error = got[3]
    assert result is None and error.startswith("ValueError: item 3 is broken (at test_parallel.py:")


def test_local_runs_setup_once_and_reports_failures_per_item():
    setups = []

    def setup():
        setups.append(1)
        return make_state(100)

    outcomes = list(map_examples(setup, add_offset, ITEMS, progress=False))
    assert [item for item, _, _ in outcomes] == ITEMS  # in order, in this process
    check_outcomes(collect(outcomes))
    assert len(setups) == 1


def test_local_setup_usage_error_stops_the_run():
    with pytest.raises(ModelError, match="no such model folder"):
        list(map_examples(bad_setup, add_offset, ITEMS, progress=False))


def test_nothing_to_do_starts_nothing():
    assert list(map_examples(bad_setup, add_offset, [], use_ray=True)) == []


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray_ships(__name__)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
             object_store_memory=100 * 1024 * 1024, runtime_env=runtime_env())
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_two_workers_same_outcomes(local_ray):
    got = collect(map_examples(partial(make_state, 100), add_offset, ITEMS, workers=2, use_ray=True,
                               num_gpus_per_worker=1.0, progress=False))  # no GPU here: CPU actors
    check_outcomes(got)


@pytest.mark.slow
def test_ray_setup_errors_reach_the_driver(local_ray):
    with pytest.raises(ModelError, match="^model_id nowhere: no such model folder$") as err:
        list(map_examples(bad_setup, add_offset, ITEMS, workers=1, use_ray=True, progress=False))
    assert err.value.setting == "model_id"   # the CLI can still name the flag
    with pytest.raises(RuntimeError, match="worker setup failed: RuntimeError: out of memory"):
        list(map_examples(crashing_setup, add_offset, ITEMS, workers=1, use_ray=True, progress=False))


@pytest.mark.slow
def test_ray_refuses_more_gpu_workers_than_gpus(local_ray, monkeypatch):
    monkeypatch.setattr(parallel, "node_resources", lambda: [{"CPU": 2.0, "GPU": 1.0}])
    with pytest.raises(ConfigError, match=r"2 workers x 1 GPUs each do not fit: .* the nodes' GPUs \(1\) hold 1$"):
        list(map_examples(partial(make_state, 0), add_offset, ITEMS, workers=2, use_ray=True,
                          num_gpus_per_worker=1.0, progress=False))


def killed_at_2(state: dict, item: int) -> int:
    if item == 2:   # whichever worker runs item 2 dies on the spot, as on a lost node
        os.kill(os.getpid(), signal.SIGKILL)
    return item


@pytest.mark.slow
def test_ray_reruns_the_examples_of_dead_workers_a_bounded_number_of_times(local_ray, capsys):
    got = collect(map_examples(partial(make_state, 0), killed_at_2, list(range(6)), workers=2, use_ray=True,
                               progress=False, cluster=ClusterSettings(ray_retries=1)))
    assert sorted(got) == list(range(6))                  # every item reported once
    assert got[2][1].startswith("worker died 2 times running it: ")   # first run + one rerun, each killed one
    assert all(got[i] in ((i, None), (None, "not run: every worker died")) for i in got if i != 2)
    assert capsys.readouterr().out.count("ray: a worker died") == 1   # the rerun is announced once
    # One worker, no reruns: item 2 takes it down, and what was still queued is reported, not lost.
    got = collect(map_examples(partial(make_state, 0), killed_at_2, list(range(6)), workers=1, use_ray=True,
                               progress=False, cluster=ClusterSettings(ray_retries=0)))
    assert [got[i] for i in (0, 1)] == [(0, None), (1, None)] and got[2][1].startswith("worker died 1 times")
    assert [got[i] for i in (3, 4, 5)] == [(None, "not run: every worker died")] * 3


# --------------------------------------------------------------------------- trees on the tiny model


TEAM = MASGraph.from_dict({
    "agents": [{"name": "reader", "system_prompt": "Read the question.", "max_new_tokens": 6},
               {"name": "solver", "system_prompt": "Solve it. End with Answer: <number>.", "max_new_tokens": 6}],
    "edges": [[-1, 0], [-1, 1], [0, 1]],
})


def one_thread_policy(model_dir: str):
    """The tiny model with one torch thread in every process, so float sums match bit for bit."""
    import torch

    from masprm.models.loading import ModelOptions
    from masprm.models.policy import HFPolicy

    torch.set_num_threads(1)
    return HFPolicy(model_dir, ModelOptions(device_map="cpu"))


@pytest.mark.slow
def test_ray_trees_equal_single_process_trees(tmp_path, tiny_model_dir, local_ray):
    examples = [Example(i, f"Tom has {i} apples and buys 3 more. How many now?", str(i + 3)) for i in range(3)]
    setup = partial(one_thread_policy, str(tiny_model_dir))
    settings = TreeSearchSettings(n_rollouts=3, n_candidates=2, temperature=1.0, top_p=0.95)
    meta = {"dataset": "toy", "split": "train", "config": "team", "model": str(tiny_model_dir)}
    quiet = lambda line: None  # noqa: E731
    for name, kw in (("single", {}), ("ray", {"use_ray": True, "workers": 2})):
        job = TreeJob(TEAM, settings, str(tmp_path / name), 7, meta, plot=False)
        assert run_trees(job, setup, examples, log=quiet, **kw) == (3, [])
    for i in range(3):
        single = json.loads((tmp_path / "single" / f"{i}.json").read_text())
        assert single == json.loads((tmp_path / "ray" / f"{i}.json").read_text())
        assert single["meta"]["stats"]["policy_calls"] >= 2
    # Sampling really depends on the example seed: not every tree is the same.
    texts = {json.dumps([c["node_text"] for c in json.loads((tmp_path / "single" / f"{i}.json").read_text())["children"]])
             for i in range(3)}
    assert len(texts) > 1
