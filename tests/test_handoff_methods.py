"""The four handoff conditions as registered evaluation methods, their summaries and the paired comparison."""

import random
import re
import pytest

from helpers_eval_world import run_method, settings
from masprm.data import Example
from masprm.search.context import SearchContext
from masprm.eval.methods import METHODS
from masprm.graph import MASGraph
from masprm.handoff.methods import (compare_handoff_conditions, format_paired_comparison, paired_comparison,
                                    paired_log_lines, summarize)
from masprm.handoff.stats import mcnemar_exact_p, paired_bootstrap_ci

ROLES = ["Analyst", "Solver", "Critic", "Finalizer"]
GRAPH = MASGraph.from_dict({
    "agents": [{"name": r, "system_prompt": f"You are the {r}."} for r in ROLES],
    "handoff": {"initial_role": "Analyst", "fixed_schedule": ["Analyst", "Solver", "Critic", "Finalizer"]},
}, source="handoff.yaml")




class Respond:
    """Turn t answers t; proposal k routes to the k-th permitted recipient from the end (FINAL first)."""

    def __init__(self):
        self.turn = 0

    def __call__(self, messages, k, rng):
        self.turn += k == 0
        content = messages[-1]["content"]
        speaker = re.search(r"^ACTIVE SPEAKER: (.*)$", content, re.M).group(1)
        permitted = re.search(r"^PERMITTED RECIPIENTS: (.*)$", content, re.M).group(1).split(", ")
        return (f"SPEAKER: {speaker}\nRECIPIENT: {permitted[-1 - k % len(permitted)]}\n"
                f"MESSAGE: step {k} GOOD{k}\nCURRENT_ANSWER: {self.turn}")


class WordScorer:
    separator = "</step>"
    tokens_seen = 0
    last_tokens: list[int] = []

    def count_tokens(self, text):
        return len(text.split())

    def score_batch(self, texts):
        self.last_tokens = [len(t.split()) for t in texts]
        self.tokens_seen += sum(self.last_tokens)
        # prefer the proposal that routes to FINAL, else the one marked GOOD1
        return [1.0 if "RECIPIENT: FINAL" in t.rsplit("SPEAKER:", 1)[-1] else
                0.5 if "GOOD1" in t.rsplit("SPEAKER:", 1)[-1] else 0.0 for t in texts]


def run(method, fake_policy, gold="3", **kw):
    """``method`` on one example with its own settings (the CLI's defaults, these flags overridden)."""
    policy = fake_policy(Respond())
    flags = {"min_turns": 2, "max_turns": 12, "prm_context_length": 4000, "sbs_temperature": 0.7,
             "max_new_tokens": 128, **kw}
    ctx = SearchContext(policy=policy, graph=GRAPH, settings=settings(**flags).method_settings(method),
                        rng=random.Random(7), scorers={"handoff_masprm": WordScorer()})
    return run_method(method, ctx, Example(0, "What is 1 + 2?", gold, {})), ctx


def test_registered_as_one_routing_with_the_prm_needing_its_scorer():
    for name in ("handoff_fixed", "handoff_random", "handoff_policy", "handoff_prm"):
        assert METHODS[name].routing == "handoff" and METHODS[name].summarize is summarize
        assert METHODS[name].needs == ({"handoff_masprm"} if name == "handoff_prm" else set())


def test_handoff_prm_follows_the_scorer_and_records_route_metrics(fake_policy):
    result, ctx = run("handoff_prm", fake_policy)
    entry = result.extra["handoff"]
    # turn 1: FINAL is not allowed yet, the scorer prefers GOOD1 (the Analyst's second-last permitted
    # role, Critic); turn 2: the Critic may say FINAL (its proposal 0), which the scorer prefers
    assert [t["recipient"] for t in entry["turns"]] == ["Critic", "FINAL"]
    assert result.prediction == "2" and result.candidates == ["2"]
    assert entry["prefix_answers"] == {"4": "2", "8": "2", "12": "2"}
    assert entry["prefix_correct"] == {"4": False, "8": False, "12": False}
    assert entry["depth"] == 2 and entry["stop_reason"] == "final"
    assert len(entry["prm_context_tokens"]) == 6 and entry["agent_proposals"] == 6 and entry["prm_evaluations"] == 6
    # the original's counts: one agent run and one PRM call per batched turn (2 turns x 3 proposals)
    assert ctx.usage.scorer_calls == 2 and ctx.usage.agent_runs == 2
    assert entry["prefix_depths"] == {"4": 2, "8": 2, "12": 2}
    assert entry["turns"][0]["raw"].startswith("SPEAKER: Analyst\nRECIPIENT: Critic\nMESSAGE: step 1 GOOD1")


