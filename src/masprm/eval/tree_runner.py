"""Stage 1's runner: one outcome-labelled MAS-MCTS tree per example, searched on any worker and written here.

``TreeJob`` wraps one example's search (``masprm.search.train_mcts.tree_search``)
so any worker, local or a Ray actor, can run it; the tree (and its picture)
comes back to the driver, which writes ``<idx>.json`` and ``<idx>.png``. The
random choices come from ``random.Random(seed + idx)`` and the policy is
reseeded with ``seed + idx`` first, so a tree does not depend on which worker
made it. ``run_trees`` runs the jobs of the examples whose tree is not on disk
yet, which is what makes an interrupted run resumable. Stage 4's runner is
``masprm.eval.runner``. Pure Python: no torch import.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator

from tqdm.auto import tqdm

from masprm.errors import ConfigError, ModelOutputError
from masprm.graph import MASGraph
from masprm.interfaces import Policy
from masprm.io import atomic_write_bytes, atomic_write_json
from masprm.parallel import describe_error, map_examples
from masprm.search.engine import LoadedModels, RequestKeys, Search, run_batched
from masprm.search.mcts import Grader
from masprm.search.node import node_to_json
from masprm.search.train_mcts import TreeSearchSettings, tree_search
from masprm.tree_schema import is_search_tree


# --------------------------------------------------------------------------- one example's job


def tree_path(out_dir: str | Path, idx: int) -> Path:
    return Path(out_dir) / f"{idx}.json"


@dataclass(frozen=True)
class TreeJob:
    """Search one example (anywhere: here or on a Ray worker) and write its files (here); picklable for Ray.

    ``search`` and ``batch`` only compute: a tree comes back as a ``BuiltTree``
    with its picture's bytes, and ``write`` puts ``<idx>.png`` and ``<idx>.json``
    into ``out_dir`` on the driver, so no worker needs the driver's disk.
    ``run_meta`` holds what every tree of the run shares (dataset, split,
    config, model); the example's own fields are added per tree.
    """

    graph: MASGraph
    settings: TreeSearchSettings
    out_dir: str
    seed: int
    run_meta: dict[str, Any]
    plot: bool = True
    verbose: bool = False
    grade: Grader | None = None
    batch_size: int = 1   # --search_batch_size: examples in flight per worker

    def batch(self, policy: Policy, examples: list[Any]) -> Iterator[tuple[Any, Any, str | None]]:
        """The trees of `examples` (``BuiltTree``), --search_batch_size of them in flight, as they finish."""
        jobs = ((ex, partial(self.search, ex)) for ex in examples)
        for example, built, error in run_batched(LoadedModels(policy), jobs, self.batch_size):
            if isinstance(error, ModelOutputError):   # a policy giving NaN: every tree would be garbage
                raise error
            yield example, built, None if error is None else describe_error(error)

    def search(self, example: Any) -> Search:
        """Search one example; returns its tree (and picture), written nowhere yet."""
        example_seed = self.seed + example.idx
        root, stats = yield from tree_search(self.graph, example.question, example.gold, self.settings,
                                             random.Random(example_seed), self.grade,
                                             RequestKeys(self.seed, example.idx))
        tree = node_to_json(root)
        tree["meta"] = {
            **self.run_meta, "index": example.idx, "gold": example.gold,
            "example_meta": example.meta, "search": self.settings.as_meta(),
            "seed": self.seed, "example_seed": example_seed, "stats": stats,
        }
        png = None
        if self.plot:   # drawn where the search ran: the driver only writes bytes
            from masprm.plots.tree_plot import tree_png
            png = tree_png(tree, names=self.graph.agent_names)
        return BuiltTree(example.idx, tree, png)

    def write(self, built: "BuiltTree") -> dict[str, Any]:
        """Write one tree's files into ``out_dir``; returns its summary."""
        json_path = tree_path(self.out_dir, built.idx)
        if built.png is not None:  # the picture first: the JSON marks the example as finished
            atomic_write_bytes(json_path.with_suffix(".png"), built.png)
        atomic_write_json(json_path, built.tree)
        summary = {"idx": built.idx, "path": str(json_path), "root_q": built.tree["q_mean"],
                   **built.tree["meta"]["stats"]}
        if self.verbose:
            from masprm.plots.tree_plot import tree_report
            summary["report"] = tree_report(built.tree, names=self.graph.agent_names)
        return summary


@dataclass(frozen=True)
class BuiltTree:
    """One example's finished search, on its way to the driver: the tree JSON and its PNG (or None)."""

    idx: int
    tree: dict[str, Any]
    png: bytes | None


# --------------------------------------------------------------------------- a whole run


def tree_problem(path: Path, example: Any) -> str | None:
    """Why the tree on disk cannot stand for this example (None when it can)."""
    try:
        tree = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:  # ValueError: bad JSON or bad UTF-8
        return f"unreadable ({type(err).__name__})"
    if not is_search_tree(tree):
        return "not a search tree"
    if tree.get("node_text") != example.question:
        return "built for another question"
    meta = tree.get("meta")
    index = meta.get("index", example.idx) if isinstance(meta, dict) else example.idx
    if index != example.idx:
        return f"built for example {index}"
    return None


def check_same_selection(out_dir: str | Path, examples: list[Any]) -> None:
    """The trees in the folder must be of the same examples.

    The first readable tree is enough: another --seed or data file reorders the whole selection.
    """
    for example in examples:
        path = tree_path(out_dir, example.idx)
        problem = tree_problem(path, example) if path.exists() else "missing"
        if problem == "built for another question":
            raise ConfigError(f"{path} was built for another question than example {example.idx} of this "
                              "run (another `seed` or `data_file`?); use another `out_root` or move the folder")
        if problem is None:
            return


def run_trees(job: TreeJob, setup: Callable[[], Policy], examples: list[Any], *, workers: int | None = 1,
              use_ray: bool = False, gpus_per_worker: float = 0.0,
              log: Callable[[str], None] | None = None, cluster: Any = None,
              shared_paths: dict[str, str] | None = None) -> tuple[int, list[tuple[int, str]]]:
    """Build the trees not yet on disk; returns (trees written, [(idx, error), ...]).

    A tree already written is never redone, so a run that was interrupted
    resumes where it stopped; an example that failed is simply retried by
    the next run. Trees are written here as they come back from the workers
    (``cluster``, ``shared_paths``: see ``masprm.parallel.map_examples``).
    """
    log = log or tqdm.write
    check_same_selection(job.out_dir, examples)
    pending, done = [], []
    for example in examples:
        path = tree_path(job.out_dir, example.idx)
        problem = tree_problem(path, example) if path.exists() else "missing"
        if problem not in (None, "missing"):  # e.g. cut short by a full disk, or edited by hand
            log(f"{path}: {problem}; building it again")
        (done if problem is None else pending).append(example)
    log(f"{len(examples)} examples, {len(done)} trees already in {job.out_dir}, {len(pending)} to build")
    written, failed = 0, []
    for example, built, error in map_examples(setup, job.batch, pending, workers=workers, use_ray=use_ray,
                                              num_gpus_per_worker=gpus_per_worker, desc="trees",
                                              batched=job.batch_size, cluster=cluster, shared_paths=shared_paths):
        if error is not None:
            failed.append((example.idx, error))
            log(f"example {example.idx} failed: {error}")
            continue
        summary = job.write(built)
        written += 1
        if "report" in summary:
            log(summary["report"])
    return written, failed
