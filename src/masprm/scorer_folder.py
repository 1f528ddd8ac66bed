"""One reader of a trained scorer folder: where its weights are and what it records, read once.

    folder = read_scorer_folder("checkpoints/toy-ppm", "prm_dir")
    folder.target          # the folder itself, or its newest checkpoint-N when it holds only checkpoints
    folder.meta            # masprm_scorer.json ({} when there is none)
    folder.adapter         # adapter_config.json of the target (None: a full model, or nothing to load)
    folder.base_model      # the base the adapter names (else the record's base_model_id), or None
    folder.training        # what it was trained as (masprm.scorer_meta.training_of)
    folder.config          # config.json of the target (None: an adapter folder, or unreadable)
    folder.config_error    # why that config.json cannot be trusted (not JSON, labels of the wrong type), or None
    folder.scorer_format   # how it is read (masprm.scorer_formats), once chosen; None until then

Stage 4 reads each scorer folder it uses once and carries the record to the
checks (``masprm.checks.check_scorer_folder`` / ``check_scorer_role``), the
condition label (``masprm.eval.naming``), the manifest and the loader
(``masprm.models.scorer.load_scorer``); nothing below it opens
``masprm_scorer.json`` or ``adapter_config.json`` again. The reader never
refuses a folder: a file that does not parse is kept as ``meta_error`` /
``adapter_error`` for ``check_scorer_folder`` to report, so a check that only
looks (the role check) can pass over it. A public scorer (a TRL reward model,
a step-tag PRM) reads into the same ``ScorerFolder``: its ``config.json`` says
what it is, and ``masprm.scorer_formats.choose_format`` records the format it
is read in (named or detected) with that format's options.

The record is found in the folder, else in the target checkpoint, else in the
run folder above the named one (a ``checkpoint-N`` named directly). Pure Python:
no torch import.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from masprm.scorer_meta import SCORER_META_FILE, training_of

ADAPTER_CONFIG = "adapter_config.json"
MODEL_CONFIG = "config.json"
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")


def checkpoint_step(path: Path) -> int:
    """N of a ``checkpoint-N`` folder; -1 for any other name."""
    match = _CHECKPOINT.fullmatch(path.name)
    return int(match.group(1)) if match else -1


def checkpoints(folder: Path) -> list[Path]:
    """The ``checkpoint-N`` folders, oldest first (by N, not by name): the one listing of them."""
    return sorted((p for p in folder.glob("checkpoint-*") if p.is_dir() and checkpoint_step(p) >= 0),
                  key=checkpoint_step)


def newest_checkpoint(folder: Path) -> Path | None:
    """The ``checkpoint-N`` folder of the highest N, or None (a resumed training sets incomplete ones aside
    first: ``masprm.train.checkpoints.resume_checkpoint``)."""
    found = checkpoints(folder)
    return found[-1] if found else None


def holds_model(folder: Path) -> bool:
    """An adapter or a full model is saved right in ``folder``."""
    return (folder / ADAPTER_CONFIG).is_file() or (folder / MODEL_CONFIG).is_file()


@dataclass(frozen=True)
class ScorerFolder:
    path: Path                       # the folder as named (expanded)
    checkpoint: str | None           # the newest checkpoint-N used in its place, or None (the folder itself)
    meta: dict[str, Any]             # masprm_scorer.json, {} when none (or unreadable: see meta_error)
    own_meta: bool                   # the record is the named folder's own (not a checkpoint's or the run's above)
    adapter: dict[str, Any] | None   # the target's adapter_config.json; None without one (or unreadable)
    meta_error: str | None = None    # why masprm_scorer.json could not be read ("is not valid JSON (...)")
    adapter_error: str | None = None
    config: dict[str, Any] | None = None   # the target's config.json (a full model's architecture and labels)
    scorer_format: str | None = None       # the format it is read in (None: not chosen yet)
    format_options: dict[str, Any] = field(default_factory=dict)   # that format's settings (step tag, tokens)
    config_error: str | None = None        # why config.json cannot be trusted (``config_problem``)

    @property
    def target(self) -> Path | None:
        """Where the weights are: the folder, its newest checkpoint, or None when there is neither."""
        if self.checkpoint:
            return self.path / self.checkpoint
        return self.path if holds_model(self.path) else None

    @property
    def is_adapter(self) -> bool:
        target = self.target
        return target is not None and (target / ADAPTER_CONFIG).is_file()

    @property
    def base_model(self) -> str | None:
        """The base model the adapter config names, else the record's ``base_model_id``."""
        base = (self.adapter or {}).get("base_model_name_or_path") or self.meta.get("base_model_id")
        return base if isinstance(base, str) and base else None

    @property
    def adapter_base(self) -> str | None:
        """The base model the adapter config alone names."""
        base = (self.adapter or {}).get("base_model_name_or_path")
        return base if isinstance(base, str) and base else None

    @property
    def training(self) -> dict[str, Any]:
        """Objective and label scheme (+ aggregation of a traj scorer); {} without a record."""
        return training_of(self.meta)

    def at(self, path: str | os.PathLike) -> "ScorerFolder":
        """The same record for the folder seen from elsewhere (a Ray worker's absolute path)."""
        return replace(self, path=Path(path))


