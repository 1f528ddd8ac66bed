"""Benchmarks as lists of examples: a question and a gold answer.

Every dataset is a loader in the ``DATASETS`` registry (``masprm.registry``), called as
``loader(split, n=..., seed=..., data_file=..., [levels=..., stratify_by=...])``
and returning ``LoadedData``; the bracketed selection options reach only a loader
that declares them in its ``options`` (competition_math: both). The hub benchmarks
below are ``HubDataset`` records; other modules add their own with
``@register_dataset(name, options=...)`` and may reuse ``select_examples`` for the
shared selection rule. A toy world's loader comes from its own folder through the registry's provider
(``masprm.worlds:provide_datasets``, asked on first need): this module never imports a world.

Selection rule: rows are put in a seeded order (the same permutation as
``datasets.Dataset.shuffle(seed=seed)``), optionally filtered and stratified
(``stratified_order``: the original's pick of ``n`` rows), and the first ``n`` usable rows become the examples; rows whose gold answer
(or question) cannot be read are skipped and counted. An example's ``idx`` is
its position in the selected list, so a run with ``--n 2`` selects the first
two examples of the run without ``--n``.

A ``--dataset`` that names no registered benchmark may name a dataset of the user's, a hub dataset id or a
local file or folder, with the fields of its question and answer (``masprm.dataset_sources``).

``data_file`` replaces the hub download with a local JSON / JSONL / Parquet
file in the hub dataset's schema, read through ``datasets`` as well. For
competition_math and gpqa the file stands for the hub's single ``train`` split,
which is partitioned into test and train after the seeded shuffle.

A blank question counts as one that cannot be read. A question field that
holds anything but text (a number, a list) is a DataError naming the file and
the record (``check_text_fields``): the schema is wrong, and searching the
value's printed form would be meaningless.

``datasets`` and numpy are imported inside the loaders, so importing this
module is cheap.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from masprm.dataset_rows import (GPQA_OPTION_FIELDS, aqua_gold, gpqa_gold, gpqa_question, gsm8k_gold, logiqa_gold,
                                  logiqa_question, math_gold, math_level, mmlu_gold, mmlu_question, number_gold,
                                  raw_text, svamp_question)
from masprm.errors import ConfigError, DataError, first_line, quoted
from masprm.registry import Registry

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Example:
    idx: int            # position in the selected list
    question: str
    gold: str           # a clean number ("72", "3/4", "25%") or a letter A-D
    meta: dict = field(default_factory=dict)


@dataclass
class LoadedData:
    examples: list[Example]
    skipped: int = 0    # rows passed over because their gold answer (or question) could not be read

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self):
        return iter(self.examples)


DatasetLoader = Callable[..., "LoadedData | list[Example]"]
DATASETS: Registry[DatasetLoader] = Registry("dataset")
# Each toy world's loader is spelt in its own folder (`masprm.worlds`, its world.py), asked for on first need.
DATASETS.register_provider("masprm.worlds:provide_datasets")
# The question's fields of the datasets loaded outside this module, which ``check_fields`` requires to be
# text (a hub dataset declares its own, ``HubDataset.text_fields``): a toy world's, from its record.
TEXT_FIELDS: Registry[tuple[str, ...]] = Registry("dataset's text fields")
TEXT_FIELDS.register_provider("masprm.worlds:provide_text_fields")

# The selection options a dataset may declare (its `options` attribute): load_examples
# passes an option on only to a dataset that declares it.
SELECTION_OPTIONS = ("levels", "stratify_by")


def register_dataset(name: str, *, options: Sequence[str] = ()) -> Callable[[DatasetLoader], DatasetLoader]:
    """Decorator: make ``loader(split, *, n, seed, data_file, **options)`` available as ``--dataset name``.

    ``options`` are the selection options (of SELECTION_OPTIONS) the loader takes;
    a name is registered once (a second registration is an error).
    """
    unknown = set(options) - set(SELECTION_OPTIONS)
    if unknown:
        raise ConfigError(f"dataset {name!r}: unknown selection options {sorted(unknown)}")

    def add(loader: DatasetLoader) -> DatasetLoader:
        if options:
            loader.options = tuple(options)
        DATASETS.register(name, loader)
        return loader

    return add


def dataset_names() -> list[str]:
    return DATASETS.names()


def dataset_options(name: str) -> tuple[str, ...]:
    """The selection options dataset ``name`` declares (none for an unknown name)."""
    return tuple(getattr(DATASETS[name], "options", ())) if name in DATASETS else ()


def load_examples(name: str, split: str, *, n: int | None = None, seed: int = 42,
                  data_file: str | Path | None = None, levels: Iterable[int] | None = None,
                  stratify_by: str | None = None, fields: Any = None) -> LoadedData:
    """The selected examples of one dataset split (see the module docstring).

    ``levels`` / ``stratify_by`` are refused for a dataset that does not declare them; ``fields``
    (``masprm.dataset_sources.DatasetFields``) are read only for a dataset given by hub id or path.
    """
    # imported here: dataset_sources builds on this module's readers and selection rule
    from masprm.dataset_sources import DatasetFields, dataset_loader

    loader = dataset_loader(name, fields or DatasetFields())
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ConfigError(f"the number of examples must be a positive integer, got {n!r}", setting="n")
    # Only options that are set are passed on, so loaders need not know every one.
    options: dict[str, Any] = {}
    if levels is not None:
        options["levels"] = [int(level) for level in levels]
    if stratify_by:
        options["stratify_by"] = stratify_by
    undeclared = sorted(set(options) - set(getattr(loader, "options", ())))
    if undeclared:
        raise ConfigError(f"dataset {name} takes no {' or '.join(undeclared)} option", setting=undeclared[0])
    loaded = loader(split, n=n, seed=seed, data_file=data_file, **options)
    if not isinstance(loaded, LoadedData):
        loaded = LoadedData(list(loaded), 0)
    if not loaded.examples:
        source = f"data file {data_file}" if data_file else "the hub dataset"
        raise DataError(f"dataset {name} split {split!r}: no usable examples in {source} "
                        f"({loaded.skipped} skipped for a blank question or an unreadable answer)")
    return loaded


# --------------------------------------------------------------------------- the shared selection rule


def seeded_order(n_rows: int, seed: int) -> list[int]:
    """Row indices in seeded order: the permutation ``datasets.Dataset.shuffle(seed=seed)`` applies."""
    import numpy as np   # heavy: only when a selection is made (the core's imports stay light)

    return [int(i) for i in np.random.default_rng(seed).permutation(n_rows)]


def round_robin(order: Sequence[int], key: Callable[[int], Any]) -> list[int]:
    """Interleave groups: the first of each group (groups sorted by key), then the second of each, ..."""
    groups: dict[str, list[int]] = {}
    for i in order:
        groups.setdefault(str(key(i)), []).append(i)
    queues = [groups[k] for k in sorted(groups)]
    out: list[int] = []
    for depth in range(max((len(q) for q in queues), default=0)):
        out.extend(q[depth] for q in queues if depth < len(q))
    return out


def stratified_order(order: Sequence[int], key: Callable[[int], Any], n: int, seed: int) -> list[int]:
    """The original's stratified pick of ``n`` rows, then the rest of the interleaving.

    Rows are grouped by ``key`` (as text); one ``random.Random(seed)`` shuffles each group in the order
    the groups first appear, the groups are taken round-robin in sorted key order, and the first ``n``
    rows so taken are shuffled again by the same generator. The remaining interleaved rows follow, so a
    selected row whose gold cannot be read is replaced by the next one instead of shrinking the set.
    """
    rng = random.Random(seed)
    groups: dict[str, list[int]] = {}
    for i in order:
        groups.setdefault(str(key(i)), []).append(i)
    for members in groups.values():
        rng.shuffle(members)
    interleaved = round_robin([i for members in groups.values() for i in members], key)
    head = interleaved[:n]
    rng.shuffle(head)
    return head + interleaved[n:]


def select_examples(rows: Sequence[Row], order: Iterable[int], *, question: Callable[[Row], str | None],
                    gold: Callable[[Row], str | None], n: int | None = None,
                    meta: Callable[[int, Row], dict] | None = None) -> LoadedData:
    """The first ``n`` rows of ``order`` whose question and gold can be read, as examples."""
    examples: list[Example] = []
    skipped = 0
    for i in order:
        if n is not None and len(examples) >= n:
            break
        row = rows[i]
        q, g = question(row), gold(row)
        if not q or not q.strip() or not g:
            skipped += 1
            continue
        examples.append(Example(len(examples), q, g, meta(i, row) if meta else {"source_index": i}))
    return LoadedData(examples, skipped)


# --------------------------------------------------------------------------- reading rows

FILE_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}


def error_text(err: BaseException) -> str:
    return first_line(err, with_cause=True, limit=300)


def quiet_datasets():
    """Import ``datasets`` with its progress bars and error logs off: failures become one DataError line."""
    try:
        import datasets   # heavy: only when a hub split is loaded
    except ImportError as err:   # e.g. a machine with a preinstalled torch stack but no datasets
        raise DataError(f"loading data needs the `datasets` package ({err}); "
                        "pip install -r requirements.txt", setting="data_file") from None

    datasets.utils.logging.set_verbosity(datasets.utils.logging.CRITICAL)
    datasets.utils.logging.disable_progress_bar()
    return datasets


def read_data_file(path: str | Path, setting: str = "data_file") -> list[dict]:
    """Every record of a local JSON / JSONL / Parquet file, through ``datasets`` (``setting``: the flag that
    named it, for the error line)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: data file not found", setting=setting)
    fmt = FILE_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(f"{path}: unsupported data file type {path.suffix!r} "
                        f"(expected one of {', '.join(FILE_FORMATS)})", setting=setting)
    datasets = quiet_datasets()
    try:
        ds = datasets.load_dataset(fmt, data_files=str(path), split="train")
    except Exception as err:  # datasets reports parse errors with many exception types
        raise DataError(f"{path}: cannot read as {fmt.upper()} ({error_text(err)})",
                        setting=setting) from None
    return ds.to_list()


