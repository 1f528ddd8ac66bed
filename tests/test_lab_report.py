"""The lab's report on a handful of tiny hand-made logs: table cells, misses split, claims and the plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers_stage4_logs import write_stage4_log
from masprm.lab.rows import LabScorer
from masprm.lab import cells as lab_cells, report as lab_report

ROWS = [LabScorer("masprm", "ppm", demo_folder="checkpoints/toy-ppm"),
        LabScorer("mc", "orm", demo_folder="checkpoints/toy-orm"),
        LabScorer("mc", "prm")]
QUESTIONS = [f"q{i}" for i in range(4)]
BUDGETS = {"sbs": {"b1": 3, "b2": 5}, "mcts": {"n_simulations": 10, "max_children": 3}, "bon": {"bon_n": 8}}
SETTINGS = {"SBS": ("sbs", {"b1": 3, "b2": 5}), "MCTS": ("mcts", {"n_simulations": 10, "max_children": 3}),
            "MCTS 5": ("mcts", {"n_simulations": 5, "max_children": 3}),
            "BoN min": ("bon", {"bon_n": 8, "step_agg": "min"}), "BoN last": ("bon", {"bon_n": 8, "step_agg": "last"})}


def write_log(folder: Path, column: str, kind: str, scorer: str | None, seed: int, correct: list[int],
              generated: list[list[str]] | None = None, work: tuple[int, int] = (100, 50), fingerprint="f0"):
    """One COMPLETED condition of four questions, written by stage 4's writer (helpers_stage4_logs.write_stage4_log)."""
    family, settings = SETTINGS[column] if column in SETTINGS else (column, {})
    method = f"{family}_{kind}" if kind else family
    role = {"prm": "masprm", "orm": "orm"}.get(kind)
    models = {"policy": {"id": "artifacts/toy/policy"}, **({role: {"id": scorer}} if role else {})}
    generated = generated or [["Answer: 7"] if c else ["Answer: 5"] for c in correct]
    records = [{"index": i, "question": q, "gold": "7", "prediction": "Answer: 7" if c else "Answer: 5",
                "correct": bool(c), "metrics": {"pass@1": c}, "extra": {"generated_answers": g}, "error": None}
               for i, (q, c, g) in enumerate(zip(QUESTIONS, correct, generated))]
    manifest = {"condition": method, "seed": seed,
                "definition": {"method": method, "settings": settings, "models": models}}
    write_stage4_log(folder / f"toy_{method}_{fingerprint}_policy_{seed}", records, manifest, label=method,
                     summary={"pass@1": sum(correct) / 4, "generated_tokens_total": 4 * work[0],
                              "scorer_tokens_total": 4 * work[1], "agent_runs_mean": work[0] / 25, "label": method})


@pytest.fixture
def logs(tmp_path):
    """The lab's logs folder and the demo's (the MASPRM's SBS and MCTS, the single pass, another budget)."""
    folder, demo = tmp_path / "logs", tmp_path / "demo_logs"
    folder.mkdir()
    demo.mkdir()
    for seed in (14, 24):
        # SBS: the MASPRM 2/4 then 1/4, the ORM (valuing prefixes, as the prm role) never, mc+prm always
        write_log(demo, "SBS", "prm", "checkpoints/toy-ppm", seed, [1, 1, 0, 0] if seed == 14 else [1, 0, 0, 0])
        write_log(demo, "MCTS 5", "prm", "checkpoints/toy-ppm", seed, [1, 1, 1, 1], fingerprint="f5")   # left out
        write_log(folder, "SBS", "prm", "checkpoints/toy-orm", seed, [0, 0, 0, 0], fingerprint="f1")
        write_log(folder, "SBS", "prm", "checkpoints/toy-lab-mc-prm", seed, [1, 1, 1, 1], fingerprint="f2")
        # MCTS: mc+prm misses everything; seed 14 had 7 among its answers, seed 24 never; the ORM gets one
        write_log(folder, "MCTS", "prm", "checkpoints/toy-lab-mc-prm", seed, [0, 0, 0, 0],
                  [["Answer: 5", "Answer: 7"]] * 4 if seed == 14 else [["Answer: 5"]] * 4, work=(300, 900))
        write_log(folder, "MCTS", "orm", "checkpoints/toy-orm", seed, [1, 0, 0, 0], work=(300, 100))
        write_log(demo, "MCTS", "prm", "checkpoints/toy-ppm", seed, [1, 0, 0, 0], fingerprint="f3")
        write_log(folder, "BoN min", "logprob", None, seed, [0, 1, 0, 1], work=(400, 200))
        write_log(demo, "single_pass", "", None, seed, [0, 0, 1, 1])
    (folder / "toy_bon_prm_f9_policy_14.txt").write_text("=== START x ===\n")   # unfinished: ignored
    return [demo, folder]


