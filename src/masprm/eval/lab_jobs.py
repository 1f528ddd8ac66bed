"""Which lab jobs asked for a condition: the record a lab's runner hands stage 4, kept in the condition's manifest.

The lab (`masprm.lab.job.Job.task`) starts each of its commands with ``$MASPRM_LAB_JOB`` set to the job's
record, one JSON object::

    MASPRM_LAB_JOB='{"lab": "toy_lab", "job": "eval_mc-prm_search", "row": "mc-prm"}'

(``lab``: the lab's name, ``<world>_<lab>`` as its logs folder and archive are named; ``job``: the job's name in
its plan; ``row``: the row key it evaluates, `LabScorer.key`, or null for a job of no single row's conditions).
Stage 4 reads it once, before anything loads (`lab_job_from_env`: a malformed value is one line, exit 2), stamps
it with the time it asked (``asked``, UTC to the microsecond) and records it in each condition's manifest under
``lab_jobs``: a list, oldest first, because a condition in a shared logs folder (the demo's) is asked for by the
demo, by every lab that reuses it and by every re-run of those labs, and each ask is kept:

- a condition run now writes its manifest with the asks its earlier (interrupted or FAILED) run recorded, then
  this one;
- a condition COMPLETED earlier and skipped keeps its log, records and summary as they are; its manifest gains
  this ask (`append_ask`: read, extended and replaced whole under a lock, so two commands asking at once both
  land and a reader never sees half a file).

``lab_jobs`` stays outside ``definition`` and out of the manifest hash (`masprm.eval.logs.manifest_hash_of`): a
condition run by hand and by the lab is the same condition, with the same fingerprint, log and reuse. Without
the variable nothing is recorded and the manifest is byte for byte what it was. The lab's cells
(`masprm.lab.cells`) place a condition by the row keys its own lab recorded and, between two experiments of one
place, take the one that lab asked for last.
"""

from __future__ import annotations

import fcntl
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from masprm.cli import UsageError
from masprm.eval.logs import LAB_JOBS
from masprm.io import atomic_write_json

LAB_JOB_ENV = "MASPRM_LAB_JOB"
FIELDS = ("lab", "job", "row")   # a record's keys, in this order; row may be null


def job_env(lab: str, job: str, row: str | None) -> str:
    """The variable's value for one job (what the lab's runner sets)."""
    return json.dumps(dict(zip(FIELDS, (lab, job, row))), ensure_ascii=False, separators=(",", ":"))


def lab_job_from_env(environ: Mapping[str, str] | None = None) -> dict | None:
    """The job record of ``$MASPRM_LAB_JOB`` stamped with the time asked, None when unset or empty; anything else
    than an object of a non-empty ``lab`` and ``job`` and a ``row`` string or null is a `UsageError` (exit 2)."""
    raw = (os.environ if environ is None else environ).get(LAB_JOB_ENV, "")
    if not raw.strip():
        return None
    shown = raw if len(raw) <= 120 else raw[:117] + "..."
    try:
        record = json.loads(raw)
    except ValueError:
        record = None
    wanted = f'a JSON object {{"lab": NAME, "job": NAME, "row": KEY or null}} (the lab sets it), got {shown!r}'
    if not isinstance(record, dict) or set(record) != set(FIELDS):
        raise UsageError(f"${LAB_JOB_ENV} must be {wanted}")
    for name in ("lab", "job"):
        if not (isinstance(record[name], str) and record[name].strip()):
            raise UsageError(f"${LAB_JOB_ENV}: {name} must be a non-empty string, got {shown!r}")
    if record["row"] is not None and not (isinstance(record["row"], str) and record["row"].strip()):
        raise UsageError(f"${LAB_JOB_ENV}: row must be a non-empty string or null, got {shown!r}")
    return {**{k: record[k] for k in FIELDS}, "asked": asked_now()}


def asked_now() -> str:
    """UTC to the microsecond, fixed width: two asks compare in time order as strings."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lab_jobs_of(manifest: Mapping[str, Any] | None) -> list[dict]:
    """The asks a manifest records, oldest first; entries that are not records are passed over (a reader never
    fails on a hand-edited list: the condition is then placed as a manifest without asks is)."""
    found = (manifest or {}).get(LAB_JOBS)
    if not isinstance(found, list):
        return []
    return [e for e in found if isinstance(e, dict) and isinstance(e.get("lab"), str)
            and isinstance(e.get("asked"), str) and (e.get("row") is None or isinstance(e.get("row"), str))]


def with_ask(manifest: dict, earlier: Mapping[str, Any] | None, ask: dict | None) -> dict:
    """`manifest` carrying the asks of `earlier` (the same condition's stored manifest) and then `ask`; the
    manifest itself when there is nothing to record (no key is added: a hand run's manifest is unchanged)."""
    asks = recorded(earlier) + ([ask] if ask else [])
    return {**manifest, LAB_JOBS: asks} if asks else manifest


def recorded(manifest: Mapping[str, Any] | None) -> list:
    """The list a manifest holds under ``lab_jobs``, every entry as written (an ask is added, never one taken)."""
    found = (manifest or {}).get(LAB_JOBS)
    return list(found) if isinstance(found, list) else []


def append_ask(path: str | Path, ask: dict) -> None:
    """Add `ask` to the stored manifest at `path`, which is replaced whole (`atomic_write_json`) and otherwise
    kept as it is. Commands asking at once are serialised by a lock on the file; as the replacement is a new
    file, a command that waited re-opens the path and retries until it holds the lock of the file in place."""
    path = Path(path)
    while True:
        with open(path, "rb") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)   # released when the file is closed
            if os.fstat(fh.fileno()).st_ino != os.stat(path).st_ino:
                continue   # replaced while we waited: the ask goes into the newer file
            manifest = json.loads(fh.read().decode("utf-8"))
            atomic_write_json(path, {**manifest, LAB_JOBS: recorded(manifest) + [ask]})
            return
