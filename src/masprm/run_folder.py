"""A stage-1 run folder: its name, one run at a time, and only runs with the same defining settings.

The folder name records what produced the trees, so a folder is never mixed
up with another run's search settings and later stages can read the dataset back:

    {dataset_tag}_res_{split}_{model_tag}_r{n_rollouts}_c{c}_cand{n_candidates}_t{temperature}_p{top_p}[_mnt{N}]

e.g. ``gsm8k_res_train_Qwen_Qwen2.5-1.5B-Instruct_r40_c4_cand3_t0p7_p0p95``.

The name does not record the seed, the data file, the model's weights or the
token cap, so two runs that differ in those would silently share a folder.
Each run therefore

- holds an exclusive lock on the folder while it works (``flock`` on the
  folder itself, released by the kernel however the process ends); a second
  run is refused with one line naming the holder, kept in ``.lock``;
- records its defining settings in ``.run_settings`` (JSON) and, on a rerun,
  refuses settings that differ, naming each one (and a folder of trees without
  that record). A folder that holds no tree yet (a first run that failed before
  its first tree) makes no such claim: its record is replaced.

Both files are hidden, so tree readers (``*.json``) and content hashes skip them.
The lock serves any folder a run owns whole (stage 3 locks its ``--output-dir``
the same way). A locked folder is also checked for symbolic links that lead
out of it: whatever a run writes there (through a library that follows links)
must stay inside. The holder file is replaced, never written through.
Pure Python (POSIX ``fcntl``).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from masprm.dataset_sources import dataset_name_tag, is_dataset_source
from masprm.outputs import check_no_outside_links, check_plain_name, missing_folders, remove_empty_folders
from masprm.errors import ConfigError
from masprm.io import atomic_write_json, atomic_write_text
from masprm.log import get_logger

log = get_logger(__name__)

LOCK_FILE = ".lock"
SETTINGS_FILE = ".run_settings"
RUN_MARKER = "_res_"


# --------------------------------------------------------------------------- the folder name


def format_number(x: float) -> str:
    """``%g`` with the dot spelled ``p``: 4.0 -> '4', 0.7 -> '0p7', 0.95 -> '0p95'."""
    return ("%g" % x).replace(".", "p")


def model_tag(model_id: str) -> str:
    """A hub id with '/' -> '_'; a local directory -> its last path component."""
    path = Path(model_id).expanduser()
    if path.is_dir():
        return path.resolve().name
    return model_id.strip("/").replace("/", "_")


def default_config_path(dataset: str, setting: str = "mas_config") -> str:
    """``configs/<dataset>.yaml``, the team of a registered benchmark; a dataset given by hub id or path has no
    team of its own, so the command's team flag (``setting``) must name one."""
    if is_dataset_source(dataset):
        raise ConfigError(f"--dataset {dataset} has no team of its own: give one with `{setting}` "
                          "(e.g. configs/gsm8k.yaml)", setting="dataset")
    return f"configs/{dataset}.yaml"


def dataset_tag(dataset: str, mas_config: str | None = None) -> str:
    """The dataset name, or the config's stem when the run used another team.

    A stem that already starts with ``<dataset>_`` (gsm8k_refine) is used as
    is; any other differing stem is appended (gsm8k + single -> gsm8k_single). A dataset given by hub id or
    path counts by its tag (``owner/name`` -> ``owner_name``, ``data/qs.jsonl`` -> ``qs``).
    """
    dataset = dataset_name_tag(dataset)
    stem = Path(mas_config).stem if mas_config else dataset
    if stem == dataset or stem.startswith(f"{dataset}_"):
        return stem
    return f"{dataset}_{stem}"


def dataset_tag_of_run(folder: str | Path) -> str:
    """The part of a run folder's name before ``_res_`` (stage 2 derives its config from it)."""
    name = Path(folder).name
    if RUN_MARKER not in name:
        raise ValueError(f"{name!r} is not a stage-1 run folder name (no {RUN_MARKER!r})")
    return name.split(RUN_MARKER, 1)[0]


def run_folder_name(dataset: str, split: str, model_id: str, n_rollouts: int, c: float,
                    n_candidates: int, temperature: float, top_p: float,
                    mas_config: str | None = None, max_new_tokens: int | None = None) -> str:
    """The folder name; a ``--max_new_tokens`` cap changes the trees, so it is added (``_mnt256``) when set.

    The split comes from the user: it must be a plain name, so the folder stays inside ``--out_root``.
    """
    check_plain_name(split, "split", "split name")
    return (
        f"{dataset_tag(dataset, mas_config)}{RUN_MARKER}{split}_{model_tag(model_id)}"
        f"_r{n_rollouts}_c{format_number(c)}_cand{n_candidates}"
        f"_t{format_number(temperature)}_p{format_number(top_p)}"
        + (f"_mnt{max_new_tokens}" if max_new_tokens is not None else "")
    )


# --------------------------------------------------------------------------- one run at a time