def test_cells_hold_accuracy_work_and_misses_per_row_and_column(logs):
    cells = lab_report.read_cells(logs, ROWS, BUDGETS)
    assert set(cells) == {("masprm-ppm", "SBS"), ("mc-orm", "SBS"), ("mc-prm", "SBS"), ("mc-prm", "MCTS"),
                          ("mc-orm", "MCTS"), ("masprm-ppm", "MCTS"), ("logprob", "BoN min"),
                          ("logprob", "single pass")}
    masprm = cells[("masprm-ppm", "SBS")]
    assert masprm.folder == logs[0] and cells[("masprm-ppm", "MCTS")].mean_std() == (0.25, 0.0)   # 10 sims, not 5
    mean, std = masprm.mean_std()
    assert sorted(masprm.seeds) == [14, 24] and mean == 0.375 and std == pytest.approx(0.125 * 2 ** 0.5)
    mcts = cells[("mc-prm", "MCTS")]
    assert mcts.work_mean() == 1200 and mcts.misses == {"hits": 0, "not_generated": 4, "not_chosen": 4, "unknown": 0}


def test_the_table_has_one_row_per_scorer_and_the_logprob(logs, tmp_path):
    stepbench = {"scorers": {"mc-prm": {"f1": 0.7125, "ece": 0.05, "auc_by_agent": {"Reader": 0.9, "Planner": 0.8},
                                        "outcome_auc": 0.834}}}
    labels = {"mc": {"auc_by_agent": {"Reader": 0.61, "Planner": 0.55, "Solver": 0.8, "Verifier": 0.7}}}
    text = lab_report.report_text(ROWS, lab_report.read_cells(logs, ROWS, BUDGETS), stepbench, labels,
                                  lab_report.read_cells(logs, ROWS, BUDGETS)[("logprob", "single pass")], BUDGETS,
                                  ["x: left out"])
    rows = {line.split(" | ")[0].strip("| "): line.strip("|").split(" | ") for line in text.splitlines()
            if line.startswith("| ") and "---" not in line}
    assert list(rows) == ["scorer", "MASPRM", "ORM", "mc+prm", "policy log-prob"]
    mc = [cell.strip() for cell in rows["mc+prm"]]
    assert mc[1:8] == ["mc", "prm", "0.61 / 0.55 / 0.80 / 0.70", "0.71", "–", "0.05", "0.90 / 0.80"]
    assert mc[8:12] == ["100.0 ± 0.0 (2 seeds)", "0.0 ± 0.0 (2 seeds)", "–", "–"]
    assert mc[12] == "150 / 1200 / – / –"                       # model work per question
    assert mc[13] == "4.0 / 12.0 / – / –"                       # agent samples per question (the fixture's
    # generated tokens / 25: SBS 100, MCTS 300)
    assert mc[14] == "0 / 0 · 50 / 50 · – · –"                  # SBS has no miss; MCTS half never generated
    assert [c.strip() for c in rows["ORM"][1:8]] == ["outcome", "orm", "outcome only", "–", "–", "–", "–"]
    assert rows["MASPRM"][8].strip() == "37.5 ± 17.7 (2 seeds)"
    assert "Single pass, no scorer: 50.0 ± 0.0 (2 seeds) %." in text and "- not run: x: left out" in text
    assert "(train questions; what best-of-N asks of it): mc+prm 0.83." in text


