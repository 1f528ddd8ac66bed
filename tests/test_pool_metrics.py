"""Pool metrics of selectors over a shared pool (voters, best-of-N, the judge), worked by hand."""

from __future__ import annotations

import math

import pytest

from masprm.answers import is_correct
from masprm.eval.aggregate import aggregate, parse_log, to_csv
from masprm.eval.pool_metrics import judge_summary, pool_report_lines, pool_summary, rank_auc, with_pool_verdicts

from helpers_stage4_logs import log_text


def test_rank_auc_counts_pairs_and_splits_ties():
    # positives 0.35, 0.8 against negatives 0.1, 0.4: 0.35 beats 0.1 only, 0.8 beats both -> 3 of 4
    assert rank_auc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == 0.75
    # the positive ties one negative (half a pair) and beats the other -> 1.5 of 2
    assert rank_auc([1.0, 1.0, 0.0], [True, False, False]) == 0.75
    assert math.isnan(rank_auc([0.3, 0.2], [False, False]))


def record(answers, scores, gold, correct, **metrics):
    return {"gold": gold, "correct": correct, "error": None, "metrics": metrics,
            "extra": {"pool": {"answers": answers, "scores": scores}}}


RECORDS = [record(["7", "5", "7"], [0.9, 0.1, 0.8], "7", True),    # solvable, chosen right, AUC 1
           record(["5", "5"], [0.3, 0.2], "7", False),             # no right pass: no AUC
           record(["7", "5"], [0.2, 0.6], "7", False)]             # solvable, chosen wrong, AUC 0


def test_pool_summary_by_hand():
    s = pool_summary(RECORDS, is_correct)
    assert s["pool_examples"] == 3 and s["pool_size_mean"] == pytest.approx(7 / 3)
    assert s["oracle_hit_at_k"] == pytest.approx(2 / 3)
    assert s["accuracy_given_solvable"] == 0.5
    assert (s["candidate_auc_per_question"], s["auc_questions"]) == (0.5, 2)
    # pooled: positives 0.9, 0.8, 0.2 against negatives 0.1, 0.3, 0.2, 0.6: 4 + 4 + (1 + 0.5) = 9.5 of 12
    assert s["candidate_auc_pooled"] == pytest.approx(9.5 / 12)


def test_undefined_values_are_none_and_a_none_score_ranks_lowest():
    s = pool_summary([record(["5"], [None], "7", False)], is_correct)
    assert s["accuracy_given_solvable"] is None and s["candidate_auc_per_question"] is None
    s = pool_summary([record(["7", "5"], [None, 0.0], "7", False)], is_correct)   # -inf below 0.0: AUC 0
    assert s["candidate_auc_per_question"] == 0.0
    assert pool_summary([{"error": None, "metrics": {}, "extra": {}}], is_correct) == {}


def test_labels_the_run_stored_win_over_the_default_checker():
    # A run with --answer_checker math_verify stores its own verdicts: "\\sqrt{8}" is right for gold
    # "2\\sqrt{2}" there, which the default rule would call wrong; the pool metrics must use the run's.
    rec = record(["\\sqrt{8}", "3"], [0.4, 0.9], "2\\sqrt{2}", False)
    assert pool_summary([rec], is_correct)["oracle_hit_at_k"] == 0.0
    rec["extra"]["pool"]["correct"] = [True, False]
    s = pool_summary([rec], is_correct)
    assert (s["oracle_hit_at_k"], s["accuracy_given_solvable"], s["candidate_auc_per_question"]) == (1.0, 0.0, 0.0)


def test_the_runner_stores_each_pass_s_verdict_by_the_checker_it_is_given():
    always_right = lambda answer, gold: True   # a checker unlike the default rule
    extra = {"pool": {"answers": ["5", "7"], "scores": [0.1, 0.2]}, "other": 1}
    assert with_pool_verdicts(extra, always_right, "7")["pool"]["correct"] == [True, True]
    assert with_pool_verdicts(extra, is_correct, "7")["pool"]["correct"] == [False, True]
    assert with_pool_verdicts({"other": 1}, is_correct, "7") == {"other": 1}   # no pool: unchanged


def test_judge_counts():
    records = [{"error": None, "metrics": {"judge_calls": 2, "judge_parse_failures": 1}},
               {"error": None, "metrics": {"judge_calls": 1, "judge_parse_failures": 0}},
               {"error": "boom", "metrics": {"judge_calls": 5, "judge_parse_failures": 5}}]
    assert judge_summary(records) == {"judge_calls_mean": 1.5, "judge_parse_failure_rate": pytest.approx(1 / 3)}
    assert judge_summary([{"error": None, "metrics": {}}]) == {}


def test_the_log_lines_aggregate_and_only_where_written():
    extra = {**pool_summary(RECORDS, is_correct), "judge_calls_mean": 1.5, "judge_parse_failure_rate": 0.25}
    lines = pool_report_lines({"extra": extra})
    assert lines[0] == "Oracle Hit@k (k = 2.33333): 0.6667"
    assert "Candidate AUC per question (mean of 2): 0.5000" in lines
    text = log_text(acc=0.3333).replace("COMPLETED", "\n".join([*lines, "COMPLETED"]))
    plain = log_text(acc=0.5)
    rows, skipped = aggregate([parse_log("gsm8k_voter_x_m_1", text), parse_log("gsm8k_sbs_y_m_1", plain)])
    assert not skipped
    header, voter, sbs = to_csv(rows).splitlines()
    cols = header.split(",")
    assert cols[-4:] == ["judge_calls_mean", "judge_calls_std", "judge_parse_failure_rate_mean",
                         "judge_parse_failure_rate_std"]
    values = dict(zip(cols, voter.split(",")))
    assert values["oracle_hit_at_k_mean"] == "0.6667" and values["auc_pooled_mean"] == "0.7917"
    assert dict(zip(cols, sbs.split(",")))["auc_pooled_mean"] == "N/A"
    only_plain, _ = aggregate([parse_log("gsm8k_sbs_y_m_1", plain)])
    assert "oracle" not in to_csv(only_plain)     # the original's columns when no log has a pool
