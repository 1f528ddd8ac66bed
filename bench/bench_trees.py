"""Benchmark stage 1: MAS-MCTS trees per minute on the tiny model, one example vs many in flight.

    python bench/bench_trees.py [--trees 16] [--n_rollouts 40] [--n_candidates 3] [--search_c 4]
                                [--max_new_tokens 32] [--batch_sizes 1 16] [--model_id DIR]
                                [--config configs/gsm8k.yaml] [--goal 0.9] [--no_plot]

Runs the same job as ``src/run_mcts.py`` (search and tree JSON) in this
process once per ``--search_batch_size`` in ``--batch_sizes``, side by side,
with the policy wrapped so every model call is timed, then times drawing
each tree's picture (what run_mcts adds unless ``--no_plot``). Reports trees
per minute, the speed-up over the first batch size, the mean rows (sampled
sequences) per model call, the share of wall time inside model calls, and
whether the trees are byte-identical to the first run's. Model loading is
not counted. Exits 1 when the trees differ, or when a share is below
``--goal``: everything outside the model (selection, routing, back-up,
answer checking, writing) must stay small next to generation.
"""

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from masprm.cli import ArgumentParser, check, run_cli
from masprm.graph import MASGraph, load_mas_config
from masprm.eval.tree_runner import TreeJob, run_trees, tree_path
from masprm.search.train_mcts import TreeSearchSettings

REPO = Path(__file__).resolve().parents[1]
TEAM = {  # the gsm8k team's shape (configs/gsm8k.yaml), used when configs/gsm8k.yaml is not there
    "agents": [{"name": n, "system_prompt": f"You are the {n}. Be brief."}
               for n in ("Reader", "Planner", "Solver", "Verifier")],
    "edges": [[-1, 0], [-1, 1], [0, 1], [1, 2], [-1, 3], [2, 3]],
}


@dataclass(frozen=True)
class Example:
    idx: int
    question: str
    gold: str
    meta: dict


class TimedPolicy:
    """Wraps a policy and adds up the seconds spent inside its calls."""

    def __init__(self, policy):
        self.policy = policy
        self.seconds = 0.0
        self.calls = 0
        self.rows = 0   # sequences sampled or scored

    def reseed(self, seed):
        self.policy.reseed(seed)

    def _timed(self, fn, *args, **kw):
        start = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1

    def sample(self, prompts, n, **kw):
        self.rows += len(prompts) * n
        return self._timed(self.policy.sample, prompts, n, **kw)

    def logprob(self, pairs):
        self.rows += len(pairs)
        return self._timed(self.policy.logprob, pairs)


def questions(n: int) -> list[Example]:
    names = ["Tom", "Mia", "Sam", "Ana", "Lee", "Kai"]
    return [Example(i, f"{names[i % 6]} has {3 + i} apples, buys {2 * i + 1} more and eats 2. "
                       f"How many apples are left?", str(3 + i + 2 * i + 1 - 2), {}) for i in range(n)]


def measure(policy: TimedPolicy, job: TreeJob, examples: list[Example]) -> dict:
    policy.seconds, policy.calls, policy.rows = 0.0, 0, 0
    start = time.perf_counter()
    written, failed = run_trees(job, lambda: policy, examples, log=lambda line: None)
    wall = time.perf_counter() - start
    check(not failed, f"bench trees failed: {failed[:1]}")
    trees = {p.name: p.read_bytes() for p in sorted(Path(job.out_dir).glob("*.json"))}
    return {"trees": written, "wall": wall, "model": policy.seconds, "calls": policy.calls,
            "rows": policy.rows, "json": trees}


def time_pictures(out_dir: str, n: int) -> float:
    """Seconds to draw the n trees' pictures, as run_mcts does after each search."""
    from masprm.io import read_json
    from masprm.plots.tree_plot import save_tree_png

    trees = [read_json(tree_path(out_dir, i)) for i in range(n)]
    save_tree_png(trees[0], Path(out_dir) / "warm.png")  # matplotlib's one-off start-up is not per tree
    start = time.perf_counter()
    for i, tree in enumerate(trees):
        save_tree_png(tree, tree_path(out_dir, i).with_suffix(".png"))
    return time.perf_counter() - start


