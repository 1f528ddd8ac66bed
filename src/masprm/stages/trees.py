"""Stage 1: MAS-MCTS search trees for training, one outcome-labelled tree per example.

    python src/run_mcts.py --dataset gsm8k --split train --n 2 --seed 42 \
        --n_rollouts 2 --search_c 4 --n_candidates 3 --mas_config configs/gsm8k.yaml \
        --load_in_4bit --no_compile

writes one tree per example to
``results/<dataset>_res_<split>_<model>_r<R>_c<C>_cand<K>_t<T>_p<P>/<idx>.json``
(and ``<idx>.png`` unless ``--no_plot``). Trees already there are kept, so
rerunning the same command resumes an interrupted run. ``--ray`` spreads the
examples over Ray actors, each with its own copy of the model: on a private
local instance, or on the cluster at ``--ray_address`` / ``$RAY_ADDRESS``
(docs/cluster.md); trees are written here either way.
"""

import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from masprm.answer_checkers import ANSWER_CHECKERS, CHECKER_HELP, DEFAULT_CHECKER, check_checker, checker_record
from masprm.checks import (check_known_dataset, check_local_model, check_output_dir, check_plain_name, check_seeds,
                           check_text_data_file, file_identity, looks_like_path)
from masprm.cli import ArgumentParser, run_cli
from masprm.cluster import ClusterSettings, check_reachable, local_folders
from masprm.config import Needs, add_settings_args, arg, config_from_args, group_classes, require, require_each
from masprm.paths import PathText
from masprm.data import load_examples
from masprm.dataset_sources import DatasetFields, source_record
from masprm.eval.logs import path_identity
from masprm.graph import load_mas_config, resolve_config_path
from masprm.models.backends import BackendFlags, check_backend, identity as backend_identity, load_policy
from masprm.models.model_checks import check_policy
from masprm.models.options import ModelFlags
from masprm.parallel import check_gpu_share
from masprm.run_folder import (announce_holder, check_or_record_settings, default_config_path, locked_folder,
                               run_folder_name)
from masprm.search.engine import EngineSettings
from masprm.eval.tree_runner import TreeJob, run_trees
from masprm.search.train_mcts import TreeSearchSettings
from masprm.log import RESULT, get_logger

log = get_logger(__name__)


@dataclass(frozen=True)
class TreesArgs:
    """Stage 1's own flags: what to search, with which policy, where the trees go."""

    dataset: str = arg("gsm8k", flags=("--dataset",),
                       help="dataset name: gsm8k (default), competition_math, mmlu, toy, ...; or a hub dataset id "
                            "(owner/name) or a local file or folder, with --question_field / --answer_field")
    split: str = arg("train", flags=("--split",), help="dataset split (default: train)")
    n: int | None = arg(None, flags=("--n",), help="number of examples (default: all)")
    seed: int = arg(42, flags=("--seed",), help="data selection and per-example sampling seed (default: 42)")
    answer_checker: str = arg(DEFAULT_CHECKER, flags=("--answer_checker",), choices=tuple(ANSWER_CHECKERS),
                              help=CHECKER_HELP)
    data_file: PathText | None = arg(None, flags=("--data_file",), help="local JSON/JSONL/Parquet file in the hub schema")
    mas_config: PathText | None = arg(None, flags=("--mas_config",),
                                 help="MAS config YAML (default: configs/<dataset>.yaml)")
    model_id: str = arg("Qwen/Qwen2.5-1.5B-Instruct", flags=("--model_id",),
                        help="policy: hub id or local folder (default: Qwen/Qwen2.5-1.5B-Instruct)")
    out_root: PathText = arg("results", flags=("--out_root",),
                        help="folder that holds the run folders (default: results)")
    no_plot: bool = arg(False, flags=("--no_plot",), help="do not draw <idx>.png next to each tree")
    verbose: bool = arg(False, flags=("--verbose",),
                        help="print the top of each tree and its three most visited rollouts")

    def __post_init__(self) -> None:
        require_each(self, ("n",), lambda v: v >= 1, "must be >= 1")
        check_seeds(self)
        check_plain_name(self.split, "split", "split name")   # it becomes part of the run folder's name
        check_checker(self.answer_checker)


# Without Ray the examples run in this process: the actors' count and GPU share would go unused
NEEDS_RAY = Needs("`ray` (or `ray_address`)", lambda s: bool(getattr(s, "ray", False) or getattr(s, "ray_address", None)
                                                           or os.environ.get("RAY_ADDRESS")))


@dataclass(frozen=True)
class RayArgs:
    """Spreading the examples over Ray actors: local ones, or on the cluster ``cluster`` names."""

    ray: bool = arg(False, flags=("--ray",), help="spread examples over local Ray actors")
    actors: int | None = arg(None, flags=("--actors",), needs=NEEDS_RAY,
                             help="Ray actors, one model copy each (default: GPUs / gpus_per_actor, at least 1)")
    gpus_per_actor: float = arg(1.0, flags=("--gpus_per_actor",), needs=NEEDS_RAY,
                                help="GPU share of each Ray actor (default: 1; without GPUs actors use CPUs)")
    cluster: ClusterSettings = field(default_factory=ClusterSettings)   # where the actors run (its own flags)

    def __post_init__(self) -> None:
        require_each(self, ("actors",), lambda v: v >= 1, "must be >= 1")
        check_gpu_share(self.gpus_per_actor)
        require(self.actors is None or self.use_ray, "actors", NEEDS_RAY.problem("actors"))

    @property
    def use_ray(self) -> bool:
        """--ray, or a cluster to join: an address means Ray."""
        return self.ray or self.cluster.address is not None


