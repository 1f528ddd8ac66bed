"""`make demo`: the whole MASPRM pipeline on the toy world, on a laptop CPU, in minutes.

Runs the README's five stages as a user would, with ``--dataset toy``:

  0. build the toy world once (tiny policy + data; cached in artifacts/toy)
  1. MAS-MCTS trees on the train split               (src/run_mcts.py)
  2. PRM samples and Bradley-Terry pairs             (src/train/preprocess_data.py)
  3. the MASPRM (ppm) and an ORM                     (src/train/trainer.py)
  4. six search conditions on the test split, seeds 14 / 24 / 42
                                                     (src/experiments/compare_sbs_mcts.py)
  5. mean / std over seeds, table and plot           (aggregator.py)

Every command is printed before it runs. A stage whose outputs already
exist is skipped, and every stage resumes by itself, so an interrupted demo
continues where it stopped. Independent commands (the two scorers, the three
seeds) run side by side, one process per CPU core. ``make clean-demo`` starts over.
"""

import sys, pathlib  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import os
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from masprm.cli import ArgumentParser, UsageError, check, run_cli

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable

# The demo's settings. Search settings follow the seed README; sizes fit a 2-core CPU.
TOY = "artifacts/toy"
POLICY = f"{TOY}/policy"
CONFIG = "configs/toy.yaml"
SEEDS = (14, 24, 42)
N_TRAIN = 160                      # train-split questions searched in stage 1
ROLLOUTS, SEARCH_C, CANDIDATES, TEMPERATURE, TOP_P = 40, 4, 3, 0.7, 0.95
TARGET_NODES = 3                   # question + Planner + Solver
PPM_DIR, ORM_DIR = "checkpoints/toy-ppm", "checkpoints/toy-orm"
LOGS = "logs/toy_demo"
TABLE = "results/toy_demo_aggregated_results.csv"
METHODS = ("single_pass", "sbs_logprob", "sbs_prm", "mcts_logprob", "mcts_prm", "mcts_orm")
SCORER_TRAINING = ("--epochs", "4", "--lr", "2e-3", "--train-batch-size", "16", "--grad-accum", "1",
                   "--lora-r", "16", "--lora-alpha", "32", "--lora-dropout", "0.05",
                   "--max-length", "256", "--seed", "42", "--quiet")


@dataclass
class Stage:
    name: str
    commands: list[list[str]]
    done: Callable[[], bool] = lambda: False     # outputs already there: skip the stage
    env: dict[str, str] = field(default_factory=dict)


def run_folder() -> str:
    from masprm.runs import run_folder_name
    # the policy is a local folder, tagged by its last path component (it may not be built yet)
    return "results/" + run_folder_name("toy", "train", Path(POLICY).name, ROLLOUTS, SEARCH_C, CANDIDATES,
                                        TEMPERATURE, TOP_P, CONFIG)


def scorer_ready(folder: str) -> bool:
    return (ROOT / folder / "adapter_config.json").is_file() or (ROOT / folder / "config.json").is_file()


def plan(args) -> list[Stage]:
    run = run_folder()
    run_name = Path(run).name
    model = ["--no_compile", "--device_map", "cpu"]
    trees = [PY, "src/run_mcts.py", "--dataset", "toy", "--split", "train", "--n", str(args.n_train),
             "--seed", "42", "--n_rollouts", str(ROLLOUTS), "--search_c", str(SEARCH_C),
             "--n_candidates", str(CANDIDATES), "--temperature", str(TEMPERATURE), "--top_p", str(TOP_P),
             "--mas_config", CONFIG, "--model_id", POLICY, "--no_plot", *model]
    if args.jobs > 1:
        trees += ["--ray", "--actors", str(args.jobs)]
    pairs = [PY, "src/train/preprocess_data.py", "--input", run, "--target-nodes", str(TARGET_NODES),
             "--make-ppm", "--ppm-max-pairs", "8", "--ppm-pos-topk", "4", "--ppm-neg-topk", "4",
             "--view", "full", "--config", CONFIG]
    ppm = [PY, "src/train/trainer.py", "--mode", "ppm", "--data_dir", f"results/ppm_pairs_{run_name}.jsonl",
           "--model-id", POLICY, "--output-dir", PPM_DIR, *SCORER_TRAINING]
    orm = [PY, "src/train/trainer.py", "--mode", "orm", "--data_dir", f"results/prm_samples_{run_name}.jsonl",
           "--model-id", POLICY, "--output-dir", ORM_DIR, *SCORER_TRAINING]
    evals = [[PY, "src/experiments/compare_sbs_mcts.py", "--dataset", "toy", "--split", "test",
              "--seed", str(seed), "--prm_dir", PPM_DIR, "--prm_base_model_id", POLICY,
              "--orm_dir", ORM_DIR, "--orm_base_model_id", POLICY, "--gen_model_id", POLICY,
              "--mas_config", CONFIG, "--methods", *METHODS, "--b1", "3", "--b2", "5",
              "--n_simulations", "10", "--max_children", "3", "--c_uct", "2",
              "--sbs_temperature", "0.7", "--mcts_temperature", "0.7", "--top_p", "0.95",
              "--logs_dir", LOGS, "--workers", "1", *model] for seed in args.seeds]
    aggregate = [PY, "aggregator.py", "--logs_dir", LOGS, "--out", TABLE]
    return [
        Stage("build the toy world", [[PY, "-m", "masprm.toy.build", "--out", TOY, "--mas_config", CONFIG]],
              env={"PYTHONPATH": "src"}),
        Stage("1 trees", [trees], done=lambda: len(list((ROOT / run).glob("*.json"))) >= args.n_train),
        Stage("2 pairs", [pairs], done=lambda: (ROOT / f"results/ppm_pairs_{run_name}.jsonl").is_file()
              and (ROOT / f"results/prm_samples_{run_name}.jsonl").is_file()),
        Stage("3 scorers", [ppm, orm], done=lambda: scorer_ready(PPM_DIR) and scorer_ready(ORM_DIR)),
        Stage("4 evaluation", evals),
        Stage("5 aggregate", [aggregate]),
    ]


