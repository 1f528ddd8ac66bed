"""Build the toy world once: the tiny policy model and the task's data files.

    PYTHONPATH=src python -m masprm.worlds.build --out artifacts/toy

Writes ``<out>/policy/`` (a normal Hugging Face model folder: use it as
``--model_id`` / ``--gen_model_id`` / ``--prm_base_model_id``),
``<out>/data/{train,test}.jsonl`` (the task's splits in GSM8K's schema, for
``--data_file``), ``<out>/transcripts_sample.jsonl`` (a few reference team
transcripts) and ``<out>/build.json`` (what was built and how). A second run
with the same settings and code finds build.json and does nothing; a changed
setting or changed toy code rebuilds. The policy is trained into a temporary
folder and moved into place at the end, so an interrupted build never
leaves a half-written model behind.

The policy is shipped with the code (``src/masprm/worlds/toy/shipped_policy/``):
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
import platform
import random
import shutil
import tempfile
import time
from itertools import islice
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from safetensors.numpy import load_file

from masprm.cli import ArgumentParser, check, run_cli
from masprm.identity import syntax_text
from masprm.checks import check_output_dir, check_seeds
from masprm.config import add_config_args, arg, config_from_args, require_each
from masprm.paths import PathText
from masprm.errors import ConfigError
from masprm.graph import load_mas_config, resolve_config_path
from masprm.io import atomic_write_json, atomic_write_jsonl, read_json
from masprm.worlds.toy.task import generate_split
from masprm.worlds import WORLDS, World

DEFAULT_OUT = "artifacts/toy"
DEFAULT_CONFIG = "configs/toy.yaml"
_TOY_SOURCES = ("toy/task.py", "toy/transcripts.py", "train_policy.py")   # the code that trains the policy
TOY_CODE = Path(__file__).resolve().parent                                 # where they are (read at call time)
SHIPPED = TOY_CODE / "toy" / "shipped_policy"
# The demo runs every job with these: PyTorch's AVX2 kernels (honoured on every x86-64 CPU with AVX2) and MKL's
# AVX2 branch of conditional numerical reproducibility, which MKL honours on Intel CPUs only: on an AMD one it
# reports CNR:AUTO and takes its own code path, so the two vendors' matrix products can round apart
# (docs/toy_world.md, "Same numbers on another machine"; bench/numerics_check.py).
PINNED_NUMERICS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}
SHIPPED_MANIFEST = "shipped.json"
# The shipped policies were trained with two intra-op threads; how a reduction is split depends on the
# count set, not on the cores there are, so every build trains with it and a rebuild matches on any CPU.
POLICY_THREADS = 2


def pin_numerics() -> dict[str, str]:
    """Give this process the demo's numerics where its environment names none (a value set there is kept,
    as `masprm.running.commands` keeps it); returns the values in force.

    Called before torch is imported (both are read when PyTorch and MKL first run a kernel): a policy
    built, shipped or verified by hand is then computed as `make demo`'s jobs compute it. Without this a
    `--verify_shipped` run by hand took AVX-512 paths and missed the shipped weights by up to 0.7.
    """
    for key, value in PINNED_NUMERICS.items():
        os.environ.setdefault(key, value)
    return {key: os.environ[key] for key in PINNED_NUMERICS}


@contextmanager
def policy_threads():
    """Train with POLICY_THREADS intra-op threads, whatever this machine has; the caller's count after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(POLICY_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def numerics() -> dict:
    """How this process computes (a trained policy records it): the kernels' instruction set, the
    threads, the pinning variables. Here, not in train_policy.py, whose text is part of the fingerprint."""
    import torch

    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
            **{key: os.environ.get(key) for key in PINNED_NUMERICS}}


def fingerprint(spec_dict: dict, config_text: str, sources: tuple[str, ...] = _TOY_SOURCES) -> str:
    """Identity of a build: its settings, the team config and the toy code that produces it.

    The code counts by its syntax (``masprm.identity``): a docstring or a comment edited
    in the toy modules leaves the build, and so the shipped policy, as it is.
    """
    h = hashlib.sha256(json.dumps(spec_dict, sort_keys=True).encode())
    h.update(config_text.encode())
    for name in sources:
        h.update(syntax_text((TOY_CODE / name).read_text(encoding="utf-8")).encode())
    return h.hexdigest()[:16]


