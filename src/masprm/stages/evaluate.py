"""Stage 4: compare search methods and scorers on a dataset, one logged condition per method.

    python src/experiments/compare_sbs_mcts.py --dataset gsm8k --split test --seed 14 \
        --prm_dir checkpoints/MASPRM-GSM8K-1.5B --prm_base_model_id Qwen/Qwen2.5-1.5B-Instruct \
        --gen_model_id Qwen/Qwen2.5-1.5B-Instruct --mas_config configs/gsm8k.yaml \
        --methods single_pass sbs_logprob sbs_prm mcts_logprob mcts_prm

Each method is one condition with its own log in --logs_dir
(`{dataset}_{method}_{fingerprint}_{model}_{seed}.txt` + `.jsonl` records,
`.manifest.json`, `.summary.json`); a condition whose log already says
COMPLETED is loaded instead of rerun, an interrupted one resumes. Exit code 1
when a condition is marked FAILED (some examples raised errors).
"""

import sys
import argparse
import os
from pathlib import Path

from masprm.cli import ArgumentParser, check, run_cli, with_flags
from masprm.config import add_config_args
from masprm.search.engine import EngineSettings
from masprm.search.settings import SEARCH_FAMILIES, ViewSettings, add_method_args
from masprm.eval.logs import log_every
from masprm.eval.methods import METHODS
from masprm.eval.runner import (ModelSpec, condition_roles, results_table, run_conditions,
                               selection_options)
from masprm.checks import ScorerKindFlags

try:  # the dynamic-routing flags come from the handoff package when it is installed
    from masprm.handoff import cli as handoff_cli
except ModuleNotFoundError as err:
    if not (err.name or "").startswith("masprm.handoff"):
        raise
    handoff_cli = None

DEFAULT_DATASET = "mmlu"
DEFAULT_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"
# scorer role (named for what it was trained as) -> its flag prefix (--<p>_dir, the seed README's spelling)
SCORER_FLAGS = {"masprm": "prm", "orm": "orm", "handoff_masprm": "handoff_prm"}


def build_parser() -> argparse.ArgumentParser:
    from masprm.models.loading import SCORER_PRECISIONS, add_model_args

    p = ArgumentParser(description="Compare single pass, SBS, MCTS and voters guided by a MASPRM, an ORM "
                                   "or policy log-probs (and the handoff conditions) on a dataset.")
    data = p.add_argument_group("data")
    data.add_argument("--dataset", default=None,
                      help=f"dataset name (default {DEFAULT_DATASET}; competition_math for handoff methods)")
    data.add_argument("--split", default="test")
    data.add_argument("--sample_n", type=int, default=None, help="evaluate the first N examples after a "
                      "seeded shuffle (default: all; 200 for handoff methods)")
    data.add_argument("--data_file", default=None, help="local JSON/JSONL/Parquet file in the hub schema")
    data.add_argument("--math_levels", type=int, nargs="+", default=[4, 5],
                      help="competition_math levels of handoff runs (static runs use the whole split)")
    data.add_argument("--math_stratify_by", default="type",
                      help="competition_math field handoff runs stratify by")
    data.add_argument("--seed", type=int, default=42, help="example i is decoded with seed + i")
    data.add_argument("--seeds", type=int, nargs="+", default=None,
                      help="evaluate each of these seeds in turn instead of --seed, in one process: the same "
                           "logs as one command per seed, with the models loaded once")

    models = p.add_argument_group("models")
    models.add_argument("--gen_model_id", default=DEFAULT_MODEL, help="the agents' policy model")
    models.add_argument("--mas_config", default=None, help="MAS config (default configs/<dataset>.yaml)")
    for role, prefix in SCORER_FLAGS.items():
        models.add_argument(f"--{prefix}_dir", default=None, help=f"{role.upper()} adapter folder")
        models.add_argument(f"--{prefix}_base_model_id", default=None,
                            help=f"{role.upper()} base model (default: from the adapter config)")
    models.add_argument("--scorer_precision", choices=SCORER_PRECISIONS, default="auto",
                        help="the scorers' own precision, independent of the policy's --load_in_4bit: auto (4-bit "
                             "NF4 on CUDA as the original, fp32 on CPU), 4bit (on CPU too), bf16, fp16 or fp32")
    add_method_args(models, (ViewSettings,))
    add_model_args(p)

    search = p.add_argument_group("search")
    search.add_argument("--methods", nargs="+", default=["single_pass", "mcts_prm"], metavar="METHOD",
                        help="conditions to run: " + ", ".join(sorted(METHODS)))
    add_method_args(search, SEARCH_FAMILIES)   # the method families' settings classes are their flags' home

    run = p.add_argument_group("run")
    run.add_argument("--workers", type=int, default=None, help="parallel workers (Ray actors when > 1; "
                     "default: one per GPU x $WORKERS_PER_GPU, or $RAY_NUM_WORKERS, or 1 on a CPU machine)")
    add_config_args(run, EngineSettings)
    run.add_argument("--logs_dir", default="logs")
    run.add_argument("--allow_unfinished_scorer", action="store_true",
                     help="use a scorer folder whose training did not finish (its newest checkpoint)")
    add_config_args(run, ScorerKindFlags)
    if handoff_cli is not None:
        handoff_cli.add_handoff_args(p)
    return p


