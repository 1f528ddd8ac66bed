"""`make report`: the docs' measured tables are rewritten from the results files, never by hand."""

import json

from masprm.eval.aggregate import PlotCondition, Row
from masprm.published.blocks import demo_table, fill_blocks, main, stepbench_table


def row(method: str, budget: str, pass1: list[float], pass5: list[float], tokens: list[float], work: list[float]):
    return Row(f"toy_{method}_{budget}", method, seeds=[14, 24], condition=PlotCondition(method, budget),
               values={"pass@1": pass1, "pass@5": pass5, "tokens": tokens}, work=work)


def test_the_demo_table_lists_methods_in_order_and_budgets_by_work():
    rows = [row("mcts_prm", "10 sims", [0.30, 0.40], [0.5, 0.6], [200, 220], [900, 1100]),
            row("mcts_prm", "5 sims", [0.35, 0.35], [0.5, 0.5], [100, 100], [500, 500]),
            row("single_pass", "", [0.2, 0.2], [0.2, 0.2], [37, 37], [37, 37])]
    lines = demo_table(rows).splitlines()
    assert lines[2] == "| single_pass |  | 20.0 ± 0.0 | 20.0 | 37 | 37 |"
    assert lines[3] == "| mcts_prm | 5 sims | 35.0 ± 0.0 | 50.0 | 100 | 500 |"
    # mean 35, sample std of (30, 40) = 7.07
    assert lines[4] == "| mcts_prm | 10 sims | 35.0 ± 7.1 | 55.0 | 210 | 1000 |"


def test_the_demo_tables_rows_are_named_as_the_csv_names_them():
    # the demo's two mcts_prm rows at 10 simulations differ only in --orm_leaf: the table names it
    plain, leaf = (row("mcts_prm", "10 sims", [0.3, 0.3], [0.5, 0.5], [200, 200], [900, 900]) for _ in range(2))
    plain.condition = PlotCondition("mcts_prm", "10 sims", "plain", {"orm_leaf": False}, recorded=True)
    leaf.condition = PlotCondition("mcts_prm", "10 sims", "leaf", {"orm_leaf": True}, recorded=True)
    leaf.work = [1300, 1300]
    lines = demo_table([leaf, plain]).splitlines()
    assert [line.split(" | ")[0:2] for line in lines[2:]] == [["| mcts_prm", "10 sims"],
                                                              ["| mcts_prm --orm_leaf", "10 sims"]]


def test_the_stepbench_table_has_a_row_per_scorer_and_ece_when_reported():
    report = {"scorers": {
        "masprm": {"acc_erroneous": 0.14, "acc_correct": 0.38, "f1": 0.2077, "auc": 0.41,
                   "auc_by_agent": {"Reader": 0.48, "Planner": None}, "ece": 0.1234},
        "logprob": {"acc_erroneous": 0.72, "acc_correct": 0.67, "f1": 0.69, "auc": 0.75,
                    "auc_by_agent": {"Reader": 0.93, "Planner": 0.82}}}}
    lines = stepbench_table(report).splitlines()
    assert lines[0] == "| scorer | acc. erroneous | acc. correct | F1 | AUC | AUC Reader | AUC Planner | ECE |"
    assert lines[2] == "| MASPRM | 0.14 | 0.38 | 0.21 | 0.41 | 0.48 | n/a | 0.123 |"
    assert lines[3] == "| policy log-prob | 0.72 | 0.67 | 0.69 | 0.75 | 0.93 | 0.82 | n/a |"


def test_only_the_named_blocks_are_rewritten():
    text = ("intro\n<!-- report: a -->\nold a\n<!-- /report -->\nmiddle\n"
            "<!-- report: b -->\nold b\n<!-- /report -->\n")
    assert fill_blocks(text, {"a": "new a\n"}) == text.replace("old a", "new a")