def test_claims_compare_every_scorer_with_the_orm_and_the_masprm(logs):
    found = {c.name: c for c in lab_report.comparisons(ROWS, lab_report.read_cells(logs, ROWS, BUDGETS), seed=0)}
    # mc+prm is right on every question where the ORM (and the MASPRM, under MCTS) is not: +100 everywhere
    sbs = found["mc+prm vs ORM (SBS)"]
    assert sbs.verdict == "holds" and sbs.result.mean_diff == 1.0 and (sbs.result.ci_low, sbs.result.ci_high) == (1, 1)
    # under MCTS it is wrong on q0 where the MASPRM is right: -25, but 81/256 resamples leave q0 out: CI up to 0
    mcts = found["mc+prm vs MASPRM (MCTS)"]
    assert mcts.result.mean_diff == -0.25 and mcts.result.ci_high == 0.0 and mcts.verdict == "inconclusive"
    # the MASPRM against the ORM under SBS: per question 1, 0.5, 0, 0 against 0: +37.5, and a resample of
    # only q2 and q3 (1 in 16) is 0, so the CI reaches 0
    masprm = found["MASPRM vs ORM (SBS)"]
    assert masprm.result.mean_diff == 0.375 and masprm.result.ci_low == 0.0 and masprm.verdict == "inconclusive"
    assert found["mc+prm vs ORM (BoN min)"].verdict == "not evaluated"  # neither has a BoN log
    assert "policy log-prob vs ORM (BoN last)" in found and "ORM vs ORM (SBS)" not in found
    text = lab_report.claims_text(list(found.values()))
    assert "\nvs ORM\n" in text and "\nvs MASPRM\n" in text
    assert "  mc+prm vs ORM (SBS): +100.0 points [95% CI +100.0, +100.0] over 4 questions (holds)" in text


def test_a_family_against_the_orm_alone_shows_the_masprm_comparisons_untested(logs):
    """toy_deep's pre-registered family: of the 8 comparisons with results, the 4 against the MASPRM are shown
    only, so Holm runs over the 3 against the ORM that are not the primary."""
    found = {c.name: c for c in lab_report.comparisons(ROWS, lab_report.read_cells(logs, ROWS, BUDGETS), seed=0,
                                                       masprm_tested=False)}
    family = sorted(c.name for c in found.values() if c.adjusted_p is not None)
    assert family == ["MASPRM vs ORM (SBS)", "mc+prm vs ORM (MCTS)", "mc+prm vs ORM (SBS)"]
    assert not found["mc+prm vs MASPRM (MCTS)"].tested and found["mc+prm vs MASPRM (MCTS)"].adjusted_p is None
    # mc+prm vs ORM (SBS): p = 0 stays 0 after Holm over 3
    assert found["mc+prm vs ORM (SBS)"].adjusted_p == 0.0 and found["MASPRM vs ORM (MCTS)"].primary


