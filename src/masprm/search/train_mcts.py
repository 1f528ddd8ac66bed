"""Stage 1: one outcome-labelled MAS-MCTS tree per example, written to disk.

The search is the MCTS loop of ``masprm.search.mcts`` with its outcome
guide: each rollout walks from the question to a finished trajectory,
expanding a childless node with ``n_candidates`` samples of the next
runnable agent and choosing among children by the training UCT; the path
earns +1 when its final answer is correct and -1 otherwise (also for a dead
end). Rollouts stop early once the root value has settled (``EarlyStop``).

The run around it (one job per example on any worker, the files, resume) is
``masprm.eval.tree_runner``, beside stage 4's runner. Pure Python: no torch import.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from masprm.answers import is_correct
from masprm.config import arg, require, require_each
from masprm.graph import MASGraph
from masprm.search.engine import RequestKeys, Search
from masprm.search.mcts import Grader, OutcomeGuide, run_simulations
from masprm.search.node import Node

# Early stop: the root value must move by more than MOVE_TOL to count
# as progress, a value within SATURATION_TOL of +-1 is settled anyway, and the
# search ends after STALE_LIMIT rollouts without progress.
MOVE_TOL = 0.01
SATURATION_TOL = 0.05
STALE_LIMIT = 24


@dataclass(frozen=True)
class TreeSearchSettings:
    """Stage-1 search settings: the one home of their flags (``src/run_mcts.py``)."""

    n_rollouts: int = arg(64, flags=("--n_rollouts",), help="rollouts per example (default: 64; paper: 40)")
    c: float = arg(4.0, flags=("--search_c",), help="UCT exploration constant (default: 4)")
    n_candidates: int = arg(4, flags=("--n_candidates",),
                            help="samples per expansion (default: 4, the number the original hard-codes)")
    temperature: float = arg(0.7, flags=("--temperature",), help="sampling temperature (default: 0.7)")
    top_p: float = arg(0.95, flags=("--top_p",), help="nucleus sampling (default: 0.95)")
    max_new_tokens: int | None = arg(None, flags=("--max_new_tokens",),
                                     help="cap on every agent's max_new_tokens (default: the config's values)")

    def __post_init__(self) -> None:
        require_each(self, ("n_rollouts", "n_candidates", "max_new_tokens"), lambda v: v >= 1, "must be >= 1")
        require_each(self, ("c",), lambda v: v >= 0, "must be >= 0")
        require_each(self, ("temperature",), lambda v: v > 0, "must be > 0")
        require(0 < self.top_p <= 1, "top_p", f"top_p must be in (0, 1], got {self.top_p}")

    def as_meta(self) -> dict[str, Any]:
        return {"n_rollouts": self.n_rollouts, "c": self.c, "n_candidates": self.n_candidates,
                "temperature": self.temperature, "top_p": self.top_p,
                "max_new_tokens": self.max_new_tokens}


@dataclass
class EarlyStop:
    """Counts rollouts after which the root value did not really move."""

    last: float | None = None
    stale: int = 0

    def update(self, root_q: float) -> bool:
        """Record the root value after a rollout; True when the search should stop."""
        if self.last is None or abs(root_q - self.last) > MOVE_TOL:
            self.last = root_q
            self.stale = self.stale + 1 if abs(root_q) >= 1.0 - SATURATION_TOL else 0
        else:
            self.stale += 1
        return self.stale >= STALE_LIMIT


def default_grader() -> Grader:
    return is_correct


def tree_search(graph: MASGraph, question: str, gold: str | None, settings: TreeSearchSettings,
                rng: random.Random, grade: Grader | None = None,
                keys: RequestKeys | None = None) -> Search:
    """Search one example (a search generator): all rollouts, or until the root value settles.

    Returns the root and the search statistics.
    """
    guide = OutcomeGuide(graph, settings, gold, rng, grade or default_grader(), keys)
    root = Node(graph.start(question))
    stop = EarlyStop()
    rollouts = yield from run_simulations(root, guide, settings.n_rollouts,
                                          settled=lambda r: bool(r.children) and stop.update(r.q_mean))
    stats = {"rollouts": rollouts, "early_stopped": rollouts < settings.n_rollouts,
             "nodes": sum(1 for _ in root.walk()), **guide.usage()}
    return root, stats
