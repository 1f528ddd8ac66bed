"""--labels shapley: Shapley credit over agents by hand, conservation, and replays from a scripted policy."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from masprm.answers import is_correct
from masprm.errors import ConfigError
from masprm.graph import MASGraph
from masprm.labels import LABEL_SCHEMES
from masprm.labels.mining import Options, parse_tree
from masprm.labels.scheme import LabelContext
from masprm.labels.shapley import (ShapleySettings, coalitions, message_credits, sample_orders, shapley_values,
                                   transcript_credits)
from masprm.search.rollouts import RolloutSource
from masprm.search.settings import SamplingSettings

from conftest import FakePolicy
from helpers_trees import GSM8K, gsm8k_tree


def test_exact_shapley_values_of_a_three_agent_game_by_hand():
    # v(S) = +1 when C speaks with A or B, else -1: over the 6 orders C's arrival completes a winning
    # coalition 4 times (+2 each), A's and B's once each, so phi = (2/6, 2/6, 8/6), summing to v(N) - v(0) = 2
    def v(s):
        return 1.0 if "C" in s and ({"A", "B"} & s) else -1.0

    phi = shapley_values(["A", "B", "C"], v)
    assert phi == pytest.approx({"A": 1 / 3, "B": 1 / 3, "C": 4 / 3}, rel=1e-12)
    assert sum(phi.values()) == pytest.approx(v({"A", "B", "C"}) - v(set()), rel=1e-12)


def test_sampled_orders_are_exact_on_an_additive_game_and_always_conserve_credit():
    weights = {i: Fraction(i - 3, 4) for i in range(8)}    # 8 agents: beyond the exact limit

    def additive(s):
        return sum(weights[i] for i in s)

    orders = sample_orders(list(weights), 5, random.Random(1))
    assert shapley_values(list(weights), additive, orders) == pytest.approx(weights)
    # a non-additive game: each order's marginals telescope, so any set of orders conserves v(N) - v(0)
    rng = random.Random(2)
    table = {c: rng.uniform(-1, 1) for c in coalitions(list(weights), orders)}
    table[frozenset(weights)] = 1.0
    phi = shapley_values(list(weights), table.__getitem__, orders)
    assert sum(phi.values()) == pytest.approx(1.0 - table[frozenset()], abs=1e-12)
    assert len(coalitions([0, 1, 2], None)) == 8


def test_an_agents_credit_is_shared_by_its_messages():
    assert message_credits([0, 1, 0, 2], {0: 1.0, 1: -0.5, 2: 0.25}) == [0.5, -0.5, 0.5, 0.25]


class CountingGame:
    """A replayer from a table of outcomes by kept agents; it records what it was asked."""

    def __init__(self, value):
        self.value, self.asked = value, []

    def replay(self, question, messages, keeps):
        self.asked.append(list(keeps))
        return [self.value(k) for k in keeps]


def test_transcript_credits_average_the_replays_and_conserve_the_outcome_minus_the_baseline():
    game = CountingGame(lambda keep: 1.0 if 2 in keep else -1.0)
    messages = [(0, "read"), (1, "plan"), (2, "solve"), (3, "check")]
    credits, baseline = transcript_credits(game, "q", messages, 1.0, ShapleySettings(shapley_samples=2),
                                           random.Random(0))
    # 15 coalitions besides the full one, each replayed twice; agent 2 decides everything
    assert len(game.asked[0]) == 30 and frozenset({0, 1, 2, 3}) not in game.asked[0]
    assert credits == pytest.approx([0.0, 0.0, 2.0, 0.0]) and baseline == -1.0
    assert sum(credits) == pytest.approx(1.0 - baseline)


def verifier_checks_the_solver(messages, k, rng):
    """Fresh messages say 'fresh'; a fresh Verifier answers 4 only when it reads the recorded 'solve A'."""
    if messages[0]["content"] == "You are the Verifier.":
        return "Answer: 4" if "solve A" in messages[-1]["content"] else "Answer: 5"
    return "fresh"


def rollouts(policy):
    return RolloutSource(policy, MASGraph.from_dict(GSM8K), lambda q, answer: 1.0 if is_correct(answer, "4") else -1.0,
                         SamplingSettings(top_p=1.0, max_new_tokens=32), temperature=0.7, seed=3)


def test_shapley_records_of_a_hand_built_tree_with_a_scripted_policy():
    policy = FakePolicy(verifier_checks_the_solver)
    source = rollouts(policy)
    ctx = LabelContext(Options(), ShapleySettings(), rollouts=source)
    recs = LABEL_SCHEMES["shapley"].records(parse_tree(gsm8k_tree(), "t.json"), ctx)
    by_path = {tuple(r["completions"]): r for r in recs}
    # path read, plan A, solve A, answer 4 (+1): the outcome is +1 when the Verifier's or the Solver's message
    # is kept (a fresh Verifier reading 'solve A' answers 4), else -1; Reader and Planner never matter.
    # Solver and Verifier are symmetric: credit 1 each, labels halved; baseline -1, 1 - (-1) = 2 in all
    good = by_path[("read", "plan A", "solve A", "answer: 4")]
    assert good["labels"] == pytest.approx([0.0, 0.0, 0.5, 0.5])
    assert good["meta"]["baseline"] == -1.0 and sum(good["meta"]["shapley_credits"]) == pytest.approx(2.0)
    # path ... answer 5 (-1): kept Verifier -> 5 (-1); fresh Verifier with solve A kept -> 4 (+1): the
    # Verifier's message is worth -2 wherever the Solver is kept, 0 elsewhere: -1; the Solver +1 where the
    # Verifier is replaced: +1; the outcome minus the baseline is -1 - (-1) = 0
    bad = by_path[("read", "plan A", "solve A", "answer: 5")]
    assert bad["meta"]["shapley_credits"] == pytest.approx([0.0, 0.0, 1.0, -1.0])
    # path read, plan B, solve B, answer 7 (-1): nothing any agent keeps wins: every credit 0
    assert by_path[("read", "plan B", "solve B", "answer: 7")]["labels"] == pytest.approx([0.0] * 4)
    assert ctx.notes["transcripts"] == 3
    # 3 transcripts x 15 replays, one policy call per message index that has a fresh message
    assert source.usage.agent_runs == 3 * sum(8 for _ in range(4)) and source.calls == 3


def test_shapley_replays_repeat_with_the_seed_and_refuse_without_a_policy():
    def texts(seed):
        policy = FakePolicy(lambda m, k, rng: f"fresh {rng.random():.6f}")
        source = rollouts(policy)
        source.seed = seed
        source.replay("What is 2 + 2?", [(0, "a"), (1, "b"), (2, "c"), (3, "Answer: 4")], [frozenset({3})] * 2)
        return policy.keys

    assert texts(3) == texts(3) and texts(3) != texts(4)
    with pytest.raises(ConfigError, match="label scheme 'shapley' needs fresh policy samples"):
        LABEL_SCHEMES["shapley"].records(parse_tree(gsm8k_tree(), "t.json"), LabelContext(Options(), ShapleySettings()))
    with pytest.raises(ConfigError, match="shapley_samples"):
        ShapleySettings(shapley_samples=0)
