"""The lab report's compute-matched sweep on hand-made logs: its cells, comparisons, tables and picture."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers_stage4_logs import write_stage4_log
from masprm.lab import report as lab_report, sweep_report as lab_sweep
from masprm.lab.claims import adjust
from test_lab_report import BUDGETS, QUESTIONS, ROWS

PLAN = {
    4: {("bon", "orm"): {"bon_n": 1, "step_agg": "last"}, ("sbs", "masprm"): {"b1": 1, "b2": 1},
        ("sbs", "orm"): {"b1": 1, "b2": 1}, ("mcts", "masprm"): None, ("mcts", "orm"): None},
    8: {("bon", "orm"): {"bon_n": 2, "step_agg": "last"}, ("sbs", "masprm"): {"b1": 1, "b2": 2},
        ("sbs", "orm"): {"b1": 1, "b2": 2}, ("mcts", "masprm"): None,
        ("mcts", "orm"): {"n_simulations": 1, "max_children": 3}},
}
FOLDERS = {"masprm": "checkpoints/toy-ppm", "orm": "checkpoints/toy-orm"}


def log(folder: Path, method: str, scorer: str, settings: dict, correct: dict[int, list[int]], samples: float,
        tokens: int, name: str) -> None:
    """A COMPLETED condition at each seed of `correct` (seed -> right or wrong on each of the four questions)."""
    role = "orm" if method.endswith("_orm") else "masprm"
    for seed, right in correct.items():
        records = [{"index": i, "question": q, "gold": "7", "prediction": "Answer: 7" if c else "Answer: 5",
                    "correct": bool(c), "metrics": {"pass@1": c}, "extra": {"generated_answers": []}, "error": None}
                   for i, (q, c) in enumerate(zip(QUESTIONS, right))]
        manifest = {"condition": method, "seed": seed, "definition": {
            "method": method, "settings": settings,
            "models": {"policy": {"id": "artifacts/toy/policy"}, role: {"id": FOLDERS[scorer]}}}}
        write_stage4_log(folder / f"toy_{method}_{name}_policy_{seed}", records, manifest, label=method,
                         summary={"pass@1": sum(right) / 4, "generated_tokens_total": 4 * tokens,
                                  "scorer_tokens_total": 0, "agent_runs_mean": samples})


def both(right: list[int]) -> dict[int, list[int]]:
    return {14: right, 24: right}


@pytest.fixture
def logs(tmp_path):
    log(tmp_path, "bon_orm", "orm", {"bon_n": 1, "step_agg": "last"}, both([0, 0, 0, 0]), 4.0, 150, "b1")
    log(tmp_path, "sbs_prm", "masprm", {"b1": 1, "b2": 1}, both([1, 1, 1, 1]), 4.0, 160, "s1")
    log(tmp_path, "sbs_prm", "orm", {"b1": 1, "b2": 1}, {14: [0, 1, 0, 0], 24: [0, 0, 0, 0]}, 4.0, 170, "o1")
    log(tmp_path, "bon_orm", "orm", {"bon_n": 2, "step_agg": "last"}, both([1, 1, 0, 0]), 8.0, 300, "b2")
    log(tmp_path, "sbs_prm", "masprm", {"b1": 1, "b2": 2}, both([1, 1, 1, 1]), 8.0, 310, "s2")
    log(tmp_path, "mcts_orm", "orm", {"n_simulations": 1, "max_children": 3}, both([0, 0, 0, 0]), 7.5, 280, "m1")
    # not the sweep's: another simulation count, the lab table's best-of-N (N = 8)
    log(tmp_path, "mcts_orm", "orm", {"n_simulations": 2, "max_children": 3}, both([1, 1, 1, 1]), 11.0, 400, "m2")
    log(tmp_path, "bon_orm", "orm", {"bon_n": 8, "step_agg": "last"}, both([1, 1, 1, 1]), 32.0, 1200, "b8")
    return tmp_path


def test_the_sweep_reads_each_condition_at_its_matched_setting(logs):
    cells = lab_sweep.sweep_cells([logs], ROWS, PLAN)
    assert set(cells) == {lab_sweep.key("bon", "orm", {"bon_n": 1, "step_agg": "last"}),
                          lab_sweep.key("sbs", "masprm", {"b1": 1, "b2": 1}),
                          lab_sweep.key("sbs", "orm", {"b1": 1, "b2": 1}),
                          lab_sweep.key("bon", "orm", {"bon_n": 2, "step_agg": "last"}),
                          lab_sweep.key("sbs", "masprm", {"b1": 1, "b2": 2}),
                          lab_sweep.key("mcts", "orm", {"n_simulations": 1, "max_children": 3})}
    mcts = lab_sweep.cell_of(cells, PLAN, 8, ("mcts", "orm"))
    assert mcts.mean_std() == (0.0, 0.0) and mcts.samples_mean() == 7.5 and mcts.work_mean() == 280
    assert lab_sweep.cell_of(cells, PLAN, 8, ("sbs", "orm")) is None          # planned, not run
    assert lab_sweep.cell_of(cells, PLAN, 4, ("mcts", "masprm")) is None      # nothing fits


def test_each_search_is_compared_with_best_of_n_and_the_orm_at_its_budget(logs):
    cells = lab_sweep.sweep_cells([logs], ROWS, PLAN)
    found = lab_sweep.sweep_comparisons(cells, PLAN, seed=0)
    adjust(found)
    by = {c.name: c for c in found}
    # 4 + 3 conditions with a setting (no MCTS at 4, the MASPRM's none at 8), one claim
    assert len(found) == 5 and {c.claim for c in found} == {lab_sweep.CLAIM}
    # the MASPRM's SBS 1 x 1 right everywhere, best-of-N (N = 1) nowhere: +100, every resample +100: p = 0
    sbs = by["SBS + MASPRM vs best-of-N + ORM (4 agent samples)"]
    assert (sbs.result.mean_diff, sbs.result.ci_low, sbs.result.ci_high) == (1.0, 1.0, 1.0)
    assert sbs.verdict == "holds" and sbs.adjusted_p == 0.0 and sbs.adjusted == "holds"
    assert by["SBS + ORM (prefixes) vs best-of-N + ORM (8 agent samples)"].result is None   # not run
    text = "\n".join(lab_sweep.sweep_lines(cells, PLAN, found))
    rows = {line.split(" | ")[0].strip("| "): [c.strip() for c in line.strip("|").split(" | ")[1:]]
            for line in text.splitlines() if line.startswith("| ") and "---" not in line}
    # the first table (pass@1) holds every condition; the second (differences) overwrites the search rows
    assert rows["best-of-N + ORM"] == ["0.0 ± 0.0 (2 seeds) (N=1; 4.0 samples, 150 tokens)",
                                       "50.0 ± 0.0 (2 seeds) (N=2; 8.0 samples, 300 tokens)"]
    assert "| MCTS + MASPRM | none fits | none fits |" in text
    accuracy = text.split("Against best-of-N")[0]
    assert "| SBS + ORM (prefixes) | 12.5 ± 17.7 (2 seeds) (1x1; 4.0 samples, 170 tokens) | – (1x2: not run) |" \
        in accuracy
    assert "| MCTS + ORM (leaves) | none fits | 0.0 ± 0.0 (2 seeds) (1 sim; 7.5 samples, 280 tokens) |" in accuracy
    # differences per question (mean over the two seeds), k the resampled draws of the questions that differ:
    # SBS + MASPRM at 8: (0, 0, 1, 1): mean k / 4, k ~ Bin(4, 1/2), P(k = 0) = P(k = 4) = 1/16 > 2.5%: [0, 100]
    assert rows["SBS + MASPRM"] == ["+100.0 [+100.0, +100.0] holds; Holm: holds",
                                    "+50.0 [+0.0, +100.0] inconclusive; Holm: inconclusive"]
    # SBS + ORM at 4: (0, 0.5, 0, 0): 0.5 k / 4, k ~ Bin(4, 1/4): P(k = 0) = 81/256; P(k >= 3) = 13/256 > 2.5%,
    # P(k = 4) = 1/256 < 2.5%: the upper end 0.5 x 3 / 4 = 37.5 points
    assert rows["SBS + ORM (prefixes)"] == ["+12.5 [+0.0, +37.5] inconclusive; Holm: inconclusive", "not evaluated"]
    # MCTS + ORM at 8: (-1, -1, 0, 0): -k / 4, k ~ Bin(4, 1/2): [-100, 0]
    assert rows["MCTS + ORM (leaves)"] == ["none fits", "-50.0 [-100.0, +0.0] inconclusive; Holm: inconclusive"]
    assert lab_sweep.sweep_points(cells, PLAN)["best-of-N + ORM"] == [(4.0, 0.0, 0.0), (8.0, 0.5, 0.0)]


def test_the_report_joins_the_sweep_to_the_claims_family_and_the_picture(logs, tmp_path):
    out = tmp_path / "results"
    lab_report.write_report(ROWS, [logs], out / "none.json", out / "labelbench", out / "lab.md", out / "claims.txt",
                            out / "lab.png", budgets=BUDGETS, seed=0, sweep=PLAN)
    report, claims = (out / "lab.md").read_text(), (out / "claims.txt").read_text()
    assert "\n### Compute-matched sweep\n" in report and "| condition | 4 samples | 8 samples |" in report
    # the lab's own table has no cell here (no log at its budgets but the ORM's best-of-N 8 last): the sweep's
    # 4 comparisons with a result are the Holm family, and the main table's ORM best-of-N is not the sweep's
    assert f"\n{lab_sweep.CLAIM}\n" in claims and "over the other 4 comparisons" in claims
    assert "  SBS + MASPRM vs best-of-N + ORM (4 agent samples): +100.0 points [95% CI +100.0, +100.0] over 4 " \
           "questions (holds); Holm: holds" in claims
    assert (out / "lab.png").read_bytes()[:4] == b"\x89PNG"
    lab_report.write_report(ROWS, [logs], out / "none.json", out / "labelbench", out / "lab2.md", out / "claims2.txt",
                            out / "lab2.png", budgets=BUDGETS, seed=0)   # no plan: no section
    assert "Compute-matched" not in (out / "lab2.md").read_text()