def is_built(out: Path, key: str, model: str = "policy") -> bool:
    manifest = out / "build.json"
    if not (manifest.is_file() and (out / model / "config.json").is_file()):
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
    import torch   # the toy package stays torch-free until a policy is trained or shipped

    shipped = SHIPPED if shipped is None else Path(shipped)
    shutil.rmtree(shipped, ignore_errors=True)
    shutil.copytree(policy, shipped)
    files = {p.name: file_digest(p) for p in sorted(shipped.iterdir()) if p.is_file()}
    atomic_write_json(shipped / SHIPPED_MANIFEST, {
        "fingerprint": key, "files": files, "final_loss": stats.get("final_loss"),
        "parameters": stats.get("parameters"), "train_seconds": stats.get("train_seconds"),
        "trained_on": {"machine": platform.machine(), "processor": _cpu_name(), "torch": torch.__version__,
                       **(stats.get("numerics") or numerics())}})   # as trained (build_toy_world records it)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def compare_weights(a: Path, b: Path) -> dict:
    """Byte equality and the largest absolute difference between two policies' tensors."""
    x, y = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    if set(x) != set(y):
        return {"identical": False, "max_abs_diff": None, "tensors": "differ in names"}
    diff = max(float(abs(x[k].astype("float64") - y[k].astype("float64")).max()) for k in x)
    return {"identical": file_digest(a / "model.safetensors") == file_digest(b / "model.safetensors"),
            "max_abs_diff": diff}


def write_data_files(out: Path, graph, seed: int, world: World) -> None:
    for split in world.data_splits:
        atomic_write_jsonl(out / "data" / f"{split}.jsonl", [p.row() for p in generate_split(split, world.task)])
    rng = random.Random(seed)
    sample = []
    for problem in islice(world.task.iter_split("sft"), 20):
        outputs = world.reference_outputs(problem, rng)
        sample.append({"question": problem.question, "gold": problem.gold,
                       "outputs": {graph.agents[a].name: text for a, text in outputs.items()}})
    atomic_write_jsonl(out / "transcripts_sample.jsonl", sample)


def load_toy_team(config: str | Path, world: World | None = None):
    """The team a toy world's policy learns to play (a ConfigError naming `mas_config` for another team)."""
    graph = load_mas_config(config)
    try:
        (world or WORLDS["toy"]).check_graph(graph)
    except ValueError as err:
        raise ConfigError(f"{err} (`mas_config`)", setting="mas_config") from None
    return graph


BACKBONES = ("policy", "scorer")   # what a build trains: the team's policy, or a larger scorer backbone


def shipped_dir(world: World, backbone: str = "policy") -> Path:
    """A world's shipped policy folder (the toy world's is SHIPPED, read at call time), or its scorer backbone's."""
    if backbone == "scorer":
        if world.scorer_shipped is None:
            raise ConfigError(f"--backbone scorer: the world {world.name} has no scorer backbone", setting="backbone")
        return TOY_CODE / world.scorer_shipped
    return SHIPPED if world.name == "toy" else world.shipped_dir


def default_out(world: World, backbone: str = "policy") -> str:
    """Where a build goes by default: the world's folder, or beside it for the scorer backbone (a build folder
    holds one model and one build.json)."""
    return world.out if backbone == "policy" else f"{world.out}_scorer"


def build_key(world: World, spec, config: Path) -> str:
    return fingerprint(asdict(spec), config.read_text(encoding="utf-8"), world.sources)