def test_the_command_rewrites_from_the_results_and_check_says_when_docs_are_stale(tmp_path, capsys):
    docs, results = tmp_path / "docs", tmp_path / "results"
    docs.mkdir()
    results.mkdir()
    (results / "toy_demo_claims.txt").write_text("(i) claim: +1.0 points (holds)\n")
    doc = docs / "toy.md"
    doc.write_text("# Toy\n<!-- report: demo-claims -->\nstale\n<!-- /report -->\n"
                   "<!-- report: lab-table -->\nnot run yet\n<!-- /report -->\n")
    flags = ["--docs", str(docs), "--results", str(results), "--logs_dir", str(tmp_path / "nologs")]
    assert main([*flags, "--check"]) == 1 and "stale" in doc.read_text()   # --check writes nothing
    assert main(flags) == 0
    assert doc.read_text() == ("# Toy\n<!-- report: demo-claims -->\n```\n(i) claim: +1.0 points (holds)\n```\n"
                               "<!-- /report -->\n<!-- report: lab-table -->\nnot run yet\n<!-- /report -->\n")
    assert "lab-table (" in capsys.readouterr().out   # its source is missing: named, left as it is
    assert main([*flags, "--check"]) == 0


def test_an_unknown_block_name_is_refused(tmp_path, capsys):
    (tmp_path / "d.md").write_text("<!-- report: nosuch -->\nx\n<!-- /report -->\n")
    assert main(["--docs", str(tmp_path), "--results", str(tmp_path)]) == 2
    assert "unknown block(s) nosuch" in capsys.readouterr().err


def test_the_lab_table_is_copied_without_its_own_title(tmp_path):
    docs, results = tmp_path / "docs", tmp_path / "results"
    docs.mkdir()
    results.mkdir()
    (results / "toy_lab.md").write_text("# The scorer lab (toy world)\n\nintro\n\n| a |\n|---|\n| 1 |\n")
    doc = docs / "lab.md"
    doc.write_text("## Results\n<!-- report: lab-table -->\nold\n<!-- /report -->\n")
    assert main(["--docs", str(docs), "--results", str(results), "--logs_dir", str(tmp_path / "nologs")]) == 0
    assert doc.read_text() == "## Results\n<!-- report: lab-table -->\nintro\n\n| a |\n|---|\n| 1 |\n<!-- /report -->\n"


def test_the_readme_summary_marks_the_cells_make_demo_made_from_the_labs_facts(tmp_path, capsys):
    docs, results = tmp_path / "docs", tmp_path / "results"
    docs.mkdir()
    results.mkdir()
    (results / "toy_lab.md").write_text("# Lab\n\nnot read when the facts are there\n")
    columns = ["scorer", "label AUC R / P / S / V", "step F1", "step AUC R / P", "SBS pass@1 %", "MCTS pass@1 %",
               "BoN min pass@1 %"]
    cells = {"MASPRM": ["MASPRM", "0.74", "0.21", "0.48", "40.1 ± 2.0", "35.3 ± 1.2", "32.9 ± 2.5"],
             "ORM": ["ORM", "outcome only", "0.56", "0.52", "42.9 ± 1.5", "37.6 ± 2.7", "46.4 ± 1.0"],
             "mc+prm": ["mc+prm", "0.68", "0.64", "0.73", "43.1 ± 1.5", "36.8 ± 1.6", "47.1 ± 1.9"]}
    demo, lab = "logs/toy_demo", "logs/toy_lab"
    logs = {"MASPRM": {"SBS pass@1 %": demo, "MCTS pass@1 %": demo, "BoN min pass@1 %": lab},
            "ORM": {"SBS pass@1 %": demo, "MCTS pass@1 %": demo, "BoN min pass@1 %": lab},
            "mc+prm": {"SBS pass@1 %": lab, "MCTS pass@1 %": lab, "BoN min pass@1 %": lab}}
    (results / "toy_lab.json").write_text(json.dumps({
        "columns": columns, "made_by": {demo: "make demo", lab: "make lab"},
        "rows": [{"slug": k, "cells": dict(zip(columns, v)), "logs": logs[k]} for k, v in cells.items()]}))
    (results / "toy_lab_claims.json").write_text(json.dumps([
        {"name": "MASPRM vs ORM (MCTS)", "result": {"mean_diff": -0.024, "ci_low": -0.057, "ci_high": 0.008}},
        {"name": "mc+prm vs ORM (MCTS)", "result": {"mean_diff": -0.00833, "ci_low": -0.04167, "ci_high": 0.025}}]))
    (tmp_path / "README.md").write_text("<!-- report: lab-summary -->\n<!-- /report -->\n")
    assert main(["--docs", str(docs), "--results", str(results), "--logs_dir", str(tmp_path / "nologs")]) == 0
    lines = (tmp_path / "README.md").read_text().splitlines()
    assert lines[1].startswith("| scorer (†: from `make demo`, the rest from `make lab`) | label AUC")   # what † means
    assert lines[3:6] == [
        # the MASPRM's and the ORM's SBS and MCTS are the demo's, and so is the difference of their MCTS cells
        "| MASPRM | 0.74 | 0.21 | 0.48 | 40.1 ± 2.0 † | 35.3 ± 1.2 † | 32.9 ± 2.5 | -2.4 [-5.7, +0.8] † |",
        "| ORM | outcome only | 0.56 | 0.52 | 42.9 ± 1.5 † | 37.6 ± 2.7 † | 46.4 ± 1.0 | – |",
        "| mc+prm | 0.68 | 0.64 | 0.73 | 43.1 ± 1.5 | 36.8 ± 1.6 | 47.1 ± 1.9 | -0.8 [-4.2, +2.5] |"]
    assert "read the table of" not in capsys.readouterr().out


