"""A stage-1 run folder: one run at a time, and only runs with the same defining settings.

The folder name records the search settings but not the seed, the
data file, the model's weights or the token cap, so two runs that differ in
those would silently share a folder. Each run therefore

- holds an exclusive lock on the folder while it works (``flock`` on the
  folder itself, released by the kernel however the process ends); a second
  run is refused with one line naming the holder, kept in ``.lock``;
- records its defining settings in ``.run_settings`` (JSON) and, on a rerun,
  refuses settings that differ, naming each one.

Both files are hidden, so tree readers (``*.json``) and content hashes skip them.
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

from masprm.errors import ConfigError
from masprm.io import atomic_write_json

LOCK_FILE = ".lock"
SETTINGS_FILE = ".run_settings"


@contextmanager
def locked_folder(folder: str | os.PathLike, setting: str = "out_root") -> Iterator[Path]:
    """Create `folder` if needed and hold its lock; a folder another run holds is a ConfigError."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = _read_holder(folder / LOCK_FILE)
        raise ConfigError(f"{folder} is in use by another run ({holder}); wait for it to finish, "
                          f"or use another `{setting}`") from None
    except OSError as err:  # a file system without locks (some network mounts): run, but say so
        print(f"warning: cannot lock {folder} ({err.strerror}); a second run on it would not be stopped",
              file=sys.stderr)
    try:
        yield folder
    finally:
        (folder / LOCK_FILE).unlink(missing_ok=True)
        os.close(fd)  # closing the last descriptor releases the lock


def announce_holder(folder: Path) -> None:
    """Say who holds the lock (called once the run is known to go ahead)."""
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "?"
    text = (f"pid {os.getpid()} on {socket.gethostname()}, since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime())}: {command}")
    (folder / LOCK_FILE).write_text(text[:500] + "\n", encoding="utf-8")


def _read_holder(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip() or "holder unknown"
    except OSError:
        return "holder unknown"


# --------------------------------------------------------------------------- defining settings

# recorded name -> the setting a user changes it with (for the message)
SETTING_NAMES = {"model": "model_id"}


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


def check_settings(folder: Path, current: dict) -> bool:
    """Compare with the folder's record; True when it has one. A difference is a ConfigError."""
    recorded = read_settings(folder)
    if recorded is None:
        return False
    changed = [k for k in current if k in recorded and not _same(recorded[k], current[k])]
    if changed:
        diffs = "; ".join(f"`{SETTING_NAMES.get(k, k)}` was {_shown(recorded[k])}, now {_shown(current[k])}"
                          for k in changed)
        raise ConfigError(f"{folder} holds trees of another run ({diffs}); use another `out_root` "
                          "or move the folder")
    return True


def write_settings(folder: Path, current: dict) -> None:
    atomic_write_json(folder / SETTINGS_FILE, current)