def _read_object(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the JSON object in ``path``, None) or (None, why it cannot be read)."""
    try:
        raw = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:   # worded as masprm.checks.read_utf8 words it
        return None, (f"{path}: the file is not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset "
                      f"{err.start}); save it as UTF-8")
    except OSError as err:
        return None, f"{path.name} cannot be read ({err.strerror or err})"
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        return None, f"{path.name} is not valid JSON ({err.msg}, line {err.lineno})"
    if not isinstance(data, dict):
        return None, f"{path.name} must hold a JSON object"
    return data, None


def _whole(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def config_problem(config: dict[str, Any]) -> str | None:
    """Why a model's config.json cannot say what it is (None when it can): ``architectures`` a list of names,
    ``num_labels`` a whole number >= 1, ``id2label`` an object from the labels 0..n-1 (as text, JSON's keys)
    to names and ``label2id`` its inverse, both of as many labels as ``num_labels`` when it is given. The
    formats read their head's size from these values; transformers would turn a bad one into a traceback."""
    names = config.get("architectures")
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        return f"config.json: architectures must be a list of class names, got {json.dumps(names)[:80]}"
    count = config.get("num_labels")
    if count is not None and not _whole(count, 1):
        return f"config.json: num_labels must be a whole number >= 1, got {json.dumps(count)[:80]}"
    id2label, label2id = config.get("id2label"), config.get("label2id")
    if id2label is not None:
        if not isinstance(id2label, dict) or not all(isinstance(v, str) for v in id2label.values()):
            return "config.json: id2label must map label numbers to names"
        keys = sorted(id2label, key=lambda k: (not k.isdigit(), len(k), k))
        if keys != [str(i) for i in range(len(keys))]:
            return (f"config.json: id2label's keys must be the label numbers 0..{len(keys) - 1}, got "
                    f"{', '.join(json.dumps(k) for k in keys[:4])}")
        if count is not None and len(keys) != count:
            return f"config.json: id2label names {len(keys)} labels, num_labels says {count}"
    if label2id is not None and not (isinstance(label2id, dict) and all(_whole(v, 0) for v in label2id.values())):
        return "config.json: label2id must map label names to label numbers"
    return None


def read_scorer_folder(path: str | os.PathLike) -> ScorerFolder:
    """The folder's record (see the module docstring); a folder that does not exist reads as empty."""
    folder = Path(path).expanduser()
    checkpoint = None
    if folder.is_dir() and not holds_model(folder):
        newest = newest_checkpoint(folder)
        checkpoint = newest.name if newest else None
    target = folder / checkpoint if checkpoint else folder
    meta, meta_error, own = {}, None, False
    candidates = [folder / SCORER_META_FILE, target / SCORER_META_FILE, folder.parent / SCORER_META_FILE]
    for k, candidate in enumerate(dict.fromkeys(candidates)):
        if candidate.is_file():
            read, meta_error = _read_object(candidate)
            meta, own = read or {}, k == 0
            break
    adapter, adapter_error = None, None
    if (target / ADAPTER_CONFIG).is_file():
        adapter, adapter_error = _read_object(target / ADAPTER_CONFIG)
    config, config_error = _read_object(target / MODEL_CONFIG) if (target / MODEL_CONFIG).is_file() else (None, None)
    config_error = config_error or (config_problem(config) if config is not None else None)
    return ScorerFolder(folder, checkpoint, meta, own, adapter, meta_error, adapter_error, config,
                        config_error=config_error)
