"""The GPU check's steps: what each runs, its time limit on the GPU machine, the packages and steps it
needs, and the two device calls of the lent machine's plan (``bash bench/gpu_check.sh --plan``).

Pure Python: the runner (bench/gpu_check.py) builds each step's command from a Context and runs it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

CALL_LIMIT_S = 360        # each device call must end within 6 minutes; the sum of its step limits stays under
CPU_LIMIT_FACTOR = 4      # --cpu: 2 shared cores import and build slower than the GPU machine's 16
WHEELS_LIMIT_S = 15       # installing carried wheels (bitsandbytes' is 43 MB) from a local folder


@dataclass
class Context:
    """What the step commands depend on."""

    work: Path
    cpu: bool
    have: set[str] = field(default_factory=set)   # importable packages (distribution names)

    @property
    def gpus(self) -> int:
        """GPUs the setup step saw (it writes WORK/machine.json); 0 before it ran or on --cpu."""
        try:
            return int(json.loads((self.work / "machine.json").read_text())["gpus"])
        except (OSError, ValueError, KeyError):
            return 0

    def in_process(self, name: str) -> list[str]:
        return [sys.executable, str(BENCH / "gpu_steps.py"), name, str(self.work)] + (["--cpu"] if self.cpu else [])


@dataclass
class Run:
    """One step's command, and what its output must (or must not) contain to pass."""

    argv: list[str]
    cwd: Path | None = None
    expect: list[str] = field(default_factory=list)
    refuse: list[str] = field(default_factory=list)
    verify: Callable[[], str | None] | None = None   # after a clean exit: a failure message, or None
    fresh: list[Path] = field(default_factory=list)  # outputs removed first, so a rerun in WORK starts clean


@dataclass(frozen=True)
class Step:
    name: str
    limit: int                     # seconds on the GPU machine
    calls: tuple[int, ...]         # the device calls of the two-call plan that run it
    what: str
    command: Callable[[Context], Run]
    needs: tuple[str, ...] = ()    # packages; any absent: one SKIP line
    after: tuple[str, ...] = ("setup",)  # steps that must have passed first
    alone: str = ""                # a step in neither call: why, and how it runs


def _trainer(ctx: Context, out: str) -> list[str]:
    """The tiny ppm training run of the train and torchrun steps (QLoRA when bitsandbytes is there)."""
    if "bitsandbytes" not in ctx.have:
        quant = ["--no-load-in-4bit"]
    elif ctx.cpu:
        quant = ["--load-in-4bit"]  # the GPU's default path, asked for on the CPU
    else:
        quant = []  # QLoRA is the default on CUDA: check the default
    return [str(REPO / "src/train/trainer.py"), "--mode", "ppm", "--data_dir", str(ctx.work / "pairs.jsonl"),
            "--model-id", str(ctx.work / "tiny"), "--max-steps", "8", "--lr", "1e-4", "--train-batch-size", "8",
            "--grad-accum", "1", "--lora-r", "8", "--lora-alpha", "16", "--max-length", "128", "--eval-steps", "4",
            "--output-dir", str(ctx.work / out), *quant]


def _trained(ctx: Context) -> list[str]:
    # the trainer's start line ends in ", QLoRA (4-bit base)" or ", LoRA"
    return ["saved ppm scorer", ", QLoRA (4-bit base)" if "bitsandbytes" in ctx.have else ", LoRA"]


def _stage1(ctx: Context, n: int, candidates: int, tokens: int) -> list[str]:
    return [sys.executable, str(REPO / "src/run_mcts.py"), "--dataset", "gsm8k", "--split", "train", "--n", str(n),
            "--seed", "42", "--n_rollouts", "2", "--search_c", "4", "--n_candidates", str(candidates),
            "--mas_config", "configs/gsm8k.yaml", "--load_in_4bit", "--no_compile", "--model_id",
            str(ctx.work / "tiny"), "--data_file", str(ctx.work / "gsm8k.jsonl"), "--max_new_tokens", str(tokens),
            "--no_plot"]


def smoke(ctx: Context) -> Run:
    # The seed README's smoke test, verbatim, on the local tiny model and data.
    return Run(_stage1(ctx, 2, 3, 24), cwd=ctx.work, expect=["wrote 2 trees"],
               refuse=[] if ctx.cpu else ["running on CPU"], fresh=[ctx.work / "results"])


def train(ctx: Context) -> Run:
    expect = _trained(ctx)
    if ctx.gpus >= 2:
        expect.append(f"training on 1 of the {ctx.gpus} visible GPUs")
    return Run([sys.executable, *_trainer(ctx, "prm")], expect=expect, fresh=[ctx.work / "prm"])