@contextmanager
def locked_folder(folder: str | os.PathLike, setting: str = "out_root") -> Iterator[Path]:
    """Create `folder` if needed and hold its lock; a folder another run holds is a ConfigError.

    The folder being a link, or a link in it that leads out of it, is refused (ConfigError naming it)
    before anything is written. A run that fails having written only its own record leaves no record
    (``_remove_own_records``), and the folders this call created (the run folder, a new `out_root` above it)
    are removed again if the run left them empty.
    """
    folder = Path(folder)
    created = not os.path.lexists(folder)
    made = missing_folders(folder)   # the run folder, then a missing `out_root` above it
    if not created:
        check_no_outside_links(folder, setting)   # the folder itself a link, or one inside leading out
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = _read_holder(folder / LOCK_FILE)
        raise ConfigError(f"{folder} is in use by another run ({holder}); wait for it to finish, "
                          f"or use another `{setting}`") from None
    except OSError as err:  # a file system without locks (some network mounts): run, but say so
        log.warning(f"warning: cannot lock {folder} ({err.strerror}); a second run on it would not be stopped")
    before = set() if created else {p.name for p in folder.iterdir()}
    try:
        yield folder
    except BaseException:
        _remove_own_records(folder, before)
        raise
    finally:
        (folder / LOCK_FILE).unlink(missing_ok=True)
        os.close(fd)  # closing the last descriptor releases the lock
        remove_empty_folders(made)   # a run refused before it wrote anything leaves no empty folder behind


def _remove_own_records(folder: Path, before: set[str]) -> None:
    """A run refused late (a connection, a model's first output) removes the records it wrote about itself
    (``.run_settings``) when it wrote nothing else: no record of a run that made nothing is left, and nothing
    that was there before it (a resumed run's record and trees) is touched."""
    made = {p.name for p in folder.iterdir()} - before - {LOCK_FILE}
    if made and made <= {SETTINGS_FILE}:
        for name in made:
            (folder / name).unlink(missing_ok=True)


def announce_holder(folder: Path) -> None:
    """Say who holds the lock (called once the run is known to go ahead)."""
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "?"
    text = (f"pid {os.getpid()} on {socket.gethostname()}, since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime())}: {command}")
    atomic_write_text(folder / LOCK_FILE, text[:500] + "\n")   # replaces a planted link, never follows it


def _read_holder(path: Path) -> str:
    """The holder line, read without following a link (a link would show another file's text)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return "holder unknown"
    with os.fdopen(fd, "rb") as fh:
        text = fh.read(1000).decode("utf-8", errors="replace")
    return text.strip()[:500] or "holder unknown"


# --------------------------------------------------------------------------- defining settings

# recorded name -> the setting a user changes it with (for the message)
SETTING_NAMES = {"model": "model_id", "policy_weights": "load_in_4bit"}   # a record key -> the setting shown
# Keys recorded only when not at their default (so older records stay valid): a missing one means this value.
RECORD_DEFAULTS = {"backend": "hf"}


def read_settings(folder: Path) -> dict | None:
    path = folder / SETTINGS_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ConfigError(f"{path} is corrupt (not JSON); it records what made the trees in {folder}: "
                          "fix it or move the folder") from None
    return data if isinstance(data, dict) else {}


def _same(recorded: Any, current: Any) -> bool:
    """Equal, where a file or model counts as the same when its content is (wherever it lies now)."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        if recorded.get("identity") or current.get("identity"):
            return recorded.get("identity") == current.get("identity")
        return recorded.get("path") == current.get("path")
    return recorded == current


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return f"{value.get('path')} [{value.get('identity') or 'hub'}]"
    return repr(value)


def holds_trees(folder: Path) -> bool:
    """Whether the folder holds a tree file (``<idx>.json``)."""
    return any(p.suffix == ".json" and not p.name.startswith(".") for p in folder.iterdir()) \
        if folder.is_dir() else False


def check_or_record_settings(folder: Path, current: dict) -> None:
    """Record ``current`` in a folder without trees (a record there claims nothing: its run made no
    tree), or compare it with the folder's record: a difference is a ConfigError, and so are trees
    without a record (no run of this version leaves a folder so)."""
    if not holds_trees(folder):
        atomic_write_json(folder / SETTINGS_FILE, current)
        return
    recorded = read_settings(folder)
    if recorded is None:
        raise ConfigError(f"{folder} holds trees but no record of the settings that made them "
                          f"({SETTINGS_FILE}); use another `out_root` or move the folder")
    recorded = {**RECORD_DEFAULTS, **recorded}
    current = {**RECORD_DEFAULTS, **current}
    changed = [k for k in current if k in recorded and not _same(recorded[k], current[k])]
    if changed:
        diffs = "; ".join(f"`{SETTING_NAMES.get(k, k)}` was {_shown(recorded[k])}, now {_shown(current[k])}"
                          for k in changed)
        raise ConfigError(f"{folder} holds trees of another run ({diffs}); use another `out_root` "
                          "or move the folder")
