"""``--exclude_questions_file``: question-disjoint development runs (the original's newer branch).

``read_excluded_questions`` reads the listed questions; ``exclude_questions`` picks the
examples of a whole loaded split by that branch's rule. Pure Python.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from masprm.data import Example, LoadedData
from masprm.errors import DataError


def read_excluded_questions(path: str | Path, setting: str = "exclude_questions_file") -> set[str]:
    """The questions a JSONL file lists: each record's ``prompt``, else its ``question`` (blank lines skipped).

    Stage 2's pair and sample files and the hub's GSM8K rows both work, so a development run can
    leave out every question a scorer was trained on.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{setting} {path}: no such file", setting=setting)
    questions: set[str] = set()
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{setting} {path}: line {number} is not JSON ({err.msg})", setting=setting) from None
            question = record.get("prompt", record.get("question")) if isinstance(record, dict) else None
            if question is not None:
                questions.add(str(question))
    return questions


def exclude_questions(loaded: LoadedData, excluded: set[str], n: int | None, seed: int) -> LoadedData:
    """The original newer branch's question-disjoint pick from every usable example of a split.

    Its rule: the rows whose question is not listed, in the dataset's own order, shuffled by
    ``random.Random(seed)``, the first ``n`` kept (all without ``n``). ``loaded`` holds the whole
    split; its examples' ``source_index`` gives the dataset order.
    """
    kept = sorted((e for e in loaded.examples if e.question not in excluded),
                  key=lambda e: e.meta.get("source_index", e.idx))
    random.Random(seed).shuffle(kept)
    kept = kept[:n] if n is not None else kept
    return LoadedData([Example(i, e.question, e.gold, e.meta) for i, e in enumerate(kept)], loaded.skipped)