def test_the_primary_is_tested_alone_and_the_rest_under_holm(logs):
    found = {c.name: c for c in lab_report.comparisons(ROWS, lab_report.read_cells(logs, ROWS, BUDGETS), seed=0)}
    primary = found["MASPRM vs ORM (MCTS)"]
    assert primary.primary and primary.adjusted_p is None and primary.adjusted == primary.verdict
    # with results: SBS and MCTS, each row against the other two (the log-prob has BoN logs only, where no
    # baseline has one): 2 columns x 2 baselines x 2 rows = 8 comparisons, the primary outside -> a family of 7
    family = [c for c in found.values() if c.adjusted_p is not None]
    assert len(family) == 7
    # mc+prm vs ORM (SBS): every resampled mean is +1, so p = 0 and Holm keeps it (0 x 7 = 0)
    sbs = found["mc+prm vs ORM (SBS)"]
    assert sbs.result.p_value == 0.0 and sbs.adjusted_p == 0.0 and sbs.adjusted == "holds"
    assert sbs.lab_line().endswith("(holds); Holm: holds; MDE 0.0")
    # MASPRM vs ORM (SBS): a mean of 0 needs a resample of q2 and q3 only (1 in 16), so p ~ 2/16 and the
    # adjusted p is at least that: inconclusive both ways
    masprm = found["MASPRM vs ORM (SBS)"]
    assert masprm.result.p_value == pytest.approx(2 / 16, abs=0.02) and masprm.adjusted == "inconclusive"
    # mc+prm vs MASPRM (MCTS), -25 points: no resampled mean reaches +2 points, so it is "not better by more
    # than 2", but most resamples hold q0 (-100 for it): not equivalent
    line = found["mc+prm vs MASPRM (MCTS)"].lab_line()
    assert "; Holm: inconclusive; not better by more than 2 points; MDE " in line
    text = lab_report.claims_text(list(found.values()))
    assert "Primary (fixed in advance): MASPRM vs ORM (MCTS)" in text and "over the other 7 comparisons" in text
    assert "  MASPRM vs ORM (MCTS): " in text and "; primary; " in text


def test_write_report_writes_the_three_outputs(logs, tmp_path):
    out = tmp_path / "results"
    lab_report.write_report(ROWS, logs, out / "none.json", out / "labelbench", out / "lab.md", out / "claims.txt",
                            out / "lab.png", budgets=BUDGETS, seed=0)
    assert "- SBS 3x5 and MCTS with 10 simulations" in (out / "lab.md").read_text()
    assert "- power: the minimum detectable difference against the ORM at 80% power" in (out / "lab.md").read_text()
    claims = json.loads((out / "claims.json").read_text())
    assert {"primary", "holm_p", "holm_verdict", "p_value", "mde"} <= set(claims[0])
    assert (out / "lab.md").read_text().startswith("# The scorer lab")
    assert json.loads((out / "claims.json").read_text())[0]["claim"] == "vs ORM"
    assert (out / "lab.png").read_bytes()[:4] == b"\x89PNG"
    points = lab_report.plot_points(ROWS, lab_report.read_cells(logs, ROWS, BUDGETS))
    assert ("mc+prm", "MCTS", 1200.0, 0.0, 0.0) in points and len(points) == 7


def test_the_tables_facts_say_which_command_made_each_cell_and_the_readme_marks_the_demos(logs, tmp_path, capsys):
    from masprm.published.blocks import DEMO_NOTE, main as report
    out = tmp_path / "results"
    lab_report.write_report(ROWS, logs, out / "none.json", out / "labelbench", out / "toy_lab.md",
                            out / "toy_lab_claims.txt", out / "toy_lab.png", budgets=BUDGETS, seed=0,
                            made_by={str(logs[0]): "make demo", str(logs[1]): "make lab"})
    facts = json.loads((out / "toy_lab.json").read_text())
    by_slug = {row["slug"]: row for row in facts["rows"]}
    # the MASPRM's SBS and MCTS are the demo's conditions; the ORM's and the log-prob's BoN the lab's
    assert by_slug["masprm-ppm"]["logs"] == {"SBS pass@1 %": str(logs[0]), "MCTS pass@1 %": str(logs[0])}
    assert by_slug["mc-orm"]["logs"] == {"SBS pass@1 %": str(logs[1]), "MCTS pass@1 %": str(logs[1])}
    assert by_slug["logprob"]["logs"] == {"BoN min pass@1 %": str(logs[1])}
    markdown = (out / "toy_lab.md").read_text().splitlines()   # the same cells as the Markdown table
    assert all("| " + " | ".join(row["cells"][c] for c in facts["columns"]) + " |" in markdown
               for row in facts["rows"])
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("<!-- report: lab-summary -->\n<!-- /report -->\n")
    assert report(["--docs", str(tmp_path / "docs"), "--results", str(out), "--logs_dir", str(tmp_path / "x")]) == 0
    assert "read the table of" not in capsys.readouterr().out   # the facts, not the Markdown
    lines = (tmp_path / "README.md").read_text().splitlines()
    masprm = next(ln for ln in lines if ln.startswith("| MASPRM |")).split(" | ")
    orm = next(ln for ln in lines if ln.startswith("| ORM |")).split(" | ")
    assert [c.endswith(" †") for c in masprm[4:7]] == [True, True, False]   # SBS, MCTS: the demo's; BoN: none
    assert not any(c.endswith("†") for c in orm) and not masprm[7].endswith("†")   # the ORM's MCTS is the lab's
    assert lines[1].startswith(f"| {DEMO_NOTE.format(demo='make demo', lab='make lab')} |")


