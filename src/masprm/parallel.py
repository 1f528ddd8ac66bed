"""Run one task per example, in this process or on Ray actors (this machine or a cluster).

    for item, result, error in map_examples(setup, task, items, workers=4, use_ray=True):
        ...

``setup()`` runs once per worker (it loads the models) and returns the
worker's state ``W``; ``task(W, item)`` handles one item. Both must be
picklable for Ray: a module-level function, a ``functools.partial`` of one,
or an instance of a module-level class. Results come back as they finish,
each as ``(item, result, None)`` or ``(item, None, "error text")``: one
failing item never stops the others. A setup failure stops the run (a
domain error in setup, e.g. a bad model path, is raised as it was).

One tqdm bar counts finished items. With Ray (``masprm.cluster``: a private
local instance, or the cluster at ``--ray_address`` / ``$RAY_ADDRESS``), each
actor holds one copy of the models and is handed the next item as soon as it
is free; on a cluster without GPUs the actors run on CPUs. Results always come
back here: workers write nothing. Before its setup, each actor checks that
the local folders the run needs (``shared_paths``) are readable on its node.
An item whose actor died (its process or its node) is rerun on the others,
up to ``ray_retries`` times. Reproducibility is the task's job: it must seed
from the item (e.g. ``seed + idx``), never from worker order or batch.
"""

from __future__ import annotations

import math
import os
import traceback
from collections import deque
from typing import Any, Callable, Iterable, Iterator, TypeVar

from tqdm.auto import tqdm

from masprm.cluster import (ClusterSettings, WorkerPlan, check_node_paths, node_resources, place_workers,
                            plan_workers, ray_session)
from masprm.errors import ConfigError, MasprmError
from masprm.progress import progress_bar

W = TypeVar("W")
Item = TypeVar("Item")
R = TypeVar("R")
Outcome = tuple[Any, Any, "str | None"]

# Quiet workers: one progress bar (the driver's), no library chatter.
WORKER_ENV = {"TQDM_DISABLE": "1", "TOKENIZERS_PARALLELISM": "false", "TRANSFORMERS_VERBOSITY": "error"}


def describe_error(err: BaseException) -> str:
    """One line: the exception and where it was raised."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    message = " ".join(str(err).split()) or "(no message)"
    return f"{type(err).__name__}: {message}{where}"


def check_gpu_share(gpus: float, setting: str = "gpus_per_actor") -> None:
    """Ray gives an actor a share of one GPU (0 to 1) or whole GPUs; anything else is a ConfigError."""
    if not (math.isfinite(gpus) and gpus >= 0) or (gpus > 1 and not float(gpus).is_integer()):
        raise ConfigError(f"{setting} {gpus:g}: give a share of one GPU (0 to 1, e.g. 0.5) or a whole number "
                          "of GPUs (e.g. 2); Ray gives an actor nothing in between", setting=setting)


def map_examples(setup: Callable[[], W], task: Callable[[W, Item], R], items: Iterable[Item], *,
                 workers: int | None = 1, use_ray: bool = False, num_gpus_per_worker: float | None = 0.0,
                 desc: str = "", progress: bool = True, batched: int = 0,
                 cluster: ClusterSettings | None = None,
                 shared_paths: dict[str, str] | None = None) -> Iterator[tuple[Item, R | None, str | None]]:
    """Yield ``(item, result, error)`` for every item, in the order they finish.

    With Ray, ``workers=None`` means as many workers as the cluster's GPUs hold at
    ``num_gpus_per_worker`` each (one without GPUs), and ``num_gpus_per_worker=None``
    the largest share of the cluster's GPUs that gives each of ``workers`` its own
    (``masprm.cluster.plan_workers``). Without Ray everything runs here, in order.

    With ``batched=N`` the task takes a list of items and yields their
    outcomes as they finish (a batched search engine running N at a time):
    here it gets every item; each Ray actor gets chunks of 2N items, the next
    chunk when it is done, so each actor runs its own engine on its share.
    """
    items = list(items)
    if not items:
        return
    if use_ray:
        if num_gpus_per_worker is not None:
            check_gpu_share(num_gpus_per_worker)
        ray_options = (workers, num_gpus_per_worker, cluster or ClusterSettings(), dict(shared_paths or {}))
        if batched:
            chunks = [items[i:i + 2 * batched] for i in range(0, len(items), 2 * batched)]
            outcomes = _flatten(_ray_map(setup, _ChunkTask(task), chunks, *ray_options))
        else:
            outcomes = _ray_map(setup, task, items, *ray_options)
    elif batched:
        outcomes = _local_batched(setup, task, items)
    else:
        outcomes = _local_map(setup, task, items)
    with progress_bar(total=len(items), desc=desc, dynamic_ncols=True, enabled=progress) as bar:
        for outcome in outcomes:
            bar.update(1)
            yield outcome


# --------------------------------------------------------------------------- in this process


def _local_map(setup: Callable[[], W], task: Callable[[W, Item], R], items: list[Item]) -> Iterator[Outcome]:
    state = setup()
    for item in items:
        try:
            result = task(state, item)
        except Exception as err:  # reported per item; KeyboardInterrupt still stops the run
            yield item, None, describe_error(err)
        else:
            yield item, result, None


def _local_batched(setup: Callable[[], W], task: Callable[[W, list], Iterator[Outcome]],
                   items: list) -> Iterator[Outcome]:
    yield from task(setup(), items)


class _ChunkTask:
    """A batched task as a per-chunk task for Ray actors: all the chunk's outcomes in one list."""

    def __init__(self, task: Callable[[Any, list], Iterator[Outcome]]):
        self.task = task

    def __call__(self, state: Any, chunk: list) -> list[Outcome]:
        return list(self.task(state, chunk))