def read_hub_split(hub_id: str, config: str | None, split: str, name: str) -> list[dict]:
    datasets = quiet_datasets()
    try:
        ds = datasets.load_dataset(hub_id, config, split=split)
    except Exception as err:  # offline, gated, renamed: all mean "use a local copy"
        where = hub_id + (f" ({config})" if config else "")
        raise DataError(f"cannot load {name} split {split!r} from the Hugging Face Hub {where}: "
                        f"{error_text(err)}; offline? give a local JSON/JSONL/Parquet copy in the hub "
                        f"schema as the data file", setting="data_file") from None
    return ds.to_list()


def check_fields(rows: Sequence[Row], required: Sequence[str | tuple[str, ...]], where: str,
                  name: str, text: Sequence[str] = ()) -> None:
    """The records must have each required field (a tuple means: one of these), and the `text` fields
    (the question's; default: ``TEXT_FIELDS`` of `name`) must hold strings.

    ``datasets`` gives every record the same columns (absent values are None),
    so the first record shows the schema; a null value only makes that row unusable.
    """
    check_text_fields(rows, text or TEXT_FIELDS.get(name, ()), where)
    if not rows:
        raise DataError(f"{where}: no records")
    columns = set(rows[0])
    for need in required:
        options = need if isinstance(need, tuple) else (need,)
        if not columns & set(options):
            wanted = " or ".join(repr(f) for f in options)
            raise DataError(f"{where}: missing field {wanted}, which {name} needs "
                            f"(fields: {', '.join(sorted(columns)) or 'none'})")


