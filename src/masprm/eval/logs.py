"""Per-condition log files of stage 4: names, fingerprints, text, sidecars, resume.

One condition (a method with its settings, on one dataset, with one seed) owns
    logs/{dataset}_{method}_{fingerprint}_{model}_{seed}.txt    the text log (read by the aggregator)
    <same>.jsonl           one record per example, sorted by index
    <same>.manifest.json   everything that defines the run
    <same>.summary.json    the condition's metrics
    <same>.partial.jsonl   finished records while the condition runs (resume after a crash)
The fingerprint hashes the manifest without the seed, so the seeds of one
experiment share a name up to the trailing `_<seed>`. The text log ends with
COMPLETED (or FAILED) only once the sidecars are in place. Pure Python.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from masprm.errors import ConfigError
from masprm import identity
from masprm.identity import path_identity, stable_hash  # noqa: F401 (their home: masprm.identity)
from masprm.io import append_open, atomic_write_json, atomic_write_jsonl, atomic_write_text
from masprm.models.backends import backend_sources
from masprm.dataset_sources import dataset_name_tag
from masprm.run_folder import model_tag

COMPLETED = "COMPLETED"
FAILED = "FAILED"
# The code on every evaluation's path: the loop (which loads the policy and the scorers), the
# data loading and the generation backends (the registry names their modules by string);
# `code_version` follows their masprm imports, so policy, scorer, training-data encoding,
# answers, graph, search and eval code all count. A method's own module is added per condition.
EVAL_CODE = ("eval/runner.py", "data.py", *backend_sources())


def code_files(module_file: str | None = None, root: Path = identity.SRC) -> list[Path]:
    """The package files an evaluation runs (``masprm.identity.code_files`` from ``EVAL_CODE``)."""
    return identity.code_files(EVAL_CODE, module_file, root)


def code_version(module_file: str | None = None, root: Path = identity.SRC) -> str:
    """The hash of the code an evaluation of a method defined in ``module_file`` runs (its fingerprint's code)."""
    return identity.code_version(EVAL_CODE, module_file, root)
# --------------------------------------------------------------------------- file names


# The files of one condition: attribute -> suffix after the shared stem.
LOG_FILE_SUFFIXES = {"log": ".txt", "records": ".jsonl", "manifest": ".manifest.json",
                     "summary": ".summary.json", "partial": ".partial.jsonl"}


@dataclass(frozen=True)
class LogFiles:
    stem: Path   # logs/<name>, no suffix
    log: Path = field(init=False)
    records: Path = field(init=False)
    manifest: Path = field(init=False)
    summary: Path = field(init=False)
    partial: Path = field(init=False)

    def __post_init__(self) -> None:
        for name, suffix in LOG_FILE_SUFFIXES.items():
            object.__setattr__(self, name, self.stem.with_name(self.stem.name + suffix))

    @classmethod
    def for_condition(cls, logs_dir: str | os.PathLike, dataset: str, method: str, fingerprint: str,
                      model_id: str, seed: int) -> "LogFiles":
        return cls(Path(logs_dir) / f"{dataset_name_tag(dataset)}_{method}_{fingerprint}_{model_tag(model_id)}_{seed}")


# Lines the original's finished logs carry after their status: handoff_prm's paired comparison with
# handoff_policy ("T=8 paired ...", "T=8 McNemar ..."), appended once both conditions were done. This
# project writes such lines before the status (a log is final once it says COMPLETED); reading still
# looks past them, so the original's logs keep their status.
_TRAILER = re.compile(r"^(T=\d+ |Paired vs MASPRM )")   # ... and a condition's paired lines (masprm.eval.vs_masprm)


def text_status(text: str) -> str | None:
    """COMPLETED / FAILED from a log text's last non-empty line before any trailer, else None."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    while lines and _TRAILER.match(lines[-1]):
        lines.pop()
    last = lines[-1] if lines else ""
    return COMPLETED if last == COMPLETED else FAILED if last.startswith(FAILED) else None


def log_status(path: Path) -> str | None:
    """COMPLETED / FAILED of a log file, else None (unfinished or missing)."""
    try:
        return text_status(path.read_text(encoding="utf-8"))
    except OSError:
        return None


def is_completed(files: LogFiles) -> bool:
    return (log_status(files.log) == COMPLETED and files.records.is_file()
            and files.manifest.is_file() and files.summary.is_file())


# --------------------------------------------------------------------------- log text


LAB_JOBS = "lab_jobs"   # the lab jobs that asked for a condition (`masprm.eval.lab_jobs`)
UNHASHED = ("facts", LAB_JOBS)   # a manifest's keys that say about a condition, not what it is


def manifest_hash_of(manifest: dict) -> str:
    """The hash a log's START line and its reuse check use: the manifest without its ``facts``, which are
    read off the definition (so a manifest written before facts were recorded is still the same run), and
    without the lab jobs that asked for it (a condition run by hand and by the lab is the same run)."""
    return stable_hash({k: v for k, v in manifest.items() if k not in UNHASHED})


def start_line(condition: str, dataset: str, n: int, manifest_hash: str) -> str:
    return f"=== START {condition} | dataset={dataset} | N={n} | manifest={manifest_hash} ==="


def log_every() -> int:
    """Examples between progress lines: $LOG_EVERY (the original's variable), default 10."""
    raw = os.environ.get("LOG_EVERY", "") or "10"
    if not (raw.isdigit() and int(raw) >= 1):
        raise ConfigError(f"$LOG_EVERY must be a positive integer, got {raw!r}")
    return int(raw)


def progress_line(summary: dict, seen: int, n: int) -> str:
    """The original's progress line (pass@1..10, token mean±std, PRM calls and agent runs so far)."""
    return (f"[progress] {seen}/{n} acc={summary['accuracy']:.4f} "
            + ", ".join(f"p@{k}={summary[f'pass@{k}']:.4f}" for k in range(1, 11))
            + f" tokens={summary['tokens_mean']:.1f}±{summary['tokens_std']:.1f}"
            + f" prm_calls_total={summary['scorer_calls_total']} agent_runs_total={summary['agent_runs_total']}"
            + f" prm_calls_mean={summary['prm_calls_mean']:.2f} agent_runs_mean={summary['agent_runs_mean']:.2f}")


def metric_lines(summary: dict, report: Iterable[str] = ()) -> list[str]:
    """The summary lines the aggregator reads, then a method's own ``report`` lines, then [extra]."""
    lines = [f"Accuracy (pass@1): {summary['pass@1']:.4f}"]
    lines += [f"Pass@{k}: {summary[f'pass@{k}']:.4f}" for k in range(2, 11)]
    lines += [
        f"Tokens: {summary['tokens_mean']:.1f} ± {summary['tokens_std']:.1f} ({summary['tokens_n']} examples)",
        f"Total PRM calls: {summary['scorer_calls_total']}",   # the original's name: it counts ORM calls too
        f"Total scorer calls: {summary['scorer_calls_total']}",
        f"Total Agent runs: {summary['agent_runs_total']}",
        f"Mean PRM calls per example: {summary['prm_calls_mean']:.2f}",
        f"Mean scorer calls per example: {summary['prm_calls_mean']:.2f}",
        f"Mean Agent runs per example: {summary['agent_runs_mean']:.2f}",
        *report,
    ]
    for key, value in sorted((summary.get("extra") or {}).items()):
        lines.append(f"[extra] {key}: {json.dumps(value, sort_keys=True)}")
    return lines


def status_line(summary: dict) -> str:
    errors = summary.get("errors", 0)
    return f"{FAILED} ({errors} of {summary['n']} examples raised errors)" if errors else COMPLETED


def render_log(header: list[str], progress: Iterable[str], summary: dict, report: Iterable[str] = (),
               closing: Iterable[str] = ()) -> str:
    """The whole text log; ``closing`` lines (a paired comparison) come last before the status line."""
    return "\n".join([*header, *progress, *metric_lines(summary, report), *closing, status_line(summary)]) + "\n"


# --------------------------------------------------------------------------- writing and resuming


def write_condition(files: LogFiles, text: str, records: list[dict], manifest: dict, summary: dict) -> None:
    """Sidecars first, then the text log (which says COMPLETED/FAILED), then drop the partial file."""
    atomic_write_jsonl(files.records, records)
    atomic_write_json(files.manifest, manifest)
    atomic_write_json(files.summary, summary)
    atomic_write_text(files.log, text)
    files.partial.unlink(missing_ok=True)


def read_records(path: Path) -> list[dict]:
    """Records of a JSONL file; a line cut short by a crash (or any bad line) is dropped."""
    out = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict):
                    out.append(rec)
    except OSError:
        pass
    return out


def resumable_records(files: LogFiles, manifest_hash: str) -> dict[int, dict]:
    """Finished, error-free records of an earlier interrupted or FAILED run of the same manifest."""
    partial = read_records(files.partial)
    if partial and partial[0].get("manifest") == manifest_hash:
        found = partial[1:]
    else:
        try:
            same = manifest_hash_of(json.loads(files.manifest.read_text(encoding="utf-8"))) == manifest_hash
        except (OSError, json.JSONDecodeError):
            same = False
        found = read_records(files.records) if same and log_status(files.log) == FAILED else []
    return {r["index"]: r for r in found if "index" in r and not r.get("error")}


class PartialLog:
    """Appends each finished record (and a progress line to the text log) as it arrives."""

    def __init__(self, files: LogFiles, manifest_hash: str, header: list[str], resumed: list[dict]):
        files.stem.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_jsonl(files.partial, [{"manifest": manifest_hash}, *resumed])
        atomic_write_text(files.log, "\n".join(header) + "\n")
        self.files = files

    def add(self, record: dict) -> None:
        with append_open(self.files.partial) as fh:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            fh.flush()

    def progress(self, line: str) -> None:
        with append_open(self.files.log) as fh:
            fh.write(line + "\n")