def main() -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", type=int, default=16)
    ap.add_argument("--n_rollouts", type=int, default=40)
    ap.add_argument("--n_candidates", type=int, default=3)
    ap.add_argument("--search_c", type=float, default=4.0)
    ap.add_argument("--max_new_tokens", type=int, default=32, help="cap on each agent's output length")
    ap.add_argument("--batch_sizes", type=int, nargs="+", default=[1, 16], help="--search_batch_size values")
    ap.add_argument("--model_id", default=None, help="policy folder (default: a freshly built tiny model)")
    ap.add_argument("--config", default=None, help="MAS config (default: configs/gsm8k.yaml, else a built-in team)")
    ap.add_argument("--no_plot", action="store_true", help="do not time the pictures")
    ap.add_argument("--goal", type=float, default=0.9, help="minimum share of wall time inside model calls")
    args = ap.parse_args()
    check(args.trees >= 1 and args.n_rollouts >= 1 and args.n_candidates >= 1, "counts must be >= 1")
    check(all(b >= 1 for b in args.batch_sizes), "--batch_sizes must be >= 1")

    import torch

    from masprm.models.loading import ModelOptions
    from masprm.models.policy import HFPolicy
    from masprm.models.tiny import build_tiny_model

    torch.set_num_threads(1)  # the benchmark machine is shared; one thread keeps timings stable
    config = args.config or (REPO / "configs" / "gsm8k.yaml")
    graph = load_mas_config(config) if Path(config).is_file() else MASGraph.from_dict(TEAM, "built-in team")
    settings = TreeSearchSettings(n_rollouts=args.n_rollouts, c=args.search_c, n_candidates=args.n_candidates,
                              max_new_tokens=args.max_new_tokens)
    examples = questions(args.trees)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        model_id = args.model_id or str(build_tiny_model(Path(tmp) / "tiny", seed=0))
        policy = TimedPolicy(HFPolicy(model_id, ModelOptions(device_map="cpu", compile=False)))
        policy.sample([[{"role": "user", "content": "warm up"}]], 1, temperature=1.0, top_p=1.0,
                      max_new_tokens=2)
        for size in args.batch_sizes:
            job = TreeJob(graph, settings, f"{tmp}/trees{size}", 42, {"dataset": "bench", "split": "train"},
                          plot=False, batch_size=size)
            runs[size] = measure(policy, job, examples)
        first = args.batch_sizes[0]
        pictures = 0.0 if args.no_plot else time_pictures(f"{tmp}/trees{first}", runs[first]["trees"])

    print(f"stage-1 trees on {args.model_id or 'the tiny model'}, config {graph.source}: {args.trees} trees x "
          f"{args.n_rollouts} rollouts, {args.n_candidates} candidates, c {args.search_c:g}, "
          f"<= {args.max_new_tokens} new tokens per agent, 1 CPU thread")
    print(f"  {'search_batch_size':<18}{'trees/min':>10}{'speed-up':>10}{'rows/call':>11}{'calls/tree':>12}"
          f"{'in model':>10}  trees")
    failed = False
    for size, r in runs.items():
        share = r["model"] / r["wall"]
        same = r["json"] == runs[first]["json"]
        failed |= share < args.goal or not same
        print(f"  {size:<18}{60 * r['trees'] / r['wall']:>10.1f}{runs[first]['wall'] / r['wall']:>9.2f}x"
              f"{r['rows'] / r['calls']:>11.1f}{r['calls'] / r['trees']:>12.1f}{share:>10.1%}  "
              f"{'identical' if same else 'DIFFERENT'}")
    if not args.no_plot:
        r = runs[first]
        print(f"  picture per tree: {1000 * pictures / r['trees']:.1f} ms "
              f"(trees/min at batch size {first} with pictures: {60 * r['trees'] / (r['wall'] + pictures):.1f})")
    if failed:
        print(f"FAIL: trees differ across batch sizes, or under {args.goal:.0%} of wall time inside model calls")
        return 1
    return 0


if __name__ == "__main__":
    run_cli(main)