def build_toy_world(out: str | Path = DEFAULT_OUT, *, config: str | Path = DEFAULT_CONFIG, spec=None,
                    force: bool = False, retrain: bool = False, log=print, world: str = "toy",
                    backbone: str = "policy") -> dict:
    """Build (or find cached) a toy world (`world`, a WORLDS name) in `out`; returns the build manifest.

    The policy is copied from the shipped one when that was trained for this
    build (same settings, team config and toy code), unless `retrain`. With `backbone` "scorer" the model
    is the world's scorer backbone, trained the same way on the same corpus, in ``<out>/scorer/``.
    """
    world = WORLDS[world]
    config = resolve_config_path(config)   # a path, or a shipped config's name from any folder
    graph = load_toy_team(config, world)
    from masprm.worlds.train_policy import PolicySpec, train_policy   # imports torch

    out = Path(out)
    spec = spec or PolicySpec()
    key = build_key(world, spec, config)
    source = shipped_dir(world, backbone)   # read once: the folder checked is the folder copied (and before any write)
    if not force and is_built(out, key, backbone):
        log(f"toy world: cached in {out} (build {key})")
        return read_json(out / "build.json")

    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    write_data_files(out, graph, spec.seed, world)
    tmp = out / f".policy.tmp-{key}"
    shutil.rmtree(tmp, ignore_errors=True)
    shipped = None if retrain else shipped_policy(key, source)
    if shipped is not None:
        shutil.copytree(source, tmp, ignore=shutil.ignore_patterns(SHIPPED_MANIFEST))
        stats = {"source": "shipped", "spec": asdict(spec), **{k: shipped[k] for k in
                                                                ("final_loss", "parameters", "trained_on")}}
        log(f"toy world: using the shipped policy (trained on {shipped['trained_on']['processor']}; "
            "--retrain trains it here)")
    else:
        with policy_threads():
            stats = {"source": "trained", **train_policy(tmp, graph, spec, world=world, log=log),
                     "numerics": numerics()}
    final = out / backbone
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    manifest = {"fingerprint": key, backbone: str(final), "config": str(config),
                "data": {s: str(out / "data" / f"{s}.jsonl") for s in world.data_splits},
                "build_seconds": round(time.time() - started, 1), **stats}
    atomic_write_json(out / "build.json", manifest)
    log(f"toy world: built in {out} in {manifest['build_seconds']} s (build {key})")
    return read_json(out / "build.json")  # as a cached build returns it


@dataclass(frozen=True)
class BuildArgs:
    """What to build and where (the script's own flags)."""

    world: str = arg("toy", flags=("--world",), help="the toy world to build (toy, toy_deep)")
    backbone: str = arg("policy", flags=("--backbone",), choices=BACKBONES,
                        help="the model to build: the team's policy, or the world's larger scorer backbone "
                             "(toy_deep; the same corpus, more layers and width: docs/learnability.md)")
    out: PathText | None = arg(None, flags=("--out",),
                               help="output folder (default: the world's, artifacts/<world>, or artifacts/<world>_scorer "
                                    "for the scorer backbone)")
    mas_config: PathText | None = arg(None, flags=("--mas_config",),
                                      help="the team the policy learns to play (default: the world's, configs/<world>.yaml)")
    force: bool = arg(False, flags=("--force",), help="rebuild even when a matching build exists")
    retrain: bool = arg(False, flags=("--retrain",),
                        help="train the policy here even when the shipped one matches this build")
    verify_shipped: bool = arg(False, flags=("--verify_shipped",),
                               help="train the policy into a temporary folder and compare it with the shipped weights "
                                    "(exit 1 when they differ); writes nothing under --out")
    ship: bool = arg(False, flags=("--ship",), help="after building, record the policy as the shipped one "
                                                   "(maintainers, on the reference machine)")


