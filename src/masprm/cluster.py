"""The Ray cluster a run's workers live on: joining it, sizing the workers, placing them.

    with ray_session(ClusterSettings(ray_address="10.0.0.5:6379"), local_cpus=8):
        plan = plan_workers(node_resources(), workers=None, gpus_each=0.5, items=100)
        group = place_workers(plan, timeout_s=300)

``ray_session`` joins the cluster at ``--ray_address`` (or ``$RAY_ADDRESS``,
Ray's own convention) with no resource arguments, or, with neither, starts a
private local instance (``address="local"``), so the address file an earlier
``ray start`` left in Ray's temp folder never decides where a run goes. Either
way the masprm package travels to every worker as a Ray ``py_modules`` entry:
workers on another machine need no checkout, and never import a different
copy than the driver's.

Workers are sized from what each node has, since a worker cannot span
nodes: ``share_that_fits`` gives the largest amount of CPUs or GPUs each of N
workers can get (whole units, or 1/k of one) with every worker inside one
node. ``place_workers`` reserves them all in a placement group and stops with
one line naming the resources when they cannot be had within the start-up
timeout. Ray is imported only inside the functions that need it.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from masprm.checks import connect_problem, url_endpoint
from masprm.config import arg, require, require_each
from masprm.errors import ConfigError, first_line

OBJECT_STORE_BYTES = 128 * 1024 * 1024  # a private instance: results are trees and records; keep shared memory small
_EPS = 1e-9
PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class ClusterSettings:
    """Where Ray workers run and how long a run waits for them (stages 1 and 4)."""

    ray_address: str | None = arg(None, flags=("--ray_address",),
                                  help="join this running Ray cluster (host:port of its head, or 'auto'); "
                                       "default: $RAY_ADDRESS, else a private Ray instance on this machine. "
                                       "An address means the run uses Ray")
    ray_start_timeout: float = arg(300.0, flags=("--ray_start_timeout",),
                                   help="seconds to wait for the cluster to place every worker before the run "
                                        "stops naming the resources it could not get (default: 300)")
    ray_connect_timeout: float = arg(30.0, flags=("--ray_connect_timeout",),
                                     help="seconds to wait for the head at --ray_address (or $RAY_ADDRESS) to "
                                          "answer before the run stops with one line (default: 30)")
    ray_retries: int = arg(2, flags=("--ray_retries",),
                           help="times an example is rerun on another worker after the worker running it died "
                                "(default: 2)")

    def __post_init__(self) -> None:
        require(math.isfinite(self.ray_start_timeout) and self.ray_start_timeout > 0, "ray_start_timeout",
                f"ray_start_timeout must be > 0 seconds, got {self.ray_start_timeout:g}")
        require(math.isfinite(self.ray_connect_timeout) and self.ray_connect_timeout > 0, "ray_connect_timeout",
                f"ray_connect_timeout must be > 0 seconds, got {self.ray_connect_timeout:g}")
        require_each(self, ("ray_retries",), lambda v: v >= 0, "must be >= 0")

    @property
    def address(self) -> str | None:
        """The cluster to join: the flag, else $RAY_ADDRESS; None for a private local instance."""
        return self.ray_address or os.environ.get("RAY_ADDRESS") or None


def runtime_env() -> dict[str, Any]:
    """The job's Ray runtime environment: this masprm package, shipped to every worker."""
    return {"py_modules": [str(PACKAGE_DIR)], "excludes": ["__pycache__/", "*.pyc"]}


@contextmanager
def ray_session(settings: ClusterSettings, *, local_cpus: int, say=print) -> Iterator[None]:
    """Connect this process to Ray for the block: the given cluster, or a private local instance.

    A connection the caller made before (a notebook, a test) is used as it is, and left open.
    """
    import ray   # optional (the `ray` extra): only when workers run on Ray

    if ray.is_initialized():
        yield
        return
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")   # Ray's core would retry a bad join noisily
    address = settings.address
    quiet = {"log_to_driver": False, "logging_level": logging.ERROR, "configure_logging": True,
             "runtime_env": runtime_env()}
    if address:
        from ray.exceptions import RayError

        check_reachable(settings)
        try:
            ray.init(address=address, **quiet)   # a cluster has its own resources: none may be given
        except (ConnectionError, ValueError, RuntimeError, RayError) as err:   # e.g. a Ray version mismatch
            setting = "ray_address" if settings.ray_address else None
            raise ConfigError(f"{setting or '$RAY_ADDRESS'} {address}: {_join_problem(err)}",
                              setting=setting) from None
    else:
        ray.init(address="local", num_cpus=local_cpus, include_dashboard=False,
                 object_store_memory=OBJECT_STORE_BYTES, **quiet)
    try:
        nodes = node_resources()
        where = f"joined the Ray cluster at {ray.get_runtime_context().gcs_address}" if address else \
            "started a private local Ray instance"
        say(f"ray: {where}: {describe_nodes(nodes)}")
        yield
    finally:
        ray.shutdown()


