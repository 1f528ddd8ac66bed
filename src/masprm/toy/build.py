"""Build the toy world once: the tiny policy model and the task's data files.

    PYTHONPATH=src python -m masprm.toy.build --out artifacts/toy

Writes ``<out>/policy/`` (a normal Hugging Face model folder: use it as
``--model_id`` / ``--gen_model_id`` / ``--prm_base_model_id``),
``<out>/data/{train,test}.jsonl`` (the task's splits in GSM8K's schema, for
``--data_file``), ``<out>/transcripts_sample.jsonl`` (a few reference team
transcripts) and ``<out>/build.json`` (what was built and how). A second run
with the same settings and code finds build.json and does nothing; a changed
setting or changed toy code rebuilds. The policy is trained into a temporary
folder and moved into place at the end, so an interrupted build never
leaves a half-written model behind.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from dataclasses import asdict, fields
from pathlib import Path

from masprm.cli import ArgumentParser, UsageError, check, run_cli
from masprm.graph import load_mas_config
from masprm.io import atomic_write_json, atomic_write_jsonl, read_json

DEFAULT_OUT = "artifacts/toy"
DEFAULT_CONFIG = "configs/toy.yaml"
_TOY_SOURCES = ("task.py", "transcripts.py", "train_policy.py")


def fingerprint(spec_dict: dict, config_text: str) -> str:
    """Identity of a build: its settings, the team config and the toy code that produces it."""
    h = hashlib.sha256(json.dumps(spec_dict, sort_keys=True).encode())
    h.update(config_text.encode())
    here = Path(__file__).resolve().parent
    for name in _TOY_SOURCES:
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]


def is_built(out: Path, key: str) -> bool:
    manifest = out / "build.json"
    if not (manifest.is_file() and (out / "policy" / "config.json").is_file()):
        return False
    try:
        return read_json(manifest).get("fingerprint") == key
    except Exception:  # noqa: BLE001 - an unreadable manifest just means: build again
        return False


def write_data_files(out: Path, graph, seed: int) -> None:
    from masprm.toy.task import generate_split
    from masprm.toy.transcripts import reference_outputs

    for split in ("train", "test"):
        atomic_write_jsonl(out / "data" / f"{split}.jsonl", [p.row() for p in generate_split(split)])
    rng = random.Random(seed)
    sample = []
    for problem in generate_split("sft")[:20]:
        outputs = reference_outputs(problem, rng)
        sample.append({"question": problem.question, "gold": problem.gold,
                       "outputs": {graph.agents[a].name: text for a, text in outputs.items()}})
    atomic_write_jsonl(out / "transcripts_sample.jsonl", sample)


def build_toy_world(out: str | Path = DEFAULT_OUT, *, config: str | Path = DEFAULT_CONFIG, spec=None,
                    force: bool = False, log=print) -> dict:
    """Build (or find cached) the toy world in `out`; returns the build manifest."""
    from masprm.toy.train_policy import PolicySpec, train_policy
    from masprm.toy.transcripts import check_graph

    out = Path(out)
    spec = spec or PolicySpec()
    config = Path(config)
    graph = load_mas_config(config)
    try:
        check_graph(graph)
    except ValueError as err:
        raise UsageError(f"{err} (--mas_config)") from None
    key = fingerprint(asdict(spec), config.read_text(encoding="utf-8"))
    if not force and is_built(out, key):
        log(f"toy world: cached in {out} (build {key})")
        return read_json(out / "build.json")

    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    write_data_files(out, graph, spec.seed)
    tmp = out / f".policy.tmp-{key}"
    shutil.rmtree(tmp, ignore_errors=True)
    stats = train_policy(tmp, graph, spec, log=log)
    final = out / "policy"
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    manifest = {"fingerprint": key, "policy": str(final), "config": str(config),
                "data": {s: str(out / "data" / f"{s}.jsonl") for s in ("train", "test")},
                "build_seconds": round(time.time() - started, 1), **stats}
    atomic_write_json(out / "build.json", manifest)
    log(f"toy world: built in {out} in {manifest['build_seconds']} s (build {key})")
    return read_json(out / "build.json")  # as a cached build returns it


def main() -> int:
    from masprm.toy.train_policy import PolicySpec

    defaults = PolicySpec()
    p = ArgumentParser(description="Build the toy world (tiny policy model + task data), cached.")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    p.add_argument("--mas_config", default=DEFAULT_CONFIG, help="the team the policy learns to play")
    p.add_argument("--seed", type=int, default=defaults.seed, help="policy initialisation and data order")
    p.add_argument("--steps", type=int, default=defaults.steps, help="policy training steps")
    p.add_argument("--batch_size", type=int, default=defaults.batch_size)
    p.add_argument("--lr", type=float, default=defaults.lr)
    p.add_argument("--hidden_size", type=int, default=defaults.hidden_size)
    p.add_argument("--num_layers", type=int, default=defaults.num_layers)
    p.add_argument("--force", action="store_true", help="rebuild even when a matching build exists")
    args = p.parse_args()
    for flag in ("steps", "batch_size", "hidden_size", "num_layers"):
        check(getattr(args, flag) >= 1, f"--{flag} must be at least 1, got {getattr(args, flag)}")
    check(args.lr > 0, f"--lr must be positive, got {args.lr}")
    check(Path(args.mas_config).is_file(), f"{args.mas_config}: MAS config not found (--mas_config)")
    known = {f.name for f in fields(PolicySpec)}
    spec = PolicySpec(**{k: v for k, v in vars(args).items() if k in known})
    build_toy_world(args.out, config=args.mas_config, spec=spec, force=args.force)
    return 0


if __name__ == "__main__":
    run_cli(main)