def test_the_readme_summary_keeps_a_few_lab_columns_and_adds_the_mcts_difference_to_the_orm(tmp_path, capsys):
    docs, results = tmp_path / "docs", tmp_path / "results"
    docs.mkdir()
    results.mkdir()
    (results / "toy_lab.md").write_text(
        "# Lab\n\n| scorer | scheme | label AUC R / P / S / V | step F1 | step AUC R / P | SBS pass@1 % | MCTS pass@1 % | BoN min pass@1 % |\n"
        "|---|---|---|---|---|---|---|---|\n"
        "| ORM | outcome | outcome only | 0.56 | 0.52 / 0.50 | 44.0 ± 0.6 | 37.6 ± 2.7 | 46.4 ± 1.0 |\n"
        "| mc+prm | mc | 0.68 / 0.62 / 0.87 / 0.99 | 0.64 | 0.73 / 0.71 | 41.4 ± 1.3 | 36.8 ± 1.6 | 47.1 ± 1.9 |\n")
    (results / "toy_lab_claims.json").write_text(json.dumps([
        {"name": "mc+prm vs ORM (MCTS)", "result": {"mean_diff": -0.00833, "ci_low": -0.04167, "ci_high": 0.025}},
        {"name": "mc+prm vs ORM (SBS)", "result": {"mean_diff": 0.5, "ci_low": 0.4, "ci_high": 0.6}}]))
    (tmp_path / "README.md").write_text("intro\n<!-- report: lab-summary -->\n<!-- /report -->\nend\n")
    assert main(["--docs", str(docs), "--results", str(results), "--logs_dir", str(tmp_path / "nologs")]) == 0
    assert (tmp_path / "README.md").read_text() == (
        "intro\n<!-- report: lab-summary -->\n"
        "| scorer | label AUC R / P / S / V | step F1 | step AUC R / P | SBS pass@1 % | MCTS pass@1 % | BoN min pass@1 % "
        "| MCTS vs ORM, points [95% CI] |\n"
        "|---|--:|--:|--:|--:|--:|--:|--:|\n"
        "| ORM | outcome only | 0.56 | 0.52 / 0.50 | 44.0 ± 0.6 | 37.6 ± 2.7 | 46.4 ± 1.0 | – |\n"
        "| mc+prm | 0.68 / 0.62 / 0.87 / 0.99 | 0.64 | 0.73 / 0.71 | 41.4 ± 1.3 | 36.8 ± 1.6 | 47.1 ± 1.9 | -0.8 [-4.2, +2.5] |\n"
        "<!-- /report -->\nend\n")
    # a results folder from before the table's facts: its Markdown table, unmarked, and a note saying so
    assert f"report: lab-summary: no {results / 'toy_lab.json'}" in capsys.readouterr().out