def show(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c if c != PY else "python") for c in cmd)


def run_stage(stage: Stage, jobs: int) -> None:
    """Run a stage's commands, up to `jobs` at a time; quiet side-by-side runs log to files."""
    threads = str(max(1, (os.cpu_count() or 1) // min(jobs, len(stage.commands))))
    env = {**os.environ, **stage.env}
    if len(stage.commands) > 1 and jobs > 1:
        env.update(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    pending = list(stage.commands)
    running: list[tuple[list[str], subprocess.Popen, Path | None]] = []
    while pending or running:
        while pending and len(running) < max(1, jobs):
            cmd = pending.pop(0)
            print(f"$ {show(cmd)}", flush=True)
            log = None
            if len(stage.commands) > 1 and jobs > 1:  # keep interleaved progress bars off the screen
                log = ROOT / LOGS / "demo_output" / f"{stage.name.split()[0]}_{len(running) + len(pending)}.out"
                log.parent.mkdir(parents=True, exist_ok=True)
                proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
            else:
                proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
            running.append((cmd, proc, log))
        for item in list(running):
            cmd, proc, log = item
            if proc.poll() is None:
                continue
            running.remove(item)
            if log is not None:
                tail = log.read_text(errors="replace").strip().splitlines()[-12:]
                print("\n".join(f"  | {line}" for line in tail), flush=True)
            if proc.returncode != 0:
                for _, other, _ in running:
                    other.terminate()
                raise UsageError(f"stage '{stage.name}' failed (exit {proc.returncode}): {show(cmd)}"
                                 + (f"; see {log}" if log else ""))
        time.sleep(0.2)


def main() -> int:
    p = ArgumentParser(description="Run the MASPRM pipeline end to end on the toy world (CPU, minutes).")
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="evaluation seeds")
    p.add_argument("--n_train", type=int, default=N_TRAIN, help="train questions searched in stage 1")
    p.add_argument("--jobs", type=int, default=min(3, os.cpu_count() or 1),
                   help="commands run side by side (default: one per CPU core, at most 3)")
    p.add_argument("--dry_run", action="store_true", help="print the commands without running them")
    p.add_argument("--seed", type=int, default=42, help="accepted like every stage's; the demo's seeds "
                   "are fixed above (--seeds for evaluation)")
    args = p.parse_args()
    check(args.n_train >= 1, f"--n_train must be at least 1, got {args.n_train}")
    check(args.jobs >= 1, f"--jobs must be at least 1, got {args.jobs}")

    started = time.time()
    timings = []
    for stage in plan(args):
        if args.dry_run:
            print(f"# {stage.name}\n" + "\n".join(f"$ {show(c)}" for c in stage.commands))
            continue
        print(f"\n=== {stage.name} ===", flush=True)
        t0 = time.time()
        if stage.done():
            print("outputs already there: skipped (make clean-demo to start over)")
        else:
            run_stage(stage, args.jobs)
        timings.append((stage.name, time.time() - t0))
    if args.dry_run:
        return 0
    print("\n=== demo finished ===")
    for name, seconds in timings:
        print(f"{name:<22} {seconds:7.1f} s")
    print(f"{'total':<22} {time.time() - started:7.1f} s")
    print(f"table: {TABLE}\nplot:  {Path(TABLE).with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    run_cli(main)