@dataclass(frozen=True)
class PolicyArgs:
    """The policy's training settings this command can change; unset keeps PolicySpec's default."""

    seed: int | None = arg(None, flags=("--seed",), help="policy initialisation and data order")
    steps: int | None = arg(None, flags=("--steps",), help="policy training steps")
    batch_size: int | None = arg(None, flags=("--batch_size",), help="policy training batch size")
    lr: float | None = arg(None, flags=("--lr",), help="policy learning rate")
    hidden_size: int | None = arg(None, flags=("--hidden_size",), help="policy hidden width")
    num_layers: int | None = arg(None, flags=("--num_layers",), help="policy transformer layers")
    target_noise: float | None = arg(None, flags=("--target_noise",),
                                     help="share of SFT transcripts whose Reader misreads and (apart) whose Planner "
                                          "swaps an operation, the team following (toy_deep only)")

    def __post_init__(self) -> None:
        require_each(self, ("steps", "batch_size", "hidden_size", "num_layers"), lambda v: v >= 1,
                     "must be at least 1")
        require_each(self, ("lr",), lambda v: v > 0, "must be positive")
        require_each(self, ("target_noise",), lambda v: 0 <= v < 1, "must be in [0, 1)")
        check_seeds(self)

    def spec(self, world: World | None = None, backbone: str = "policy"):
        """The PolicySpec these settings give over the world's defaults for `backbone` (``masprm.worlds.train_policy``,
        imported here: it imports torch)."""
        from masprm.worlds.train_policy import PolicySpec   # imports torch

        defaults = world.backbone_defaults(backbone) if world is not None else {}
        return PolicySpec(**{**defaults, **{k: v for k, v in asdict(self).items() if v is not None}})


def main() -> int:
    pin_numerics()   # first: nothing has imported torch yet
    p = ArgumentParser(description="Build the toy world (tiny policy model + task data), cached.")
    add_config_args(p, BuildArgs)
    add_config_args(p, PolicyArgs)
    parsed = p.parse_args()
    args, policy = config_from_args(BuildArgs, parsed), config_from_args(PolicyArgs, parsed)
    check(args.world in WORLDS, f"--world: {WORLDS.unknown_message(args.world)}")
    world = WORLDS[args.world]
    check(args.backbone == "policy" or world.scorer_shipped is not None,
          f"--backbone scorer: the world {world.name} has no scorer backbone "
          f"(worlds with one: {', '.join(n for n, w in WORLDS.items() if w.scorer_shipped) or 'none'})")
    out = args.out or default_out(world, args.backbone)
    config = str(resolve_config_path(args.mas_config or world.config))   # a path or a shipped config's name
    if not args.verify_shipped:   # the build writes its data and policy there: never into what it reads
        check_output_dir(out, "out", inputs={"mas_config": config,
                                             f"shipped {args.backbone}": shipped_dir(world, args.backbone)})
    load_toy_team(config, world)   # a bad team fails before the trainer (and torch) is imported
    spec = policy.spec(world, args.backbone)
    head = spec.hidden_size / spec.num_heads   # rotary embeddings rotate pairs of a head's dimensions
    check(head.is_integer() and head % 2 == 0, f"--hidden_size {spec.hidden_size}: must be an even multiple of "
                                               f"the {args.backbone}'s {spec.num_heads} attention heads")
    if args.verify_shipped:
        return verify_shipped(config, spec, world, args.backbone)
    manifest = build_toy_world(out, config=config, spec=spec, force=args.force or args.ship,
                               retrain=args.retrain or args.ship, world=world.name, backbone=args.backbone)
    if args.ship:
        shipped = shipped_dir(world, args.backbone)
        ship_policy(Path(out) / args.backbone, manifest["fingerprint"], manifest, shipped)
        print(f"shipped the {args.backbone} of build {manifest['fingerprint']} in {shipped}")
    return 0


def verify_shipped(config: str | Path, spec, world: World | None = None, backbone: str = "policy") -> int:
    """Train with `spec` and compare with the world's shipped policy (or scorer backbone): 0 when byte-identical."""
    from masprm.worlds.train_policy import train_policy   # imports torch

    world = world or WORLDS["toy"]
    shipped = shipped_dir(world, backbone)
    key = build_key(world, spec, Path(config))
    check(shipped_policy(key, shipped) is not None, f"{shipped}: no shipped policy for build {key} (settings, "
                                                    "team config or toy code changed since it was trained)")
    with policy_threads(), tempfile.TemporaryDirectory() as tmp:
        train_policy(Path(tmp) / "policy", load_mas_config(config), spec, world=world)
        result = compare_weights(shipped, Path(tmp) / "policy")
        used = " ".join(f"{k}={v}" for k, v in numerics().items())
    print(f"shipped {backbone}: {'identical' if result['identical'] else 'DIFFERENT'} "
          f"(largest weight difference {result['max_abs_diff']}; trained with {used})")
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    run_cli(main)
