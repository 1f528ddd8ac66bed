"""Impossible logs: the aggregator counts a log only when each metric line it reads, standard or optional
(the pool and judge metrics), appears once, finite and in range, every standard line is there, and its name
carries a seed; anything else is named on stderr and left out of its row."""

from __future__ import annotations

import re

import pytest

from masprm.eval.aggregate import aggregate, parse_log, read_logs
from masprm.eval.pool_metrics import OPTIONAL_LINES, pool_report_lines

from helpers import snapshot
from helpers_cli import run_module
from helpers_stage4_logs import EXP, log_text


@pytest.mark.parametrize("edit, problem", [
    (lambda t: t.replace("Accuracy (pass@1): 0.5000", "Accuracy (pass@1): nan"), "its pass@1 value is not a number"),
    (lambda t: t.replace("Accuracy (pass@1): 0.5000", "Accuracy (pass@1): n/a"), "its pass@1 value is not a number"),
    (lambda t: t.replace("Accuracy (pass@1): 0.5000", "Accuracy (pass@1): 3.75"),
     "its pass@1 value 3.75 is outside [0, 1]"),
    (lambda t: t.replace("Pass@5: 0.5000", "Pass@5: -0.1"), "its pass@5 value -0.1 is outside [0, 1]"),
    (lambda t: t.replace("Tokens: 100.0", "Tokens: -100.0"), "its tokens value -100 is outside [0, inf]"),
    (lambda t: t.replace("Mean PRM calls per example: 0.00", "Mean PRM calls per example: inf"),
     "its prm_calls value is not a number"),
    (lambda t: t.replace("Pass@3: 0.5000\n", "Pass@3: 0.5000\nPass@3: 0.9000\n"), "its pass@3 line is written 2 times"),
    (lambda t: "\n".join(ln for ln in t.splitlines() if not ln.startswith("Accuracy")) + "\n",
     "it has no pass@1 line"),
])
def test_an_impossible_log_is_skipped_and_named(tmp_path, edit, problem):
    (tmp_path / f"{EXP}_1.txt").write_text(log_text(acc=0.5))
    (tmp_path / f"{EXP}_2.txt").write_text(edit(log_text(acc=0.5)))
    (tmp_path / f"{EXP}_3.txt").write_text(log_text(acc=0.7))
    rows, skipped = aggregate(read_logs(tmp_path))
    assert skipped == [f"{EXP}_2 ({problem})"]
    assert rows[0].seeds == [1, 3] and rows[0].values["pass@1"] == [0.5, 0.7]   # Seeds = values averaged


def test_a_log_without_a_seed_in_its_name_is_not_counted(tmp_path):
    (tmp_path / f"{EXP}_1.txt").write_text(log_text())
    (tmp_path / f"{EXP}.txt").write_text(log_text())
    rows, skipped = aggregate(read_logs(tmp_path))
    assert skipped == [f"{EXP} (its name carries no seed (_<seed> before .txt))"]
    assert [r.seeds for r in rows] == [[1]]


def test_the_aggregator_command_names_impossible_logs_on_stderr(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / f"{EXP}_1.txt").write_text(log_text())
    (tmp_path / "logs" / f"{EXP}_2.txt").write_text(log_text().replace("Pass@5: 0.5000", "Pass@5: 7"))
    code, lines, out = run_module(monkeypatch, capsys, "masprm.stages.aggregate", ["--logs_dir", "logs", "--no_plot"])
    assert code == 0 and lines == [f"skipped 1 log(s) that cannot be counted: {EXP}_2 "
                                   "(its pass@5 value 7 is outside [0, 1])"]
    assert f"{EXP},1," in (tmp_path / "aggregated_results.csv").read_text()


def test_only_impossible_logs_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / f"{EXP}_2.txt").write_text(log_text().replace("Pass@5: 0.5000", "Pass@5: 7"))
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.stages.aggregate", ["--logs_dir", "logs"])
    assert code == 2 and lines == [f"aggregate.py: error: --logs_dir logs: no COMPLETED logs (*.txt); 1 cannot be "
                                   f"counted: {EXP}_2 (its pass@5 value 7 is outside [0, 1]); nothing written"]
    assert snapshot(tmp_path) == before


@pytest.mark.slow
def test_the_declared_difference_for_impossible_logs(tmp_path):
    """docs/differences.md: the original averaged 0.5, 0.9 and 3.75 to 1.72; the impossible log is left out."""
    for seed, acc in ((1, 0.5), (2, 0.9), (3, 0.5)):
        (tmp_path / f"{EXP}_{seed}.txt").write_text(log_text(acc=acc))
    text = (tmp_path / f"{EXP}_3.txt").read_text().replace("Accuracy (pass@1): 0.5000", "Accuracy (pass@1): 3.75")
    (tmp_path / f"{EXP}_3.txt").write_text(text)
    [row], skipped = aggregate(read_logs(tmp_path))
    assert round((0.5 + 0.9 + 3.75) / 3, 2) == 1.72                     # the original's mean
    assert row.seeds == [1, 2] and round(row.mean("pass@1"), 4) == 0.7   # ours: the possible values only
    assert skipped == [f"{EXP}_3 (its pass@1 value 3.75 is outside [0, 1])"]