def check_reachable(settings: ClusterSettings) -> None:
    """One line, within --ray_connect_timeout, when nothing answers at the cluster's address.

    ray.init retries an address that does not answer for minutes (its C++ core warning every few
    seconds). A TCP connection says in seconds when nothing listens; a gRPC handshake (a Ray head,
    and Ray's client server behind ray://, speak gRPC) when something listens that is no Ray head.
    """
    address = settings.address
    endpoint = url_endpoint(address) if address else None   # 'auto' and the like: Ray resolves them
    if endpoint is None:
        return
    start = time.monotonic()
    why = connect_problem(*endpoint, settings.ray_connect_timeout)
    if why is None and not _speaks_grpc(endpoint, settings.ray_connect_timeout - (time.monotonic() - start)):
        why = "a server answers there, but no Ray head"
    if why:
        setting = "ray_address" if settings.ray_address else None
        raise ConfigError(f"{setting or '$RAY_ADDRESS'} {address}: nothing answers there within "
                          f"{settings.ray_connect_timeout:g} s ({why}); check the head's host and port "
                          "(`ray status` on the head prints them), or raise `ray_connect_timeout`",
                          setting=setting) from None


def _speaks_grpc(endpoint: tuple[str, int], timeout: float) -> bool:
    """Whether a gRPC channel to the endpoint gets ready within `timeout` (True when grpc is not installed)."""
    try:
        import grpc   # Ray's own dependency
    except ImportError:
        return True
    channel = grpc.insecure_channel(f"{endpoint[0]}:{endpoint[1]}", options=[("grpc.enable_http_proxy", 0)])
    try:
        grpc.channel_ready_future(channel).result(timeout=max(timeout, 0.1))
        return True
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()


def _join_problem(err: BaseException) -> str:
    """Why joining failed, in words: Ray's clusters ask for a token by default, and Ray sends none to an
    address it is given unless told to (RAY_AUTH_MODE=token)."""
    chain, seen = [], err
    while seen is not None:
        chain.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    if "auth" in " ".join(chain).lower() and os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        return ("the cluster asks for its authentication token: set RAY_AUTH_MODE=token, with the token in "
                "$RAY_AUTH_TOKEN, $RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token")
    return f"cannot join a Ray cluster there ({first_line(err)})"


# --------------------------------------------------------------------------- what the nodes have


def node_resources() -> list[dict[str, float]]:
    """Each live node's total resources (CPU, GPU, ...), as Ray reports them."""
    import ray   # optional (the `ray` extra): only when workers run on Ray

    return [{k: float(v) for k, v in node["Resources"].items()} for node in ray.nodes() if node.get("Alive")]


def _amount(value: float) -> str:
    return f"{value:g}"


def describe_nodes(nodes: list[dict[str, float]]) -> str:
    """'2 nodes, CPU 1+1, GPU 0': the per-node amounts a worker has to fit in."""
    parts = [f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}"]
    for resource in ("CPU", "GPU"):
        parts.append(f"{resource} " + "+".join(_amount(n.get(resource, 0.0)) for n in nodes) if nodes
                     else f"{resource} 0")
    return ", ".join(parts)


def capacity(per_node: list[float], amount: float, *, devices: bool = False) -> int:
    """How many workers of `amount` each fit, every worker inside one node.

    ``devices``: the amounts count devices (GPUs), and a share below one must fit one device:
    3 workers of 2/3 GPU do not fit two GPUs.
    """
    if amount <= 0:
        raise ValueError("capacity of a zero amount")
    if devices and amount < 1:
        return sum(math.floor(have + _EPS) * math.floor(1 / amount + _EPS) for have in per_node)
    return sum(math.floor(have / amount + _EPS) for have in per_node)


def share_that_fits(per_node: list[float], count: int) -> float:
    """The largest amount each of `count` workers can get, inside one node each: a whole number, or 1/k of one.

    0 when the nodes have none of it. One node with 2 GPUs and 3 workers gives 1/2 (not 2/3:
    Ray does not split a worker over two GPUs).
    """
    if count < 1 or max(per_node, default=0.0) <= 0:
        return 0.0
    for whole in range(math.floor(max(per_node) + _EPS), 0, -1):
        if capacity(per_node, whole) >= count:
            return float(whole)
    k = 2
    while capacity(per_node, 1.0 / k) < count:
        k += 1
    return 1.0 / k


@dataclass(frozen=True)
class WorkerPlan:
    count: int
    cpus: float     # each worker's CPUs
    gpus: float     # each worker's GPUs (0: a CPU worker)
    note: str = ""  # a line to show, e.g. that GPUs were asked for and there are none

    @property
    def bundle(self) -> dict[str, float]:
        return {k: v for k, v in (("CPU", self.cpus), ("GPU", self.gpus)) if v > 0}