def test_the_deep_worlds_lab_has_blocks_of_its_own_marked_by_its_demo(tmp_path):
    docs, results = tmp_path / "docs", tmp_path / "results"
    docs.mkdir()
    results.mkdir()
    columns = ["scorer", "label AUC R / P / S / V", "step F1", "step AUC R / P", "SBS pass@1 %", "MCTS pass@1 %",
               "BoN min pass@1 %", "BoN last pass@1 %"]
    demo, lab = "logs/toy_deep_demo", "logs/toy_deep_lab"
    rows = [("masprm-ppm", ["MASPRM", "0.65", "0.10", "0.40", "2.4 ± 0.3", "3.8 ± 0.5", "–", "–"], demo),
            ("mc-orm", ["ORM", "outcome only", "0.30", "0.60", "20.0 ± 1.0", "30.0 ± 1.0", "–", "9.1 ± 0.4"], demo)]
    (results / "toy_deep_lab.md").write_text("# toy_deep lab\n\n| a |\n|---|\n| 1 |\n")
    (results / "toy_deep_lab_claims.txt").write_text("deep claims\n")
    (results / "toy_deep_lab.json").write_text(json.dumps({
        "columns": columns, "made_by": {demo: "make demo WORLD=toy_deep", lab: "make lab WORLD=toy_deep"},
        "rows": [{"slug": k, "cells": dict(zip(columns, v)), "logs": {"MCTS pass@1 %": d, "SBS pass@1 %": lab}}
                 for k, v, d in rows]}))
    (results / "toy_deep_lab_claims.json").write_text(json.dumps([
        {"name": "MASPRM vs ORM (MCTS)", "result": {"mean_diff": -0.262, "ci_low": -0.3, "ci_high": -0.22}}]))
    (tmp_path / "README.md").write_text("<!-- report: toy_deep-lab-summary -->\n<!-- /report -->\n")
    (docs / "lab.md").write_text("<!-- report: toy_deep-lab-table -->\n<!-- /report -->\n"
                                 "<!-- report: toy_deep-lab-claims -->\n<!-- /report -->\n"
                                 "<!-- report: lab-table -->\nthe toy world's, no source here\n<!-- /report -->\n")
    assert main(["--docs", str(docs), "--results", str(results), "--logs_dir", str(tmp_path / "nologs")]) == 0
    assert (docs / "lab.md").read_text() == (
        "<!-- report: toy_deep-lab-table -->\n| a |\n|---|\n| 1 |\n<!-- /report -->\n"
        "<!-- report: toy_deep-lab-claims -->\n```\ndeep claims\n```\n<!-- /report -->\n"
        "<!-- report: lab-table -->\nthe toy world's, no source here\n<!-- /report -->\n")
    lines = (tmp_path / "README.md").read_text().splitlines()
    assert lines[1].startswith("| scorer (†: from `make demo WORLD=toy_deep`, the rest from `make lab WORLD=toy_deep`) |")
    assert "| BoN last pass@1 % |" in lines[1] and "BoN min" not in lines[1]   # no row has a BoN min cell
    assert lines[4].startswith("| ORM | outcome only | 0.30 | 0.60 | 20.0 ± 1.0 | 30.0 ± 1.0 † | 9.1 ± 0.4 | – |")
    # the MCTS cells and their difference are the deep demo's; the SBS cells the lab's
    assert lines[3] == "| MASPRM | 0.65 | 0.10 | 0.40 | 2.4 ± 0.3 | 3.8 ± 0.5 † | – | -26.2 [-30.0, -22.0] † |"
