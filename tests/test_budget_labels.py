"""Budgeted Monte Carlo labels (mc_rollouts_uniform, mc_rollouts_active: ActPRM's active estimation): the two
allocation rules by hand, and every label of a hand-built tree from a scripted policy and scripted spreads."""

from __future__ import annotations

import pytest

from masprm.answers import is_correct
from masprm.errors import ConfigError
from masprm.graph import MASGraph
from masprm.labels import LABEL_SCHEMES
from masprm.labels.allocation import even_split, rank, ranked_split
from masprm.labels.mc_budget import ActiveSettings, BudgetSettings, open_prefixes
from masprm.labels.mining import Options, parse_tree
from masprm.labels.scheme import LabelContext
from masprm.search.rollouts import RolloutSource
from masprm.search.settings import SamplingSettings

from helpers_trees import GSM8K, gsm8k_tree, scripted_team


def test_even_split_gives_the_remainder_to_the_first_nodes():
    assert even_split(5, 7) == [2, 2, 1, 1, 1]
    assert even_split(3, 2) == [1, 1, 0]
    assert even_split(4, 8) == [2, 2, 2, 2]
    assert even_split(0, 7) == [] and even_split(3, 0) == [0, 0, 0]


def test_ranked_split_ranks_by_spread_ties_to_the_first_and_spends_the_budget_exactly():
    spreads = [0.1, 0.3, 0.3, 0.05, 0.2]
    assert rank(spreads) == [1, 2, 4, 0, 3]                 # 0.3 (met first), 0.3, 0.2, 0.1, 0.05
    assert ranked_split(spreads, 7, 3) == [0, 3, 3, 0, 1]   # 3 + 3 + the remainder 1
    assert ranked_split(spreads, 6, 3) == [0, 3, 3, 0, 0]
    # 17 > 5 x 3: one full round of 3 each (15), the 2 left to the top node
    assert ranked_split(spreads, 17, 3) == [3, 5, 3, 3, 3]
    assert ranked_split(spreads, 0, 3) == [0] * 5 and ranked_split([], 9, 3) == []
    assert rank([float("nan"), 0.0, 0.0]) == [1, 2, 0]      # a NaN spread ranks last
    for budget in range(40):
        assert sum(ranked_split(spreads, budget, 4)) == budget == sum(even_split(5, budget))


def scripted():
    """Fresh messages as `scripted_team`'s; the Verifier answers 4 (right) after solve A, else 7 (wrong). So every
    completion through solve A succeeds, none through plan B or solve B does."""
    return scripted_team(lambda seen: "Answer: 4" if "solve A" in seen else "Answer: 7")


class ScriptedSpreads:
    """The heads' spread by the prefix's last message."""

    BY_LAST = {"read": 0.1, "plan A": 0.3, "solve A": 0.3, "plan B": 0.05, "solve B": 0.2}

    def __init__(self):
        self.asked = []

    def spreads(self, question, prefixes):
        self.asked.append([p[-1][1] for p in prefixes])
        return [self.BY_LAST[p[-1][1]] for p in prefixes]


def labels_of(name, settings, spreads=None, seed=1):
    source = RolloutSource(scripted(), MASGraph.from_dict(GSM8K),
                           lambda q, answer: 1.0 if is_correct(answer, "4") else -1.0,
                           SamplingSettings(top_p=1.0, max_new_tokens=16), seed=seed)
    ctx = LabelContext(Options(), settings, rollouts=source, spreads=spreads)
    recs = LABEL_SCHEMES[name].records(parse_tree(gsm8k_tree(), "t.json"), ctx)
    return [r["labels"] for r in recs], ctx, source


def test_the_open_prefixes_are_the_distinct_unfinished_ones_in_path_order():
    units = open_prefixes(parse_tree(gsm8k_tree(), "t.json"), 5)
    assert [[text for _, text in u] for u in units] == [
        ["read"], ["read", "plan A"], ["read", "plan A", "solve A"], ["read", "plan B"], ["read", "plan B", "solve B"]]


