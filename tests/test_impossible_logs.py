"""Impossible logs: the aggregator counts a log only when each metric appears once, finite and in range,
and its name carries a seed; anything else is named on stderr and left out of its row."""

from __future__ import annotations

import pytest

from masprm.eval.aggregate import aggregate, read_logs

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
