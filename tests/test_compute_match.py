"""The compute-matched sweep's mapping: budget in agent samples -> each search's setting (docs/scorer_lab.md)."""

from __future__ import annotations

import pytest

from masprm.toy.compute_match import BUDGETS, MCTS_GRID, SBS_GRID, bon_n, matched_setting, sweep_settings


def test_the_fixed_budgets_and_grids():
    assert BUDGETS == (4, 8, 12, 24)
    assert len(SBS_GRID) == 24 and SBS_GRID[0] == (1, 1) and SBS_GRID[-1] == (4, 6) and MCTS_GRID == tuple(range(1, 21))
    assert [bon_n(b) for b in BUDGETS] == [1, 2, 3, 6]   # one pass = one sample of each of the 4 agents
    with pytest.raises(ValueError, match="not a whole number of 4-agent passes"):
        bon_n(10)


def test_each_search_gets_the_largest_setting_that_fits():
    # made-up train-split means: SBS about 4 x B1 x B2 minus early finishes; MCTS a bit over one sample a simulation
    sbs = {(1, 1): 4.0, (1, 2): 7.5, (2, 1): 7.5, (1, 3): 11.0, (2, 2): 14.5, (2, 3): 21.0, (3, 2): 21.0, (2, 4): 27.0}
    mcts = {1: 4.0, 2: 5.0, 3: 6.2, 5: 8.0, 8: 11.9, 9: 12.4, 15: 23.9, 16: 24.1}
    plan = sweep_settings(sbs, mcts)
    # 4: only 1 x 1 (4.0, equal to the budget, counts) and one simulation
    assert plan[4] == {"bon_n": 1, "sbs": (1, 1), "mcts": 1}
    # 8: 1 x 2 and 2 x 1 tie at 7.5: the first in grid order, 1 x 2; MCTS 5 (8.0 <= 8)
    assert plan[8] == {"bon_n": 2, "sbs": (1, 2), "mcts": 5}
    # 12: 1 x 3 (11.0; 2 x 2's 14.5 is over); MCTS 8 (11.9; 9 is 12.4)
    assert plan[12] == {"bon_n": 3, "sbs": (1, 3), "mcts": 8}
    # 24: 2 x 3 and 3 x 2 tie at 21.0 -> 2 x 3; MCTS 15 (23.9; 16 is 24.1)
    assert plan[24] == {"bon_n": 6, "sbs": (2, 3), "mcts": 15}


def test_a_budget_below_every_setting_leaves_the_search_out():
    assert matched_setting({(1, 1): 4.4}, SBS_GRID, 4) is None
    assert matched_setting({}, MCTS_GRID, 24) is None
