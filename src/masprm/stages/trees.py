"""Stage 1: MAS-MCTS search trees for training, one outcome-labelled tree per example.

    python src/run_mcts.py --dataset gsm8k --split train --n 2 --seed 42 \
        --n_rollouts 2 --search_c 4 --n_candidates 3 --mas_config configs/gsm8k.yaml \
        --load_in_4bit --no_compile

writes one tree per example to
``results/<dataset>_res_<split>_<model>_r<R>_c<C>_cand<K>_t<T>_p<P>/<idx>.json``
(and ``<idx>.png`` unless ``--no_plot``). Trees already there are kept, so
rerunning the same command resumes an interrupted run. ``--ray`` spreads the
examples over local Ray actors, each with its own copy of the model.
"""

import sys
from functools import partial
from pathlib import Path

from masprm.cli import ArgumentParser, check, run_cli
from masprm.config import add_config_args, config_from_args
from masprm.graph import load_mas_config, resolve_config_path
from masprm.parallel import check_gpu_share
from masprm.run_folder import default_config_path, run_folder_name
from masprm.search.engine import EngineSettings
from masprm.search.train_mcts import SearchSettings, TreeJob, check_same_selection, run_trees


def build_parser() -> ArgumentParser:
    from masprm.models.loading import add_model_args

    ap = ArgumentParser(description="Generate MAS-MCTS search trees labelled by final-answer correctness.")
    ap.add_argument("--dataset", default="gsm8k",
                    help="dataset name: gsm8k (default), competition_math, mmlu, toy, ...")
    ap.add_argument("--split", default="train", help="dataset split (default: train)")
    ap.add_argument("--n", type=int, default=None, help="number of examples (default: all)")
    ap.add_argument("--seed", type=int, default=42,
                    help="data selection and per-example sampling seed (default: 42)")
    ap.add_argument("--data_file", default=None, help="local JSON/JSONL/Parquet file in the hub schema")
    ap.add_argument("--mas_config", default=None, help="MAS config YAML (default: configs/<dataset>.yaml)")
    ap.add_argument("--model_id", default="Qwen/Qwen2.5-1.5B-Instruct",
                    help="policy: hub id or local folder (default: Qwen/Qwen2.5-1.5B-Instruct)")
    add_model_args(ap)
    add_config_args(ap, SearchSettings)
    add_config_args(ap, EngineSettings)
    ap.add_argument("--ray", action="store_true", help="spread examples over local Ray actors")
    ap.add_argument("--actors", type=int, default=None,
                    help="Ray actors, one model copy each (default: GPUs / gpus_per_actor, at least 1)")
    ap.add_argument("--gpus_per_actor", type=float, default=1.0,
                    help="GPU share of each Ray actor (default: 1; without GPUs actors use CPUs)")
    ap.add_argument("--out_root", default="results", help="folder that holds the run folders (default: results)")
    ap.add_argument("--no_plot", action="store_true", help="do not draw <idx>.png next to each tree")
    ap.add_argument("--verbose", action="store_true",
                    help="print the top of each tree and its three most visited rollouts")
    return ap


def validate(args) -> None:
    check(args.n is None or args.n >= 1, f"--n must be >= 1, got {args.n}")
    check(args.n_rollouts >= 1, f"--n_rollouts must be >= 1, got {args.n_rollouts}")
    check(args.n_candidates >= 1, f"--n_candidates must be >= 1, got {args.n_candidates}")
    check(args.c >= 0, f"--search_c must be >= 0, got {args.c}")
    check(args.temperature > 0, f"--temperature must be > 0, got {args.temperature}")
    check(0 < args.top_p <= 1, f"--top_p must be in (0, 1], got {args.top_p}")
    check(args.max_new_tokens is None or args.max_new_tokens >= 1,
          f"--max_new_tokens must be >= 1, got {args.max_new_tokens}")
    check(args.actors is None or args.actors >= 1, f"--actors must be >= 1, got {args.actors}")
    check(args.search_batch_size >= 1, f"--search_batch_size must be >= 1, got {args.search_batch_size}")
    check(args.max_batch_tokens >= 1, f"--max_batch_tokens must be >= 1, got {args.max_batch_tokens}")
    check_gpu_share(args.gpus_per_actor)
    check(args.actors is None or args.ray, "--actors needs --ray")