def test_the_orm_leaf_run_and_the_oracles_have_rows_of_their_own():
    def place(method, settings, models=None):
        return lab_cells.condition_place({"condition": method, "definition": {"settings": settings,
                                                                             "models": models or {}}},
                                         ROWS, BUDGETS)
    mcts = {"n_simulations": 10, "max_children": 3}
    leaf = {"masprm": {"id": "checkpoints/toy-ppm"}, "orm": {"id": "checkpoints/toy-orm"}}
    # the MASPRM's MCTS with the ORM on its leaves is not the MASPRM's MCTS cell
    assert place("mcts_prm", {**mcts, "orm_leaf": True}, leaf) == (lab_report.ORM_LEAF, "MCTS")
    assert place("mcts_prm", {**mcts, "orm_leaf": False}, leaf) == ("masprm-ppm", "MCTS")
    assert place("mcts_prm", {**mcts, "orm_leaf": True}, {"masprm": {"id": "checkpoints/toy-lab-mc-prm"}}) is None
    assert place("sbs_oracle_step", {"b1": 3, "b2": 5}) == ("oracle_step", "SBS")
    assert place("bon_oracle_outcome", {"bon_n": 8, "step_agg": "last"}) == ("oracle_outcome", "BoN last")
    assert place("mcts_oracle_step", {"n_simulations": 5, "max_children": 3}) is None   # another budget


def test_rows_that_did_not_run_leave_no_line(logs):
    found = lab_report.comparisons(ROWS, lab_report.read_cells(logs, ROWS, BUDGETS), seed=0)
    assert not [c for c in found if c.name.startswith(("oracle", "MASPRM + ORM leaf"))]
    table = lab_report.table_lines(ROWS, lab_report.read_cells(logs, ROWS, BUDGETS), None, {})
    assert not [line for line in table if line.startswith(("| oracle", "| MASPRM + ORM leaf"))]


def test_step_cells_show_the_benchmarks_intervals_where_it_has_them():
    bench = {"scorers": {"a": {"f1": 0.64, "ece": 0.36, "auc_by_agent": {"Reader": 0.73, "Planner": 0.71},
                               "f1_ci": [0.6, 0.68], "auc_by_agent_ci": {"Reader": [0.7, 0.76], "Planner": None},
                               "f1_by_agent_thresholds": 0.66},
                         "old": {"f1": 0.5, "ece": 0.1, "auc_by_agent": {"Reader": 0.5, "Planner": 0.5}}}}
    assert lab_report.step_cells(bench, "a") == ["0.64 [0.60, 0.68]", "0.66", "0.36", "0.73 [0.70, 0.76] / 0.71"]
    assert lab_report.step_cells(bench, "old") == ["0.50", "–", "0.10", "0.50 / 0.50"]   # from before the CIs


