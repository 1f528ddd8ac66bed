"""Run one task per example, in this process or on local Ray actors.

    for item, result, error in map_examples(setup, task, items, workers=4, use_ray=True):
        ...

``setup()`` runs once per worker (it loads the models) and returns the
worker's state ``W``; ``task(W, item)`` handles one item. Both must be
picklable for Ray: a module-level function, a ``functools.partial`` of one,
or an instance of a module-level class. Results come back as they finish,
each as ``(item, result, None)`` or ``(item, None, "error text")``: one
failing item never stops the others. A setup failure stops the run (a
domain error in setup, e.g. a bad model path, is raised as it was).

One tqdm bar counts finished items. With Ray, each actor holds one copy of
the models and is handed the next item as soon as it is free; on a machine
without GPUs the actors run on CPUs. Reproducibility is the task's job: it
must seed from the item (e.g. ``seed + idx``), never from worker order.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import traceback
from typing import Any, Callable, Iterable, Iterator, TypeVar

from tqdm.auto import tqdm

from masprm.errors import ConfigError, MasprmError
from masprm.progress import progress_bar

W = TypeVar("W")
Item = TypeVar("Item")
R = TypeVar("R")
Outcome = tuple[Any, Any, "str | None"]

# Quiet workers: one progress bar (the driver's), no library chatter.
WORKER_ENV = {"TQDM_DISABLE": "1", "TOKENIZERS_PARALLELISM": "false", "TRANSFORMERS_VERBOSITY": "error"}
OBJECT_STORE_BYTES = 128 * 1024 * 1024  # results are small summaries; keep Ray's shared memory small
_DONE = object()


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
                 workers: int | None = 1, use_ray: bool = False, num_gpus_per_worker: float = 0.0,
                 desc: str = "", progress: bool = True,
                 batched: int = 0) -> Iterator[tuple[Item, R | None, str | None]]:
    """Yield ``(item, result, error)`` for every item, in the order they finish.

    ``workers=None`` with Ray means one worker per ``num_gpus_per_worker``
    GPUs (at least one). Without Ray everything runs here, in order.

    With ``batched=N`` the task takes a list of items and yields their
    outcomes as they finish (a batched search engine running N at a time):
    here it gets every item; each Ray actor gets chunks of 2N items, the next
    chunk when it is done, so each actor runs its own engine on its share.
    """
    items = list(items)
    if not items:
        return
    if use_ray:
        check_gpu_share(num_gpus_per_worker)
        if batched:
            chunks = [items[i:i + 2 * batched] for i in range(0, len(items), 2 * batched)]
            outcomes = _flatten(_ray_map(setup, _ChunkTask(task), chunks, workers, num_gpus_per_worker))
        else:
            outcomes = _ray_map(setup, task, items, workers, num_gpus_per_worker)
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
    """A Ray actor: runs setup once, then tasks; errors come back as text, never kill it."""

    def __init__(self, setup: Callable[[], Any], task: Callable[[Any, Any], Any]):
        self.task = task
        self.state = None
        self.setup_error: MasprmError | str | None = None
        try:
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


def _import_path() -> str:
    """The driver's own import path (e.g. src/, tests/), so actors unpickle the same modules."""
    base = (sys.prefix, sys.base_prefix)
    extra = [p for p in sys.path if p and os.path.isdir(p) and not p.startswith(base)]
    inherited = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(extra + ([inherited] if inherited else []))


def _ray_map(setup: Callable[[], W], task: Callable[[W, Item], R], items: list[Item],
             workers: int | None, num_gpus_per_worker: float) -> Iterator[Outcome]:
    import ray
    from ray.exceptions import RayError

    started_here = not ray.is_initialized()
    if started_here:
        ray.init(num_cpus=max(os.cpu_count() or 1, workers or 1), include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR, configure_logging=True, ignore_reinit_error=True,
                 object_store_memory=OBJECT_STORE_BYTES)
    try:
        resources = ray.cluster_resources()
        gpus, cpus = float(resources.get("GPU", 0)), float(resources.get("CPU", 1))
        if num_gpus_per_worker > 0 and gpus == 0:
            tqdm.write("ray: no GPU found; workers run on CPUs")
            num_gpus_per_worker = 0.0
        if workers is None:
            workers = max(1, math.floor(gpus / num_gpus_per_worker + 1e-9)) if num_gpus_per_worker else 1
        workers = min(workers, len(items))
        if workers * num_gpus_per_worker > gpus + 1e-9:  # Ray would wait forever for the missing GPUs
            raise ConfigError(f"{workers} workers x {num_gpus_per_worker:g} GPUs each need "
                              f"{workers * num_gpus_per_worker:g} GPUs; Ray sees {gpus:g}")
        # CPU workers share the cores (Ray gives each that many torch threads); a GPU worker
        # needs one core to feed it. Shares below one core keep every worker schedulable.
        cpus_each = min(1.0, cpus / workers) if num_gpus_per_worker else (
            float(max(1, int(cpus) // workers)) if cpus >= workers else cpus / workers)
        actor_class = ray.remote(_Worker).options(
            num_cpus=cpus_each, num_gpus=num_gpus_per_worker,
            runtime_env={"env_vars": {**WORKER_ENV, "PYTHONPATH": _import_path()}})
        actors = [actor_class.remote(setup, task) for _ in range(workers)]
        failures = [f for f in ray.get([actor.ready.remote() for actor in actors]) if f is not None]
        if failures:
            # Free the actors' CPUs and GPUs now: the raised error's traceback keeps their handles
            # (and so the actors) alive for as long as the caller holds it.
            for actor in actors:
                ray.kill(actor)
            failure = failures[0]
            raise failure if isinstance(failure, MasprmError) else RuntimeError(f"worker setup failed: {failure}")

        todo = iter(items)
        running: dict[Any, tuple[Any, Item]] = {}  # object ref -> (actor, item)

        def hand_next(actor: Any) -> None:
            item = next(todo, _DONE)
            if item is not _DONE:
                running[actor.run.remote(item)] = (actor, item)

        for actor in actors:
            hand_next(actor)
        alive = len(actors)
        while running:
            [ref], _ = ray.wait(list(running), num_returns=1)
            actor, item = running.pop(ref)
            try:
                result, error = ray.get(ref)
            except RayError as err:  # the actor process died (e.g. out of memory): retire it
                result, error = None, f"worker died: {' '.join(str(err).split())[:300]}"
                alive -= 1
            else:
                hand_next(actor)
            yield item, result, error
            if alive == 0:
                for item in todo:
                    yield item, None, "not run: every worker died"
    finally:
        if started_here:
            ray.shutdown()