# --------------------------------------------------------------------------- validation


def validate(args: argparse.Namespace) -> str:
    """Check the flags; returns the method family ('static' or 'handoff')."""
    unknown = [m for m in args.methods if m not in METHODS]
    check(not unknown, f"--methods: unknown {', '.join(unknown)} (known: {', '.join(sorted(METHODS))})")
    check(len(set(args.methods)) == len(args.methods), "--methods: a method is listed twice")
    families = {METHODS[m].family for m in args.methods}
    check(len(families) == 1, "--methods: handoff and static methods cannot be mixed in one run")
    for name in ("b1", "b2", "voter_k", "n_simulations", "max_children", "max_new_tokens", "sample_n", "workers",
                 "search_batch_size", "max_batch_tokens"):
        value = getattr(args, name)
        check(value is None or value >= 1, f"--{name} must be at least 1, got {value}")
    check(args.c_uct >= 0, f"--c_uct must be >= 0, got {args.c_uct}")
    for name in ("sbs_temperature", "mcts_temperature"):
        check(getattr(args, name) > 0, f"--{name} must be > 0, got {getattr(args, name)}")
    check(0 < args.top_p <= 1, f"--top_p must be in (0, 1], got {args.top_p}")
    check(not args.orm_leaf or "mcts_prm" in args.methods, "--orm_leaf needs mcts_prm in --methods")
    for role, prefix in SCORER_FLAGS.items():
        users = [m for m in args.methods if role in condition_roles(m, args)]
        folder = getattr(args, f"{prefix}_dir")
        check(not users or folder, f"{', '.join(users)} need{'s' if len(users) == 1 else ''} --{prefix}_dir")
        if users:
            check(Path(folder).is_dir(), f"--{prefix}_dir {folder}: no such folder")
    family = families.pop()
    log_every()   # a bad $LOG_EVERY fails here, before any model loads
    check_scorer_roles(args)
    if handoff_cli is not None:
        handoff_cli.check_handoff_args(args)
    return family


def check_scorer_roles(args: argparse.Namespace) -> None:
    """Each scorer folder a method reads holds a scorer of its role's kind (an ORM is no --prm_dir)."""
    from masprm.checks import check_scorer_role

    for role, prefix in SCORER_FLAGS.items():
        folder = getattr(args, f"{prefix}_dir")
        if folder and any(role in condition_roles(m, args) for m in args.methods):
            check_scorer_role(folder, role, f"{prefix}_dir", allow_any=args.allow_scorer_kind_mismatch)


def input_paths(args: argparse.Namespace) -> dict:
    """Everything the run reads, by setting: the logs may not go into (or inside) any of them."""
    models = {f"{prefix}_{kind}": getattr(args, f"{prefix}_{kind}")
              for prefix in SCORER_FLAGS.values() for kind in ("dir", "base_model_id")}
    return {"gen_model_id": args.gen_model_id, "data_file": args.data_file, "mas_config": args.mas_config, **models}


def resolve_defaults(args: argparse.Namespace, family: str) -> None:
    """Fill the defaults that depend on the methods (handoff runs use their own data and team)."""
    handoff = family == "handoff" and handoff_cli is not None
    if args.dataset is None:
        args.dataset = handoff_cli.HANDOFF_DATASET if handoff else DEFAULT_DATASET
    if args.mas_config is None:
        args.mas_config = handoff_cli.HANDOFF_CONFIG if handoff else f"configs/{args.dataset}.yaml"
    if args.sample_n is None and handoff:
        args.sample_n = handoff_cli.HANDOFF_SAMPLE_N


def resolve_workers(flag: int | None, gpus: int | None = None) -> tuple[int, float]:
    """(workers, GPUs per worker), as the original sizes its Ray pool.

    --workers (or $RAY_NUM_WORKERS) workers share the GPUs evenly (3 workers on one GPU get a third
    each); otherwise one worker per GPU x $WORKERS_PER_GPU; on a CPU-only machine one worker.
    """
    def env_int(name: str) -> int | None:
        raw = os.environ.get(name, "")
        if not raw:
            return None
        check(raw.isdigit() and int(raw) >= 1, f"${name} must be a positive integer, got {raw!r}")
        return int(raw)

    if gpus is None:
        import torch
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    count = flag or env_int("RAY_NUM_WORKERS")
    if count:
        return count, gpus / count
    per_gpu = env_int("WORKERS_PER_GPU") or 1
    return (gpus * per_gpu, 1.0 / per_gpu) if gpus else (1, 0.0)


