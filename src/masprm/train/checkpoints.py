"""Stage-3 output folders: which checkpoint a --resume continues from, and whose data a scorer holds.

transformers writes a checkpoint in steps (weights, optimizer, scheduler,
RNG state, and ``trainer_state.json`` last), so a run killed while saving
leaves a ``checkpoint-N`` folder that looks like the newest and cannot be
resumed. ``resume_checkpoint`` resumes from the newest *complete* one and
sets every incomplete one aside as ``incomplete-checkpoint-N`` (a name the
trainer's checkpoint rotation and the scorer loader do not pick up).

A scorer folder's ``masprm_scorer.json`` records the content hash of its
training data; ``check_same_data`` refuses to continue it on other data, so
a finished scorer is never relabelled as trained on a file it never saw. A
finished scorer (status ``completed``) is never trained over without
``overwrite`` (``check_not_finished``); ``resume`` continues it only from a
checkpoint it still has.
Pure Python.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Callable

from masprm.checks import ADAPTER_WEIGHTS, MODEL_WEIGHTS, SCORER_META_FILE, check_safetensors, file_identity
from masprm.errors import ConfigError, DataError, MasprmError
from masprm.scorer_folder import checkpoints   # the one listing of checkpoint-N folders (the trainer imports it here)

TRAINER_STATE = "trainer_state.json"
TORCH_FILE_SUFFIXES = (".pt", ".pth", ".bin")   # what transformers writes with torch.save in a checkpoint


def incomplete_reason(checkpoint: Path) -> str | None:
    """Why a checkpoint cannot be resumed from (None when it can)."""
    state = checkpoint / TRAINER_STATE
    if not state.is_file():
        return f"no {TRAINER_STATE}"
    try:
        json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{TRAINER_STATE} is cut short"
    weights = [checkpoint / name for name in (*ADAPTER_WEIGHTS, *MODEL_WEIGHTS) if (checkpoint / name).is_file()]
    if not weights:
        return "no weights"
    for file in weights:
        if file.suffix == ".safetensors":
            try:
                check_safetensors(file, "output_dir")
            except MasprmError:
                return f"{file.name} is cut short"
    for file in sorted(checkpoint.iterdir()):
        # optimizer, scheduler, RNG state, scaler, training args: torch.save writes each as a zip archive,
        # so an empty, cut or overwritten one is told without torch
        if file.suffix in TORCH_FILE_SUFFIXES and not (file.is_file() and zipfile.is_zipfile(file)):
            return f"{file.name} is not a complete torch file (empty, cut short or overwritten)"
    return None


def _set_aside(checkpoint: Path) -> Path:
    target = checkpoint.with_name(f"incomplete-{checkpoint.name}")
    k = 1
    while target.exists():
        k += 1
        target = checkpoint.with_name(f"incomplete-{checkpoint.name}.{k}")
    checkpoint.rename(target)
    return target


def resume_checkpoint(folder: Path, log: Callable[[str], None]) -> Path | None:
    """The newest complete checkpoint; incomplete ones are set aside, one line each."""
    found = checkpoints(folder) if folder.is_dir() else []
    complete = [p for p in found if incomplete_reason(p) is None]
    newest = complete[-1] if complete else None
    for checkpoint in found:
        reason = incomplete_reason(checkpoint)
        if reason is not None:
            aside = _set_aside(checkpoint)
            log(f"resuming: {checkpoint} is incomplete ({reason}; the run stopped while saving it): "
                f"moved to {aside.name}, resuming from {newest.name if newest else 'scratch'}")
    return newest


def data_record(data_file: str) -> dict:
    return {"path": str(data_file), "identity": file_identity(data_file), "bytes": Path(data_file).stat().st_size}


def _read_meta(folder: Path) -> dict:
    meta_path = folder / SCORER_META_FILE
    if not meta_path.is_file():
        return {}
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ConfigError(f"output_dir {folder}: {SCORER_META_FILE} is corrupt; move the folder or delete it",
                          setting="output_dir") from None
    return meta if isinstance(meta, dict) else {}


def check_not_finished(folder: Path, *, resume: bool, overwrite: bool) -> None:
    """A folder that holds a finished scorer is not trained over unless `overwrite` says so
    (`resume` continues it only from a checkpoint it still has)."""
    if overwrite or not folder.is_dir():
        return
    meta = _read_meta(folder)
    if meta.get("status") != "completed" or (resume and checkpoints(folder)):
        return
    raise ConfigError(f"output_dir {folder} holds a finished {meta.get('mode', '')} scorer ({SCORER_META_FILE} "
                      f"says status completed{'' if not resume else '; no checkpoint is left to resume from'}); "
                      "pass `overwrite` to train over it, or choose another folder", setting="output_dir")


def check_same_data(folder: Path, data_file: str) -> None:
    """Resuming on a folder whose record names other training data is refused."""
    if not (folder / SCORER_META_FILE).is_file():
        return
    meta = _read_meta(folder)
    recorded = meta.get("data") if isinstance(meta.get("data"), dict) else {}
    if not recorded.get("identity"):
        raise ConfigError(f"output_dir {folder}: {SCORER_META_FILE} records no identity of its training data, so "
                          "`resume` cannot tell whether it is the same; use another `output_dir`", setting="output_dir")
    if recorded["identity"] != file_identity(data_file):
        raise DataError(f"data_file {data_file} is not the data the scorer in {folder} was trained on "
                        f"({recorded.get('path')}; status {meta.get('status', 'unknown')}); `resume` continues a run "
                        "on its own data: use another `output_dir` for new data", setting="data_file")
