"""Where a run may write: checks of output locations, made before anything is written.

- ``check_output_dir`` / ``check_output_file``: a file where a folder goes, a
  folder where a file goes, a location that cannot be written, and (with
  ``inputs``) a location that is, or is inside, one of the run's inputs;
- ``check_outside_inputs``: an output inside a model, scorer or data location
  would change what the run reads (a base model's tokenizer files, the content a
  fingerprint is computed from);
- ``check_no_linked_folders``: no folder at or below a chosen output is a symbolic link
  (``check_output_dir`` and ``check_output_file`` apply it, so every command does);
- ``check_no_outside_links``: a folder a run owns whole has no symbolic link
  that leads out of it (``masprm.run_folder.locked_folder`` calls it);
- ``check_plain_name``: a user's value that becomes a file name component;
- ``check_csv_output``: a table output never replaces a log, a manifest or a picture;
- ``library_output`` / ``file_snapshot``: a library that writes files itself (``save_pretrained``)
  writes new inodes through a temporary folder, and only the files a run created get the umask's mode.

``masprm.checks`` re-exports them. Each raises ``ConfigError`` naming the setting.
Pure Python.
"""

from __future__ import annotations

import csv
import os
import secrets
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

from masprm.errors import ConfigError, quoted
from masprm.io import honour_umask
from masprm.paths import path_status


def lexical_path(path: str | os.PathLike) -> Path:
    """`path` made absolute without looking at the disk: '..' and '.' are folded by name, and a link
    stays a link (``resolve()`` would put an output next to the link's target, a folder the user did
    not name)."""
    return Path(os.path.abspath(os.fspath(path)))