def model_specs(args: argparse.Namespace) -> dict[str, ModelSpec]:
    """The models of the run, each folder checked (weights, tokenizer, a finished scorer) before any loads."""
    from masprm.checks import check_local_model, check_scorer_folder
    from masprm.models.loading import options_from_args, scorer_options
    from masprm.models.model_checks import check_policy

    options = options_from_args(args)
    policy = check_local_model(args.gen_model_id, "gen_model_id")
    check_policy(policy, "gen_model_id", options)
    specs = {"policy": ModelSpec("policy", policy, None, options, setting="gen_model_id",
                                 max_batch_tokens=args.max_batch_tokens)}
    scoring = scorer_options(options, args.scorer_precision)   # scorers have their own precision
    for role, prefix in SCORER_FLAGS.items():
        folder = getattr(args, f"{prefix}_dir")
        if folder:
            base = getattr(args, f"{prefix}_base_model_id")
            note = check_scorer_folder(folder, f"{prefix}_dir", base_model_id=base,
                                       base_setting=f"{prefix}_base_model_id",
                                       allow_unfinished=args.allow_unfinished_scorer)
            if note:
                print(with_flags(note), file=sys.stderr)
            # The handoff PRM reads transcripts of up to --prm_context_length tokens (the original's
            # loader setting); the static scorers keep their training length.
            max_length = getattr(args, "prm_context_length", None) if role == "handoff_masprm" else None
            specs[role] = ModelSpec("scorer", folder, base, scoring, max_length, setting=f"{prefix}_dir")
    return specs


# --------------------------------------------------------------------------- main


def handoff_report(conditions: list) -> None:
    """The printed prefix table of the handoff conditions and, when both handoff_policy and
    handoff_prm ran, their paired comparison on the same examples: printed, kept in handoff_prm's summary
    and written after COMPLETED in its text log, as the original does."""
    handoff = [c for c in conditions if METHODS[c.method].family == "handoff"]
    if handoff_cli is None or not handoff:
        return
    from masprm.eval.logs import read_records, set_trailer
    from masprm.handoff.methods import format_paired_comparison, paired_comparison, paired_log_lines, prefix_table
    from masprm.io import atomic_write_json

    names = [getattr(c, "label", "") or c.method for c in handoff]   # the readable label where there is one
    print()
    print("\n".join(prefix_table(list(zip(names, (c.summary for c in handoff))), max(map(len, names)) + 2)))
    by_method = {c.method: c for c in handoff}
    if not {"handoff_policy", "handoff_prm"} <= set(by_method):
        return
    policy, prm = by_method["handoff_policy"], by_method["handoff_prm"]
    result = paired_comparison(read_records(policy.files.records), read_records(prm.files.records),
                               seed=policy.manifest["seed"])
    prm.summary["paired_comparison"] = {"baseline": policy.files.log.name, **result}
    atomic_write_json(prm.files.summary, prm.summary)
    set_trailer(prm.files.log, paired_log_lines(result))
    print("\n".join(format_paired_comparison(result)))


def load_data(args: argparse.Namespace, family: str):
    """The evaluated examples (competition_math levels and strata apply to handoff runs only)."""
    from masprm.data import load_examples
    from masprm.models.loading import options_from_args
    from masprm.models.model_checks import check_policy

    data = load_examples(args.dataset, args.split, n=args.sample_n, seed=args.seed,
                         data_file=args.data_file, **selection_options(args, family))
    check(bool(data.examples), f"--dataset {args.dataset} --split {args.split}: no usable examples "
                               f"({data.skipped} skipped without a gold answer)")
    check_policy(args.gen_model_id, "gen_model_id", options_from_args(args), questions=data.examples,
                 where=args.data_file or f"dataset {args.dataset} split {args.split}")
    return data


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    family = validate(args)
    resolve_defaults(args, family)

    from masprm.checks import check_known_dataset, check_output_dir, check_text_data_file
    from masprm.graph import load_mas_config

    check_known_dataset(args.dataset)
    check_output_dir(args.logs_dir, "logs_dir", inputs=input_paths(args))
    specs = model_specs(args)   # bad model or scorer folders fail here, before any data is read
    graph = load_mas_config(args.mas_config)
    if args.data_file:
        check_text_data_file(args.data_file)
    if family == "handoff":
        handoff_cli.check_handoff_config(args, graph, args.methods)
    workers, gpus_per_worker = resolve_workers(args.workers)
    failed = []
    for seed in args.seeds or [args.seed]:
        args.seed = seed
        data = load_data(args, family)
        print(f"seed {seed}: {len(data.examples)} examples ({data.skipped} skipped without gold), "
              f"{len(args.methods)} condition(s), {workers} worker(s); logs in {args.logs_dir}/")
        conditions = run_conditions(args.methods, args, graph, data, specs, logs_dir=args.logs_dir,
                                    workers=workers, use_ray=workers > 1, num_gpus_per_worker=gpus_per_worker)
        print(results_table(conditions))
        for c in conditions:
            print(f"  {c.method}: {c.files.log}")
        handoff_report(conditions)
        failed += [f"{c.method} (seed {seed})" for c in conditions if c.summary.get("status") == "FAILED"]
    if failed:
        print(f"FAILED conditions (examples raised errors; see the .jsonl records): {', '.join(failed)}",
              file=sys.stderr)
    return 1 if failed else 0


def cli() -> None:
    """The console script (pyproject.toml) and the checkout's script: one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
