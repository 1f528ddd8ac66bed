"""Benchmark stage 2: preprocess many small stage-1-shaped trees, end to end through the CLI.

    python bench/bench_preprocess.py [--trees 10000] [--limit 60]

Generates the trees (the 4-agent gsm8k team, a few MCTS-like rollouts each)
in a temporary folder, then times `src/train/preprocess_data.py` with the seed
README's flags in the full and the local view. Exits 1 when a run takes
longer than --limit seconds.
"""

import sys
import json
import random
import resource
import subprocess
import tempfile
import time
from pathlib import Path

import yaml
from tqdm import tqdm

from masprm.cli import ArgumentParser, run_cli

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "src" / "train" / "preprocess_data.py"
TEAM = {
    "agents": [{"name": n, "system_prompt": f"You are the {n}."} for n in ("Reader", "Planner", "Solver", "Verifier")],
    "edges": [[-1, 0], [-1, 1], [0, 1], [1, 2], [-1, 3], [2, 3]],
}  # a chain, so the agent at depth d is agent d - 1


def new_node(agent: int | None, text: str, terminal: bool) -> dict:
    return {"steps": [], "action_text": None if agent is None else f"[agent {agent}] {text}",
            "is_terminal": terminal, "final_answer": text if terminal else None, "visits": 0, "q_sum": 0.0,
            "q_mean": 0.0, "node_text": text, "children": []}


def make_tree(rng: random.Random, idx: int, rollouts: int = 8, candidates: int = 3) -> dict:
    """An MCTS-like tree: each rollout expands an unexpanded node on its way down and is graded ±1."""
    n_agents = len(TEAM["agents"])
    root = new_node(None, f"Question {idx}: what is {rng.randint(1, 99)} + {rng.randint(1, 99)}?", False)
    for _ in range(rollouts):
        path, node = [root], root
        for depth in range(n_agents):
            if not node["children"]:
                node["children"] = [new_node(depth, f"step {depth} of {idx}: {rng.randint(0, 10**6)}",
                                             depth == n_agents - 1) for _ in range(candidates)]
            node = rng.choice(node["children"])
            path.append(node)
        reward = rng.choice((1.0, -1.0))
        for n in path:
            n["visits"] += 1
            n["q_sum"] += reward
            n["q_mean"] = n["q_sum"] / n["visits"]
    return root


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_run(argv: list[str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of one CLI run; CPU time is what a busy machine cannot inflate."""
    cpu = children_cpu_seconds
    start, cpu_start = time.perf_counter(), cpu()
    done = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True)
    seconds, cpu_seconds = time.perf_counter() - start, cpu() - cpu_start
    if done.returncode != 0:
        raise SystemExit(f"preprocess_data.py failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return seconds, cpu_seconds, done.stdout


def main() -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", type=int, default=10_000)
    ap.add_argument("--limit", type=float, default=60.0, help="seconds a run may take")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "results" / "gsm8k_res_bench"
        run.mkdir(parents=True)
        config = Path(tmp) / "gsm8k.yaml"
        config.write_text(yaml.safe_dump(TEAM))
        for i in tqdm(range(args.trees), desc="Writing trees", unit="tree"):
            (run / f"{i}.json").write_text(json.dumps(make_tree(rng, i), indent=1))
        size_mb = sum(p.stat().st_size for p in run.iterdir()) / 2**20
        print(f"{args.trees} trees, {size_mb:.1f} MiB")
        for view in ("full", "local"):
            seconds, cpu_seconds, out = time_run([
                "--input", str(run), "--target-nodes", "5", "--make-ppm", "--ppm-max-pairs", "8",
                "--ppm-pos-topk", "4", "--ppm-neg-topk", "4", "--view", view, "--config", str(config)])
            print(out.strip())
            verdict = "ok" if seconds <= args.limit else f"OVER the {args.limit:g} s limit"
            print(f"view={view}: {seconds:.1f} s wall, {cpu_seconds:.1f} s CPU for {args.trees} trees "
                  f"({1000 * seconds / args.trees:.2f} ms/tree) {verdict}")
            failed |= seconds > args.limit
    return 1 if failed else 0


if __name__ == "__main__":
    run_cli(main)
