"""Atomic file writes, safe YAML and line-checked JSONL reading.

Every output is written to a temporary file in the same folder and renamed
into place, so an interrupted run never leaves a half-written file. The
rename replaces whatever was at the path -- a symbolic link included -- and
never writes through it, so a link planted in an output folder cannot send a
write elsewhere. The temporary file is created as a plain ``open`` would
create it (mode 0666 less the process umask), so colleagues sharing a group,
and Docker bind mounts, get the permissions the user's umask gives.

A write that fails because the disk is full (or a quota or file-size limit is
reached) is an ``OutputError`` naming the file: the previous file is still in
place. ``writing_into`` turns the same failure inside other code (a trainer
saving a checkpoint) into one such line naming the folder. ``honour_umask``
gives the files a library wrote private (safetensors writes mode 0600) the
umask's mode.

``load_yaml`` is ``yaml.safe_load`` that also refuses duplicate keys and
aliases that would expand a structure beyond ``YAML_MAX_NODES`` nodes.
"""

from __future__ import annotations

import glob
import json
import os
import re
import secrets
from pathlib import Path
from contextlib import contextmanager
from typing import IO, Any, Iterable, Iterator, TextIO

import yaml

from masprm.errors import (ConfigError, DataError, MasprmError, OutputError, first_line, no_space_reason,
                           quoted)


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file next to `path` for writing (``mode`` "w" or "wb"); rename it into place on a
    clean exit.

    On an exception the temporary file is removed and any existing `path` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path.parent, path.name)   # mode 0666 less the umask; never an existing file or link
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        full = _no_space(path, err)
        if full is None:
            raise
        raise full from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path) as fh:
        fh.write(text)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb") as fh:
        fh.write(data)


def atomic_write_json(path: str | os.PathLike, obj: Any, indent: int | None = 1) -> None:
    atomic_write_text(path, json.dumps(obj, ensure_ascii=False, indent=indent) + "\n")


def atomic_write_jsonl(path: str | os.PathLike, records: Iterable[dict]) -> int:
    """Write records one per line, atomically; returns the number written.

    Records are streamed into the temporary file, so memory does not grow
    with their number.
    """
    with AtomicJsonlWriter(path) as out:
        for rec in records:
            out.write(rec)
    return out.count


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: not valid JSON ({first_line(err, limit=200)})") from None
    except RecursionError:
        raise DataError(f"{path}: nested too deeply to read (more than Python's recursion limit)") from None
    check_encodable(data, text, str(path))
    return data


# A \uD800-\uDBFF escape not followed by a \uDC00-\uDFFF one, or the second kind alone: JSON allows it,
# UTF-8 cannot hold it, so the string would pass every reader and fail when written back.
_LONE_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                             r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def check_encodable(value: Any, text: str | None, where: str, error: type[MasprmError] = DataError,
                    first: int = 1) -> None:
    """Every string in `value` (parsed from `text`) can be written as UTF-8; else `error` naming
    ``where:line`` (lines counted from `first`) and the escape. Without `text` (records a library
    read) every value is checked and `where` is named as it is."""
    found = None
    if text is not None:
        found = _LONE_SURROGATE.search(text) if "\\u" in text else None
        if found is None:
            return
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        line = "" if found is None else f":{first + text.count(chr(10), 0, found.start())}"
        shown = found.group(0) if found else repr(err.object[err.start:err.end])[1:-1]
        raise error(f"{where}{line}: a string holds a lone surrogate ({shown}), which cannot be "
                    "written as UTF-8; fix the file's text") from None


# --------------------------------------------------------------------------- YAML

YAML_MAX_NODES = 100_000   # a MAS config has hundreds; aliases must not multiply a file into millions


class _GuardedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate mapping keys and alias bombs.

    The node graph is composed first (aliases there are shared references, so
    it stays as small as the text); its size with every alias expanded is
    counted before any Python object is built, and a document that would
    expand beyond ``YAML_MAX_NODES`` is refused.
    """

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            size = _expanded_size(node, {})
            if size > YAML_MAX_NODES:
                raise yaml.YAMLError(f"its aliases expand to more than {YAML_MAX_NODES} values "
                                     "(an alias bomb?); write the structure out instead")
        return node

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                if key is not None and key in seen:
                    raise yaml.YAMLError(f"duplicate key {quoted(key)} at line {key_node.start_mark.line + 1} "
                                         f"(first at line {seen[key] + 1}); the later one would silently win")
                if key is not None:
                    seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def _expanded_size(node, memo: dict) -> int:
    """Nodes in `node` with every alias expanded; shared nodes counted once per use, each computed once."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = YAML_MAX_NODES + 1   # a node that contains itself expands forever
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    else:
        size = 1
    memo[key] = min(size, YAML_MAX_NODES + 1)
    return memo[key]