def torchrun(ctx: Context) -> Run:
    # One process per GPU (a single GPU still runs NCCL and the DDP wrapper); gloo on --cpu.
    return Run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                "1" if ctx.cpu else "gpu", *_trainer(ctx, "prm-ddp")], expect=_trained(ctx),
               fresh=[ctx.work / "prm-ddp"])


def stage4(ctx: Context) -> Run:
    """Stage 4 with torch.compile on (the default) and the scorer in its default precision, 4-bit on CUDA.

    Without bitsandbytes the scorer loads in bf16; on --cpu with bitsandbytes it is asked for 4-bit,
    the path the GPU takes by default."""
    bnb = "bitsandbytes" in ctx.have
    precision = ([] if not ctx.cpu else ["--scorer_precision", "4bit"]) if bnb else \
        (["--scorer_precision", "bf16"] if not ctx.cpu else [])
    argv = [sys.executable, str(REPO / "src/experiments/compare_sbs_mcts.py"), "--dataset", "gsm8k", "--split",
            "test", "--seed", "14", "--data_file", str(ctx.work / "gsm8k.jsonl"), "--sample_n", "2",
            "--gen_model_id", str(ctx.work / "tiny"), "--prm_dir", str(ctx.work / "prm"), "--mas_config",
            "configs/gsm8k.yaml", "--methods", "single_pass", "sbs_prm", "--b1", "3", "--b2", "5",
            "--max_new_tokens", "24", "--workers", "1", "--logs_dir", str(ctx.work / "logs-stage4"), *precision]

    def scorer_was_4bit() -> str | None:
        manifests = sorted((ctx.work / "logs-stage4").glob("*sbs_prm*.manifest.json"))
        if not manifests:
            return "no sbs_prm manifest written"
        models = json.loads(manifests[0].read_text())["definition"]["models"]
        # the scorer's entry is named for its role (masprm for --prm_dir): find it by its folder
        scorer = [m for m in models.values() if m.get("id") == str(ctx.work / "prm")]
        if not scorer:
            return f"the sbs_prm manifest names no model {ctx.work / 'prm'}"
        quantized = scorer[0].get("load_in_4bit")
        print(f"  sbs_prm scorer loaded in 4-bit: {quantized}")
        return None if quantized == bnb else f"sbs_prm scorer load_in_4bit is {quantized}, expected {bnb}"

    return Run(argv, cwd=ctx.work, refuse=["torch.compile failed"], verify=scorer_was_4bit,
               fresh=[ctx.work / "logs-stage4"])


def ray(ctx: Context) -> Run:
    share = "0" if ctx.cpu else "0.5"  # two actors sharing one GPU
    argv = _stage1(ctx, 4, 2, 16) + ["--ray", "--gpus_per_actor", share, "--actors", "2",
                                     "--out_root", str(ctx.work / "ray-results")]
    return Run(argv, cwd=ctx.work, expect=["wrote 4 trees"], fresh=[ctx.work / "ray-results"])


def decode(ctx: Context) -> Run:
    """The decode loop against generate and a bare loop (bench/bench_decode.py): the 1.5B shape in bf16 on the
    GPU, with and without CUDA graphs; on --cpu its quick run on a 2-layer model."""
    argv = [sys.executable, str(BENCH / "bench_decode.py")]
    argv += ["--quick", "--layers", "2", "--rows", "4", "--vocab", "512"] if ctx.cpu else ["--device", "cuda"]
    return Run(argv, expect=["bench_decode: done"], refuse=["torch.compile failed"])


def in_process(name: str) -> Callable[[Context], Run]:
    return lambda ctx: Run(ctx.in_process(name))


