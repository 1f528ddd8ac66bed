"""Does the demo compute the same bytes under every instruction-set setting this CPU offers?

    python bench/numerics_check.py [--trees 4] [--steps 8] [--settings NAME ...] [--probe]

Each setting is an environment for the demo's own commands (``masprm.stages.demo.commands``), run one thread
each in a folder laid out like the checkout: stage 1 on the first ``--trees`` train questions (the demo's search
settings), stage 2 on those trees, and stage 3 (the demo's ORM training, its settings, cut to ``--steps``
optimizer steps). Every file they write (trees, records, the scorer's weights and record) is compared byte for
byte with the run under the demo's pinning:

- ``pinned``: the demo's `PINNED_NUMERICS` (PyTorch's AVX2 kernels; MKL asked for its AVX2 branch of
  conditional numerical reproducibility);
- ``pinned-avx2-cpu``: the same, with MKL and oneDNN also limited to AVX2 instructions
  (``MKL_ENABLE_INSTRUCTIONS``, ``ONEDNN_MAX_CPU_ISA``), as on a CPU without AVX-512;
- ``unpinned``: nothing set, as a plain run gets it (the widest kernels the CPU has);
- ``avx512``: PyTorch's AVX-512 kernels and MKL's AVX-512 branch; run only where the CPU has AVX-512 (PyTorch
  2.13 does not cap the request to the CPU: on one without, the first vectorised kernel stops the process with
  an illegal instruction, exit 132);
- ``mkl-compatible``: the pinning with MKL's ``COMPATIBLE`` branch instead of ``AVX2`` (the branch MKL gives
  the same results with on Intel and non-Intel CPUs): a control, its matrix products differ from the others'
  wherever MKL honours the AVX2 branch, which shows that the check sees a change of GEMM code path.

``--probe`` runs two trees and two training steps under ``pinned`` with ``MKL_VERBOSE=1`` and
``ONEDNN_VERBOSE=1`` and counts what ran: each MKL function, the CNR mode MKL reports for its calls, and each
oneDNN primitive with the instruction set oneDNN reports.
"""

from __future__ import annotations

import argparse
import collections
import filecmp
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from masprm.worlds.build import PINNED_NUMERICS   # noqa: E402

# The variables a setting may set; every other variable of this process passes to the commands unchanged.
NUMERICS_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA",
                      "DNNL_MAX_CPU_ISA", "MKL_VERBOSE", "ONEDNN_VERBOSE", "DNNL_VERBOSE")
