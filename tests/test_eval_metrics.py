"""pass@k arithmetic, token statistics and the log text they feed."""

from __future__ import annotations

import pytest

from masprm.answers import is_correct
from masprm.eval.logs import COMPLETED, metric_lines, progress_line, render_log, status_line
from masprm.eval.metrics import mean_std, pass_at_k_hits, pass_candidates, summarize_records


def hits(prediction, candidates, gold="7"):
    return pass_at_k_hits(prediction, candidates, gold, is_correct=is_correct)


def test_pass_candidates_drop_only_the_prediction_text_and_keep_the_top_five():
    # The original: [pred] + [c for c in top5 if c != pred]; equal answers in other words stay.
    ranked = pass_candidates("Answer: 5", ["5", "Answer: 6", "so 6", "Answer: 5", "Answer: 7", "Answer: 8"])
    assert ranked == ["Answer: 5", "5", "Answer: 6", "so 6", "Answer: 7"]   # "Answer: 8" is 6th


def test_pass_at_k_follows_the_originals_candidate_list():
    # The example: prediction 5, candidates [5, 5.0, 7], gold 7 -> [5, 5.0, 7]: pass@2 = 0, pass@3 = 1.
    assert hits("5", ["5", "5.0", "7"]) == [0, 0, 1, 1, 1, 1, 1, 1, 1, 1]
    assert hits("Answer: 5", ["Answer: 5", "Answer: 6", "6.0", "Answer: 7"]) == [0, 0, 0, 1, 1, 1, 1, 1, 1, 1]
    # A correct candidate beyond the method's top 5 never counts.
    assert hits("1", ["2", "3", "4", "5", "6", "7"]) == [0] * 10
    assert hits("Answer: 7", []) == [1] * 10
    assert hits("Answer: 5", ["Answer: 6"]) == [0] * 10
    assert hits("Answer: 5", ["Answer: 7"], gold=None) == [0] * 10   # no gold is never correct


def _record(idx, hit_at, tokens, scorer_calls=0, agent_runs=2, error=None):
    if error:
        return {"index": idx, "error": error, "metrics": {}}
    h = [int(hit_at is not None and k >= hit_at) for k in range(1, 11)]
    return {"index": idx, "error": None,
            "metrics": {**{f"pass@{k}": h[k - 1] for k in range(1, 11)}, "generated_tokens": tokens,
                        "prompt_tokens": 1, "scorer_tokens": 3 * scorer_calls, "scorer_calls": scorer_calls,
                        "agent_runs": agent_runs}}


def test_summary_over_examples_counts_crashes_as_wrong():
    records = [_record(0, 1, 10, 4), _record(1, 3, 20, 6), _record(2, None, 30, 8), _record(3, None, 0, error="boom")]
    s = summarize_records(records)
    assert s["n"] == 4 and s["errors"] == 1
    assert s["accuracy"] == s["pass@1"] == 0.25
    assert s["pass@2"] == 0.25 and s["pass@3"] == 0.5 and s["pass@10"] == 0.5
    assert s["tokens_mean"] == 20.0 and s["tokens_std"] == pytest.approx((200 / 3) ** 0.5)
    assert s["tokens_n"] == 3
    assert s["scorer_calls_total"] == 18 and s["prm_calls_mean"] == 6.0
    assert s["agent_runs_total"] == 6 and s["agent_runs_mean"] == 2.0
    assert mean_std([]) == (0.0, 0.0)


def test_log_text_has_the_spec_lines_and_status():
    s = summarize_records([_record(0, 1, 10, 4), _record(1, None, 20, 6)])
    lines = metric_lines(s)
    assert lines[0] == "Accuracy (pass@1): 0.5000"
    assert lines[1:10] == [f"Pass@{k}: 0.5000" for k in range(2, 11)]
    assert lines[10] == "Tokens: 15.0 ± 5.0 (2 examples)"
    # the original's "PRM calls" lines (they count every scorer call), each beside the line that says so
    assert lines[11:] == ["Total PRM calls: 10", "Total scorer calls: 10", "Total Agent runs: 4",
                          "Mean PRM calls per example: 5.00", "Mean scorer calls per example: 5.00",
                          "Mean Agent runs per example: 2.00"]
    # The original's progress line: p@1..p@10, then totals and means so far.
    assert progress_line(s, 2, 2) == ("[progress] 2/2 acc=0.5000 "
                                      + ", ".join(f"p@{k}=0.5000" for k in range(1, 11))
                                      + " tokens=15.0±5.0 prm_calls_total=10 agent_runs_total=4"
                                      " prm_calls_mean=5.00 agent_runs_mean=2.00")
    assert render_log(["=== START x ==="], [], s).splitlines()[-1] == COMPLETED
    failed = summarize_records([_record(0, 1, 10), _record(1, None, 0, error="boom")])
    assert status_line(failed) == "FAILED (1 of 2 examples raised errors)"
