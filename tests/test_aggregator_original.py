"""The aggregator on logs in the original code's format gives the CSV the original's aggregator wrote.

The logs follow the original's writer (ray_eval.py): its condition names with spaces, its
file names, its progress and summary lines, a FAILED run and a rerun appended to one file,
and handoff_prm's paired T= lines after COMPLETED. The expected CSV is worked out by hand
with the original aggregator's rules: columns pass@1, pass@3, pass@5 then agent_runs,
prm_calls, tokens (mean, and sample std except for pass@3/pass@5), 4 decimals, rows in order
of first appearance in the sorted file names, the csv module's CRLF rows.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from masprm.eval.aggregate import aggregate, read_logs, to_csv

ROOT = Path(__file__).resolve().parents[1]
SBS = "gsm8k_SBS + PRM (B1=3, B2=5)B1-3_B2-5_gen_kwargs_0123456789ab_Qwen2.5-1.5B-RM_Qwen2.5-1.5B-Instruct"
HANDOFF = ("competition_math_Agent-selected handoff + MASPRMhandoff_candidates-3_89abcdef0123"
           "_MASPRM-HANDOFF-1.5B_Qwen2.5-1.5B-Instruct")
MANIFEST = "f" * 64


def start(name, dataset, n=50):
    return f"=== START {name} | dataset={dataset} | N={n} | manifest={MANIFEST} ==="


def progress(seen, n, acc, tokens, prm_total, runs_total):
    passes = ", ".join(f"p@{i}={acc:.4f}" for i in range(1, 6))
    return (f"[progress] {seen}/{n} acc={acc:.4f} {passes} tokens={tokens:.1f}±2.0 prm_calls_total={prm_total} "
            f"agent_runs_total={runs_total} prm_calls_mean={prm_total / seen:.2f} agent_runs_mean={runs_total / seen:.2f}")


def summary(acc, passes, tokens, prm_mean, runs_mean, n=50):
    return [f"Accuracy (pass@1): {acc:.4f}", *(f"Pass@{k}: {p:.4f}" for k, p in zip(range(2, 6), passes)),
            f"Tokens: {tokens:.1f} ± 3.0 ({n} examples)", f"Total PRM calls: {round(prm_mean * n)}",
            f"Total Agent runs: {round(runs_mean * n)}", f"Mean PRM calls per example: {prm_mean:.2f}",
            f"Mean Agent runs per example: {runs_mean:.2f}"]


HANDOFF_LINES = ["Hit@1 at 4 messages: 0.3000", "Hit@1 at 8 messages: 0.3400", "Hit@1 at 12 messages: 0.3450",
                 "Realized depth (mean/median): 10.25/12.00", "Unique agents / directed edges (mean): 5.10/8.20",
                 "Role revisit rate (mean): 0.4800", "Route entropy H(recipient|speaker), bits: 1.9000",
                 "PRM context tokens (median/p95): 1800.0/3900.0", "PRM truncation rate: 0.0000",
                 "Action parse-failure rate: 0.1200", "Batched policy calls / proposals per example: 10.25/30.75"]
PAIRED = ["T=8 paired dynamic PRM-policy accuracy delta (95% bootstrap CI): 0.0400 [-0.0100, 0.0900]",
          "T=8 McNemar exact: policy-only=10, prm-only=18, p=0.185471",
          "T=12 paired dynamic PRM-policy accuracy delta (95% bootstrap CI): 0.0500 [0.0000, 0.1000]",
          "T=12 McNemar exact: policy-only=9, prm-only=19, p=0.087158"]


def write_original_logs(folder: Path) -> None:
    name = "SBS + PRM (B1=3, B2=5)"
    for seed, acc, tok, prm in ((14, 0.5, 100.0, 20.0), (24, 0.6, 110.0, 22.0), (42, 0.7, 120.0, 24.0)):
        lines = [start(name, "gsm8k"), progress(10, 50, acc, tok, int(prm * 10), 450)]
        if seed == 24:   # a FAILED first attempt, then the rerun appended to the same file
            lines += ["FAILED: processed 30/50 examples; worker_crashed=True", "Decoder errors: 0",
                      "Tokens so far: 90.0 ± 2.0", "Total PRM calls so far: 600", "Total Agent runs so far: 1350",
                      start(name, "gsm8k"), progress(10, 50, acc, tok, int(prm * 10), 450)]
        passes = [acc + 0.1, acc + 0.12, acc + 0.14, acc + 0.16]
        lines += summary(acc, passes, tok, prm, 45.0) + ["COMPLETED"]
        (folder / f"{SBS}_{seed}.txt").write_text("\n".join(lines) + "\n")
    # seed 7 crashed and was never rerun: the original's FAILED block carries no metric the aggregator reads
    (folder / f"{SBS}_7.txt").write_text("\n".join([
        start(name, "gsm8k"), "FAILED: processed 3/50 examples; worker_crashed=True", "Decoder errors: 1",
        "Tokens so far: 80.0 ± 1.0", "Total PRM calls so far: 60", "Total Agent runs so far: 135"]) + "\n")
    # an interrupted run: header and progress only
    (folder / f"{SBS}_8.txt").write_text(start(name, "gsm8k") + "\n" + progress(10, 50, 0.9, 1.0, 1, 1) + "\n")
    hname = "Agent-selected handoff + MASPRM"
    for seed, acc, tok, calls, paired in ((14, 0.345, 1500.5, 10.25, True), (24, 0.355, 1600.5, 11.75, False)):
        lines = [start(hname, "competition_math", 200), *summary(acc, [acc] * 4, tok, calls, calls, 200),
                 *HANDOFF_LINES, "COMPLETED", *(PAIRED if paired else [])]
        (folder / f"{HANDOFF}_{seed}.txt").write_text("\n".join(lines) + "\n")


# sample std of two values x, y is |x - y| / sqrt(2): 0.01 -> 0.0071, 100 -> 70.7107, 1.5 -> 1.0607
EXPECTED = (
    "Experiment,Seeds,pass@1_mean,pass@1_std,pass@3_mean,pass@5_mean,agent_runs_mean,agent_runs_std,"
    "prm_calls_mean,prm_calls_std,tokens_mean,tokens_std\r\n"
    f"{HANDOFF},2,0.3500,0.0071,0.3500,0.3500,11.0000,1.0607,11.0000,1.0607,1550.5000,70.7107\r\n"
    f'"{SBS}",3,0.6000,0.1000,0.7200,0.7600,45.0000,0.0000,22.0000,2.0000,110.0000,10.0000\r\n'
)


def test_original_logs_give_the_originals_csv(tmp_path):
    write_original_logs(tmp_path)
    rows, skipped = aggregate(read_logs(tmp_path))
    assert to_csv(rows) == EXPECTED
    assert sorted(skipped) == [f"{SBS}_7 (unfinished)", f"{SBS}_8 (unfinished)"]
    assert [r.label for r in rows] == ["Agent-selected handoff + MASPRM", "SBS + PRM (B1=3, B2=5)"]


def test_the_cli_writes_that_csv_byte_for_byte(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    write_original_logs(logs)
    done = subprocess.run([sys.executable, str(ROOT / "aggregator.py"), "--no_plot"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "aggregated_results.csv").read_bytes() == EXPECTED.encode()
    assert "skipped 2 log(s)" in done.stdout


def test_rows_follow_the_sorted_file_names_not_the_experiment_ids(tmp_path):
    # "a-x_1.txt" sorts before "a_1.txt" ('-' < '_'), while the id "a" sorts before "a-x"
    for name in ("a", "a-x"):
        (tmp_path / f"{name}_1.txt").write_text("\n".join([start(name, "d"), *summary(0.5, [0.5] * 4, 1.0, 0, 1),
                                                           "COMPLETED"]) + "\n")
    rows, _ = aggregate(read_logs(tmp_path))
    assert [r.experiment for r in rows] == ["a-x", "a"]
