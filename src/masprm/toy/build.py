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

The policy is shipped with the code (``src/masprm/toy/shipped_policy/``):
trained once on the reference machine, it is copied instead of trained when
its recorded build fingerprint equals this build's, so every machine
searches with the same weights (training itself is the first place where two
CPUs part ways: other vector instructions round the 3,000 optimiser steps
differently). ``--retrain`` trains anyway; ``--verify_shipped`` trains into
a temporary folder and compares the weights with the shipped ones, which
checks on the reference machine that the trainer reproduces them.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from dataclasses import asdict, fields
from pathlib import Path

from masprm.cli import ArgumentParser, check, run_cli
from masprm.errors import ConfigError
from masprm.graph import load_mas_config, resolve_config_path
from masprm.io import atomic_write_json, atomic_write_jsonl, read_json

DEFAULT_OUT = "artifacts/toy"
DEFAULT_CONFIG = "configs/toy.yaml"
_TOY_SOURCES = ("task.py", "transcripts.py", "train_policy.py")
SHIPPED = Path(__file__).resolve().parent / "shipped_policy"
# The demo runs every job with these: the AVX2 code paths of PyTorch's kernels and of MKL (conditional
# numerical reproducibility), which every x86-64 CPU of the last decade has, so Intel and AMD machines,
# with or without AVX-512, round the same way.
PINNED_NUMERICS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}
SHIPPED_MANIFEST = "shipped.json"


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


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def shipped_policy(key: str, shipped: Path | None = None) -> dict | None:
    """The shipped policy's manifest when it was trained for this build key and its files are intact.

    ``shipped`` defaults to the module's SHIPPED, read at call time.
    """
    shipped = SHIPPED if shipped is None else Path(shipped)
    try:
        manifest = read_json(shipped / SHIPPED_MANIFEST)
        if manifest.get("fingerprint") != key:
            return None
        if any(file_digest(shipped / name) != digest for name, digest in manifest["files"].items()):
            return None
        return manifest
    except Exception:  # noqa: BLE001 - missing or unreadable: there is no usable shipped policy
        return None


def ship_policy(policy: Path, key: str, stats: dict, shipped: Path | None = None) -> None:
    """Record a trained policy as the shipped one (the reference machine's weights)."""
    import platform

    import torch

    shipped = SHIPPED if shipped is None else Path(shipped)
    shutil.rmtree(shipped, ignore_errors=True)
    shutil.copytree(policy, shipped)
    files = {p.name: file_digest(p) for p in sorted(shipped.iterdir()) if p.is_file()}
    atomic_write_json(shipped / SHIPPED_MANIFEST, {
        "fingerprint": key, "files": files, "final_loss": stats.get("final_loss"),
        "parameters": stats.get("parameters"), "train_seconds": stats.get("train_seconds"),
        "trained_on": {"machine": platform.machine(), "processor": _cpu_name(), "torch": torch.__version__,
                       "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                       "threads": torch.get_num_threads(),
                       **{k: os.environ.get(k) for k in PINNED_NUMERICS}}})


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or "unknown"


def compare_weights(a: Path, b: Path) -> dict:
    """Byte equality and the largest absolute difference between two policies' tensors."""
    from safetensors.numpy import load_file

    x, y = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    if set(x) != set(y):
        return {"identical": False, "max_abs_diff": None, "tensors": "differ in names"}
    diff = max(float(abs(x[k].astype("float64") - y[k].astype("float64")).max()) for k in x)
    return {"identical": file_digest(a / "model.safetensors") == file_digest(b / "model.safetensors"),
            "max_abs_diff": diff}


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
                    force: bool = False, retrain: bool = False, log=print) -> dict:
    """Build (or find cached) the toy world in `out`; returns the build manifest.

    The policy is copied from the shipped one when that was trained for this
    build (same settings, team config and toy code), unless `retrain`.
    """
    from masprm.toy.train_policy import PolicySpec, train_policy
    from masprm.toy.transcripts import check_graph

    out = Path(out)
    spec = spec or PolicySpec()
    config = resolve_config_path(config)   # a path, or a shipped config's name from any folder
    graph = load_mas_config(config)
    try:
        check_graph(graph)
    except ValueError as err:
        raise ConfigError(f"{err} (`mas_config`)", setting="mas_config") from None
    key = fingerprint(asdict(spec), config.read_text(encoding="utf-8"))
    if not force and is_built(out, key):
        log(f"toy world: cached in {out} (build {key})")
        return read_json(out / "build.json")

    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    write_data_files(out, graph, spec.seed)
    tmp = out / f".policy.tmp-{key}"
    shutil.rmtree(tmp, ignore_errors=True)
    source = SHIPPED   # read once: the folder checked is the folder copied
    shipped = None if retrain else shipped_policy(key, source)
    if shipped is not None:
        shutil.copytree(source, tmp, ignore=shutil.ignore_patterns(SHIPPED_MANIFEST))
        stats = {"source": "shipped", "spec": asdict(spec), **{k: shipped[k] for k in
                                                                ("final_loss", "parameters", "trained_on")}}
        log(f"toy world: using the shipped policy (trained on {shipped['trained_on']['processor']}; "
            "--retrain trains it here)")
    else:
        stats = {"source": "trained", **train_policy(tmp, graph, spec, log=log)}
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
    p.add_argument("--retrain", action="store_true",
                   help="train the policy here even when the shipped one matches this build")
    p.add_argument("--verify_shipped", action="store_true",
                   help="train the policy into a temporary folder and compare it with the shipped weights "
                        "(exit 1 when they differ); writes nothing under --out")
    p.add_argument("--ship", action="store_true",
                   help="after building, record the policy as the shipped one (maintainers, on the reference machine)")
    args = p.parse_args()
    for flag in ("steps", "batch_size", "hidden_size", "num_layers"):
        check(getattr(args, flag) >= 1, f"--{flag} must be at least 1, got {getattr(args, flag)}")
    check(args.lr > 0, f"--lr must be positive, got {args.lr}")
    args.mas_config = str(resolve_config_path(args.mas_config))   # a path or a shipped config's name
    known = {f.name for f in fields(PolicySpec)}
    spec = PolicySpec(**{k: v for k, v in vars(args).items() if k in known})
    if args.verify_shipped:
        return verify_shipped(args.mas_config, spec)
    manifest = build_toy_world(args.out, config=args.mas_config, spec=spec, force=args.force or args.ship,
                               retrain=args.retrain or args.ship)
    if args.ship:
        ship_policy(Path(args.out) / "policy", manifest["fingerprint"], manifest)
        print(f"shipped the policy of build {manifest['fingerprint']} in {SHIPPED}")
    return 0


def verify_shipped(config: str | Path, spec) -> int:
    """Train with `spec` and compare with the shipped policy: 0 when byte-identical."""
    import tempfile

    from masprm.toy.train_policy import train_policy

    key = fingerprint(asdict(spec), Path(config).read_text(encoding="utf-8"))
    check(shipped_policy(key) is not None, f"{SHIPPED}: no shipped policy for build {key} (settings, team "
                                           "config or toy code changed since it was trained)")
    with tempfile.TemporaryDirectory() as tmp:
        train_policy(Path(tmp) / "policy", load_mas_config(config), spec)
        result = compare_weights(SHIPPED, Path(tmp) / "policy")
    print(f"shipped policy: {'identical' if result['identical'] else 'DIFFERENT'} "
          f"(largest weight difference {result['max_abs_diff']})")
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    run_cli(main)
