"""Stage 5: seed logs of one experiment become one row; unfinished and FAILED logs are skipped."""

from __future__ import annotations

import csv
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from masprm.aggregate import aggregate, columns, parse_log, read_logs, split_experiment, to_csv
from masprm.eval.logs import render_log

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
    (logs / "old_exp_7.txt").write_text("=== START old | dataset=x | N=1 | manifest=a ===\n"
                                        "Accuracy (pass@1): 1.0000\nCOMPLETED\n")
    rows, _ = aggregate(read_logs(logs))
    table = list(csv.DictReader(to_csv(rows).splitlines()))
    first = table[0]
    assert first["Seeds"] == "3" and first["pass@1_mean"] == "0.6000" and first["pass@1_std"] == "0.1000"
    assert first["tokens_mean"] == "110.0000"
    old = next(r for r in table if r["Experiment"] == "old_exp")
    assert old["pass@1_mean"] == "1.0000" and old["pass@3_mean"] == "N/A" and old["tokens_std"] == "N/A"


def test_experiment_id_drops_only_the_trailing_seed():
    assert split_experiment("toy_mcts_prm_ab12_policy_2_14") == ("toy_mcts_prm_ab12_policy_2", 14)
    assert split_experiment("no_seed_here") == ("no_seed_here", None)
    parsed = parse_log("a_b_3", "=== START sbs_prm | dataset=d | N=1 | manifest=x ===\nPass@5: 0.25\nCOMPLETED\n")
    assert parsed.label == "sbs_prm" and parsed.metrics == {"pass@5": 0.25} and parsed.status == "COMPLETED"


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