# Every optional line at a possible value: the pool of 3 passes and a judge, as a pooled condition writes them.
POOL = {"pool_size_mean": 3, "oracle_hit_at_k": 0.5, "accuracy_given_solvable": 0.5, "auc_questions": 2,
        "candidate_auc_per_question": 0.5, "candidate_auc_pooled": 0.5, "judge_calls_mean": 1.5,
        "judge_parse_failure_rate": 0.25}
POOL_VALUE = {"oracle_hit_at_k": 0.5, "acc_given_solvable": 0.5, "auc_per_question": 0.5, "auc_pooled": 0.5,
              "judge_calls": 1.5, "judge_parse_failure_rate": 0.25}   # what the aggregator reads of POOL
# the one optional metric that is a count per example, not a share or an AUC
RANGE = {key: "[0, inf]" if key == "judge_calls" else "[0, 1]" for key in OPTIONAL_LINES}


def pooled_log(acc=0.5) -> str:
    return log_text(acc=acc).replace("COMPLETED", "\n".join([*pool_report_lines({"extra": POOL}), "COMPLETED"]))


def with_value(text: str, key: str, value: str) -> str:
    """`text` with the optional line of `key` holding `value` (the rest of its line after the label)."""
    return re.sub(rf"^({OPTIONAL_LINES[key]})\s*\S+$", lambda m: f"{m.group(1)} {value}", text, flags=re.MULTILINE)


def _parsed(*texts):
    return [parse_log(f"{EXP}_{seed}", text) for seed, text in enumerate(texts, start=1)]


def test_every_optional_line_is_read_from_a_pooled_log():
    [row], skipped = aggregate(_parsed(pooled_log()))
    assert not skipped and set(OPTIONAL_LINES) <= set(row.values)
    assert row.values["judge_calls"] == [1.5] and row.values["auc_pooled"] == [0.5]


@pytest.mark.parametrize("key", list(OPTIONAL_LINES))
@pytest.mark.parametrize("value, problem", [
    ("7.5", "value 7.5 is outside {range}"),    # above a share's 1 (a count per example may be 7.5: below)
    ("-4", "value -4 is outside {range}"),
    ("1e999", "value is not a number"),         # float() gives inf: statistics.stdev would fail on it
    ("nan", "value is not a number"),
    ("abc", "value is not a number"),           # text, not a number (N/A is the one word for undefined)
    ("0.5abc", "value is not a number"),        # a number's first characters are no number
    (None, "line is written 2 times"),          # None: the line twice
])
def test_an_impossible_optional_metric_keeps_the_log_out(key, value, problem):
    good = pooled_log()
    if value is None:
        line = re.search(rf"^{OPTIONAL_LINES[key]}.*$", good, flags=re.MULTILINE).group(0)
        bad = good.replace(line, f"{line}\n{line}")
    else:
        bad = with_value(good, key, value)
    assert bad != good
    rows, skipped = aggregate(_parsed(good, bad, pooled_log(acc=0.7)))
    if key == "judge_calls" and value == "7.5":   # 7.5 judge calls per example is possible: counted
        assert not skipped and rows[0].values[key] == [1.5, 7.5, 1.5]
        return
    assert skipped == [f"{EXP}_2 (its {key} {problem.format(range=RANGE[key])})"]
    assert rows[0].seeds == [1, 3] and rows[0].values[key] == [POOL_VALUE[key]] * 2   # Seeds = values averaged



def test_an_undefined_optional_value_is_left_out_of_its_mean_only():
    """N/A (no solvable question, no question with both classes) is the writer's undefined value: the log
    counts, and that metric's mean is over the seeds that define it."""
    rows, skipped = aggregate(_parsed(pooled_log(), with_value(pooled_log(), "auc_pooled", "N/A")))
    assert not skipped and rows[0].seeds == [1, 2]
    assert rows[0].values["auc_pooled"] == [0.5] and rows[0].values["judge_calls"] == [1.5, 1.5]


@pytest.mark.parametrize("cut_before", ["Pass@5:", "Tokens:", "Mean Agent runs per example:"])
def test_a_log_cut_in_the_middle_of_its_metric_lines_is_skipped_and_named(cut_before):
    """A log whose metric lines stop part way (then COMPLETED, as a spliced or hand-cut file has it) lacks a
    line every writer puts there: not counted, and its first missing metric named."""
    lines = log_text().splitlines()
    cut = next(i for i, ln in enumerate(lines) if ln.startswith(cut_before))
    missing = {"Pass@5:": "pass@5", "Tokens:": "tokens", "Mean Agent runs per example:": "agent_runs"}[cut_before]
    rows, skipped = aggregate(_parsed(log_text(), "\n".join([*lines[:cut], "COMPLETED"]) + "\n"))
    assert skipped == [f"{EXP}_2 (it has no {missing} line)"] and rows[0].seeds == [1]


def test_the_command_names_an_optional_metric_of_1e999_and_writes_its_row(tmp_path, monkeypatch, capsys):
    """1e999 used to reach statistics.stdev as inf (a traceback); now the log is named and the others count."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / f"{EXP}_1.txt").write_text(pooled_log())
    (tmp_path / "logs" / f"{EXP}_2.txt").write_text(with_value(pooled_log(), "judge_calls", "1e999"))
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.stages.aggregate", ["--logs_dir", "logs", "--no_plot"])
    assert code == 0 and lines == [f"skipped 1 log(s) that cannot be counted: {EXP}_2 "
                                   "(its judge_calls value is not a number)"]
    assert f"{EXP},1," in (tmp_path / "aggregated_results.csv").read_text()
