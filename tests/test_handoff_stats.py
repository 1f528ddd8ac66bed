"""Route metrics, bootstrap CI and exact McNemar against hand-computed values."""

import math

import pytest

from masprm.handoff.protocol import FINAL, RoutedTurn
from masprm.handoff.stats import conditional_entropy_bits, observed_quantile, route_metrics, summarize_routes
from masprm.paired_stats import mcnemar_exact_p, paired_accuracy, paired_bootstrap_ci
from masprm.handoff.team import HandoffRun


@pytest.mark.parametrize("only_a,only_b,p", [
    (0, 0, 1.0),
    (0, 5, 2 / 32),                        # 2 * P(X <= 0), X ~ Bin(5, 1/2)
    (1, 9, 2 * (1 + 10) / 1024),
    (8, 2, 2 * (1 + 10 + 45) / 1024),
    (3, 3, 1.0),                           # 2 * P(X <= 3; 6) = 84/64, capped at 1
    (4, 1, 2 * (1 + 5) / 32),
])
def test_mcnemar_exact_p(only_a, only_b, p):
    assert mcnemar_exact_p(only_a, only_b) == pytest.approx(p, abs=1e-12)


def test_bootstrap_ci_hand_cases():
    assert paired_bootstrap_ci([0, 0, 0], [1, 1, 1]) == (1.0, 1.0, 1.0)
    # two pairs with differences 0 and 1: resampled means are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4,
    # so the 2.5% and 97.5% percentiles are exactly 0 and 1
    assert paired_bootstrap_ci([0, 0], [0, 1], seed=3) == (0.5, 0.0, 1.0)
    assert paired_bootstrap_ci([], []) == (0.0, 0.0, 0.0)


def test_bootstrap_ci_is_seeded_and_close_to_the_normal_interval():
    # 100 pairs: B alone right on 30, A alone right on 10 -> delta 0.2, sd of differences 0.6
    a = [0] * 30 + [1] * 10 + [1] * 20 + [0] * 40
    b = [1] * 30 + [0] * 10 + [1] * 20 + [0] * 40
    delta, low, high = paired_bootstrap_ci(a, b, seed=42)
    assert delta == pytest.approx(0.2)
    half = 1.96 * 0.6 / math.sqrt(100)
    assert low == pytest.approx(0.2 - half, abs=0.015) and high == pytest.approx(0.2 + half, abs=0.015)
    assert paired_bootstrap_ci(a, b, seed=42) == (delta, low, high)
    # a few resamples make the seed visible
    assert paired_bootstrap_ci(a, b, seed=1, n_resamples=20) != paired_bootstrap_ci(a, b, seed=2, n_resamples=20)


def test_paired_accuracy_pairs_by_example_index():
    policy = {0: True, 1: False, 2: False, 3: True, 9: True}
    prm = {0: True, 1: True, 2: True, 3: False}               # example 9 is not in both
    r = paired_accuracy(policy, prm, seed=0)
    assert r["n_pairs"] == 4 and (r["only_a"], r["only_b"]) == (1, 2)
    assert (r["accuracy_a"], r["accuracy_b"], r["delta"]) == (0.5, 0.75, 0.25)
    assert r["mcnemar_p"] == pytest.approx(1.0)
    assert r["ci_low"] <= 0.25 <= r["ci_high"]


def test_conditional_route_entropy():
    assert conditional_entropy_bits([("A", "B"), ("A", "C"), ("B", "A"), ("B", "A")]) == pytest.approx(0.5)
    assert conditional_entropy_bits([("A", "B"), ("B", "A"), ("A", "B"), ("B", FINAL)]) == pytest.approx(0.5)
    assert conditional_entropy_bits([("A", "B"), ("A", "C"), ("A", "D"), ("A", "E")]) == pytest.approx(2.0)
    assert conditional_entropy_bits([("A", "B")] * 3) == 0.0


def test_nearest_rank_quantiles():
    assert observed_quantile([10, 20, 30], 0.95) == 30 and observed_quantile([10, 20, 30], 0.5) == 20
    assert observed_quantile(list(range(1, 101)), 0.95) == 95 and observed_quantile([], 0.95) == 0.0


def known_route():
    run = HandoffRun("q", turns=[RoutedTurn("A", "B", "1", "1"), RoutedTurn("B", "A", "2", "2"),
                                 RoutedTurn("A", "B", "3", "3"), RoutedTurn("B", FINAL, "4", "4")],
                     stop_reason="final", proposals=8, parse_failures=2, fallback_turns=1)
    run.scored = [{"tokens": 10, "full_tokens": 10, "truncated": False},
                  {"tokens": 20, "full_tokens": 25, "truncated": True},
                  {"tokens": 30, "full_tokens": 40, "truncated": False}]
    return run


