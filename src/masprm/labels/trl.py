"""Stage-2 records in TRL's dataset formats (``preprocess_data.py --export trl``).

TRL's documented "standard" formats (its dataset-formats guide):

- preference: ``{"prompt": str, "chosen": str, "rejected": str}`` (explicit prompt);
- stepwise supervision: ``{"prompt": str, "completions": [str], "labels": [bool]}``.

A PPM pair becomes one preference row holding the texts the scorer compares
(``ppm_texts``): ``prompt`` is their shared start (the question and the steps
before the one that differs, each ended by the separator) and ``chosen`` /
``rejected`` the differing step plus the separator, so ``prompt + chosen`` is the
scorer's positive text exactly. Pairs whose steps are identical (no preference)
are left out, as training leaves them out. Any other field of the pair (``meta``)
is kept as an extra column.

A PRM sample keeps ``prompt`` and ``completions``; ``labels`` is True where the
step's value is above 0 (False at 0 or below), and the values themselves stay in
the extra column ``values`` (floats). The steps carry no separator: TRL's PRM
trainer adds its ``step_separator`` between them.

Output files sit next to their source with the prefix ``trl_``
(``results/trl_ppm_pairs_<run>.jsonl``), written atomically. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from masprm.io import AtomicJsonlWriter, iter_jsonl
from masprm.labels.mining import ppm_texts
from masprm.state_text import DEFAULT_SEPARATOR, join_steps

EXPORT_FORMATS = ("trl",)
PREFIX = "trl_"
PAIR_FIELDS = ("prompt", "chosen_actions", "rejected_actions")


def trl_path(source: str | Path) -> Path:
    """results/ppm_pairs_<run>.jsonl -> results/trl_ppm_pairs_<run>.jsonl."""
    source = Path(source)
    return source.with_name(PREFIX + source.name)


def preference_row(record: dict, sep: str = DEFAULT_SEPARATOR) -> dict | None:
    """A PPM pair as a TRL preference row (None when chosen and rejected are the same steps)."""
    chosen, rejected = record["chosen_actions"], record["rejected_actions"]
    differ = [i for i, (c, r) in enumerate(zip(chosen, rejected)) if c != r]
    if not differ:
        return None
    pos, neg = ppm_texts(record, sep)
    shared = str(join_steps(record["prompt"], list(chosen[:differ[-1]]), sep))
    if not (pos.startswith(shared) and neg.startswith(shared)):   # ppm_texts' layout: shared steps, then the pair
        raise ValueError("the pair's texts do not start with their shared steps")
    extra = {k: v for k, v in record.items() if k not in PAIR_FIELDS}
    return {"prompt": shared, "chosen": pos[len(shared):], "rejected": neg[len(shared):], **extra}


def stepwise_row(record: dict) -> dict:
    """A PRM sample as a TRL stepwise-supervision row: boolean labels by sign, the values kept."""
    values = [float(v) for v in record["labels"]]
    extra = {k: v for k, v in record.items() if k not in ("prompt", "completions", "labels")}
    return {"prompt": record["prompt"], "completions": list(record["completions"]),
            "labels": [v > 0 for v in values], "values": values, **extra}


@dataclass
class ExportCount:
    path: Path
    written: int = 0
    left_out: int = 0     # pairs without a preference (identical steps)


def _rows(records: Iterable[dict], pairs: bool, count: ExportCount) -> Iterator[dict]:
    for record in records:
        row = preference_row(record) if pairs else stepwise_row(record)
        if row is None:
            count.left_out += 1
            continue
        count.written += 1
        yield row


def export_trl(source: str | Path, *, pairs: bool) -> ExportCount:
    """Write ``trl_path(source)`` from a stage-2 JSONL file (``pairs``: PPM pairs, else PRM samples)."""
    count = ExportCount(trl_path(source))
    with AtomicJsonlWriter(count.path) as out:
        for row in _rows((rec for _, rec in iter_jsonl(source)), pairs, count):
            out.write(row)
    return count