STEPS = [
    Step("setup", 50, (1, 2), "GPUs, precision rule, C compiler; builds the tiny model, data, pairs and the "
         "real-size random Qwen2.5-1.5B", in_process("setup"), after=()),
    Step("rs-sample", 70, (1,), "real size: HFPolicy.sample at 16/64/256 rows, bf16 (tokens/s, rows/call, peak)",
         in_process("rs-sample")),
    Step("rs-score", 35, (1,), "real size: HFScorer.score_batch, bf16 (+ 4-bit with bitsandbytes) (transcripts/s)",
         in_process("rs-score")),
    Step("rs-train", 75, (1, 2), "real size: one ppm optimizer step, 8 x 16 pairs (QLoRA with bitsandbytes, "
         "else LoRA)", in_process("rs-train")),
    Step("compile", 80, (1,), "torch.compile on HFPolicy's forward: no fallback, logits_to_keep reaches it",
         in_process("compile")),
    Step("torchrun", 45, (1,), "tiny ppm training under torchrun, one process per GPU (NCCL, DDP)", torchrun),
    Step("smoke", 40, (2,), "the README's smoke test (stage 1, --load_in_4bit) on the tiny model", smoke,
         needs=("bitsandbytes", "datasets")),
    Step("bnb", 40, (2,), "4-bit policy log-probs vs unquantised, 4-bit sampling, QLoRA biases stay fp32",
         in_process("bnb"), needs=("bitsandbytes",)),
    Step("train", 45, (2,), "tiny ppm training through the trainer CLI (QLoRA with bitsandbytes)", train),
    Step("stage4", 90, (2,), "stage 4 with torch.compile on and the scorer at its default precision", stage4,
         needs=("datasets",), after=("setup", "train")),
    Step("ray", 90, (), "stage 1 on Ray, two actors sharing a GPU", ray, needs=("ray", "datasets"),
         alone="ray's wheel (79 MB) is over the 64 MiB a call can carry"),
    Step("decode", 180, (), "the decode loop, 1.5B shape in bf16: HFPolicy.sample eager and as CUDA graphs, "
         "generate, a bare loop (ms/step, tokens/s, floor)", decode, after=(),
         alone="both calls are full: a third call of its own, --steps decode"),
]
BY_NAME = {s.name: s for s in STEPS}
CALL_WHEELS = {1: (), 2: ("bitsandbytes", "datasets")}  # what each call carries
# datasets' own needs that the lent machine lacks, at versions inside datasets 5.2.0's bounds
DATASETS_EXTRA_WHEELS = ("dill==0.4.1", "multiprocess==0.70.19")
# pip download for the lent machine: CPython 3.12 on x86-64 Linux, binary wheels only
def call_budget(call: int) -> tuple[list[tuple[str, int]], int]:
    """(name, limit) of every step of a device call, carried-wheel installation included, and their sum."""
    parts = ([("wheels", WHEELS_LIMIT_S)] if CALL_WHEELS[call] else []) + \
        [(s.name, s.limit) for s in STEPS if call in s.calls]
    return parts, sum(limit for _, limit in parts)


def plan_text() -> str:
    lines = [f"GPU check steps (limits in seconds on the GPU machine; --cpu multiplies them by {CPU_LIMIT_FACTOR})",
             "", f"{'step':<10} {'limit':>5}  {'calls':<5}  {'needs':<23} what"]
    for s in STEPS:
        calls = " ".join(map(str, s.calls)) or "-"
        lines.append(f"{s.name:<10} {s.limit:>5}  {calls:<5}  {', '.join(s.needs) or '-':<23} {s.what}")
    lines.append("")
    for call in CALL_WHEELS:
        parts, total = call_budget(call)
        carried = f"--wheels DIR with {', '.join(CALL_WHEELS[call])}" if CALL_WHEELS[call] else "no wheels"
        verdict = "within" if total < CALL_LIMIT_S else "OVER"
        lines.append(f"call {call} ({carried}): " + " + ".join(f"{n} {t}" for n, t in parts) +
                     f" = {total} s, {verdict} the {CALL_LIMIT_S} s of one call")
    outside = [f"{s.name} ({s.alone})" for s in STEPS if not s.calls]
    lines.append(f"in neither call: {'; '.join(outside)}; a run without --call runs every step")
    return "\n".join(lines)


def skip_reason(step: Step, have: set[str], passed: set[str], broken: Iterable[str] = ()) -> str | None:
    """Why a step does not run (one line), or None. `have` holds the usable packages, `broken` those
    installed that do not import."""
    missing = [p for p in step.needs if p not in have]
    if missing:
        unusable = [p for p in missing if p in broken]
        why = "which does not import here" if unusable == missing else \
            "not installed here" if not unusable else "not installed or not importable here"
        return f"SKIP {step.name}: needs {', '.join(missing)}, {why}"
    blocked = [a for a in step.after if a not in passed]
    if blocked:
        return f"SKIP {step.name}: needs step {', '.join(blocked)}, which did not pass"
    return None


def selected_steps(call: int | None, names: list[str] | None) -> list[Step]:
    if names:
        return [s for s in STEPS if s.name in names]
    return [s for s in STEPS if call is None or call in s.calls]


def with_prerequisites(steps: list[Step], have: set[str]) -> list[Step]:
    """The steps, plus the steps that those able to run need first (in the check's order)."""
    wanted = {s.name for s in steps}
    stack = [s for s in steps if not any(p not in have for p in s.needs)]
    while stack:
        for name in stack.pop().after:
            if name not in wanted:
                wanted.add(name)
                stack.append(BY_NAME[name])
    return [s for s in STEPS if s.name in wanted]