def check_text_fields(rows: Sequence[Row], fields: Sequence[str], where: str) -> None:
    """Each of `fields` holds a string (or null) in every record; a number or a list is a DataError naming it."""
    for k, row in enumerate(rows):
        for name in fields:
            value = row.get(name)
            if value is not None and not isinstance(value, str):
                raise DataError(f"{where}: record {k + 1}: field {name!r} must be text, got "
                                f"{type(value).__name__} {quoted(value, 60)}", setting="data_file")


# --------------------------------------------------------------------------- hub datasets


@dataclass(frozen=True)
class HubDataset:
    """A benchmark on the Hugging Face Hub: where it lives and how to read a row."""

    name: str
    hub_id: str
    config: str | None
    required: tuple[str | tuple[str, ...], ...]
    question: Callable[[Row], str]
    gold: Callable[[Row], str | None]
    split_alias: Mapping[str, str] = field(default_factory=dict)
    test_size: int | None = None            # partition the hub's train split: first test_size (seeded) = test
    level: Callable[[Row], int | None] | None = None   # a dataset with levels declares the levels option
    meta_fields: tuple[str, ...] = ()
    stratify: bool = False                  # declares the stratify_by option
    text_fields: tuple[str, ...] = ()       # the fields the question is made of: strings only

    @property
    def options(self) -> tuple[str, ...]:
        """The selection options this dataset takes (load_examples refuses the others)."""
        return (("levels",) if self.level is not None else ()) + (("stratify_by",) if self.stratify else ())

    def __call__(self, split: str, *, n: int | None = None, seed: int = 42,
                 data_file: str | Path | None = None, levels: Sequence[int] | None = None,
                 stratify_by: str | None = None) -> LoadedData:
        if self.test_size is not None and split not in ("train", "test"):
            raise ConfigError(f"{self.name} has splits 'train' and 'test' (got {split!r})", setting="split")
        hub_split = "train" if self.test_size is not None else self.split_alias.get(split, split)
        if data_file:
            rows, where = read_data_file(data_file), str(data_file)
        else:
            rows, where = read_hub_split(self.hub_id, self.config, hub_split, self.name), self.hub_id
        required = self.required + (("level",) if levels is not None else ()) + \
            ((stratify_by,) if stratify_by else ())
        check_fields(rows, required, where, self.name, text=self.text_fields)

        order = seeded_order(len(rows), seed)
        if self.test_size is not None:
            order = order[:self.test_size] if split == "test" else order[self.test_size:]
        if levels is not None:
            wanted = set(levels)
            order = [i for i in order if self.level(rows[i]) in wanted]
        if stratify_by and n is not None:   # as the original, which stratifies only a sample of n
            order = stratified_order(order, lambda i: rows[i][stratify_by], n, seed)
        return select_examples(rows, order, question=self.question, gold=self.gold, n=n, meta=self._meta)

    def _meta(self, i: int, row: Row) -> dict:
        meta = {"dataset": self.name, "source_index": i}
        meta.update({f: row[f] for f in self.meta_fields if f in row})
        return meta