def test_headroom_recovered_against_the_step_oracle(logs):
    # the step oracle under MCTS is right everywhere; the ORM only on q0 in both seeds: a gap of +75 points
    # (q1-q3), whose CI stays above 0 (a resample needs 3 of 4 draws on q0 to reach 25: 13/256 > 2.5%,
    # and all four, 1/256, to reach 0). mc+prm is wrong everywhere: -25 / 75 = -33%; the MASPRM equals the
    # ORM under MCTS: 0%
    for seed in (14, 24):
        write_log(logs[1], "MCTS", "oracle_step", None, seed, [1, 1, 1, 1], fingerprint="f7")
    lines = lab_report.headroom_lines(ROWS, lab_report.read_cells(logs, ROWS, BUDGETS), seed=0)
    assert lines[1].startswith("headroom recovered: (row - ORM) / (step oracle - ORM)")
    assert any(line.startswith("  mc+prm (MCTS): -33% [") and line.endswith("of the step oracle's +75.0 points "
                                                                          "over the ORM") for line in lines)
    assert any(line.startswith("  MASPRM (MCTS): +0% [") for line in lines)
    assert not any("(SBS)" in line for line in lines)   # no step oracle under SBS
    # the table's column: per resample mc+prm's ratio is -k / (4 - k), k the draws of q0 (k = 4 leaves no room
    # and is left out): k = 3 (12/255 of the kept resamples, above 2.5%) gives the lower end -300%, k = 0
    # (81/255) the upper end 0
    cells = lab_report.read_cells(logs, ROWS, BUDGETS)
    rooms = lab_report.headrooms(ROWS, cells, seed=0)
    assert set(rooms) == {"MCTS"} and set(rooms["MCTS"]) == {"masprm-ppm", "mc-prm"}   # the ORM is the base
    head, records = lab_report.table_records(ROWS, cells, None, {}, rooms)
    column = {r["slug"]: r["cells"]["headroom recovered %: SBS / MCTS / BoN min / BoN last"] for r in records}
    assert column["mc-prm"] == "– / -33 [-300, +0] / – / –"
    assert column["masprm-ppm"] == "– / +0 [+0, +0] / – / –"
    assert column["mc-orm"] == column["logprob"] == column["oracle_step"] == "– / – / – / –"
    # no headroom: an ORM as good as the step oracle under MCTS leaves the cells "no headroom"
    for seed in (14, 24):
        write_log(logs[1], "MCTS", "orm", "checkpoints/toy-orm", seed, [1, 1, 1, 1], fingerprint="f8")
    cells = lab_report.read_cells(logs, ROWS, BUDGETS)
    _, records = lab_report.table_records(ROWS, cells, None, {}, lab_report.headrooms(ROWS, cells, seed=0))
    assert records[2]["cells"]["headroom recovered %: SBS / MCTS / BoN min / BoN last"] == "– / no headroom / – / –"


