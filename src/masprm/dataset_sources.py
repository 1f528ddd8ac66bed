"""Datasets of the user's: ``--dataset`` as a hub dataset id or a local file or folder. Pure Python.

A ``--dataset`` that names no registered benchmark (``masprm.data.DATASETS``) may name a hub dataset id
(``owner/name``) or a local file (JSON / JSONL / Parquet) or folder, loaded with ``datasets.load_dataset``
(a folder of split files, ``train.jsonl`` / ``test.jsonl``, reads as a hub repository does).
``DatasetFields`` (``--question_field``, ``--answer_field``; default ``question`` and ``answer``) say which
fields hold the question and the gold answer; ``dataset_rows.any_gold`` reads the answer (a number, GSM8K's
``#### N``, a ``\\boxed{}``, or an option letter), and ``masprm.data``'s selection rule applies. Run folders and
log names carry the dataset as ``dataset_name_tag`` spells it (no '/'); what defines the examples beyond the
name (a local copy's content, the fields) is recorded by ``source_record``. Such a dataset has no team of its
own: ``--mas_config`` names one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from masprm.config import arg
from masprm import data   # its registry read at each call (a test or a plugin may set another)
from masprm.data import (DatasetLoader, LoadedData, check_fields, error_text, quiet_datasets, read_data_file,
                         seeded_order, select_examples)
from masprm.dataset_rows import any_gold, raw_text
from masprm.errors import ConfigError, DataError
from masprm.identity import path_identity

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")   # owner/name, as the Hub spells a dataset


@dataclass(frozen=True)
class DatasetFields:
    """Where a dataset given by hub id or path (``--dataset``) keeps its question and its gold answer."""

    question_field: str | None = arg(None, flags=("--question_field",),
                                     help="with --dataset given as a hub dataset id (owner/name) or a local "
                                          "file or folder: the field holding the question (default: question)")
    answer_field: str | None = arg(None, flags=("--answer_field",),
                                   help="... and the field holding the gold answer: a number, text ending in "
                                        "'#### N', a \\boxed{N}, or an option letter (default: answer)")

    @property
    def given(self) -> bool:
        return self.question_field is not None or self.answer_field is not None


def is_dataset_source(name: str | None) -> bool:
    """A ``--dataset`` that names no registered benchmark but a local file or folder, or a hub dataset id."""
    if not name or name in data.DATASETS:
        return False
    return Path(name).expanduser().exists() or HUB_ID.fullmatch(name) is not None


def dataset_name_tag(name: str) -> str:
    """``name`` as run folders and log names carry it: a registered name as it is; a hub id with '/' as '_';
    a local folder by its name, a file by its stem."""
    if not is_dataset_source(name):
        return name
    path = Path(name).expanduser()
    if path.exists():
        return path.resolve().name if path.is_dir() else path.stem
    return name.replace("/", "_")


def source_record(dataset: str, fields: DatasetFields) -> dict:
    """What defines the examples of a dataset given by hub id or path beyond its name: a local copy's content
    (None for a hub id) and the fields read. Empty for a registered benchmark, so what its runs record (stage 1's
    run settings, stage 4's fingerprints) stays as it was."""
    if not is_dataset_source(dataset):
        return {}
    return {"dataset_identity": path_identity(dataset), "question_field": fields.question_field,
            "answer_field": fields.answer_field}


def dataset_loader(name: str, fields: DatasetFields) -> DatasetLoader:
    """The loader of ``--dataset name``: a registered benchmark's, or one for a dataset given by hub id or path."""
    if is_dataset_source(name):
        return SourceDataset(name, fields.question_field or "question", fields.answer_field or "answer")
    if fields.given and name in data.DATASETS:
        raise ConfigError(f"`question_field` and `answer_field` name the fields of a dataset given by hub id or "
                          f"path; {name} reads its own", setting="question_field" if fields.question_field
                          else "answer_field")
    return data.DATASETS[name]   # an unknown name: UnknownNameError listing the valid ones


@dataclass(frozen=True)
class SourceDataset:
    """A dataset of the user's: a hub id or a local file or folder, with the fields of its question and answer."""

    source: str
    question_field: str
    answer_field: str

    def __call__(self, split: str, *, n: int | None = None, seed: int = 42,
                 data_file: str | Path | None = None) -> LoadedData:
        if data_file:
            raise ConfigError(f"`data_file` stands in for a registered benchmark's download; {self.source} is "
                              "read from `dataset` itself", setting="data_file")
        path = Path(self.source).expanduser()
        rows = read_data_file(path, setting="dataset") if path.is_file() else self._split(split)
        where = f"--dataset {self.source}" + ("" if path.is_file() else f" split {split!r}")
        columns = set(rows[0]) if rows else set()
        for flag, wanted in (("question_field", self.question_field), ("answer_field", self.answer_field)):
            if rows and wanted not in columns:
                raise DataError(f"{where}: no field {wanted!r} (`{flag}`; its fields: "
                                f"{', '.join(sorted(map(str, columns))) or 'none'})", setting=flag)
        check_fields(rows, (), where, self.source, text=(self.question_field,))
        return select_examples(rows, seeded_order(len(rows), seed),
                               question=lambda row: raw_text(row.get(self.question_field)),
                               gold=lambda row: any_gold(row.get(self.answer_field)), n=n,
                               meta=lambda i, row: {"dataset": self.source, "source_index": i})

    def _split(self, split: str) -> list[dict]:
        """One split of a hub dataset or a local folder, as ``datasets.load_dataset`` reads it."""
        datasets = quiet_datasets()
        try:
            return datasets.load_dataset(self.source, split=split).to_list()
        except Exception as err:  # offline, gated, no such split, no data files: one line either way
            raise DataError(f"--dataset {self.source}: cannot load split {split!r} ({error_text(err)}); offline? "
                            "give a local copy: a file (JSON/JSONL/Parquet) or a folder of them",
                            setting="dataset") from None