def _hub(spec: HubDataset) -> HubDataset:
    register_dataset(spec.name)(spec)
    return spec


GSM8K = _hub(HubDataset(
    "gsm8k", "gsm8k", "main", ("question", "answer"),
    question=lambda row: raw_text(row.get("question")), gold=gsm8k_gold, text_fields=("question",)))
COMPETITION_MATH = _hub(HubDataset(
    "competition_math", "qwedsacf/competition_math", None, ("problem", "solution"),
    question=lambda row: raw_text(row.get("problem")), gold=math_gold,
    test_size=2000, level=math_level, meta_fields=("level", "type"), stratify=True, text_fields=("problem",)))
MMLU = _hub(HubDataset(
    "mmlu", "cais/mmlu", "all", ("question", ("choices", "options"), ("answer", "target", "label")),
    question=mmlu_question, gold=mmlu_gold,
    split_alias={"train": "test", "test": "validation"}, meta_fields=("subject",), text_fields=("question",)))
LOGIQA = _hub(HubDataset(
    "logiqa", "lucasmccabe/logiqa", None, ("context", ("query", "question"), "options",
                                           ("correct_option", "label")),
    question=logiqa_question, gold=logiqa_gold, text_fields=("context", "query", "question")))
GPQA = _hub(HubDataset(
    "gpqa", "Idavidrein/gpqa", "gpqa_main", ("Question",) + GPQA_OPTION_FIELDS,
    question=gpqa_question, gold=gpqa_gold, test_size=100, meta_fields=("Record ID",), text_fields=("Question",)))
AQUA_RAT = _hub(HubDataset(
    "aqua_rat", "aqua_rat", None, ("question", "options", "correct"),
    question=lambda row: raw_text(row.get("question")), gold=aqua_gold, text_fields=("question",)))
SVAMP = _hub(HubDataset(
    "svamp", "svamp", None, ("Body", "Question", "Answer"),
    question=svamp_question, gold=lambda row: number_gold(row.get("Answer")), text_fields=("Body", "Question")))