def test_rows_trained_at_several_seeds_are_compared_by_the_two_level_bootstrap(logs, tmp_path):
    from masprm.paired_stats import two_level_bootstrap

    rows = [*ROWS, *(row.replica(7) for row in ROWS)]
    lab_logs = logs[1]
    for seed in (14, 24):   # training seed 7 under MCTS: mc+prm right on q0 and q1, its ORM never
        write_log(lab_logs, "MCTS", "prm", "checkpoints/toy-lab-mc-prm-s7", seed, [1, 1, 0, 0], fingerprint="g1")
        write_log(lab_logs, "MCTS", "orm", "checkpoints/toy-lab-mc-orm-s7", seed, [0, 0, 0, 0], fingerprint="g2")
    cells = lab_report.read_cells(logs, rows, BUDGETS)
    assert ("mc-prm_s7", "MCTS") in cells and ("mc-orm_s7", "MCTS") in cells
    found = {c.name: c for c in lab_report.comparisons(rows, cells, seed=0)}
    claim = found["mc+prm vs ORM (MCTS)"]
    # per question a - b: seed 42 (-1, 0, 0, 0) (the fixture), seed 7 (1, 1, 0, 0): the mean over both seeds
    # and the four questions is (-1 + 2) / 8 = +12.5 points; seed 42 alone says -25
    assert claim.result.mean_diff == pytest.approx(0.125) and claim.result.n_seeds == 2 and claim.train_seeds == 2
    per_seed_a = [{"q0": 0.0, "q1": 0.0, "q2": 0.0, "q3": 0.0}, {"q0": 1.0, "q1": 1.0, "q2": 0.0, "q3": 0.0}]
    per_seed_b = [{"q0": 1.0, "q1": 0.0, "q2": 0.0, "q3": 0.0}, {"q0": 0.0, "q1": 0.0, "q2": 0.0, "q3": 0.0}]
    assert claim.result == two_level_bootstrap(per_seed_a, per_seed_b, seed=0)
    assert claim.lab_line().endswith("; 2 training seeds")
    # a row without its replica's runs stays at one seed: the MASPRM (no seed-7 log) against the ORM
    assert found["MASPRM vs ORM (MCTS)"].train_seeds == 1
    # the table keeps one line per row (the lab's --seed); the replicas feed the claims only
    lab_report.write_report(rows, logs, tmp_path / "none.json", tmp_path, tmp_path / "t.md", tmp_path / "c.txt",
                            tmp_path / "p.png", budgets=BUDGETS, seed=0)
    assert (tmp_path / "t.md").read_text().count("| mc+prm |") == 1
    assert "mc+prm vs ORM (MCTS): +12.5 points" in (tmp_path / "c.txt").read_text()


def test_the_held_out_outcome_auc_of_each_traj_scorer_is_a_line_under_the_table(logs, tmp_path, monkeypatch):
    """The AUC a traj scorer's training recorded on its eval split (issue 34 item 7), read from its folder; a row
    whose folder has none (another objective, an older scorer) is left out of the line."""
    monkeypatch.chdir(tmp_path)
    rows = [*ROWS, LabScorer("mc", "traj", "min"), LabScorer("mc", "traj", "prod")]
    folder = tmp_path / rows[3].folder
    folder.mkdir(parents=True)
    (folder / "masprm_scorer.json").write_text(json.dumps({"objective": "traj", "eval_metrics": {"eval_auc": 0.6875}}))
    text = lab_report.report_text(rows, lab_report.read_cells(logs, rows, BUDGETS), None, {}, None, BUDGETS, [])
    line = next(x for x in text.splitlines() if x.startswith("- held-out outcome AUC"))
    assert line.endswith("(the calibration split; its kept checkpoint has the highest): mc+traj-min 0.69.")
    assert "outcome AUC: each scorer's" not in text   # no step benchmark: no calibration-transcript line


def test_an_exploratory_lab_has_no_primary_and_puts_every_comparison_under_holm(logs):
    """`primary=False` (toy_deep's exploratory family): the MASPRM against the ORM under MCTS joins the family,
    so Holm runs over all 8 comparisons with results, and the claims say there is no primary."""
    found = {c.name: c for c in lab_report.comparisons(ROWS, lab_report.read_cells(logs, ROWS, BUDGETS), seed=0,
                                                       primary=False)}
    mcts = found["MASPRM vs ORM (MCTS)"]
    assert not mcts.primary and mcts.adjusted_p is not None and mcts.adjusted_p >= mcts.result.p_value
    assert sum(c.adjusted_p is not None for c in found.values()) == 8
    text = lab_report.claims_text(list(found.values()))
    assert "Primary (fixed in advance)" not in text and "over all 8 comparisons" in text and "; primary; " not in text


def test_the_picture_gives_every_scorer_its_own_colour_past_twenty_rows():
    # toy_deep's exploratory table has 22 rows: one palette of 20 repeated gave the two oracles the MASPRM's
    # and the ORM's colours; and a 61st scorer is refused, never coloured like the first
    colours = lab_report.distinct_colours(22)
    assert len(set(colours)) == 22
    assert colours[:20] == lab_report.distinct_colours(20)
    with pytest.raises(ValueError, match="61 scorers"):
        lab_report.distinct_colours(61)
