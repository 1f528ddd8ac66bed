"""Stage 2: MAS-MCTS trees -> PRM samples and Bradley-Terry preference pairs.

    python src/train/preprocess_data.py --input results/<run> --target-nodes 5 \\
        --make-ppm --ppm-max-pairs 8 --ppm-pos-topk 4 --ppm-neg-topk 4 \\
        --view full --config configs/gsm8k.yaml

Writes next to the tree folder: results/prm_samples[_local]_<run>.jsonl and,
with --make-ppm, results/ppm_pairs[_local]_<run>.jsonl. Trees are read one at
a time and the outputs are streamed into temporary files that replace the
old outputs only when the whole pass succeeds.
"""

import sys
import argparse
import json
from contextlib import ExitStack
from pathlib import Path

from tqdm import tqdm

from masprm.checks import check_output_file, file_identity
from masprm.cli import ArgumentParser, UsageError, check, run_cli
from masprm.graph import MASGraph, load_mas_config
from masprm.io import AtomicJsonlWriter
from masprm.pairs import Options, Preprocessor


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = ArgumentParser(description="Turn MAS-MCTS trees into PRM samples and PPM (Bradley-Terry) pairs.")
    ap.add_argument("--input", type=Path, required=True,
                    help="a folder of tree JSON files (searched recursively) or a single tree file")
    ap.add_argument("--target-nodes", type=int, default=5,
                    help="path length in nodes, root included (default 5); <= 0 means variable depth "
                         "(every root-to-terminal-leaf path)")
    ap.add_argument("--dedupe", action=argparse.BooleanOptionalAction, default=True,
                    help="drop exact duplicate samples and pairs across trees (default on)")
    ap.add_argument("--make-ppm", action="store_true", help="also write PPM preference pairs")
    ap.add_argument("--ppm-max-pairs", type=int, default=8, help="at most this many pairs per tree (default 8)")
    ap.add_argument("--ppm-pos-topk", type=int, default=4, help="at most this many positives per prefix (default 4)")
    ap.add_argument("--ppm-neg-topk", type=int, default=4, help="at most this many negatives per prefix (default 4)")
    ap.add_argument("--ppm-root-window", type=float, nargs=2, default=(-0.7, 0.7), metavar=("LO", "HI"),
                    help="mine pairs only from trees whose root value is in [LO, HI] (default -0.7 0.7)")
    ap.add_argument("--view", choices=("full", "local"), default="full",
                    help="full: the routed transcript; local: one agent's inbox + its output (default full)")
    ap.add_argument("--config", type=Path, default=None,
                    help="MAS config YAML, needed by --view local (default configs/<dataset>.yaml, "
                         "<dataset> being the input folder's name before '_res_')")
    ap.add_argument("--force", action="store_true",
                    help="--view local: route with --config even when the trees record another MAS config")
    ap.add_argument("--seed", type=int, default=42,
                    help="accepted like every stage's; preprocessing is deterministic and uses no randomness")
    args = ap.parse_args(argv)
    check(args.target_nodes != 1, "--target-nodes 1 is the root alone: use 2 or more, or <= 0 for variable depth")
    for flag in ("ppm_max_pairs", "ppm_pos_topk", "ppm_neg_topk"):
        check(getattr(args, flag) >= 1, f"--{flag.replace('_', '-')} must be at least 1")
    lo, hi = args.ppm_root_window
    check(lo <= hi, f"--ppm-root-window: LO ({lo:g}) must not exceed HI ({hi:g})")
    return args


def find_trees(input_path: Path) -> list[Path]:
    check(input_path.exists(), f"--input: {input_path} does not exist")
    if input_path.is_file():
        return [input_path]
    files = sorted(p for p in input_path.rglob("*.json") if p.is_file())
    check(bool(files), f"--input: no tree files (*.json) under {input_path}")
    return files


def output_paths(input_path: Path, view: str) -> tuple[Path, Path]:
    """results/<run> -> results/prm_samples[_local]_<run>.jsonl, results/ppm_pairs[_local]_<run>.jsonl."""
    resolved = input_path.resolve()
    run = resolved.stem if resolved.is_file() else resolved.name
    tag = "" if view == "full" else f"_{view}"
    return (resolved.with_name(f"prm_samples{tag}_{run}.jsonl"),
            resolved.with_name(f"ppm_pairs{tag}_{run}.jsonl"))