def test_fixed_condition_runs_the_schedule(fake_policy):
    result, _ = run("handoff_fixed", fake_policy, gold="4", max_turns=4)
    entry = result.extra["handoff"]
    assert [t["speaker"] for t in entry["turns"]] == ROLES
    assert entry["turns"][-1]["recipient"] == "FINAL" and result.prediction == "4"
    assert entry["prefix_correct"] == {"4": True, "8": True, "12": True}
    assert entry["prm_context_tokens"] == []


def test_policy_condition_is_reproducible_under_the_same_seed(fake_policy):
    first, _ = run("handoff_policy", fake_policy)
    again, _ = run("handoff_policy", fake_policy)
    assert first.extra == again.extra


def record(idx, c8, c12, **extra):
    entry = {"depth": 12, "stop_reason": "max_turns", "transitions": [["A", "B"]] * 12, "unique_agents": 2,
             "unique_directed_role_edges": 1, "role_revisits": 10, "role_revisit_rate": 10 / 12,
             "route_entropy_bits": 0.0, "agent_proposals": 36, "parse_failures": 0, "fallback_turns": 0,
             "prm_context_tokens": [], "prm_truncations": 0,
             "prefix_correct": {"4": False, "8": c8, "12": c12}, **extra}
    return {"index": idx, "correct": c12, "extra": {"handoff": entry}, "error": None}


def test_paired_comparison_matches_hand_counts():
    # T=8: policy alone right on 0, prm alone right on 1, 2, 3 ; T=12: one discordant each way
    policy = [record(0, True, True), record(1, False, False), record(2, False, True), record(3, False, False),
              record(4, True, True)]
    prm = [record(0, False, True), record(1, True, False), record(2, True, True), record(3, True, True),
           record(4, True, False)]
    r = paired_comparison(policy, prm, seed=0)
    assert r["n_pairs"] == 5
    assert (r["t8_policy_accuracy"], r["t8_prm_accuracy"]) == (0.4, 0.8)
    assert r["t8_paired_accuracy_delta"] == pytest.approx(0.4)
    assert (r["t8_policy_only"], r["t8_prm_only"]) == (1, 3)
    assert r["t8_mcnemar_exact_p"] == pytest.approx(mcnemar_exact_p(1, 3)) == pytest.approx(0.625)
    assert r["t12_paired_accuracy_delta"] == pytest.approx(0.0)
    assert r["t12_mcnemar_exact_p"] == 1.0
    assert r["t8_paired_bootstrap_ci_low"] <= 0.4 <= r["t8_paired_bootstrap_ci_high"]
    assert paired_comparison(policy, prm, seed=0) == r
    # each T's bootstrap is seeded seed + T, as in the original
    a8, b8 = [1, 0, 0, 0, 1], [0, 1, 1, 1, 1]
    assert (r["t8_paired_bootstrap_ci_low"], r["t8_paired_bootstrap_ci_high"]) == \
        paired_bootstrap_ci(a8, b8, seed=8)[1:]
    assert paired_comparison(policy, prm, seed=5)["t12_paired_bootstrap_ci_low"] == \
        paired_bootstrap_ci([1, 0, 1, 0, 1], [1, 0, 1, 1, 0], seed=17)[1]
    assert format_paired_comparison(r)[0] == (
        f"T=8 dynamic MASPRM \u2212 policy: \u0394=0.400, 95% CI [{r['t8_paired_bootstrap_ci_low']:.3f}, "
        f"{r['t8_paired_bootstrap_ci_high']:.3f}], McNemar p=0.625")
    log = paired_log_lines(r)
    assert log[0] == ("T=8 paired dynamic PRM-policy accuracy delta (95% bootstrap CI): 0.4000 "
                      f"[{r['t8_paired_bootstrap_ci_low']:.4f}, {r['t8_paired_bootstrap_ci_high']:.4f}]")
    assert log[1] == "T=8 McNemar exact: policy-only=1, prm-only=3, p=0.625000"
    assert log[3] == "T=12 McNemar exact: policy-only=1, prm-only=1, p=1.000000" and len(log) == 4
    assert compare_handoff_conditions({"handoff_policy": policy}) is None
    assert compare_handoff_conditions({"handoff_policy": policy, "handoff_prm": prm}, seed=0) == r


def test_a_crashed_example_counts_as_a_miss():
    crashed = {"index": 2, "correct": False, "extra": {}, "error": "boom"}
    s = summarize([record(0, True, True), record(1, False, True), crashed])
    assert (s["hit_at_8"], s["hit_at_12"]) == (pytest.approx(1 / 3), pytest.approx(2 / 3))
    assert s["handoff_examples"] == 2 and s["route_entropy_bits"] == 0.0
    r = paired_comparison([record(2, True, True)], [crashed])
    assert (r["t8_policy_only"], r["t8_prm_only"]) == (1, 0)
