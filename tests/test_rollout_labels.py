"""Rollout-based label schemes (mc_rollouts, first_error_search, step_consistency) on a hand-built tree,
with fresh completions from a scripted policy: labels, the binary search, the cache and the policy cost."""

from __future__ import annotations

import pytest

from masprm.answers import is_correct
from masprm.errors import ConfigError
from masprm.graph import MASGraph
from masprm.labels import LABEL_SCHEMES
from masprm.labels.first_error_search import FirstErrorSearchSettings, binary_search_first_error
from masprm.labels.mc_rollouts import McRolloutsSettings
from masprm.labels.mining import Options, parse_tree
from masprm.labels.scheme import LabelContext
from masprm.labels.step_consistency import StepConsistencySettings
from masprm.search.rollouts import RolloutSource
from masprm.search.settings import SamplingSettings

from helpers_trees import GSM8K, gsm8k_tree, scripted_team


def scripted():
    """A fresh Planner writes 'plan X'; a fresh Solver 'solve B' after plan B, else 'solve A'; a Verifier
    after 'solve A' answers 4 and 5 in turn (one of each per prefix with K = 2), after anything else 7."""
    verdicts = iter(range(10**6))
    return scripted_team(lambda seen: ("Answer: 4", "Answer: 5")[next(verdicts) % 2] if "solve A" in seen
                         else "Answer: 7")


def labels_of(name, settings):
    source = RolloutSource(scripted(), MASGraph.from_dict(GSM8K),
                           lambda q, answer: 1.0 if is_correct(answer, "4") else -1.0,
                           SamplingSettings(top_p=1.0, max_new_tokens=16), seed=1)
    ctx = LabelContext(Options(), settings, rollouts=source)
    recs = LABEL_SCHEMES[name].records(parse_tree(gsm8k_tree(), "t.json"), ctx)
    return [r["labels"] for r in recs], ctx, source


def test_mc_rollouts_soft_and_hard_labels_and_their_cost():
    # path 1 (read, plan A, solve A, answer 4): every open prefix reaches 'solve A', so 1 of its 2 completions
    # answers 4: f = 1/2, label 0; the last step is the path's own +1. Path 2 shares the prefixes (cached).
    # Path 3: 'read' as before; after plan B the Solver writes 'solve B' and the Verifier 7: f = 0, label -1.
    labels, ctx, source = labels_of("mc_rollouts", McRolloutsSettings(mc_rollouts=2))
    assert labels == [[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, -1.0], [0.0, -1.0, -1.0, -1.0]]
    # agent runs: path 1 completes read (3 agents x 2), plan A (2 x 2), solve A (1 x 2); path 3 plan B and
    # solve B (4 + 2); the rest from the cache
    assert source.usage.agent_runs == 12 + 6 and len(source.cache) == 5
    hard, _, _ = labels_of("mc_rollouts", McRolloutsSettings(mc_rollouts=2, mc_hard=True))
    assert hard == [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, -1.0], [1.0, -1.0, -1.0, -1.0]]


def test_first_error_search_bisects_the_prefixes():
    labels, ctx, source = labels_of("first_error_search", FirstErrorSearchSettings(search_rollouts=2))
    # path 1: probe 2 (solve A: 1/2 succeed) then 3 (its own +1): no error. Path 2: 2 then 3 (-1): the error is
    # the last step. Path 3: 2 (solve B: none), 1 (plan B: none), 0 (read: 1/2): the error is plan B.
    assert labels == [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, -1.0], [1.0, -1.0]]
    assert ctx.notes["probes"] == 2 + 2 + 3 and ctx.notes["completed_prefixes"] == 1 + 1 + 3
    assert [binary_search_first_error(8, lambda i: i < e) for e in range(9)] == list(range(9))


def test_step_consistency_judges_each_step_by_the_majority_of_all_completions():
    labels, ctx, _ = labels_of("step_consistency", StepConsistencySettings(consistency_rollouts=2))
    # answers over the distinct prefixes: read, plan A, solve A -> 4, 5 each; plan B, solve B -> 7, 7; the paths'
    # own answers 4, 5, 7: 4 and 5 four votes each, 7 five: the majority is 7 (no gold is read)
    assert labels == [[-1.0] * 4, [-1.0] * 4, [-1.0, 1.0, 1.0, 1.0]]


def test_rollout_schemes_refuse_without_a_policy_and_check_their_flags():
    for name, settings in (("mc_rollouts", McRolloutsSettings()), ("first_error_search", FirstErrorSearchSettings()),
                           ("step_consistency", StepConsistencySettings())):
        assert LABEL_SCHEMES[name].needs_rollouts
        with pytest.raises(ConfigError, match=f"label scheme '{name}' needs fresh policy samples"):
            LABEL_SCHEMES[name].records(parse_tree(gsm8k_tree(), "t.json"), LabelContext(Options(), settings))
    with pytest.raises(ConfigError, match="mc_rollouts"):
        McRolloutsSettings(mc_rollouts=0)