def plan_workers(nodes: list[dict[str, float]], workers: int | None, gpus_each: float | None,
                 items: int) -> WorkerPlan:
    """How many workers, with how many CPUs and GPUs each, from what each node has.

    ``workers=None``: as many as the nodes' GPUs hold at ``gpus_each`` (one on a cluster
    without GPUs). ``gpus_each=None``: the largest share of the nodes' GPUs that gives every
    one of ``workers`` its own (0 without GPUs). CPU workers share the nodes' cores; a GPU
    worker gets one core to feed it, less where a node has more of its workers than cores.
    """
    gpu_nodes = [n.get("GPU", 0.0) for n in nodes]
    cpu_nodes = [n.get("CPU", 0.0) for n in nodes]
    note = ""
    if gpus_each is None:
        gpus_each = share_that_fits(gpu_nodes, workers) if workers else 1.0
    if gpus_each > 0 and sum(gpu_nodes) == 0:
        note, gpus_each = "ray: no GPU found; workers run on CPUs", 0.0
    if workers is None:
        workers = max(1, capacity(gpu_nodes, gpus_each, devices=True)) if gpus_each else 1
    workers = max(1, min(workers, items))
    if gpus_each > 0:
        fits = capacity(gpu_nodes, gpus_each, devices=True)
        if fits < workers:  # Ray would wait forever for the missing GPUs
            raise ConfigError(f"{workers} workers x {gpus_each:g} GPUs each do not fit: a worker must fit one "
                              f"node (a share below 1, one GPU), and the nodes' GPUs "
                              f"({'+'.join(map(_amount, gpu_nodes))}) hold {fits}")
        per_node = [(cpus, capacity([gpus], gpus_each, devices=True)) for cpus, gpus in zip(cpu_nodes, gpu_nodes)]
        cpus_each = min([1.0] + [cpus / k for cpus, k in per_node if k > 0])
        return WorkerPlan(workers, cpus_each, gpus_each, note)
    cpus_each = share_that_fits(cpu_nodes, workers)
    if cpus_each == 0:
        raise ConfigError(f"no Ray node has CPUs for a worker ({describe_nodes(nodes)})")
    return WorkerPlan(workers, cpus_each, 0.0, note)


def place_workers(plan: WorkerPlan, timeout_s: float, say=print) -> Any:
    """Reserve every worker's resources in one placement group, spread over the nodes; returns it.

    Stops with a ConfigError naming the resources when the cluster has not granted them
    within ``timeout_s`` (they may be held by other jobs, or belong to nodes that are gone).
    """
    import ray   # optional (the `ray` extra): only when workers run on Ray
    from ray.util.placement_group import placement_group, remove_placement_group

    group = placement_group([plan.bundle] * plan.count, strategy="SPREAD")
    ready = group.ready()
    waited = min(10.0, timeout_s)
    done, _ = ray.wait([ready], timeout=waited)
    if not done and timeout_s > waited:
        say(f"ray: waiting up to {timeout_s - waited:g} s more for {plan.count} workers x {_bundle_text(plan)}")
        done, _ = ray.wait([ready], timeout=timeout_s - waited)
    if not done:
        remove_placement_group(group)
        free = {k: v for k, v in ray.available_resources().items() if k in ("CPU", "GPU")}
        raise ConfigError(f"ray: could not place {plan.count} workers x {_bundle_text(plan)} within "
                          f"{timeout_s:g} s (nodes: {describe_nodes(node_resources())}; free now: "
                          f"{_bundle_text(free) or 'none'}); free those resources, ask for fewer or smaller "
                          "workers, or wait longer with `ray_start_timeout`", setting="ray_start_timeout")
    return group


def _bundle_text(plan_or_amounts: WorkerPlan | Mapping[str, float]) -> str:
    amounts = plan_or_amounts.bundle if isinstance(plan_or_amounts, WorkerPlan) else plan_or_amounts
    return ", ".join(f"{k} {_amount(v)}" for k, v in sorted(amounts.items()))


# --------------------------------------------------------------------------- files every node reads


def local_folders(paths: Mapping[str, str | None]) -> dict[str, str]:
    """The values of `paths` (setting -> model id or folder) that are files or folders here, made absolute.

    A hub id is left out: every node fetches it itself. A local folder must be readable at the same
    absolute path on every node (a worker's working folder is not the driver's).
    """
    return {setting: str(Path(path).expanduser().resolve()) for setting, path in paths.items()
            if path and Path(path).expanduser().exists()}


def check_node_paths(paths: Mapping[str, str]) -> None:
    """On a worker, before any example: every local folder the run needs must be readable on this node."""
    for setting, path in paths.items():
        folder = os.path.isdir(path)
        if not os.access(path, os.R_OK | (os.X_OK if folder else 0)):
            raise ConfigError(f"{setting} {path}: not readable on the Ray node {_node_ip()}; a local folder "
                              "must be on a path every node can read (a shared file system), or give a hub "
                              "id, which every node fetches itself", setting=setting)


def _node_ip() -> str:
    try:
        import ray   # optional (the `ray` extra): only when workers run on Ray
        return ray.util.get_node_ip_address()
    except Exception:  # not in a Ray worker: the host name still says where
        return socket.gethostname()
