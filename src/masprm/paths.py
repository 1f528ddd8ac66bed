"""Paths a user names: one argument type, one checker, one way to list a folder.

- ``PathText``: the annotation of a settings field that holds a path kept as text
  (``Path`` fields stay ``Path``); ``masprm.config`` gives both the argument type
  ``path_value``, which refuses ``""`` at parse time (an empty path is the current
  folder to ``open`` and ``mkdir``, never what a user meant);
- ``path_status``: ``os.stat`` of a path that turns every ``OSError`` but "missing"
  (a name too long, a link loop, a folder that cannot be searched) into one
  ``ConfigError`` naming the setting; ``Path.exists()`` swallows a link loop and
  would let a check pass;
- ``check_input_file`` / ``check_input_dir``: a file the run reads is a regular file
  (a FIFO would hang the reader, a device would be read forever), a folder is a folder;
- ``matching_files``: a folder's entries matching a pattern, each with why it cannot be
  read as a file (a FIFO, a folder, unreadable: skipped and named, never opened).

Pure Python.
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
from pathlib import Path
from typing import NewType

from masprm.errors import ConfigError, quoted

PathText = NewType("PathText", str)   # a settings field holding a path as text (its flag refuses "")


def _refuse_empty(text: str) -> str:
    if not text or not text.strip():
        raise argparse.ArgumentTypeError(f"an empty path ({quoted(text)}) names no file or folder")
    if "\0" in text:
        raise argparse.ArgumentTypeError("a path cannot contain a NUL byte")
    return text


def path_value(kind: type) -> "callable":
    """The argparse type of a path flag: ``Path`` or text (``PathText``), never empty."""
    if kind is Path:
        def as_path(text: str) -> Path:
            return Path(_refuse_empty(text))
        as_path.__name__ = "path"
        return as_path

    def as_text(text: str) -> str:
        return _refuse_empty(text)
    as_text.__name__ = "path"
    return as_text


def os_problem(err: OSError) -> str:
    """What an OSError says about a path, in words (``ENAMETOOLONG`` -> 'a name in it is too long')."""
    words = {errno.ENAMETOOLONG: "a name in it is too long for the file system",
             errno.ELOOP: "it is a loop of symbolic links",
             errno.EACCES: "permission denied",
             errno.EPERM: "permission denied",
             errno.ENOTDIR: "a part of it is a file, not a folder",
             errno.ENOENT: "no such file or folder"}
    return words.get(err.errno, err.strerror or type(err).__name__)


def path_error(path: str | os.PathLike, setting: str, err: OSError, label: str | None = None) -> ConfigError:
    return ConfigError(f"{label or setting} {os.fspath(path)}: {os_problem(err)}", setting=setting)


def path_status(path: str | os.PathLike, setting: str, *, follow: bool = True,
                label: str | None = None) -> os.stat_result | None:
    """``os.stat`` (``os.lstat`` unless ``follow``) of `path`; None when nothing is there.

    Any other OSError (ENAMETOOLONG, ELOOP, EACCES on a folder above it) is a ConfigError naming `setting`.
    """
    try:
        return os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ENOTDIR:
            return None   # a file where a folder of the path should be: nothing is there (callers say why)
        raise path_error(path, setting, err, label) from None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _check_input(path: str | os.PathLike, setting: str, what: str, label: str | None, is_kind, kind_word: str,
                 access: int, cannot: str) -> Path:
    shown = f"{label or setting} {os.fspath(path)}"
    st = path_status(path, setting, label=label)
    if st is None:
        raise ConfigError(f"{shown}: no such {what}", setting=setting)
    if not is_kind(st.st_mode):
        raise ConfigError(f"{shown}: is {kind_word(st.st_mode)}, not a {what}", setting=setting)
    if not os.access(path, access):
        raise ConfigError(f"{shown}: permission denied ({cannot})", setting=setting)
    return Path(path)


def check_input_file(path: str | os.PathLike, setting: str, *, what: str = "file",
                     label: str | None = None) -> Path:
    """A file the run reads: present, a regular file (following links), readable."""
    return _check_input(path, setting, what, label, stat.S_ISREG, _kind, os.R_OK, "cannot be read")


def check_input_dir(path: str | os.PathLike, setting: str, *, what: str = "folder",
                    label: str | None = None) -> Path:
    """A folder the run reads: present, a folder (following links), listable."""
    return _check_input(path, setting, what, label, stat.S_ISDIR, lambda mode: "a file", os.R_OK | os.X_OK,
                        "cannot be listed")


def matching_files(folder: str | os.PathLike, pattern: str, setting: str) -> list[tuple[Path, str | None]]:
    """Each entry of `folder` matching `pattern` (sorted by name), with why it cannot be read as a file
    (None for a readable regular file).

    A match that is a folder, a FIFO, a device, a dangling link or unreadable is never opened: the
    caller skips it and names it with the reason.
    """
    check_input_dir(folder, setting)
    found = []
    for path in sorted(Path(folder).glob(pattern), key=lambda p: p.name):
        try:
            st = os.stat(path)
        except OSError as err:
            found.append((path, os_problem(err)))
            continue
        if not stat.S_ISREG(st.st_mode):
            found.append((path, _kind(st.st_mode)))
        elif not os.access(path, os.R_OK):
            found.append((path, "permission denied"))
        else:
            found.append((path, None))
    return found
