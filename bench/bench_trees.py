"""Benchmark stage 1: MAS-MCTS trees per minute on the tiny model, and where the time goes.

    python bench/bench_trees.py [--trees 6] [--n_rollouts 8] [--n_candidates 3] [--max_new_tokens 16]
                                [--model_id DIR] [--config configs/gsm8k.yaml] [--goal 0.9]

Runs the same per-example job as ``src/run_mcts.py`` (search and tree JSON)
in this process, with the policy wrapped so every model call is timed, then
times drawing each tree's picture (what run_mcts adds unless ``--no_plot``).
Reports trees per minute and the share of wall time spent inside model
calls, with and without the pictures. Model loading is not counted. Exits 1
when the share without pictures is below ``--goal``: everything outside the
model (selection, routing, back-up, answer checking, writing) must stay
small next to generation.
"""

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from masprm.cli import ArgumentParser, check, run_cli
from masprm.graph import MASGraph, load_mas_config
from masprm.search.train_mcts import SearchSettings, TreeJob, run_trees, tree_path

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

    def reseed(self, seed):
        self.policy.reseed(seed)

    def _timed(self, fn, *args, **kw):
        start = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1

    def sample(self, *args, **kw):
        return self._timed(self.policy.sample, *args, **kw)

    def logprob(self, *args, **kw):
        return self._timed(self.policy.logprob, *args, **kw)


def questions(n: int) -> list[Example]:
    names = ["Tom", "Mia", "Sam", "Ana", "Lee", "Kai"]
    return [Example(i, f"{names[i % 6]} has {3 + i} apples, buys {2 * i + 1} more and eats 2. "
                       f"How many apples are left?", str(3 + i + 2 * i + 1 - 2), {}) for i in range(n)]


def measure(policy: TimedPolicy, job: TreeJob, examples: list[Example]) -> dict:
    policy.seconds, policy.calls = 0.0, 0
    start = time.perf_counter()
    written, failed = run_trees(job, lambda: policy, examples, log=lambda line: None)
    wall = time.perf_counter() - start
    check(not failed, f"bench trees failed: {failed[:1]}")
    return {"trees": written, "wall": wall, "model": policy.seconds, "calls": policy.calls}


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
    ap.add_argument("--trees", type=int, default=6)
    ap.add_argument("--n_rollouts", type=int, default=8)
    ap.add_argument("--n_candidates", type=int, default=3)
    ap.add_argument("--max_new_tokens", type=int, default=16, help="cap on each agent's output length")
    ap.add_argument("--model_id", default=None, help="policy folder (default: a freshly built tiny model)")
    ap.add_argument("--config", default=None, help="MAS config (default: configs/gsm8k.yaml, else a built-in team)")
    ap.add_argument("--no_plot", action="store_true", help="do not time the pictures")
    ap.add_argument("--goal", type=float, default=0.9, help="minimum share of wall time inside model calls")
    args = ap.parse_args()
    check(args.trees >= 1 and args.n_rollouts >= 1 and args.n_candidates >= 1, "counts must be >= 1")

    import torch

    from masprm.models.loading import ModelOptions
    from masprm.models.policy import HFPolicy
    from masprm.models.tiny import build_tiny_model

    torch.set_num_threads(1)  # the benchmark machine is shared; one thread keeps timings stable
    config = args.config or (REPO / "configs" / "gsm8k.yaml")
    graph = load_mas_config(config) if Path(config).is_file() else MASGraph.from_dict(TEAM, "built-in team")
    settings = SearchSettings(n_rollouts=args.n_rollouts, n_candidates=args.n_candidates,
                              max_new_tokens=args.max_new_tokens)
    examples = questions(args.trees)
    with tempfile.TemporaryDirectory() as tmp:
        model_id = args.model_id or str(build_tiny_model(Path(tmp) / "tiny", seed=0))
        policy = TimedPolicy(HFPolicy(model_id, ModelOptions(device_map="cpu", compile=False)))
        policy.sample([[{"role": "user", "content": "warm up"}]], 1, temperature=1.0, top_p=1.0,
                      max_new_tokens=2)
        job = TreeJob(graph, settings, f"{tmp}/trees", 42, {"dataset": "bench", "split": "train"}, plot=False)
        r = measure(policy, job, examples)
        pictures = 0.0 if args.no_plot else time_pictures(job.out_dir, r["trees"])

    share = r["model"] / r["wall"]
    share_with_pictures = r["model"] / (r["wall"] + pictures)
    print(f"stage-1 trees on {args.model_id or 'the tiny model'}, config {graph.source}: {args.trees} trees x "
          f"{args.n_rollouts} rollouts, {args.n_candidates} candidates, <= {args.max_new_tokens} new tokens "
          f"per agent, 1 CPU thread")
    print(f"  trees per minute          {60 * r['trees'] / r['wall']:8.1f}   "
          f"(with pictures {60 * r['trees'] / (r['wall'] + pictures):.1f})")
    print(f"  model calls per tree      {r['calls'] / r['trees']:8.1f}   ({1000 * r['model'] / r['calls']:.1f} ms each)")
    print(f"  outside the model         {1000 * (r['wall'] - r['model']) / r['calls']:8.2f} ms per model call "
          f"(search, routing, grading, tree JSON)")
    if not args.no_plot:
        print(f"  picture per tree          {1000 * pictures / r['trees']:8.1f} ms")
    print(f"  wall time in model calls  {share:8.1%}   (with pictures {share_with_pictures:.1%})")
    if share < args.goal:
        print(f"FAIL: {share:.1%} of wall time inside model calls, goal {args.goal:.0%}")
        return 1
    return 0


if __name__ == "__main__":
    run_cli(main)