def load_yaml(text: str, source: str | os.PathLike) -> Any:
    """``yaml.safe_load(text)`` without duplicate keys or alias bombs; a problem is a ConfigError naming `source`."""
    try:
        return yaml.load(text, Loader=_GuardedLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        raise ConfigError(f"{source}: not valid YAML ({first_line(err, limit=300)})") from None
    except RecursionError:
        raise ConfigError(f"{source}: not valid YAML (nested too deeply)") from None


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """Yield (line_number, record) for each non-blank line; bad lines raise DataError."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataError(f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[err.start]:02x}); "
                                "save the file as UTF-8") from None
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
            if not isinstance(rec, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}")
            check_encodable(rec, line, str(path), first=lineno)
            yield lineno, rec


def remove_stale_temps(path: str | os.PathLike) -> int:
    """Remove the temporary files of `path` whose writer process is gone (a run killed mid-write); returns
    how many. A live writer's, and any other file, is left alone."""
    path = Path(path)
    removed = 0
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*-*.tmp"):
        pid = tmp.name[len(path.name) + 2:].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)) or tmp.is_symlink() or not tmp.is_file():
            continue
        tmp.unlink(missing_ok=True)
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True   # another user's process: alive
    return True


class AtomicJsonlWriter:
    """Stream records into a JSONL file that appears (atomically) only on a clean exit.

    For a stage that fills several output files in one pass, so a single
    ``atomic_write_jsonl`` call does not fit.

        with AtomicJsonlWriter(path) as out:
            out.write(record)
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.count = 0
        remove_stale_temps(self.path)   # a long stream is where a killed run leaves its temporary file
        self._ctx = atomic_open(self.path)
        self._fh: TextIO | None = None

    def __enter__(self) -> "AtomicJsonlWriter":
        self._fh = self._ctx.__enter__()
        return self

    def write(self, record: dict) -> None:
        self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.count += 1

    def __exit__(self, exc_type, exc, tb) -> bool | None:
        return self._ctx.__exit__(exc_type, exc, tb)


# --------------------------------------------------------------------------- safe creation, full disks, modes

_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _create_temp(folder: Path, name: str) -> tuple[int, Path]:
    """A new file next to the target (never an existing file or link), mode 0666 less the umask.

    Its name carries the writer's process id, so a temporary file left by a killed run (SIGTERM, SIGKILL)
    is told from a live one and removed by the next writer of the same file (``remove_stale_temps``).
    """
    for _ in range(100):
        tmp = folder / f".{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, _TEMP_FLAGS, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{folder}: no free temporary file name for {name}")


def _no_space(path: Path, err: BaseException, kept: str | None = None) -> OutputError | None:
    reason = no_space_reason(err)
    if reason is None:
        return None
    kept = kept or ("the previous file is unchanged" if path.exists() else "no file was made")
    return OutputError(f"{path}: cannot be written ({reason}); nothing finished was lost: {kept}; "
                       "free some space and run the command again")


@contextmanager
def append_open(path: str | os.PathLike) -> Iterator[TextIO]:
    """Open a file of finished records to append to; a full disk is an OutputError naming it (the lines
    written before are kept, so a rerun resumes from them)."""
    path = Path(path)
    try:
        with open(path, "a", encoding="utf-8") as fh:
            yield fh
    except OSError as err:
        full = _no_space(path, err, "the lines written before are kept and the same command resumes from them")
        if full is None:
            raise
        raise full from None


def process_umask() -> int:
    """The process umask, read without changing it where the system allows (Linux: /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def honour_umask(folder: str | os.PathLike, *, before: set[tuple[str, int]] | None = None) -> int:
    """Give every file a library created private (mode 0600, e.g. safetensors' writer) in `folder` the
    mode a plain ``open`` gives (0666 less the umask); returns how many were changed.

    Only files this run created are touched: with ``before`` (``masprm.outputs.file_snapshot`` taken when the run
    began), a file that was already there as the same inode keeps its mode (a user's private key in
    the folder stays private). Links are not followed.
    """
    mode = 0o666 & ~process_umask()
    if mode == 0o600:
        return 0
    changed = 0
    for here, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(here, name)
            st = os.lstat(path)
            if before is not None and (path, st.st_ino) in before:
                continue
            if os.path.isfile(path) and not os.path.islink(path) and st.st_mode & 0o777 == 0o600:
                os.chmod(path, mode)
                changed += 1
    return changed


@contextmanager
def writing_into(folder: str | os.PathLike, setting: str, kept: str) -> Iterator[None]:
    """Code that writes into `folder` (a library saving a model): a full disk becomes one OutputError.

    The message names the file when the error does (else the folder), then what was kept
    (`kept`, e.g. "the checkpoints already saved are intact").
    """
    try:
        yield
    except OutputError:
        raise
    except Exception as err:  # noqa: BLE001 - libraries report a full disk with many exception types
        reason = no_space_reason(err)
        if reason is None:
            raise
        where = getattr(err, "filename", None) or folder
        raise OutputError(f"{where}: cannot be written ({reason}); nothing finished was lost: {kept}; "
                          "free some space and run the command again", setting=setting) from None