def test_uniform_spreads_the_budget_and_pools_the_rollouts_with_the_tree_values():
    # shares over (read, plan A, solve A, plan B, solve B) = [2, 2, 1, 1, 1]. read: 6 visits at 0.2 (q_sum 1.2),
    # 2 wins: (1.2 + 2) / 8 = 0.4; plan A: 1 visit at 0.5, 2 wins: 2.5 / 3; solve A: 1 win: 1.5 / 2 = 0.75;
    # plan B and solve B: -1 with one loss each: -2 / 2 = -1. The last step is the path's own outcome.
    labels, ctx, source = labels_of("mc_rollouts_uniform", BudgetSettings(rollout_budget=7))
    a = pytest.approx
    assert labels == [[a(0.4), a(2.5 / 3), a(0.75), 1.0], [a(0.4), a(2.5 / 3), a(0.75), -1.0],
                      [a(0.4), -1.0, -1.0, -1.0]]
    assert (ctx.notes["rollouts"], ctx.notes["prefixes"]) == (7, 5)
    # agent runs: read 2 x 3 agents to speak, plan A 2 x 2, solve A 1, plan B 1 x 2, solve B 1
    assert source.usage.agent_runs == 6 + 4 + 1 + 2 + 1


def test_active_spends_the_budget_where_the_heads_disagree():
    # ranked by spread: plan A (0.3, first), solve A (0.3), solve B (0.2), read, plan B; K = 3, budget 7:
    # plan A 3, solve A 3, solve B 1. plan A: (0.5 + 3) / 4; solve A: (0.5 + 3) / 4; solve B: (-1 - 1) / 2;
    # read and plan B get none and keep their tree values 0.2 and -1 (mc's labels)
    spreads = ScriptedSpreads()
    labels, ctx, source = labels_of("mc_rollouts_active", ActiveSettings(rollout_budget=7, active_rollouts=3),
                                    spreads)
    a = pytest.approx
    assert labels == [[0.2, a(0.875), a(0.875), 1.0], [0.2, a(0.875), a(0.875), -1.0], [0.2, -1.0, -1.0, -1.0]]
    assert spreads.asked == [["read", "plan A", "solve A", "plan B", "solve B"]]   # one batch per tree
    assert ctx.notes["rollouts"] == 7 and source.usage.agent_runs == 3 * 2 + 3 + 1


def test_a_budget_of_zero_is_refused_and_the_same_seed_gives_the_same_labels():
    # 0 would load the policy and sample nothing (every prefix would keep its mc label)
    for settings in (BudgetSettings, ActiveSettings):
        with pytest.raises(ConfigError, match="rollout_budget must be at least 1, got 0 .*--labels mc writes"):
            settings(rollout_budget=0)
    once = labels_of("mc_rollouts_active", ActiveSettings(rollout_budget=9, active_rollouts=2), ScriptedSpreads(), 5)
    again = labels_of("mc_rollouts_active", ActiveSettings(rollout_budget=9, active_rollouts=2), ScriptedSpreads(), 5)
    assert once[0] == again[0] and once[2].cache == again[2].cache


def test_active_refuses_without_an_ensemble_and_the_flags_are_checked():
    with pytest.raises(ConfigError, match="no ensemble scorer was given"):
        labels_of("mc_rollouts_active", ActiveSettings())
    with pytest.raises(ConfigError, match="rollout_budget must be at least 1"):
        BudgetSettings(rollout_budget=-1)
    with pytest.raises(ConfigError, match="active_rollouts must be at least 1"):
        ActiveSettings(active_rollouts=0)
    assert LABEL_SCHEMES["mc_rollouts_active"].needs_spreads and LABEL_SCHEMES["mc_rollouts_active"].needs_rollouts
    assert not LABEL_SCHEMES["mc_rollouts_uniform"].needs_spreads
