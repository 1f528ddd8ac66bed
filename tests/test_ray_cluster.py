"""Stages 1 and 4 on a two-node Ray cluster whose nodes run in their own folders (CPU, one core per node).

The nodes are started without this checkout on their import path, so a worker imports masprm only
from what the run ships it; outputs must be byte for byte those of one process, all of them in the
driver's folder and none in a node's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import FakePolicy
from helpers import REPO, files_under
from helpers_cli import call_main, stage1_args
from helpers_ray import free_port, ray_ships, ray_temp_dir
from helpers_stage1_jobs import EXAMPLES, make_job, random_team
from masprm.cluster import PACKAGE_DIR, ClusterSettings
from masprm.data import Example
from masprm.errors import ConfigError
from masprm.parallel import map_examples
from masprm.eval.tree_runner import run_trees

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """Two nodes x 1 CPU, each started in its own empty folder, in a Ray temp folder of their own."""
    from ray.cluster_utils import Cluster

    ray_ships("conftest", "helpers_stage1_jobs", __name__)
    temp = ray_temp_dir()
    folders = [tmp_path_factory.mktemp(f"node{i}") for i in range(2)]
    saved = {name: os.environ.get(name) for name in ("RAY_TMPDIR", "PYTHONPATH")}
    os.environ["RAY_TMPDIR"] = str(temp)    # the cluster's address file goes there, not into /tmp/ray
    here, cluster = os.getcwd(), Cluster()
    try:
        os.environ["PYTHONPATH"] = ""       # what the nodes' workers import comes from the run
        for i, folder in enumerate(folders):
            os.chdir(folder)
            head = {"include_dashboard": False, "dashboard_agent_listen_port": free_port()} if i == 0 else {}
            cluster.add_node(num_cpus=1, object_store_memory=80 * 1024 * 1024, **head)
    finally:
        os.chdir(here)
        restore_env({"PYTHONPATH": saved["PYTHONPATH"]})
    try:
        yield SimpleNamespace(address=cluster.address, folders=folders,
                              settings=ClusterSettings(ray_address=cluster.address, ray_start_timeout=120))
    finally:
        ray.shutdown()
        cluster.shutdown()
        restore_env({"RAY_TMPDIR": saved["RAY_TMPDIR"]})
        shutil.rmtree(temp, ignore_errors=True)


def restore_env(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def nothing() -> None:
    return None


def where_it_ran(state, item: int) -> tuple[str, str, str]:
    import masprm

    return ray.get_runtime_context().get_node_id(), os.getcwd(), masprm.__file__


def test_workers_fill_both_single_cpu_nodes_and_run_the_shipped_package(two_nodes, capsys):
    seen = list(map_examples(nothing, where_it_ran, list(range(6)), workers=2, use_ray=True, progress=False,
                             cluster=two_nodes.settings))
    assert sorted(item for item, _, _ in seen) == list(range(6)) and all(err is None for _, _, err in seen)
    places = {result for _, result, _ in seen}
    assert len({node for node, _, _ in places}) == 2                          # one worker on each node
    assert {cwd for _, cwd, _ in places} == {str(f.resolve()) for f in two_nodes.folders}
    for _, _, module in places:   # neither this checkout nor the installed copy: the package the run shipped
        shipped = Path(module).parent
        assert "runtime_resources" in shipped.parts and not shipped.is_relative_to(REPO)
        assert (shipped / "cluster.py").read_bytes() == (PACKAGE_DIR / "cluster.py").read_bytes()
    assert "ray: joined the Ray cluster at" in capsys.readouterr().out


def run_stage(monkeypatch, capsys, folder: Path, args: list[str], script: str) -> str:
    folder.mkdir()
    monkeypatch.chdir(folder)
    code, out, err = call_main(monkeypatch, capsys, args, script=script)
    assert code == 0, err[-3000:]
    return out


def test_stage1_on_two_nodes_writes_the_trees_of_one_process_in_the_drivers_folder(two_nodes, tiny_model_dir,
                                                                                     tmp_path, monkeypatch, capsys):
    args = stage1_args(tmp_path, tiny_model_dir, n=3) + ["--out_root", "results"]   # relative: the driver's
    run_stage(monkeypatch, capsys, tmp_path / "one", args, "run_mcts")
    out = run_stage(monkeypatch, capsys, tmp_path / "cluster", args + ["--ray_address", two_nodes.address,
                                                                        "--actors", "2"], "run_mcts")
    assert f"joined the Ray cluster at {two_nodes.address}: 2 nodes, CPU 1+1, GPU 0+0" in out
    one, cluster = files_under(tmp_path / "one"), files_under(tmp_path / "cluster")
    assert sorted(Path(name).name for name in one) == [".run_settings", "0.json", "0.png", "1.json", "1.png",
                                                       "2.json", "2.png"]
    assert cluster == one
    assert all(not any(folder.iterdir()) for folder in two_nodes.folders)
    # Resuming works from the driver's folder: nothing is left to build.
    out = run_stage(monkeypatch, capsys, tmp_path / "again", args + ["--out_root", str(tmp_path / "cluster" / "results"),
                                                                      "--ray_address", two_nodes.address], "run_mcts")
    assert "3 trees already" in out and "0 to build" in out


def test_stage4_on_two_nodes_writes_the_logs_of_one_process(two_nodes, tiny_model_dir, tmp_path, monkeypatch,
                                                             capsys):
    stage1 = stage1_args(tmp_path, tiny_model_dir)
    data, team = stage1[stage1.index("--data_file") + 1], stage1[stage1.index("--mas_config") + 1]
    args = ["--dataset", "gsm8k", "--data_file", data, "--mas_config", team, "--seed", "24",
            "--gen_model_id", str(tiny_model_dir), "--methods", "single_pass", "mcts_logprob",
            "--n_simulations", "3", "--max_children", "2", "--max_new_tokens", "6", "--device_map", "cpu",
            "--no_compile", "--logs_dir", "logs"]
    run_stage(monkeypatch, capsys, tmp_path / "one", args + ["--workers", "1"], "compare_sbs_mcts")
    out = run_stage(monkeypatch, capsys, tmp_path / "cluster",
                    args + ["--workers", "2", "--ray_address", two_nodes.address], "compare_sbs_mcts")
    assert "joined the Ray cluster" in out
    one, cluster = files_under(tmp_path / "one"), files_under(tmp_path / "cluster")
    assert len(one) == 8 and cluster == one       # 2 conditions x (log, records, manifest, summary)
    records = [json.loads(line) for name, text in one.items() if name.endswith(".jsonl")
               for line in text.decode().splitlines()]
    assert len(records) == 6 and not any(r["error"] for r in records)
    assert all(not any(folder.iterdir()) for folder in two_nodes.folders)


def test_workers_that_cannot_be_placed_stop_within_the_timeout_with_one_line(two_nodes):
    from ray.util.placement_group import placement_group, remove_placement_group

    ray.init(address=two_nodes.address)
    held = placement_group([{"CPU": 1.0}] * 2, strategy="STRICT_SPREAD")   # another job holds both cores
    try:
        ray.get(held.ready(), timeout=60)
        start = time.monotonic()
        with pytest.raises(ConfigError) as err:
            list(map_examples(nothing, where_it_ran, [0, 1], workers=1, use_ray=True, progress=False,
                              cluster=ClusterSettings(ray_start_timeout=3)))
        assert time.monotonic() - start < 3 + 30
    finally:
        remove_placement_group(held)
        ray.shutdown()
    message = str(err.value)
    assert "\n" not in message and err.value.setting == "ray_start_timeout"
    assert message.startswith("ray: could not place 1 workers x CPU 1 within 3 s (nodes: 2 nodes, CPU 1+1, GPU 0+0;")


def test_a_model_folder_a_node_cannot_read_stops_the_run_before_any_example(two_nodes, tmp_path):
    missing = str(tmp_path / "only_on_the_driver")
    with pytest.raises(ConfigError, match=r"^model_id .*only_on_the_driver: not readable on the Ray node .*; a local "
                                          r"folder must be on a path every node can read") as err:
        list(map_examples(nothing, where_it_ran, [0, 1], workers=2, use_ray=True, progress=False,
                          cluster=two_nodes.settings, shared_paths={"model_id": missing}))
    assert err.value.setting == "model_id"


def dies_once_at(marker: str, question: str):
    """The scripted team, except that the first worker to see `question` is killed (SIGKILL) on the spot."""
    policy = random_team(FakePolicy)
    respond = policy.respond

    def respond_or_die(messages, k, rng):
        if any(question in m["content"] for m in messages):
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        return respond(messages, k, rng)

    policy.respond = respond_or_die
    return policy


def test_a_killed_worker_loses_only_its_examples_and_the_trees_are_unchanged(two_nodes, tmp_path, capsys):
    examples = EXAMPLES + [Example(i, f"What is {i} + 2?", str(i + 2), {"source": "test"}) for i in (4, 5)]
    quiet = lambda line: None  # noqa: E731
    run_trees(make_job(tmp_path / "one", plot=False), partial(random_team, FakePolicy), examples, log=quiet)
    marker = tmp_path / "killed"
    setup = partial(dies_once_at, str(marker), examples[3].question)
    written, failed = run_trees(make_job(tmp_path / "cluster", plot=False), setup, examples, log=quiet,
                                use_ray=True, workers=2, cluster=two_nodes.settings)
    assert marker.exists() and "a worker died" in capsys.readouterr().out   # really, mid-run
    assert (written, failed) == (6, [])
    assert files_under(tmp_path / "cluster") == files_under(tmp_path / "one")
