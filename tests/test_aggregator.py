"""Stage 5: seed logs of one experiment become one row; unfinished and FAILED logs are skipped.

The plot joins the experiments of one method (its budgets) into one curve over model work per example.
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from masprm.eval.aggregate import (PlotCondition, Row, aggregate, columns, facts_of, format_table, model_work,
                              option_flags, parse_log, read_logs, row_cells, row_names, split_experiment,
                              split_label, to_csv)
from masprm.eval.budget_plot import plot_results, plot_series, uses_model_work
from masprm.eval.methods import budget_label
from masprm.eval.logs import render_log, stable_hash

ROOT = Path(__file__).resolve().parents[1]
EXP = "gsm8k_mcts_prm_0123abcd45_Qwen_Qwen2.5-1.5B-Instruct"


def summary(acc, tokens, prm_calls=20.0, agent_runs=9.0, errors=0, n=50):
    s = {f"pass@{k}": min(1.0, acc + 0.01 * (k - 1)) for k in range(1, 11)}
    s.update(n=n, errors=errors, tokens_mean=tokens, tokens_std=3.0, tokens_n=n,
             scorer_calls_total=int(prm_calls * n), agent_runs_total=int(agent_runs * n),
             prm_calls_mean=prm_calls, agent_runs_mean=agent_runs)
    return s


def write_log(folder: Path, name: str, s: dict, *, finished=True, condition="mcts_prm"):
    header = [f"=== START {condition} | dataset=gsm8k | N={s['n']} | manifest=abc ==="]
    text = render_log(header, [], s) if finished else "\n".join(header) + "\n[progress] 3/50 acc=0.1\n"
    (folder / f"{name}.txt").write_text(text)


@pytest.fixture
def logs(tmp_path):
    write_log(tmp_path, f"{EXP}_14", summary(0.50, 100.0, prm_calls=20))
    write_log(tmp_path, f"{EXP}_24", summary(0.60, 110.0, prm_calls=22))
    write_log(tmp_path, f"{EXP}_42", summary(0.70, 120.0, prm_calls=24))
    write_log(tmp_path, "gsm8k_single_pass_99ff_Qwen_Qwen2.5-1.5B-Instruct_14", summary(0.4, 50.0, 0, 4),
              condition="single_pass")
    write_log(tmp_path, "gsm8k_single_pass_99ff_Qwen_Qwen2.5-1.5B-Instruct_24", summary(0.9, 50.0, errors=2),
              condition="single_pass")                                # FAILED
    write_log(tmp_path, "gsm8k_single_pass_99ff_Qwen_Qwen2.5-1.5B-Instruct_42", summary(0.9, 50.0),
              finished=False, condition="single_pass")                # unfinished
    return tmp_path


def test_three_seeds_make_one_row_and_bad_logs_are_skipped(logs):
    rows, skipped = aggregate(read_logs(logs))
    assert [r.experiment for r in rows] == ["gsm8k_mcts_prm_0123abcd45_Qwen_Qwen2.5-1.5B-Instruct",
                                            "gsm8k_single_pass_99ff_Qwen_Qwen2.5-1.5B-Instruct"]
    mcts, single = rows
    assert len(mcts.seeds) == 3 and sorted(mcts.seeds) == [14, 24, 42]
    assert mcts.mean("pass@1") == pytest.approx(0.6)
    assert mcts.std("pass@1") == pytest.approx(statistics.stdev([0.5, 0.6, 0.7]))   # sample std
    assert mcts.mean("pass@3") == pytest.approx(0.62) and mcts.mean("tokens") == pytest.approx(110.0)
    assert mcts.mean("prm_calls") == pytest.approx(22.0)
    assert len(single.seeds) == 1 and single.std("pass@1") == 0.0
    assert sorted(skipped) == ["gsm8k_single_pass_99ff_Qwen_Qwen2.5-1.5B-Instruct_24 (FAILED)",
                               "gsm8k_single_pass_99ff_Qwen_Qwen2.5-1.5B-Instruct_42 (unfinished)"]


def test_csv_layout_and_missing_values(tmp_path, logs):
    # the original aggregator's column names
    assert columns() == ["Experiment", "Seeds", "pass@1_mean", "pass@1_std", "pass@3_mean", "pass@5_mean",
                         "agent_runs_mean", "agent_runs_std", "prm_calls_mean", "prm_calls_std",
                         "tokens_mean", "tokens_std"]
    # a COMPLETED log with pass@1 alone lacks the lines every writer puts there: cut, so skipped and named
    (logs / "old_exp_7.txt").write_text("=== START old | dataset=x | N=1 | manifest=a ===\n"
                                        "Accuracy (pass@1): 1.0000\nCOMPLETED\n")
    rows, skipped = aggregate(read_logs(logs))
    assert "old_exp_7 (it has no pass@3 line)" in skipped
    table = list(csv.DictReader(to_csv(rows).splitlines()))
    first = table[0]
    assert first["Seeds"] == "3" and first["pass@1_mean"] == "0.6000" and first["pass@1_std"] == "0.1000"
    assert first["tokens_mean"] == "110.0000"
    # one seed: its std is 0; a FAILED seed's values are not among them
    single = next(r for r in table if r["Experiment"].startswith("gsm8k_single_pass"))
    assert single["Seeds"] == "1" and single["pass@1_std"] == "0.0000"


def test_experiment_id_drops_only_the_trailing_seed():
    assert split_experiment("toy_mcts_prm_ab12_policy_2_14") == ("toy_mcts_prm_ab12_policy_2", 14)
    assert split_experiment("no_seed_here") == ("no_seed_here", None)
    parsed = parse_log("a_b_3", "=== START sbs_prm | dataset=d | N=1 | manifest=x ===\nPass@5: 0.25\nCOMPLETED\n")
    assert parsed.label == "sbs_prm" and parsed.metrics == {"pass@5": 0.25} and parsed.status == "COMPLETED"
    assert parsed.problem == "it has no pass@1 line"


def test_cli_writes_csv_and_plot_and_reports_skips(logs, tmp_path):
    out = tmp_path / "out" / "aggregated_results.csv"
    proc = subprocess.run([sys.executable, str(ROOT / "aggregator.py"), "--logs_dir", str(logs), "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "skipped 2 log(s) that are not COMPLETED" in proc.stdout
    assert "gsm8k_mcts_prm_0123abcd45" in proc.stdout          # the printed table
    assert out.read_text().splitlines()[0].startswith("Experiment,Seeds,pass@1_mean,pass@1_std")
    png = out.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = subprocess.run([sys.executable, str(ROOT / "aggregator.py"), "--logs_dir", str(tmp_path / "nope")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--logs_dir" in bad.stderr


# --------------------------------------------------------------------------- the budget-curve plot


def write_condition(folder: Path, method: str, settings: dict, seed: int, acc: float, generated: int, scored: int,
                    n: int = 10, sidecars: bool = True) -> str:
    """A COMPLETED log with (by default) its manifest and summary sidecars, as stage 4 writes them."""
    definition = {"method": method, "settings": settings, "data": {"dataset": "toy"}, "code_version": "c0de"}
    stem = f"toy_{method}_{stable_hash(definition)}_policy"
    s = summary(acc, generated / n, n=n)
    s.update(generated_tokens_total=generated, scorer_tokens_total=scored, condition=method)
    write_log(folder, f"{stem}_{seed}", s, condition=f"{method} label")
    if sidecars:
        (folder / f"{stem}_{seed}.summary.json").write_text(json.dumps(s))
        (folder / f"{stem}_{seed}.manifest.json").write_text(
            json.dumps({"condition": method, "seed": seed, "definition": definition}))
    return stem


MCTS = {"max_children": 3, "c_uct": 2.0, "uct_type": "uct"}


@pytest.fixture
def budgets(tmp_path):
    """mcts_prm at 20, 5 and 10 simulations (two seeds each), voter_prm at k=5 and k=10 (one seed)."""
    for sims, acc in ((20, 0.8), (5, 0.4), (10, 0.6)):
        for seed, shift in ((1, -0.05), (2, 0.05)):
            write_condition(tmp_path, "mcts_prm", {**MCTS, "n_simulations": sims}, seed, acc + shift,
                            generated=100 * sims, scored=50 * sims)
    for k in (5, 10):
        write_condition(tmp_path, "voter_prm", {"voter_k": k, "top_p": 0.95}, 1, 0.3 + k / 100,
                        generated=80 * k, scored=20 * k)
    return tmp_path


def test_work_is_generated_plus_scorer_tokens_per_finished_example(budgets):
    logs = read_logs(budgets)
    mcts = [log for log in logs if log.condition.method == "mcts_prm"]
    assert sorted(log.work for log in mcts) == [75.0, 75.0, 150.0, 150.0, 300.0, 300.0]   # (100 + 50) * sims / 10
    voter = [log for log in logs if log.condition.method == "voter_prm"]
    assert sorted(log.work for log in voter) == [50.0, 100.0]                           # 100 * k / 10
    assert sorted(log.condition.budget for log in voter) == ["k=10", "k=5"]


def test_one_curve_per_method_sorted_by_work_with_budget_labels(budgets):
    rows, _ = aggregate(read_logs(budgets))
    assert uses_model_work(rows)
    series = plot_series(rows)
    assert set(series) == {"mcts_prm", "voter_prm"}
    mcts = series["mcts_prm"]
    assert [(x, budget) for x, _, _, budget in mcts] == [(75.0, "5 sims"), (150.0, "10 sims"), (300.0, "20 sims")]
    assert [y for _, y, _, _ in mcts] == pytest.approx([0.4, 0.6, 0.8])
    assert [e for _, _, e, _ in mcts] == pytest.approx([statistics.stdev([0.35, 0.45])] * 3)   # std over seeds
    assert [budget for *_, budget in series["voter_prm"]] == ["k=5", "k=10"]


def test_the_plot_is_written_and_sidecars_add_only_the_method_and_budget_columns(budgets, tmp_path):
    rows, _ = aggregate(read_logs(budgets))
    out = tmp_path / "plots" / "aggregated_results.png"
    assert plot_results(rows, out) and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = list(csv.reader(to_csv(rows).splitlines()))
    assert table[0][-2:] == ["Method", "Budget"]
    assert sorted(tuple(r[-2:]) for r in table[1:]) == [("mcts_prm", "10 sims"), ("mcts_prm", "20 sims"),
                                                        ("mcts_prm", "5 sims"), ("voter_prm", "k=10"),
                                                        ("voter_prm", "k=5")]
    assert format_table(rows).splitlines()[0].split()[-2:] == ["Method", "Budget"]   # the printed table too
    for sidecar in budgets.glob("*.json"):
        sidecar.unlink()
    bare, _ = aggregate(read_logs(budgets))
    assert list(csv.reader(to_csv(bare).splitlines())) == [r[:-2] for r in table]   # the original's columns


def test_method_and_budget_come_from_the_manifests_facts(tmp_path):
    # a method no registry knows: only the manifest's facts (a voter family, its budget key) can name its budget
    definition = {"method": "my_vote", "settings": {"voter_k": 7}, "data": {"dataset": "toy"}}
    write_log(tmp_path, "toy_my_vote_ab12_policy_1", summary(0.5, 10.0), condition="My vote")
    (tmp_path / "toy_my_vote_ab12_policy_1.manifest.json").write_text(json.dumps(
        {"condition": "my_vote", "seed": 1, "definition": definition,
         "facts": {"family": "voter", "budget_keys": ["voter_k"], "scorer_roles": [], "label": "My vote"}}))
    (row,), _ = aggregate(read_logs(tmp_path))
    assert row_cells(row, (), True)[-2:] == ["my_vote", "k=7"]


def test_without_sidecars_the_plot_falls_back_to_generated_tokens_and_label_names(tmp_path):
    for b1, tokens in ((3, 200.0), (2, 100.0)):
        (tmp_path / f"gsm8k_SBS + PRM (B1={b1}, B2=5)_x_1.txt").write_text(
            f"=== START SBS + PRM (B1={b1}, B2=5) [prm: ppm] | dataset=gsm8k | N=5 | manifest=a ===\n"
            f"Accuracy (pass@1): 0.5000\nPass@3: 0.5000\nPass@5: 0.5000\nTokens: {tokens} ± 1.0 (5 examples)\n"
            "Mean PRM calls per example: 2.00\nMean Agent runs per example: 4.00\nCOMPLETED\n")
    rows, _ = aggregate(read_logs(tmp_path))
    assert not uses_model_work(rows)
    assert plot_series(rows) == {"SBS + PRM [prm: ppm]": [(100.0, 0.5, 0.0, "B1=2, B2=5"),
                                                           (200.0, 0.5, 0.0, "B1=3, B2=5")]}
    # one log with a summary sidecar among logs without: the axis stays generated tokens for all
    write_condition(tmp_path, "mcts_prm", {**MCTS, "n_simulations": 5}, 1, 0.5, generated=100, scored=50)
    rows, _ = aggregate(read_logs(tmp_path))
    assert not uses_model_work(rows) and plot_series(rows)["mcts_prm"] == [(10.0, 0.5, 0.0, "5 sims")]


def test_curves_of_one_method_are_told_apart_by_the_settings_that_differ(tmp_path):
    for uct in ("uct", "puct"):
        for sims in (5, 10):
            write_condition(tmp_path, "mcts_prm", {**MCTS, "uct_type": uct, "n_simulations": sims}, 1, 0.5,
                            generated=10 * sims, scored=0)
    series = plot_series(aggregate(read_logs(tmp_path))[0])
    assert sorted(series) == ["mcts_prm --uct_type puct", "mcts_prm --uct_type uct"]   # as the command sets them
    assert all(len(points) == 2 for points in series.values())


def test_rows_of_one_method_and_budget_are_named_by_the_options_that_differ(tmp_path):
    # the demo's mcts_prm rows: 5 and 10 simulations, and 10 with --orm_leaf (the ORM values the leaves);
    # before, the CSV and the printed table had two rows "mcts_prm, 10 sims"
    for sims, leaf in ((5, False), (10, False), (10, True)):
        write_condition(tmp_path, "mcts_prm", {**MCTS, "n_simulations": sims, "orm_leaf": leaf}, 1, 0.3,
                        generated=10 * sims, scored=0)
    write_condition(tmp_path, "mcts_orm", {**MCTS, "n_simulations": 10, "orm_leaf": False}, 1, 0.3,
                    generated=100, scored=0)   # alone in its method: its name is the method, whatever it sets
    rows, _ = aggregate(read_logs(tmp_path))
    named = sorted(tuple(r[-2:]) for r in list(csv.reader(to_csv(rows).splitlines()))[1:])
    assert named == [("mcts_orm", "10 sims"), ("mcts_prm", "10 sims"), ("mcts_prm", "5 sims"),
                     ("mcts_prm --orm_leaf", "10 sims")]
    assert "mcts_prm --orm_leaf  10 sims" in format_table(rows)   # the printed table, its columns padded
    assert sorted(plot_series(rows)) == ["mcts_orm", "mcts_prm", "mcts_prm --orm_leaf"]   # the legend: the same
    # a value option is written with its value; a switch that is off or a setting unset is not written
    assert option_flags({"orm_leaf": True, "distinct_tries": 2, "pw_k": None, "x": False},
                        ["distinct_tries", "orm_leaf", "pw_k", "x"]) == ["--distinct_tries 2", "--orm_leaf"]


def test_rows_of_other_budgets_keep_their_methods_name_whatever_else_differs():
    # a demo whose code changed between its budget runs: 5 and 10 simulations are two series (another
    # code_version), but no two rows read the same, so each is named by its method alone
    five = Row("e1", "MCTS + logprob (N=5, 3 children)", condition=PlotCondition("mcts_logprob", "5 sims", "s1"))
    ten = Row("e2", "MCTS + logprob (N=10, 3 children)", condition=PlotCondition("mcts_logprob", "10 sims", "s2"))
    assert row_names([five, ten]) == ["mcts_logprob", "mcts_logprob"]


def test_rows_that_differ_in_no_setting_are_named_by_their_label_then_numbered():
    # two scorer folders (the definitions differ outside the settings): the labels name the folders
    a = Row("e1", "MCTS + PPM (N=5, 3 children) [prm: a]", condition=PlotCondition("mcts_prm", "5 sims", "s1"))
    b = Row("e2", "MCTS + PPM (N=5, 3 children) [prm: b]", condition=PlotCondition("mcts_prm", "5 sims", "s2"))
    c = Row("e3", "MCTS + PPM (N=5, 3 children) [prm: b]", condition=PlotCondition("mcts_prm", "5 sims", "s3"))
    assert row_names([a, b, c]) == ["mcts_prm (MCTS + PPM [prm: a])", "mcts_prm (MCTS + PPM [prm: b]) #1",
                                    "mcts_prm (MCTS + PPM [prm: b]) #2"]


def test_label_splitting_and_budget_names():
    assert split_label("SBS + PRM (B1=3, B2=5) [prm: x]") == ("SBS + PRM [prm: x]", "B1=3, B2=5")
    assert split_label("DyLAN MCTS (PUCT) + PPM (N=10, 3 children)") == ("DyLAN MCTS (PUCT) + PPM", "N=10, 3 children")
    assert split_label("Greedy + Voter (policy only, no PRM)") == ("Greedy + Voter (policy only, no PRM)", "")
    # the budget comes from the condition's facts (its family), whatever the method is called
    assert budget_label({"family": "sbs"}, {"b1": 3, "b2": 5}) == "3x5"
    assert budget_label({"family": "voter"}, {"voter_k": 10}) == "k=10"
    assert budget_label({"family": None}, {"handoff_candidates": 3}) == ""
    assert facts_of(None, "voter_plain")["budget_keys"] == ["voter_k"]     # an older manifest: the method's record
    assert facts_of({"facts": {"family": "mcts", "budget_keys": ["n_simulations"]}}, "renamed_x") == {
        "family": "mcts", "budget_keys": ["n_simulations"]}
    assert facts_of(None, "not_registered") == {}


def test_model_work_counts_finished_examples_only():
    done = {"n": 12, "errors": 2, "generated_tokens_total": 800, "scorer_tokens_total": 200}
    assert model_work(done) == 100.0
    assert model_work({**done, "errors": 12}) is None and model_work(None) is None
    assert model_work({"n": 3, "errors": 0, "tokens_mean": 5.0}) is None   # an older summary: no token totals


def test_scorer_calls_line_is_read_first_and_the_originals_line_alone_still_aggregates():
    text = render_log(["=== START mcts_prm | dataset=gsm8k | N=50 | manifest=abc ==="], [], summary(0.5, 100.0, 6.5))
    assert "Total PRM calls: 325\nTotal scorer calls: 325\n" in text
    assert "Mean PRM calls per example: 6.50\nMean scorer calls per example: 6.50\n" in text
    both = parse_log(f"{EXP}_14", text)
    old_only = parse_log(f"{EXP}_14", "\n".join(ln for ln in text.splitlines() if "scorer calls" not in ln))
    assert both.metrics["prm_calls"] == old_only.metrics["prm_calls"] == 6.5
    assert both.problem is None and old_only.problem is None
    # both there: the line named after what it counts wins
    moved = text.replace("Mean scorer calls per example: 6.50", "Mean scorer calls per example: 7.25")
    assert parse_log(f"{EXP}_14", moved).metrics["prm_calls"] == 7.25
    # each spelling is checked: a bad value in the original's line still keeps the log out
    bad = text.replace("Mean PRM calls per example: 6.50", "Mean PRM calls per example: -1.00")
    assert parse_log(f"{EXP}_14", bad).problem == "its prm_calls value -1 is outside [0, inf]"
    twice = text.replace("Mean scorer calls per example: 6.50",
                         "Mean scorer calls per example: 6.50\nMean scorer calls per example: 6.50")
    assert parse_log(f"{EXP}_14", twice).problem == "its prm_calls line is written 2 times"