def load_graph(args: argparse.Namespace) -> MASGraph | None:
    """The MAS graph the local view routes inboxes through (a given --config is always checked)."""
    path = args.config
    if path is None:
        if args.view != "local":
            return None
        folder = args.input.resolve()
        folder = folder.parent if folder.is_file() else folder
        check("_res_" in folder.name,
              f"--config: cannot derive the MAS config from the folder name {folder.name!r} "
              f"(expected '<dataset>_res_...'); pass --config")
        path = Path("configs") / f"{folder.name.split('_res_')[0]}.yaml"
        check(path.is_file(), f"--config: {path} (derived from the input folder name) not found; pass --config")
    graph = load_mas_config(path)
    if args.view == "local" and not args.force:
        check_recorded_config(args.input, path)
    return graph


def check_recorded_config(input_path: Path, config: Path) -> None:
    """The local view routes inboxes through the team that built the trees: compare with their record."""
    first = input_path if input_path.is_file() else next(iter(find_trees(input_path)))
    try:
        meta = json.loads(first.read_text(encoding="utf-8")).get("meta") or {}
    except (OSError, ValueError, AttributeError):
        return  # an unreadable tree is reported (and skipped) with the others
    recorded, identity = meta.get("config"), meta.get("config_identity")
    if not isinstance(recorded, str):
        return  # trees from elsewhere: nothing to compare with
    if identity is None and Path(recorded).is_file():
        identity = file_identity(recorded)
    same = file_identity(config) == identity if identity else Path(recorded).resolve() == config.resolve()
    check(same, f"--config {config} is not the MAS config the trees were built with ({recorded}, recorded in "
                f"{first}); the local view would route inboxes through another team. Pass that config, "
                "or --force to use this one anyway")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    files = find_trees(args.input)
    graph = load_graph(args)
    options = Options(target_nodes=args.target_nodes, view=args.view, make_ppm=args.make_ppm,
                      dedupe=args.dedupe, ppm_max_pairs=args.ppm_max_pairs, ppm_pos_topk=args.ppm_pos_topk,
                      ppm_neg_topk=args.ppm_neg_topk, ppm_root_window=tuple(args.ppm_root_window))
    prep = Preprocessor(options, graph)
    prm_path, ppm_path = output_paths(args.input, args.view)
    for path in (ppm_path, prm_path) if args.make_ppm else (prm_path,):
        check_output_file(path, f"--input {args.input}: output")
    root = args.input if args.input.is_dir() else args.input.parent
    if graph is not None and args.view == "local":
        print(f"[preprocess] local view, routing inboxes with {graph.source}")

    with ExitStack() as stack:
        prm_out = stack.enter_context(AtomicJsonlWriter(prm_path))
        ppm_out = stack.enter_context(AtomicJsonlWriter(ppm_path)) if args.make_ppm else None
        # The bar shows on a terminal only and leaves no line behind, so an error stays one line.
        for f in tqdm(files, desc="Processing trees", unit="tree", disable=None, leave=False):
            prm, ppm = prep.process_file(f, name=str(f.relative_to(root)))
            for rec in prm:
                prm_out.write(rec)
            for rec in ppm:
                ppm_out.write(rec)
        # Raised inside the writers' block, so the previous outputs stay in place.
        if not prep.counts.trees:
            raise UsageError(f"--input: none of the {len(files)} tree file(s) could be read "
                             f"({prep.counts.malformed_named[0]}); nothing was written")

    for bad in (prep.malformed_summary(), prep.off_config_summary()):
        if bad:
            print(f"[preprocess] warning: {bad}", file=sys.stderr)
    print(prep.prm_summary(prm_path))
    if args.make_ppm:
        print(prep.ppm_summary(ppm_path))
    for why in (prep.why_no_prm(), prep.why_no_ppm()):
        if why:
            print(f"[preprocess] {why}")
    return 0


if __name__ == "__main__":
    run_cli(main)
