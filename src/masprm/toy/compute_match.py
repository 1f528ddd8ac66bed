"""The compute-matched sweep's settings: each search at the largest setting its budget of agent samples allows.

Fixed in docs/scorer_lab.md ("Compute-matched sweep") before any run: budgets of 4, 8, 12 and 24 agent
samples per question (agent messages the policy generated, a record's ``agent_runs``). Best-of-N + ORM
runs N = budget / 4 passes of the 4-agent team. SBS and MCTS each run the setting of their budget flag
(SBS B1 x B2 from the grid 1 x 1 ... 4 x 6, MCTS simulations 1 ... 20) whose mean agent samples per
question, measured on the *train* questions, is the largest not above the budget. Pure Python.
"""

from __future__ import annotations

from typing import Mapping, Sequence

BUDGETS = (4, 8, 12, 24)          # agent samples per question
TEAM_AGENTS = 4                   # Reader, Planner, Solver, Verifier: one best-of-N pass is 4 samples
SBS_GRID = tuple((b1, b2) for b1 in range(1, 5) for b2 in range(1, 7))   # (B1, B2), 1 x 1 ... 4 x 6
MCTS_GRID = tuple(range(1, 21))   # simulations


def bon_n(budget: int) -> int:
    """Best-of-N passes at a budget: every pass is one sample per agent."""
    if budget % TEAM_AGENTS:
        raise ValueError(f"a budget of {budget} agent samples is not a whole number of {TEAM_AGENTS}-agent passes")
    return budget // TEAM_AGENTS


def matched_setting(measured: Mapping, grid: Sequence, budget: float):
    """The setting of `grid` whose measured mean agent samples per question is the largest not above `budget`
    (ties: the first in grid order, the cheaper search); None when even the smallest is above it.
    `measured` maps a setting to its mean; a setting not measured is not chosen."""
    fits = [(measured[s], -i, s) for i, s in enumerate(grid) if s in measured and measured[s] <= budget]
    return max(fits)[2] if fits else None


def sweep_settings(sbs_samples: Mapping, mcts_samples: Mapping,
                   budgets: Sequence[int] = BUDGETS) -> dict[int, dict[str, object]]:
    """Per budget, the setting of each method: {"bon_n": N, "sbs": (B1, B2) or None, "mcts": simulations or None}."""
    return {budget: {"bon_n": bon_n(budget), "sbs": matched_setting(sbs_samples, SBS_GRID, budget),
                     "mcts": matched_setting(mcts_samples, MCTS_GRID, budget)} for budget in budgets}