AVX2_EVERYWHERE = {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
SETTINGS = {
    "pinned": dict(PINNED_NUMERICS),
    "pinned-avx2-cpu": {**PINNED_NUMERICS, **AVX2_EVERYWHERE},
    "unpinned": {},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AVX512"},
    "mkl-compatible": {**PINNED_NUMERICS, "MKL_CBWR": "COMPATIBLE"},
}
# What a setting needs of the CPU (its /proc/cpuinfo flags): PyTorch's AVX-512 kernels need all four.
NEEDS = {"avx512": {"avx512f", "avx512bw", "avx512vl", "avx512dq"}}
REFERENCE = "pinned"


def cpuinfo(field: str) -> str:
    """The first value of `field` in /proc/cpuinfo ("" where Linux does not say)."""
    try:
        found = re.search(rf"^{field}\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
    except OSError:
        return ""
    return found.group(1).strip() if found else ""


def cpu_flags() -> set[str]:
    return set(cpuinfo("flags").split())


def cpu_name() -> str:
    return cpuinfo("model name") or "unknown"


def offered(settings: list[str], flags: set[str]) -> tuple[list[str], dict[str, str]]:
    """The settings this CPU can run, and why each other one is skipped."""
    run, skipped = [], {}
    for name in settings:
        missing = sorted(NEEDS.get(name, set()) - flags)
        if missing:
            skipped[name] = f"the CPU lacks {', '.join(missing)}"
        else:
            run.append(name)
    return run, skipped


def checkout_copy(folder: Path) -> Path:
    """A folder laid out like the checkout (its code and teams linked in, the toy world linked or built): the
    demo's commands write their results/ and checkpoints/ there."""
    folder.mkdir(parents=True)
    for name in ("src", "configs"):
        (folder / name).symlink_to(ROOT / name)
    if (ROOT / "artifacts" / "toy" / "policy" / "model.safetensors").is_file():
        (folder / "artifacts").symlink_to(ROOT / "artifacts")
    else:   # a fresh clone: the demo's step 0 (the shipped policy copied in, seconds), here rather than in the checkout
        build = [sys.executable, "-m", "masprm.worlds.build", "--out", "artifacts/toy", "--mas_config", "configs/toy.yaml"]
        done = subprocess.run(build, cwd=folder, env=environment({}), capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the toy world's build in {folder}: exit {done.returncode}: {done.stderr[-500:]}")
    return folder


def demo_commands(trees: int, steps: int) -> list[list[str]]:
    """Stages 1-3 of the demo on `trees` train questions, the ORM trained for `steps` optimizer steps."""
    from masprm.stages.demo import DemoArgs, commands

    c = commands(DemoArgs(n_train=trees, seed=42))
    orm = next(job for job in c.scorers if job.name == "train_orm")
    return [c.trees, c.pairs, [*orm.cmd, "--max-steps", str(steps), "--eval-steps", str(steps)]]


def environment(setting: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in NUMERICS_VARIABLES}
    return {**env, **setting, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TQDM_DISABLE": "1",
            "PYTHONPATH": str(ROOT / "src")}


def run_setting(folder: Path, setting: dict[str, str], cmds: list[list[str]], log: Path | None = None) -> None:
    """The commands one after another in `folder` under `setting`; their output goes to `log` (default: nowhere)."""
    with (log.open("w") if log else open(os.devnull, "w")) as out:
        for cmd in cmds:
            done = subprocess.run(cmd, cwd=folder, env=environment(setting), stdout=out, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(cmd[:3])} ... under {setting or 'no pinning'}: exit {done.returncode}"
                                 + (f" (its output: {log})" if log else ""))


def outputs(folder: Path) -> dict[str, Path]:
    """Every file the commands wrote that a rerun must reproduce: trees, records, the scorer's weights and record
    (its checkpoints and event logs hold times)."""
    files = [*(folder / "results").rglob("*.json"), *(folder / "results").rglob("*.jsonl"),
             *(folder / "checkpoints").glob("*/adapter_model.safetensors"),
             *(folder / "checkpoints").glob("*/masprm_scorer.json")]
    return {str(p.relative_to(folder)): p for p in sorted(files)}


def differing(a: Path, b: Path) -> list[str]:
    """The outputs of run `b` that are not byte-identical to run `a`'s (or are missing from either)."""
    left, right = outputs(a), outputs(b)
    return sorted(name for name in left.keys() | right.keys()
                  if name not in left or name not in right or not filecmp.cmp(left[name], right[name], shallow=False))


def compare(settings: list[str], trees: int, steps: int, tmp: Path) -> dict:
    """Each setting's run against the reference's: how many outputs and which differ."""
    cmds = demo_commands(trees, steps)
    for name in [REFERENCE, *(s for s in settings if s != REFERENCE)]:
        run_setting(checkout_copy(tmp / name), SETTINGS[name], cmds)
    n = len(outputs(tmp / REFERENCE))
    return {f"{name} vs {REFERENCE}": {"outputs": n, "differ": differing(tmp / REFERENCE, tmp / name)}
            for name in settings if name != REFERENCE}


def probe(tmp: Path) -> dict:
    """What runs under the demo's pinning: MKL functions with the CNR mode they report, oneDNN primitives."""
    log = tmp / "probe.log"
    verbose = {**SETTINGS[REFERENCE], "MKL_VERBOSE": "1", "ONEDNN_VERBOSE": "1"}
    run_setting(checkout_copy(tmp / "probe"), verbose, demo_commands(2, 2), log)   # two: the ORM holds one question out
    mkl, cnr, onednn, isa = (collections.Counter() for _ in range(4))
    header = ""
    with log.open(errors="replace") as lines:
        for line in lines:
            call = re.match(r"MKL_VERBOSE (\w+)\(", line)
            if call:
                mkl[call.group(1)] += 1
                cnr.update(re.findall(r"CNR:(\S+)", line))
            elif line.startswith("MKL_VERBOSE "):   # its version line: the processors it took this one for
                header = header or line.strip().removeprefix("MKL_VERBOSE ")
            elif line.startswith("onednn_verbose,") and ",exec," in line:   # primitive kind and implementation
                onednn[" ".join(line.split(",")[5:7])] += 1
            elif line.startswith("onednn_verbose,") and ",isa:" in line:
                isa[line.strip().split("isa:", 1)[1]] += 1
    return {"MKL": header, "MKL calls": dict(mkl), "MKL CNR modes": dict(cnr), "oneDNN primitives": dict(onednn),
            "oneDNN ISA": dict(isa)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trees", type=int, default=4, help="stage-1 train questions per setting (default 4, at least 2)")
    p.add_argument("--steps", type=int, default=8, help="optimizer steps of the ORM's training (default 8)")
    p.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS),
                   help="the settings to compare with the pinned run (default: every one this CPU offers)")
    p.add_argument("--probe", action="store_true", help="also count the MKL calls and oneDNN primitives that run")
    args = p.parse_args(argv)
    if args.trees < 2 or args.steps < 1:   # the training holds whole questions out to pick its checkpoint
        p.error("--trees must be at least 2 and --steps at least 1")
    import torch

    settings, skipped = offered(args.settings, cpu_flags())
    # PyTorch's own switches, as this process has them (the commands run with the same defaults)
    report = {"cpu": cpu_name(), "torch": torch.__version__,
              "torch cpu capability": torch.backends.cpu.get_cpu_capability(),
              "mkldnn enabled": torch.backends.mkldnn.enabled,
              "mkldnn matmul fp32 precision": torch.backends.mkldnn.matmul.fp32_precision,
              "float32 matmul precision": torch.get_float32_matmul_precision(),
              "interop threads": torch.get_num_interop_threads(), "threads per command": 1, "skipped": skipped}
    with tempfile.TemporaryDirectory() as tmp:
        if args.probe:   # first: the short run
            report["probe (pinned)"] = probe(Path(tmp))
        report["runs"] = compare(settings, args.trees, args.steps, Path(tmp))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