def run_settings(args, config: str) -> dict:
    """What defines the run's trees beyond the folder name (seed, dataset and split, the data file, model
    and config by path and content identity, the token cap), as recorded in the folder: a resumed run must match it."""
    from masprm.checks import file_identity, looks_like_path
    from masprm.eval.logs import path_identity

    def local(path):
        return {"path": str(Path(path).resolve()), "identity": file_identity(path)} if path else None

    model = {"path": str(Path(args.model_id).resolve()), "identity": path_identity(args.model_id, model=True)} \
        if looks_like_path(args.model_id) else {"path": args.model_id, "identity": None}
    return {"seed": args.seed, "dataset": args.dataset, "split": args.split, "data_file": local(args.data_file),
            "model": model, "max_new_tokens": args.max_new_tokens, "mas_config": local(config)}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    validate(args)
    from masprm.checks import check_known_dataset, check_local_model, check_output_dir, check_text_data_file
    from masprm.data import load_examples
    from masprm.models.loading import options_from_args
    from masprm.models.model_checks import check_policy
    from masprm.run_folder import announce_holder, check_settings, locked_folder, write_settings

    # The cheap checks first: a bad name, config or output location must not wait for the data,
    # and no bad input (the model folder included) may wait for the model to load.
    check_known_dataset(args.dataset)
    config = str(resolve_config_path(args.mas_config or default_config_path(args.dataset)))
    graph = load_mas_config(config)
    inputs = {"model_id": args.model_id, "data_file": args.data_file, "mas_config": config}
    out_dir = check_output_dir(args.out_root, "out_root", inputs=inputs) / run_folder_name(
        args.dataset, args.split, args.model_id, args.n_rollouts, args.c, args.n_candidates,
        args.temperature, args.top_p, config, max_new_tokens=args.max_new_tokens)
    check_output_dir(out_dir, "out_root")
    if args.data_file:
        check_text_data_file(args.data_file)
    loaded = load_examples(args.dataset, args.split, n=args.n, seed=args.seed, data_file=args.data_file)
    check_local_model(args.model_id, "model_id")
    check_policy(args.model_id, "model_id", options_from_args(args), questions=loaded.examples,
                 where=args.data_file or f"dataset {args.dataset} split {args.split}")
    if loaded.skipped:
        print(f"skipped {loaded.skipped} examples without a usable gold answer", file=sys.stderr)

    settings = config_from_args(SearchSettings, args)
    defining = run_settings(args, config)
    with locked_folder(out_dir):  # one run per folder at a time
        if not check_settings(out_dir, defining):
            check_same_selection(out_dir, loaded.examples)  # a folder from before settings were recorded
            write_settings(out_dir, defining)
        announce_holder(out_dir)
        return build_trees(args, graph, settings, config, out_dir, loaded)


def build_trees(args, graph, settings: SearchSettings, config: str, out_dir: Path, loaded) -> int:
    from masprm.checks import file_identity
    from masprm.models.loading import options_from_args
    from masprm.models.policy import HFPolicy

    # config_identity lets stage 2 tell whether a --config is the team that built the trees.
    run_meta = {"dataset": args.dataset, "split": args.split, "config": config,
                "config_identity": file_identity(config), "model": args.model_id, "data_file": args.data_file}
    job = TreeJob(graph, settings, str(out_dir), args.seed, run_meta, plot=not args.no_plot,
                  verbose=args.verbose, batch_size=args.search_batch_size)
    setup = partial(HFPolicy, args.model_id, options_from_args(args), max_batch_tokens=args.max_batch_tokens)
    written, failed = run_trees(job, setup, loaded.examples, workers=args.actors if args.ray else 1,
                                use_ray=args.ray, gpus_per_worker=args.gpus_per_actor if args.ray else 0.0)
    print(f"wrote {written} trees to {out_dir}" + (f"; {len(failed)} examples failed "
                                                    "(rerun the same command to retry them)" if failed else ""))
    return 1 if failed else 0


def cli() -> None:
    """The console script (pyproject.toml) and the checkout's script: one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