def _flatten(chunk_outcomes: Iterator[Outcome]) -> Iterator[Outcome]:
    for chunk, outcomes, error in chunk_outcomes:
        if error is not None:   # the actor failed outside the engine: every item of its chunk failed
            yield from ((item, None, error) for item in chunk)
        else:
            yield from outcomes


# --------------------------------------------------------------------------- Ray actors


class _Worker:
    """A Ray actor: checks the node's files, runs setup once, then tasks; errors come back, never kill it."""

    def __init__(self, setup: Callable[[], Any], task: Callable[[Any, Any], Any], shared_paths: dict[str, str]):
        self.task = task
        self.state = None
        self.setup_error: MasprmError | str | None = None
        try:
            check_node_paths(shared_paths)
            self.state = setup()
        except MasprmError as err:   # a bad input: sent back whole (it pickles with its setting)
            self.setup_error = err
        except Exception as err:
            self.setup_error = describe_error(err)

    def ready(self) -> MasprmError | str | None:
        return self.setup_error

    def run(self, item: Any) -> tuple[Any, str | None]:
        try:
            return self.task(self.state, item), None
        except Exception as err:
            return None, describe_error(err)


def _ray_map(setup: Callable[[], W], task: Callable[[W, Item], R], items: list[Item], workers: int | None,
             num_gpus_per_worker: float | None, cluster: ClusterSettings,
             shared_paths: dict[str, str]) -> Iterator[Outcome]:
    with ray_session(cluster, local_cpus=max(os.cpu_count() or 1, workers or 1), say=tqdm.write):
        plan = plan_workers(node_resources(), workers, num_gpus_per_worker, len(items))
        if plan.note:
            tqdm.write(plan.note)
        group = place_workers(plan, cluster.ray_start_timeout, say=tqdm.write)
        actors: list[Any] = []
        try:
            actors = _start_actors(setup, task, plan, group, shared_paths)
            yield from _hand_out(actors, items, cluster.ray_retries)
        finally:
            # Free the workers' CPUs and GPUs now: a raised error's traceback keeps their handles
            # (and so the actors) alive for as long as the caller holds it.
            import ray   # optional (the `ray` extra): only when workers run on Ray
            from ray.util.placement_group import remove_placement_group

            for actor in actors:
                ray.kill(actor)
            remove_placement_group(group)


def _start_actors(setup: Callable[[], Any], task: Callable[[Any, Any], Any], plan: WorkerPlan, group: Any,
                  shared_paths: dict[str, str]) -> list[Any]:
    """One actor per reserved bundle, set up; the ones whose node died while loading are dropped."""
    import ray   # optional (the `ray` extra): only when workers run on Ray
    from ray.exceptions import RayActorError
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    actor_class = ray.remote(_Worker)
    actors = [actor_class.options(num_cpus=plan.cpus, num_gpus=plan.gpus, runtime_env={"env_vars": WORKER_ENV},
                                  scheduling_strategy=PlacementGroupSchedulingStrategy(
                                      group, placement_group_bundle_index=i)).remote(setup, task, shared_paths)
              for i in range(plan.count)]
    alive, failure = [], None
    for actor in actors:
        try:
            problem = ray.get(actor.ready.remote())
        except RayActorError as err:   # its node or process died while loading: the others carry on
            tqdm.write(f"ray: a worker died while starting: {_short(err)}")
            continue
        if problem is not None:
            failure = failure or problem
        alive.append(actor)
    if failure is not None:
        for actor in alive:
            ray.kill(actor)
        raise failure if isinstance(failure, MasprmError) else RuntimeError(f"worker setup failed: {failure}")
    if not alive:
        raise RuntimeError("worker setup failed: every Ray worker died while starting")
    return alive


def _short(err: BaseException) -> str:
    return " ".join(str(err).split())[:300]


def _hand_out(actors: list[Any], items: list[Item], retries: int) -> Iterator[Outcome]:
    """Give each free actor the next item; an item whose actor died goes to the others (`retries` times)."""
    import ray   # optional (the `ray` extra): only when workers run on Ray
    from ray.exceptions import RayError

    queue = deque(range(len(items)))           # positions of the items still to run
    deaths = [0] * len(items)
    running: dict[Any, tuple[Any, int]] = {}   # object ref -> (actor, position)
    idle = list(actors)

    def hand_out() -> None:
        while idle and queue:
            actor, pos = idle.pop(), queue.popleft()
            running[actor.run.remote(items[pos])] = (actor, pos)

    hand_out()
    while running:
        [ref], _ = ray.wait(list(running), num_returns=1)
        actor, pos = running.pop(ref)
        try:
            result, error = ray.get(ref)
        except RayError as err:   # the worker (or its node) died: retire it, rerun its item elsewhere
            ray.kill(actor)
            deaths[pos] += 1
            if deaths[pos] <= retries:
                tqdm.write(f"ray: a worker died ({_short(err).split('. ')[0]}); its examples go to the others")
                queue.appendleft(pos)
            else:
                yield items[pos], None, f"worker died {deaths[pos]} times running it: {_short(err)}"
        else:
            idle.append(actor)
            yield items[pos], result, error
        hand_out()
        if not running and queue:   # every worker is gone
            for pos in queue:
                yield items[pos], None, "not run: every worker died"
            return
