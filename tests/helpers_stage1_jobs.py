"""Stage-1 tree jobs on a scripted team: trees built by MCTS without a model.

A reader -> solver -> refiner team whose refiner runs only when the solver hedges (``BRANCHY``), a
fake policy whose outputs depend only on the seed (``random_team``), four small examples
(``EXAMPLES``), a grade by the answer's end (``ends_with_gold``) and the ``TreeJob`` that builds
their trees (``make_job``). Use it for tests of stage 1's search, run folders and workers (in one
process or on Ray: ship this module with ``helpers_ray.ray_ships``).
"""

from __future__ import annotations

from pathlib import Path

from masprm.data import Example
from masprm.eval.tree_runner import TreeJob
from masprm.graph import MASGraph
from masprm.search.train_mcts import TreeSearchSettings


# A reader, a solver and a refiner that runs only when the solver hedges: trajectories of 2 or 3 steps.
BRANCHY = MASGraph.from_dict({
    "agents": [{"name": "reader", "system_prompt": "read"}, {"name": "solver", "system_prompt": "solve"},
               {"name": "refiner", "system_prompt": "refine"}],
    "edges": [[-1, 0], [-1, 1], [0, 1], [1, 2, "contains:unsure"]],
})


def ends_with_gold(prediction: str, gold: str | None) -> bool:
    return gold is not None and prediction.strip().endswith(gold)


def random_team(fake_policy):
    """Outputs drawn from the policy's (reseeded) RNG: the tree depends only on the seed."""
    def respond(messages, k, rng):
        role = messages[0]["content"]
        if role == "solve":
            return rng.choice(["Answer: 3", "Answer: 4", "unsure, maybe 3"])
        if role == "refine":
            return rng.choice(["Answer: 3", "Answer: 5"])
        return rng.choice(["numbers 1 and 2", "one plus two"])
    return fake_policy(respond)


EXAMPLES = [Example(i, f"What is {i} + 2?", str(i + 2), {"source": "test"}) for i in range(4)]


def make_job(out_dir: Path, seed: int = 42, **kw) -> TreeJob:
    settings = TreeSearchSettings(n_rollouts=6, n_candidates=kw.pop("n_candidates", 3))
    return TreeJob(BRANCHY, settings, str(out_dir), seed, {"dataset": "toy", "split": "train",
                   "config": "configs/x.yaml", "model": "fake"}, grade=ends_with_gold, **kw)
