"""Paired comparisons against the MASPRM (the original newer branch's pairs), worked by hand."""

from __future__ import annotations

import pytest

from masprm.eval.logs import COMPLETED, text_status
from masprm.eval.vs_masprm import compare_with_masprm, configured_pairs, vs_masprm_lines


def records(correct):
    return [{"index": i, "correct": bool(c), "error": None} for i, c in enumerate(correct)]


def test_the_configured_pairs_need_both_conditions():
    assert configured_pairs(["voter_plain", "voter_prm", "pooled_judge", "mcts_judge", "bon_orm"]) == [
        ("voter_plain", "voter_prm"), ("pooled_judge", "voter_prm")]   # no mcts_prm, no bon_prm in the run
    assert configured_pairs(["mcts_judge", "mcts_prm", "bon_logprob", "bon_prm"]) == [
        ("mcts_judge", "mcts_prm"), ("bon_logprob", "bon_prm")]
    assert configured_pairs(["voter_prm", "mcts_prm", "sbs_prm"]) == []


def test_accuracy_difference_and_exact_mcnemar_by_hand():
    masprm = records([1, 1, 0, 0, 1])
    this = records([1, 0, 1, 1, 1])
    r = compare_with_masprm(this, masprm, seed=42)
    assert (r["accuracy"], r["masprm_accuracy"], r["delta"]) == (0.8, 0.6, pytest.approx(0.2))
    # discordant: this-only 2 (questions 2, 3), masprm-only 1 (question 1): p = 2 * (C(3,0) + C(3,1)) / 2^3 -> 1
    assert (r["only_this"], r["only_masprm"], r["mcnemar_exact_p"]) == (2, 1, 1.0)
    assert r["ci_low"] <= 0.2 <= r["ci_high"] and r["n_pairs"] == 5
    six = compare_with_masprm(records([1] * 6 + [0] * 4), records([0] * 10), seed=0)
    assert six["mcnemar_exact_p"] == pytest.approx(2 / 2 ** 6)   # 6 discordant, all one way
    # a crashed example counts as wrong
    crashed = [{**rec, "error": "boom"} if rec["index"] == 0 else rec for rec in records([1, 1])]
    assert compare_with_masprm(crashed, records([1, 1]), seed=0)["only_masprm"] == 1


def test_the_lines_are_a_trailer_after_completed():
    r = compare_with_masprm(records([1, 0, 1, 1, 1]), records([1, 1, 0, 0, 1]), seed=42)
    lines = vs_masprm_lines("voter_prm", r)
    assert lines[0].startswith("Paired vs MASPRM (voter_prm) accuracy delta (95% bootstrap CI over 5 questions): "
                               "0.2000 [")
    assert lines[1] == "Paired vs MASPRM (voter_prm) McNemar exact: this-only=2, masprm-only=1, p=1.000000"
    assert text_status("\n".join(["Accuracy (pass@1): 0.8", COMPLETED, *lines])) == COMPLETED