def _existing_ancestor(path: Path, setting: str, shown: str) -> Path:
    """The nearest existing ancestor of `path` (itself included); an OSError other than "missing"
    (a name too long, a loop of links, a folder that cannot be searched) is one ConfigError."""
    path = lexical_path(path)
    missing = []
    while path_status(path, setting, label=shown) is None and path != path.parent:
        if os.path.islink(path):   # a dangling link where a folder is to be made: mkdir would go through it
            raise _linked_folder(shown, setting, os.readlink(path), str(path) if missing else "")
        missing.append(path.name)
        path = path.parent
    # the names still to be made: one too long would fail only after the folders above it were made
    try:
        limit = os.pathconf(path, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    if any(len(os.fsencode(name)) > limit for name in missing):
        raise ConfigError(f"{shown}: a name in it is too long for the file system (over {limit} bytes)",
                          setting=setting)
    return path


def _check_can_hold(folder: Path, setting: str, shown: str) -> None:
    """`folder` exists as a writable folder, or can be made inside one (`shown` starts the message)."""
    base = _existing_ancestor(folder, setting, shown)
    if not base.is_dir():
        raise ConfigError(f"{shown}: {base} is a file, so no folder can be made there", setting=setting)
    if not os.access(base, os.W_OK | os.X_OK):
        raise ConfigError(f"{shown}: {base} is not writable", setting=setting)


Inputs = Mapping[str, "str | os.PathLike | None"]   # setting -> a path the run reads (None, hub ids: skipped)


def _linked_folder(shown: str, setting: str, target: str, below: str = "") -> ConfigError:
    where = f"{below} is a link" if below else "is a link"
    return ConfigError(f"{shown}: {where} to {target}; no folder at or below an output may be a link (the "
                       "run would write into the link's target): remove the link or name its target",
                       setting=setting)


def check_no_linked_folders(path: str | os.PathLike, setting: str, shown: str | None = None) -> None:
    """Neither `path` nor any folder below it (at any depth) is a symbolic link; a link below it that
    does not lead to a regular file (a folder, nothing, a loop) counts as a folder.

    The one rule for every output: a run writes folders as themselves, so a planted link never sends
    trees, logs, caches or checkpoints into a folder the user did not name. Links to files are left:
    every file is written as a new inode that replaces the link (``masprm.io``). Links above `path`
    (the user's own layout, e.g. a home on another disk) are not looked at.
    """
    shown = shown or f"{setting} {path}"
    path = lexical_path(path)
    if os.path.islink(path):
        raise _linked_folder(shown, setting, os.readlink(path))
    if not os.path.isdir(path):
        return
    for here, dirs, files in os.walk(path, onerror=lambda err: None):   # links are listed, never followed
        for name in sorted(dirs + files):
            entry = os.path.join(here, name)
            if os.path.islink(entry) and not os.path.isfile(entry):
                raise _linked_folder(shown, setting, os.readlink(entry), os.path.relpath(entry, path))


def check_output_dir(path: str | os.PathLike, setting: str, *, inputs: Inputs | None = None) -> Path:
    """A folder the run will write into: not a file, writable (or creatable), no folder at or below it a
    link (``check_no_linked_folders``), and not one of `inputs` nor inside one (``check_outside_inputs``)."""
    path = Path(path)
    st = path_status(path, setting)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{setting} {path}: is a file, not a folder", setting=setting)
    _check_can_hold(path, setting, f"{setting} {path}")
    check_no_linked_folders(path, setting)
    check_outside_inputs(path, setting, inputs or {})
    return path


def check_output_file(path: str | os.PathLike, setting: str, *, label: str | None = None,
                      inputs: Inputs | None = None) -> Path:
    """A file the run will write (atomically, by renaming into place): not a folder, in a writable folder
    (none of the folders still to be made for it a link), not one of `inputs` nor inside an input folder."""
    path = Path(path)
    shown = f"{label or setting} {path}"
    st = path_status(path, setting, label=label)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{shown}: is a folder, not a file", setting=setting)
    _check_can_hold(path.parent, setting, shown)
    check_outside_inputs(path, setting, inputs or {}, label=label)
    return path


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_outside_inputs(output: str | os.PathLike, setting: str, inputs: Inputs, *,
                         label: str | None = None) -> None:
    """An output that is an input, or lies inside an input folder, is a ConfigError naming both.

    Writing there would change what the run reads: a base model's tokenizer files, the
    content a model's or scorer's fingerprint is computed from, the data. Paths are
    compared after resolving links; an input that is not a local path (a hub id) is skipped.
    """
    out = os.path.realpath(output)
    for name, value in inputs.items():
        if not value or not os.path.exists(value):
            continue
        source = os.path.realpath(value)
        if out == source or (os.path.isdir(source) and _inside(out, source)):
            kind = "folder" if os.path.isdir(source) else "file"
            where = "is" if out == source else "is inside"
            raise ConfigError(f"{label or setting} {output}: {where} the input {kind} {value} (`{name}`); "
                              "writing there would change what the run reads: choose an output outside it",
                              setting=setting)


def check_no_outside_links(folder: str | os.PathLike, setting: str) -> None:
    """`folder` is no link, and no symbolic link inside it (at any depth) leads out of it.

    A run that owns a folder (a stage-1 run folder, a stage-3 output folder) writes
    into it through libraries that follow links; a planted link would send such a
    write to any file the user may change.
    """
    if os.path.islink(folder):
        raise ConfigError(f"{setting} {folder}: is a link to {os.path.realpath(folder)}; a folder the run "
                          "owns is written as itself, never through a link: remove the link or name its "
                          "target", setting=setting)
    root = os.path.realpath(folder)
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            entry = os.path.join(here, name)
            if not os.path.islink(entry):
                continue
            target = os.path.realpath(entry)
            if not _inside(target, root):
                rel = os.path.relpath(entry, root)
                raise ConfigError(f"{setting} {folder}: {rel} is a link to {target}, outside the folder; "
                                  "writing through it would change that file: remove the link", setting=setting)


def missing_folders(folder: str | os.PathLike) -> list[Path]:
    """The folders a run would make to create `folder`: itself, then each missing one above it (deepest
    first); [] when it exists. Taken before the run, for ``remove_empty_folders`` after a late refusal."""
    folder = Path(folder)
    return [p for p in (folder, *folder.parents) if not os.path.lexists(p)]


def remove_empty_folders(folders: list[Path]) -> None:
    """Remove `folders` (deepest first, as ``missing_folders`` lists them) while they are empty: a run refused
    before it wrote anything leaves no folder behind, and a folder that holds something stops the climb."""
    for path in folders:
        try:
            path.rmdir()
        except OSError:
            break


def check_plain_name(value: str, setting: str, what: str = "name") -> str:
    """A user's value that becomes one component of a file or folder name: no separator, not '.' or '..'."""
    if (not isinstance(value, str) or not value.strip() or value in (".", "..") or "/" in value
            or "\\" in value or "\0" in value or value != value.strip()):
        raise ConfigError(f"{setting} {quoted(value)}: must be a plain {what} (it becomes part of an output "
                          "folder name): no '/', no '..', no surrounding spaces", setting=setting)
    return value


def check_csv_output(path: str | os.PathLike, setting: str) -> Path:
    """A CSV file to write: a ``.csv`` name, and an existing file there must be a CSV table (not a log,
    a manifest or a picture renamed)."""
    path = Path(path)
    if path.suffix.lower() != ".csv":
        raise ConfigError(f"{setting} {path}: must name a .csv file (got suffix {quoted(path.suffix or '')})",
                          setting=setting)
    if path.is_file() and not _looks_like_csv(path):
        raise ConfigError(f"{setting} {path}: the file there is not a CSV table; it would be overwritten: "
                          "choose another name", setting=setting)
    return path


def _looks_like_csv(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if not head.strip():
        return True
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    first = next((line for line in text.splitlines() if line.strip()), "")
    return "\0" not in text and not first.lstrip().startswith(("{", "[", "=")) and len(next(csv.reader([first]))) >= 2


# --------------------------------------------------------------------------- files a library writes


def file_snapshot(folder: str | os.PathLike) -> set[tuple[str, int]]:
    """(path, inode) of every file under `folder` (links not followed): what was there before a run."""
    found = set()
    for here, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(here, name)
            try:
                found.add((path, os.lstat(path).st_ino))
            except OSError:
                continue
    return found


@contextmanager
def library_output(folder: str | os.PathLike) -> Iterator[Path]:
    """A new, empty temporary folder inside `folder` for a library that writes files itself (a model's
    ``save_pretrained``); on a clean exit its files get the umask's mode and are renamed into `folder`.

    So every file a library writes is a new inode: a file already at a name (a hard link to a backup,
    a link planted to elsewhere) is replaced, never written through or truncated. On an exception
    nothing in `folder` changes.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        tmp = folder / f".save.{secrets.token_hex(4)}.tmp"
        try:
            tmp.mkdir()
            break
        except FileExistsError:
            continue
    else:   # never take over a folder another writer made: it would be filled and removed below
        raise ConfigError(f"{folder}: no new temporary folder could be made there (100 names taken)",
                          setting="output")
    try:
        yield tmp
        honour_umask(tmp)   # everything in it is this run's
        _move_into(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _move_into(source: Path, target: Path) -> None:
    """Rename each file of `source` to the same place under `target` (folders merged, never followed)."""
    for entry in sorted(source.iterdir()):
        dest = target / entry.name
        if entry.is_dir() and not entry.is_symlink():
            if os.path.islink(dest) or (os.path.lexists(dest) and not dest.is_dir()):
                os.unlink(dest)
            if not os.path.lexists(dest):
                os.rename(entry, dest)
                continue
            _move_into(entry, dest)
        else:
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            os.replace(entry, dest)
