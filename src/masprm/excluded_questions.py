"""``--exclude_questions_file``: question-disjoint development runs (the original's newer branch).

``read_excluded_questions`` reads the listed questions; ``exclude_questions`` picks the
examples of a whole loaded split by that branch's rule. Pure Python.
"""

from __future__ import annotations

import random
from pathlib import Path

from masprm.data import Example, LoadedData
from masprm.errors import DataError
from masprm.io import iter_jsonl
from masprm.paths import check_input_file


def read_excluded_questions(path: str | Path, setting: str = "exclude_questions_file") -> set[str]:
    """The questions a JSONL file lists: each record's ``prompt``, else its ``question`` (blank lines skipped).

    Stage 2's pair and sample files and the hub's GSM8K rows both work, so a development run can
    leave out every question a scorer was trained on. The file goes through the project's JSONL reader
    (UTF-8, one JSON object a line, strings UTF-8 can hold); a record with neither field, or whose
    field is no string, and a file that lists no question are refused naming ``file:line``: a run the
    user believes question-disjoint must not silently exclude nothing.
    """
    check_input_file(path, setting)
    questions: set[str] = set()
    try:
        for number, record in iter_jsonl(path):
            key = "prompt" if "prompt" in record else "question" if "question" in record else None
            if key is None:
                raise DataError(f"{path}:{number}: a record with neither 'prompt' nor 'question' (the question "
                                "to leave out)")
            if not isinstance(record[key], str):
                raise DataError(f"{path}:{number}: '{key}' must be a string, got {type(record[key]).__name__}")
            questions.add(record[key])
    except DataError as err:   # the reader's own lines name the file; the flag is added in front
        raise DataError(str(err), setting=setting) from None
    if not questions:
        raise DataError(f"{path}: holds no record, so no question would be left out", setting=setting)
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
