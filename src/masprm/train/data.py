"""Training data for the scorer: read and check stage-2 records, hold out the eval split.

An objective reads one kind of record (``Objective.records``):

- ``pairs`` (ppm_pairs_*.jsonl): ``prompt`` plus ``chosen_actions`` and
  ``rejected_actions``, two non-empty lists of step strings of equal length,
  and optionally a ``weight`` > 0 (default 1);
- ``steps`` (prm_samples_*.jsonl): ``prompt``, ``completions`` (step strings) and
  ``labels``, one number in [-1, 1] per completion.

A file is JSON (a list, or one object), JSONL or Parquet, read by ``datasets``
into a temporary cache (nothing is left in the user's datasets cache). A JSON or
JSONL file that ``datasets`` cannot read, or whose rows fail the checks, is read
again line by line, so the error names the file and the record (or line) as it
is written; a Parquet error names the row. How records become examples is the
objective's own (``masprm.train.pairwise`` / ``masprm.train.stepwise``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from masprm.checks import read_utf8
from masprm.errors import DataError, first_line
from masprm.io import check_encodable, iter_jsonl
from masprm.state_text import join_steps
from masprm.train.objectives import OBJECTIVES

EVAL_FRACTION = 0.04
PARQUET_SUFFIX = ".parquet"


def _bad(message: str) -> DataError:
    """An error in the training data file (the CLI names its flag, --data_dir)."""
    return DataError(message, setting="data_file")


# --------------------------------------------------------------------------- reading records


def _iter_records(path: Path) -> Iterator[tuple[str, dict]]:
    """Yield (where, record): a JSON list/object file, else JSONL (line numbers in `where`)."""
    if path.suffix == ".json":
        try:
            data = json.loads(read_utf8(path, "data file"))
        except json.JSONDecodeError:
            data = None  # not one JSON document: read it as JSONL below
        if isinstance(data, dict):
            data = [data]
        if isinstance(data, list):
            for i, rec in enumerate(data):
                if not isinstance(rec, dict):
                    raise _bad(f"{path}: record {i}: expected a JSON object, got {type(rec).__name__}")
                yield f"{path}: record {i}", rec
            return
    for lineno, rec in iter_jsonl(path):
        yield f"{path}:{lineno}", rec


def _check_str_list(where: str, rec: dict, key: str) -> None:
    value = rec.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(s, str) for s in value):
        raise _bad(f"{where}: field {key!r} must be a non-empty list of strings")


def _check_has_text(where: str, rec: dict, kind: str) -> None:
    """A record whose prompt and every step are blank gives the scorer nothing to read.

    Judged only once the step fields are lists of strings (a malformed one is reported as such).
    """
    steps = [rec.get(key) for key in (("chosen_actions", "rejected_actions") if kind == "pairs" else ("completions",))]
    if not all(isinstance(v, list) and v and all(isinstance(t, str) for t in v) for v in steps):
        return
    if not any(text.strip() for text in [rec["prompt"], *(text for v in steps for text in v)]):
        raise _bad(f"{where}: the prompt and every step are empty; a scorer cannot learn from a record "
                   "without text")


def _check_record(where: str, rec: dict, mode: str, kind: str) -> None:
    needed = ("prompt", "chosen_actions", "rejected_actions") if kind == "pairs" else \
        ("prompt", "completions", "labels")
    missing = [k for k in needed if k not in rec]
    if missing:
        raise _bad(f"{where}: missing field(s) {', '.join(missing)} for {mode} training "
                   f"(a {mode} record needs {', '.join(needed)})")
    if not isinstance(rec["prompt"], str):
        raise _bad(f"{where}: field 'prompt' must be a string")
    _check_has_text(where, rec, kind)
    check_encodable(rec, None, where, DataError)   # a lone surrogate would fail when the cache is written
    if kind == "pairs":
        _check_str_list(where, rec, "chosen_actions")
        _check_str_list(where, rec, "rejected_actions")
        if len(rec["chosen_actions"]) != len(rec["rejected_actions"]):
            raise _bad(f"{where}: chosen_actions and rejected_actions must have the same number of steps")
        w = rec.get("weight", 1.0)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w <= 0:
            raise _bad(f"{where}: field 'weight' must be a number > 0, got {w!r}")
        return
    _check_str_list(where, rec, "completions")
    labels = rec["labels"]
    if not isinstance(labels, list) or len(labels) != len(rec["completions"]):
        raise _bad(f"{where}: field 'labels' must be a list with one number per completion")
    for y in labels:
        if isinstance(y, bool) or not isinstance(y, (int, float)) or not math.isfinite(y) or abs(y) > 1.0 + 1e-6:
            raise _bad(f"{where}: label {y!r} is not a number in [-1, 1]")


def _dataset_rows(path: Path) -> list[dict] | None:
    """The file's rows as ``datasets`` reads them; None when it cannot (Parquet: a DataError).

    ``datasets`` is optional for JSON and JSONL: without it the project's own reader below reads them
    (a training machine that lacks it, e.g. a GPU image without the package, still trains). Only
    Parquet needs it, and says so in one line.
    """
    import tempfile

    parquet = path.suffix == PARQUET_SUFFIX
    try:
        import datasets
        from datasets.utils import logging as datasets_logging
    except ImportError:
        if parquet:
            raise _bad(f"{path}: reading Parquet needs the datasets package (pip install datasets), "
                       "which does not import here; JSON and JSONL files need no extra package") from None
        return None
    read = datasets.Dataset.from_parquet if parquet else datasets.Dataset.from_json
    bars_were_on = not datasets.are_progress_bars_disabled()
    verbosity = datasets_logging.get_verbosity()
    datasets.disable_progress_bars()
    datasets_logging.set_verbosity(datasets_logging.CRITICAL)   # its parse errors would print; ours name the line
    try:
        with tempfile.TemporaryDirectory(prefix="masprm-data-") as cache:
            return read(str(path), cache_dir=cache, keep_in_memory=True).to_list()
    except Exception as err:  # noqa: BLE001 - any reader failure: JSON is read again below to name the line
        if parquet:
            raise _bad(f"{path}: not a readable Parquet file ({first_line(err)})") from None
        return None
    finally:
        datasets_logging.set_verbosity(verbosity)
        if bars_were_on:
            datasets.enable_progress_bars()


def _checked(rows: list[dict], where: Callable[[int], str], mode: str) -> list[dict]:
    for i, rec in enumerate(rows):
        _check_record(where(i), rec, mode, OBJECTIVES[mode].records)
    return rows


def load_records(path: str | Path, mode: str) -> list[dict]:
    """All records of a stage-2 file (JSON, JSONL or Parquet), checked for the fields `mode` needs."""
    path = Path(path)
    if path.is_dir():
        raise _bad(f"{path}: is a folder, not a JSON, JSONL or Parquet file")
    if not path.is_file():
        raise _bad(f"{path}: file not found")
    rows = _dataset_rows(path)
    if rows and path.suffix == PARQUET_SUFFIX:
        return _checked(rows, lambda i: f"{path}: row {i}", mode)
    if rows:
        try:
            return _checked(rows, lambda i: f"{path}: record {i}", mode)
        except DataError:
            pass  # named below by line, as the file has it
    if path.suffix == PARQUET_SUFFIX:
        raise _bad(f"{path}: no records (the file has no rows)")
    records = []
    for where, rec in _iter_records(path):
        _check_record(where, rec, mode, OBJECTIVES[mode].records)
        records.append(rec)
    if not records:
        raise _bad(f"{path}: no records (the file is empty)")
    return records


def label_scheme_of(records: Sequence[dict], kind: str) -> str:
    """The stage-2 label scheme the records name (``meta.label_scheme``); today's files name none:
    ``masprm`` (the paper's pairs) for pairs, ``mc`` (the PRM samples) for steps; several are joined by '+'."""
    named = sorted({str(rec["meta"]["label_scheme"]) for rec in records
                    if isinstance(rec.get("meta"), dict) and rec["meta"].get("label_scheme")})
    return "+".join(named) if named else ("masprm" if kind == "pairs" else "mc")


# --------------------------------------------------------------------------- eval split


def split_eval(n: int, seed: int, fraction: float = EVAL_FRACTION) -> tuple[list[int], list[int]]:
    """(train, eval) indices exactly as `datasets.Dataset.train_test_split(test_size=fraction, seed=seed)`.

    The eval part is ceil(fraction * n) rows; both parts keep the order of the
    seeded numpy permutation, so the original's held-out membership (and
    training order before sampling) is reproduced.
    """
    if n < 2:
        raise _bad(f"need at least 2 usable records for a train/eval split, got {n}")
    n_eval = math.ceil(fraction * n)
    order = np.random.default_rng(seed).permutation(n).tolist()
    return order[n_eval:], order[:n_eval]


def outcome_example(record: dict, sep: str, input_ids: list[int], **fields) -> dict:
    """An example of the objectives trained on final correctness alone: the record's text and tokens, its
    outcome (1 when its last label is positive, else 0) and its question group, with the objective's fields."""
    return {"text": join_steps(record["prompt"], record["completions"], sep), "input_ids": input_ids,
            "outcome": 1.0 if float(record["labels"][-1]) > 0 else 0.0, "group": record_group(record), **fields}


def record_group(record: dict) -> str:
    """The question a stage-2 record belongs to: ``meta.question`` when recorded, else its prompt (the tree's
    question in the full view; in the local view an agent's inbox, the closest the record carries)."""
    meta = record.get("meta")
    return str(meta["question"]) if isinstance(meta, dict) and meta.get("question") else str(record["prompt"])


def split_eval_by_group(groups: Sequence[str], seed: int, fraction: float = EVAL_FRACTION) -> tuple[list[int], list[int]]:
    """(train, eval) indices with every group (question) on one side only.

    The distinct groups, sorted, are permuted with ``np.random.default_rng(seed)``
    and the first ceil(fraction * G) of them are held out; both parts keep the
    record order of `split_eval`'s seeded permutation. Records of one question
    share their prefixes, so a record split lets the eval set see its own
    questions in training and picks the checkpoint that memorised them best.
    """
    distinct = sorted(set(groups))
    if len(distinct) < 2:
        raise _bad(f"need records of at least 2 questions for a train/eval split by question, got {len(distinct)}")
    n_eval = math.ceil(fraction * len(distinct))
    held = {distinct[i] for i in np.random.default_rng(seed).permutation(len(distinct))[:n_eval].tolist()}
    order = np.random.default_rng(seed).permutation(len(groups)).tolist()
    return [i for i in order if groups[i] not in held], [i for i in order if groups[i] in held]


# --------------------------------------------------------------------------- examples
#
# An example is a dict of plain lists (ids, positions, targets) plus its
# texts, so the eval set can be re-scored by the scorer loader.


def eval_view(example: dict) -> dict:
    """The example as evaluation sees it (orm: every separator with the final outcome)."""
    if "eval_positions" not in example:
        return example
    return {**example, "positions": example["eval_positions"], "targets": example["eval_targets"]}
