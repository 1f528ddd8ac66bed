"""Stage-4 logs written by hand: one condition's files as stage 4 leaves them.

``write_stage4_log`` writes a condition's text log, records, manifest and summary (or what an
interrupted run leaves) with stage 4's own writer (``masprm.eval.logs``); ``log_text`` is the text log
alone of one seed of the condition ``EXP``, every metric at one value. Use it for tests of what reads
stage-4 logs (the aggregator, the lab report, the toy claims) without running stage 4.
"""

from __future__ import annotations

from pathlib import Path

from masprm.eval.logs import LogFiles, PartialLog, manifest_hash_of, render_log, start_line, write_condition
from masprm.eval.metrics import summarize_records


def write_stage4_log(stem: Path, records: list[dict], manifest: dict, *, label: str, dataset: str = "toy",
                     summary: dict | None = None, errors: int = 0, finished: bool = True) -> dict:
    """One condition's files as stage 4 leaves them, written by stage 4's own writer (``masprm.eval.logs``):
    the text log (START line, metric lines, COMPLETED or FAILED when ``errors``), the records, manifest and
    summary sidecars. ``summary`` sets metrics the records do not carry (a test's records hold only what it
    reads); ``finished=False`` leaves what an interrupted run leaves (the START line and a partial file).
    Returns the summary written."""
    files = LogFiles(Path(stem))
    header = [start_line(label, dataset, len(records), manifest_hash_of(manifest))]
    if not finished:
        PartialLog(files, manifest_hash_of(manifest), header, records)
        return {}
    full = {**summarize_records([]), "n": len(records), "errors": errors, "extra": {}, **(summary or {})}
    write_condition(files, render_log(header, [], full), records, manifest, full)
    return full


EXP = "gsm8k_single_pass_0123abcd45_tiny"


def log_summary(acc=0.5, tokens=100.0):
    s = {f"pass@{k}": acc for k in range(1, 11)}
    s.update(n=10, errors=0, tokens_mean=tokens, tokens_std=1.0, tokens_n=10, scorer_calls_total=0,
             agent_runs_total=30, prm_calls_mean=0.0, agent_runs_mean=3.0)
    return s


def log_text(**kw) -> str:
    return render_log(["=== START single_pass | dataset=gsm8k | N=10 | manifest=abc ==="], [], log_summary(**kw))
