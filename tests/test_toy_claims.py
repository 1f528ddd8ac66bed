"""The paper's three claims on a hand-written logs folder: finding conditions, verdicts, the report, the CLI.

The folder holds 20 questions and 3 seeds per experiment, chosen so that:
- (i)   mcts_prm is right on every question in every seed, mcts_orm on a third of the seeds of each
        question: +66.7 points on every question, at 5 and at 10 simulations (holds);
- (ii)  sbs_prm and sbs_logprob, and mcts_prm and mcts_logprob, have the same pass@1 (inconclusive);
- (iii) sbs_prm's pass@5 equals its pass@1 (gap 0) where sbs_logprob's pass@5 is 1 (gap 1 on the
        10 questions it misses at pass@1): A's gap is SMALLER, the claim holds; under MCTS both gaps are 0.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers_stage4_logs import write_stage4_log
from masprm.instruments import claims

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [f"Question {i}: how many?" for i in range(20)]
SEEDS = (1, 2, 3)
MCTS = {"mcts_prm", "mcts_orm", "mcts_logprob"}


def experiment(method: str, budget: dict, tag: str = "") -> str:
    """A stage-4 experiment name (no seed): dataset, method, a fingerprint-like tag, the model."""
    return f"toy_{method}_{'_'.join(f'{k}{v}' for k, v in budget.items())}{tag}_policy"


def record(index: int, question: str, p1: int, p5: int) -> dict:
    metrics = {f"pass@{k}": (p1 if k < 5 else p5) for k in range(1, 11)}
    return {"index": index, "question": question, "gold": "1", "prediction": "1" if p1 else "2",
            "correct": bool(p1), "metrics": {**metrics, "generated_tokens": 5, "scorer_tokens": 0}, "error": None}


def write_seed(folder: Path, method: str, budget: dict, seed: int, hits, *, tag: str = "",
               status: str | None = "COMPLETED", mtime: float | None = None) -> str:
    """One seed's condition as stage 4 writes it (COMPLETED, FAILED with one error, unfinished for None).

    ``hits(i, seed) -> (pass@1, pass@5)`` for question i.
    """
    name = experiment(method, budget, tag)
    stem = folder / f"{name}_{seed}"
    records = [record(i, q, *hits(i, seed)) for i, q in enumerate(QUESTIONS)]
    passes = {f"pass@{k}": sum(r["metrics"][f"pass@{k}"] for r in records) / len(records) for k in range(1, 11)}
    settings = {"temperature": 0.7, "top_p": 0.95, **budget}
    manifest = {"condition": method, "fingerprint": name.split("_")[-2], "seed": seed,
                "definition": {"method": method, "settings": settings, "data": {"dataset": "toy"}}}
    write_stage4_log(stem, records, manifest, label=method, summary=passes, finished=status is not None,
                     errors=int(bool(status) and status.startswith("FAILED")))
    log = Path(f"{stem}.txt")
    if mtime is not None:
        os.utime(log, (mtime, mtime))
    return name


def write_experiment(folder: Path, method: str, budget: dict, hits, **kw) -> str:
    return [write_seed(folder, method, budget, s, hits, **kw) for s in SEEDS][0]


def always(i, seed):
    return 1, 1


def orm_hits(i, seed):       # right in one seed of three on every question
    return int((i + seed) % 3 == 0), int((i + seed) % 3 == 0)


def even_only(i, seed):      # pass@1 on the even questions, and nothing more at pass@5 (gap 0)
    return int(i % 2 == 0), int(i % 2 == 0)


def even_then_all(i, seed):  # the same pass@1, but pass@5 everywhere (gap 1 on the odd questions)
    return int(i % 2 == 0), 1


NOW = 1_700_000_000.0


@pytest.fixture
def logs(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    for n in (5, 10):
        write_experiment(folder, "mcts_prm", {"n_simulations": n}, always, mtime=NOW)
        write_experiment(folder, "mcts_orm", {"n_simulations": n}, orm_hits, mtime=NOW)
    write_experiment(folder, "mcts_logprob", {"n_simulations": 10}, always, mtime=NOW)
    write_experiment(folder, "sbs_prm", {"b1": 3, "b2": 5}, even_only, mtime=NOW)
    write_experiment(folder, "sbs_logprob", {"b1": 3, "b2": 5}, even_then_all, mtime=NOW)
    # Older runs of the same conditions with other code: the newest experiment wins, so they are not read.
    write_experiment(folder, "mcts_orm", {"n_simulations": 10}, always, tag="_old", mtime=NOW - 3600)
    write_experiment(folder, "sbs_logprob", {"b1": 3, "b2": 5}, even_only, tag="_old", mtime=NOW - 3600)
    # A newer run that did not finish (no status line) or failed: not COMPLETED, so not a candidate.
    write_experiment(folder, "mcts_prm", {"n_simulations": 10}, lambda i, s: (0, 0), tag="_cut", status=None,
                     mtime=NOW + 3600)
    write_experiment(folder, "mcts_orm", {"n_simulations": 5}, always, tag="_bad",
                     status="FAILED", mtime=NOW + 3600)
    # A budget the README does not evaluate (sbs at 2x4): found, but not compared.
    write_experiment(folder, "sbs_prm", {"b1": 2, "b2": 4}, always, mtime=NOW)
    return folder


def test_experiments_finds_each_method_and_budget_once_the_newest_completed_wins(logs):
    table = claims.experiments(logs)
    assert table == {
        ("mcts_prm", (("n_simulations", 5),)): experiment("mcts_prm", {"n_simulations": 5}),
        ("mcts_prm", (("n_simulations", 10),)): experiment("mcts_prm", {"n_simulations": 10}),
        ("mcts_orm", (("n_simulations", 5),)): experiment("mcts_orm", {"n_simulations": 5}),
        ("mcts_orm", (("n_simulations", 10),)): experiment("mcts_orm", {"n_simulations": 10}),
        ("mcts_logprob", (("n_simulations", 10),)): experiment("mcts_logprob", {"n_simulations": 10}),
        ("sbs_prm", (("b1", 3), ("b2", 5))): experiment("sbs_prm", {"b1": 3, "b2": 5}),
        ("sbs_prm", (("b1", 2), ("b2", 4))): experiment("sbs_prm", {"b1": 2, "b2": 4}),
        ("sbs_logprob", (("b1", 3), ("b2", 5))): experiment("sbs_logprob", {"b1": 3, "b2": 5}),
    }
    # The newest log decides: touching an old seed log makes the old run the newest.
    old = logs / f"{experiment('mcts_orm', {'n_simulations': 10}, '_old')}_2.txt"
    os.utime(old, (NOW + 60, NOW + 60))
    assert claims.experiments(logs)[("mcts_orm", (("n_simulations", 10),))].endswith("_old_policy")


def lines_of(logs) -> list[str]:
    return claims.report(list(claims.comparisons(logs, seed=0))).splitlines()


def test_the_report_gives_each_claim_its_verdicts(logs):
    lines = lines_of(logs)
    assert lines[0] == claims.TITLES["i"]
    assert lines[1] == ("  mcts_prm vs mcts_orm (5 simulations): +66.7 points [95% CI +66.7, +66.7] "
                        "over 20 questions (holds)")
    assert lines[2] == ("  mcts_prm vs mcts_orm (10 simulations): +66.7 points [95% CI +66.7, +66.7] "
                        "over 20 questions (holds)")
    assert lines[3] == claims.TITLES["ii"]
    assert lines[4] == ("  sbs_prm vs sbs_logprob (B1=3, B2=5): +0.0 points [95% CI +0.0, +0.0] "
                        "over 20 questions (inconclusive)")
    assert lines[5] == ("  mcts_prm vs mcts_logprob (10 simulations): +0.0 points [95% CI +0.0, +0.0] "
                        "over 20 questions (inconclusive)")
    assert lines[6] == claims.TITLES["iii"]
    # A's gap (0) minus B's (1 on half the questions): -50 points, CI below 0 -> the claim holds
    assert lines[7].startswith("  Hit@1->Hit@5 gap, sbs_prm vs sbs_logprob (B1=3, B2=5): -50.0 points [95% CI -")
    assert lines[7].endswith("over 20 questions (holds)")
    assert lines[8] == ("  Hit@1->Hit@5 gap, mcts_prm vs mcts_logprob (10 simulations): +0.0 points "
                        "[95% CI +0.0, +0.0] over 20 questions (inconclusive)")
    assert len(lines) == 9


def test_a_larger_gap_for_masprm_is_reported_reversed(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    write_experiment(folder, "sbs_prm", {"b1": 3, "b2": 5}, even_then_all)    # gap 1 on the odd questions
    write_experiment(folder, "sbs_logprob", {"b1": 3, "b2": 5}, even_only)    # gap 0
    [gap] = [c for c in claims.comparisons(folder, seed=0) if c.gap and c.result is not None]
    assert gap.result.verdict == "holds"        # the paired difference A - B is positive ...
    assert gap.verdict == "reversed"            # ... which contradicts the claim (A's gap smaller)
    assert gap.line().startswith("Hit@1->Hit@5 gap, sbs_prm vs sbs_logprob (B1=3, B2=5): +50.0 points")
    assert gap.line().endswith("(reversed)")


def test_a_missing_condition_is_not_evaluated(logs):
    for path in logs.glob("toy_mcts_logprob_*"):
        path.unlink()
    lines = lines_of(logs)
    assert "  mcts_prm vs mcts_logprob (10 simulations): not evaluated" in lines
    assert "  Hit@1->Hit@5 gap, mcts_prm vs mcts_logprob (10 simulations): not evaluated" in lines
    assert lines[4].endswith("(inconclusive)")   # the SBS comparisons are still made
    for path in logs.glob("toy_mcts_orm_n_simulations5_*"):
        path.unlink()
    assert "  mcts_prm vs mcts_orm (5 simulations): not evaluated" in lines_of(logs)


def test_an_empty_folder_evaluates_nothing(tmp_path):
    assert claims.experiments(tmp_path) == {}
    lines = lines_of(tmp_path)
    assert [ln for ln in lines if ln.startswith("  ")] == [        # every claim has a line
        "  mcts_prm vs mcts_orm (10 simulations): not evaluated",
        "  sbs_prm vs sbs_logprob (B1=3, B2=5): not evaluated",
        "  mcts_prm vs mcts_logprob (10 simulations): not evaluated",
        "  Hit@1->Hit@5 gap, sbs_prm vs sbs_logprob (B1=3, B2=5): not evaluated",
        "  Hit@1->Hit@5 gap, mcts_prm vs mcts_logprob (10 simulations): not evaluated"]


def run_claims(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "masprm.instruments.claims", *args], cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True)


def test_cli_writes_the_text_and_json_reports(logs, tmp_path):
    out = tmp_path / "results" / "claims.txt"
    out.parent.mkdir()
    proc = run_claims("--logs_dir", str(logs), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text == claims.report(list(claims.comparisons(logs, seed=42)))
    assert text in proc.stdout
    rows = json.loads(out.with_suffix(".json").read_text())
    assert [(r["claim"], r["verdict"]) for r in rows] == [
        ("i", "holds"), ("i", "holds"), ("ii", "inconclusive"), ("ii", "inconclusive"),
        ("iii", "holds"), ("iii", "inconclusive")]
    assert [r["line"] for r in rows] == [ln[2:] for ln in text.splitlines() if ln.startswith("  ")]
    assert rows[0]["result"]["n_questions"] == 20 and rows[0]["result"]["mean_diff"] == pytest.approx(2 / 3)


def test_cli_missing_logs_dir_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "claims.txt"
    proc = run_claims("--logs_dir", str(tmp_path / "nope"), "--out", str(out))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--logs_dir" in proc.stderr and "nope" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_orm_leaf_run_is_its_own_line_and_leaves_claim_i_alone(logs):
    # mcts_prm --orm_leaf at 10 simulations, wrong on every question: -33.3 points against mcts_orm (right in
    # one seed of three on each question); the plain mcts_prm at 10 simulations is still the one claim (i) reads
    write_experiment(logs, "mcts_prm", {"n_simulations": 10, "orm_leaf": True}, lambda i, s: (0, 0), tag="_leaf",
                     mtime=NOW)
    lines = lines_of(logs)
    assert lines[2] == ("  mcts_prm vs mcts_orm (10 simulations): +66.7 points [95% CI +66.7, +66.7] "
                        "over 20 questions (holds)")
    assert lines[3] == ("  mcts_prm --orm_leaf vs mcts_orm (10 simulations): -33.3 points [95% CI -33.3, -33.3] "
                        "over 20 questions (reversed)")
    assert lines[4] == claims.TITLES["ii"]
