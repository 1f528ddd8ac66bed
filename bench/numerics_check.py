"""Where do two CPUs part ways, and do the demo's pinned numerics keep them together?

    python bench/numerics_check.py [--steps 200] [--trees 16]

Another CPU is emulated on this one by the environment of a child process:

- ``native``: PyTorch's widest kernels (AVX-512 where the CPU has it) and
  MKL's own choice of code path, as a plain run gets them;
- ``pinned``: the demo's `PINNED_NUMERICS` (PyTorch's AVX2 kernels, MKL's
  AVX2 code path with conditional numerical reproducibility);
- ``pinned-avx2-cpu``: the same, with MKL also restricted to AVX2
  instructions (``MKL_ENABLE_INSTRUCTIONS=AVX2``), as on a CPU without AVX-512.

For each, one thread: (1) the toy policy trained for ``--steps`` steps from
the same seed (its weights are compared), and (2) stage-1 trees of the
shipped policy on ``--trees`` train questions (the files are compared). The
expected outcome: native differs from pinned (so an unpinned run on another
CPU would too), and the two pinned runs are identical.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from masprm.toy.build import PINNED_NUMERICS, compare_weights

ROOT = Path(__file__).resolve().parents[1]

ENVS = {
    "native": {},
    "pinned": dict(PINNED_NUMERICS),
    "pinned-avx2-cpu": {**PINNED_NUMERICS, "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
}

TRAIN = """
import sys
from dataclasses import replace
from masprm.graph import load_mas_config
from masprm.toy.train_policy import PolicySpec, train_policy
spec = replace(PolicySpec(), steps=int(sys.argv[2]), n_problems=2000, warmup=20)
train_policy(sys.argv[1], load_mas_config("configs/toy.yaml"), spec, log=lambda m: None)
"""


def run(env_name: str, args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR",
                                                             "MKL_ENABLE_INSTRUCTIONS")}
    env.update(ENVS[env_name], OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    subprocess.run([sys.executable, *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def trees_differ(a: Path, b: Path) -> int:
    names = sorted(p.name for p in a.rglob("*.json"))
    return sum(not filecmp.cmp(next(a.rglob(n)), next(b.rglob(n)), shallow=False) for n in names)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="policy training steps per run (default 200)")
    p.add_argument("--trees", type=int, default=16, help="stage-1 trees per run (default 16)")
    args = p.parse_args()
    policy = ROOT / "artifacts" / "toy" / "policy"
    if not (policy / "model.safetensors").is_file():
        sys.exit(f"{policy}: build the toy world first (python -m masprm.toy.build)")
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in ENVS:
            run(name, ["-c", TRAIN, str(tmp / name / "policy"), str(args.steps)])
            run(name, ["src/run_mcts.py", "--dataset", "toy", "--split", "train", "--n", str(args.trees),
                       "--seed", "42", "--n_rollouts", "40", "--search_c", "4", "--n_candidates", "3",
                       "--temperature", "0.7", "--top_p", "0.95", "--mas_config", "configs/toy.yaml",
                       "--model_id", str(policy), "--no_plot", "--no_compile", "--device_map", "cpu",
                       "--out_root", str(tmp / name / "trees")])
        for a, b in (("native", "pinned"), ("pinned", "pinned-avx2-cpu")):
            weights = compare_weights(tmp / a / "policy", tmp / b / "policy")
            out[f"{a} vs {b}"] = {"policy weights identical": weights["identical"],
                                  "largest weight difference": weights["max_abs_diff"],
                                  "trees that differ": trees_differ(tmp / a / "trees", tmp / b / "trees"),
                                  "trees": args.trees}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