H_21 = -(2 / 3 * math.log2(2 / 3) + 1 / 3 * math.log2(1 / 3))    # entropy of (2/3, 1/3)


def test_route_metrics_of_a_known_route():
    # the original's per-example metrics for this route in a team of 3 (its own test's numbers)
    m = route_metrics(known_route(), n_roles=3)
    assert (m["depth"], m["unique_agents"], m["unique_directed_role_edges"], m["role_revisits"]) == (4, 2, 2, 2)
    assert m["active_roles"] == ["A", "B"] and m["directed_role_edges"] == ["A -> B", "B -> A", "A -> B"]
    assert m["role_revisit_rate"] == 0.5
    assert m["route_entropy_bits"] == pytest.approx(H_21)                 # edges A->B x2, B->A
    assert m["route_entropy_normalized"] == pytest.approx(H_21 / math.log2(6))
    assert m["transitions"] == [["A", "B"], ["B", "A"], ["A", "B"], ["B", FINAL]]
    assert (m["agent_proposals"], m["parse_failures"], m["parse_failure_rate"]) == (8, 2, 0.25)
    assert m["prm_evaluations"] == 3 and m["prm_original_context_tokens"] == [10, 25, 40]
    assert (m["prm_context_tokens"], m["prm_truncations"]) == ([10, 20, 30], 1)
    assert (m["prm_context_token_median"], m["prm_context_token_p95"]) == (20.0, 30.0)
    assert m["prm_truncation_rate"] == pytest.approx(1 / 3)


def test_summarize_routes_pools_a_condition():
    first = {**route_metrics(known_route(), 3), "prefix_correct": {"4": True, "8": True, "12": False}}
    run = HandoffRun("q", turns=[RoutedTurn("C", "A", "1", "1"), RoutedTurn("A", "C", "2", "2")],
                     stop_reason="max_turns", proposals=4)
    second = {**route_metrics(run, 3), "prefix_correct": {"4": False, "8": True, "12": True}}
    s = summarize_routes([first, second], n_examples=4)          # two more examples crashed
    assert (s["hit_at_4"], s["hit_at_8"], s["hit_at_12"]) == (0.25, 0.5, 0.25)
    assert (s["realized_depth_mean"], s["realized_depth_median"]) == (3.0, 3.0)
    assert (s["unique_agents_mean"], s["unique_directed_role_edges_mean"]) == (2.0, 2.0)
    # the original's revisit rate: the mean of the per-example rates 2/4 and 0/2 (pooled would be 2/6)
    assert s["role_revisit_rate_mean"] == pytest.approx(0.25)
    # routed turns only (FINAL is no route): A->B x2, A->C, B->A, C->A; only A has a choice
    assert s["route_entropy_bits"] == pytest.approx(3 / 5 * H_21)
    assert s["within_trajectory_edge_entropy_bits_mean"] == pytest.approx((H_21 + 1.0) / 2)
    assert (s["prm_context_token_median"], s["prm_context_token_p95"]) == (20.0, 30.0)
    assert s["prm_truncation_rate"] == pytest.approx(1 / 3)
    assert s["parse_failure_rate"] == pytest.approx(2 / 12)
    assert (s["agent_proposals_total"], s["agent_proposals_mean"]) == (12.0, 6.0) and s["final_stop_rate"] == 0.5


def test_bootstrap_reproduces_the_originals_resampling():
    # The original: random.Random(seed); each resample draws len(d) indices with randrange and
    # averages; the sorted means are read at floor(0.025 (B-1)) and ceil(0.975 (B-1)).
    a, b = [1, 0, 0, 1, 0], [1, 1, 1, 0, 0]
    d = [0, 1, 1, -1, 0]
    rng = __import__("random").Random(50)
    means = sorted(sum(d[rng.randrange(5)] for _ in d) / 5 for _ in range(41))
    assert paired_bootstrap_ci(a, b, n_resamples=41, seed=50) == (0.2, means[1], means[39])   # 0.025*40 -> 1
    # one resample: both ends are that resample's mean
    rng = __import__("random").Random(7)
    only = sum(d[rng.randrange(5)] for _ in d) / 5
    assert paired_bootstrap_ci(a, b, n_resamples=1, seed=7) == (0.2, only, only)