# Every settings class of stage 1, by --help group: its flags' one list.
GROUPS = ((None, (TreesArgs, DatasetFields)), ("model loading", (ModelFlags,)),
          ("generation backend", (BackendFlags,)),
          (None, (TreeSearchSettings, EngineSettings, RayArgs, ClusterSettings)))


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(description="Generate MAS-MCTS search trees labelled by final-answer correctness.")
    add_settings_args(ap, GROUPS)
    return ap


def run_settings(args: TreesArgs, search: TreeSearchSettings, config: str, loading: ModelFlags,
                 backend: BackendFlags | None = None, fields: DatasetFields | None = None) -> dict:
    """What defines the run's trees beyond the folder name (seed, dataset and split, the data file, model
    and config by path and content identity, the token cap, how the policy's weights are held: 4-bit FP4
    and NF4 sample other tokens; the generation backend unless the default), as recorded in the folder:
    a resumed run must match it."""
    def local(path):
        return {"path": str(Path(path).resolve()), "identity": file_identity(path)} if path else None

    model = {"path": str(Path(args.model_id).resolve()), "identity": path_identity(args.model_id, model=True)} \
        if looks_like_path(args.model_id) else {"path": args.model_id, "identity": None}
    return {"seed": args.seed, "dataset": args.dataset, "split": args.split, "data_file": local(args.data_file),
            "model": model, "max_new_tokens": search.max_new_tokens, "mas_config": local(config),
            "policy_weights": policy_weights(loading), **backend_identity(backend),
            **checker_record(args.answer_checker), **source_record(args.dataset, fields or DatasetFields())}


def policy_weights(loading: ModelFlags) -> str:
    """"4-bit fp4", "4-bit nf4", or the dtype of unquantised weights ("dtype auto")."""
    return f"4-bit {loading.bnb_4bit_quant_type}" if loading.load_in_4bit else f"dtype {loading.dtype or 'auto'}"


def main(argv: list[str] | None = None) -> int:
    parsed = build_parser().parse_args(argv)
    built = {cls: config_from_args(cls, parsed) for cls in group_classes(GROUPS) if cls is not RayArgs}
    ray = config_from_args(RayArgs, parsed, cluster=built[ClusterSettings])   # each checks its values
    args, search, engine = built[TreesArgs], built[TreeSearchSettings], built[EngineSettings]

    # The cheap checks first: a bad name, config or output location must not wait for the data,
    # and no bad input (the model folder included) may wait for the model to load.
    check_known_dataset(args.dataset)
    config = str(resolve_config_path(args.mas_config or default_config_path(args.dataset)))
    graph = load_mas_config(config)
    inputs = {"model_id": args.model_id, "data_file": args.data_file, "mas_config": config}
    out_dir = check_output_dir(args.out_root, "out_root", inputs=inputs) / run_folder_name(
        args.dataset, args.split, args.model_id, search.n_rollouts, search.c, search.n_candidates,
        search.temperature, search.top_p, config, max_new_tokens=search.max_new_tokens)
    check_output_dir(out_dir, "out_root")
    if args.data_file:
        check_text_data_file(args.data_file)
    loaded = load_examples(args.dataset, args.split, n=args.n, seed=args.seed, data_file=args.data_file,
                           fields=built[DatasetFields])
    check_local_model(args.model_id, "model_id")
    check_policy(args.model_id, "model_id", built[ModelFlags].options(), questions=loaded.examples,
                 where=args.data_file or f"dataset {args.dataset} split {args.split}",
                 prompts=[agent.system_prompt for agent in graph.agents])
    check_backend(built[BackendFlags], args.model_id, built[ModelFlags].options(), "model_id")
    if loaded.skipped:
        log.info(f"skipped {loaded.skipped} examples without a usable gold answer")

    if ray.use_ray and ray.cluster.address:
        check_reachable(ray.cluster)   # a head that does not answer is refused before the run folder is made
    with locked_folder(out_dir):  # one run per folder at a time
        check_or_record_settings(out_dir, run_settings(args, search, config, built[ModelFlags], built[BackendFlags],
                                                       built[DatasetFields]))
        announce_holder(out_dir)
        return build_trees(args, built[ModelFlags], search, engine, ray, graph, config, out_dir, loaded,
                           built[BackendFlags])


def build_trees(args: TreesArgs, loading: ModelFlags, search: TreeSearchSettings, engine: EngineSettings,
                ray: RayArgs, graph, config: str, out_dir: Path, loaded, backend: BackendFlags | None = None) -> int:
    # config_identity lets stage 2 tell whether a --config is the team that built the trees.
    run_meta = {"dataset": args.dataset, "split": args.split, "config": config,
                "config_identity": file_identity(config), "model": args.model_id, "data_file": args.data_file}
    job = TreeJob(graph, search, str(out_dir), args.seed, run_meta, plot=not args.no_plot,
                  grade=ANSWER_CHECKERS[args.answer_checker],
                  verbose=args.verbose, batch_size=engine.search_batch_size)
    shared = local_folders({"model_id": args.model_id})   # read by every worker, wherever it runs
    # The backend's loader imports its model library (torch, vLLM) in the worker: only once every input is checked.
    setup = partial(load_policy, backend, shared.get("model_id", args.model_id), loading.options(),
                    max_batch_tokens=engine.max_batch_tokens)
    written, failed = run_trees(job, setup, loaded.examples, workers=ray.actors if ray.use_ray else 1,
                                use_ray=ray.use_ray, gpus_per_worker=ray.gpus_per_actor if ray.use_ray else 0.0,
                                cluster=ray.cluster, shared_paths=shared)
    retry = f"; {len(failed)} examples failed (rerun the same command to retry them)" if failed else ""
    log.info(f"wrote {written} trees to {out_dir}{retry}", extra=RESULT)
    return 1 if failed else 0


def cli() -> None:
    """The console script (pyproject.toml) and the checkout's script: one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
