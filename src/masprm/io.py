"""Atomic file writes and line-checked JSONL reading.

Every output is written to a temporary file in the same folder and renamed
into place, so an interrupted run never leaves a half-written file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from contextlib import contextmanager
from typing import IO, Any, Iterable, Iterator, TextIO

from masprm.errors import DataError


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file next to `path` for writing (``mode`` "w" or "wb"); rename it into place on a
    clean exit.

    On an exception the temporary file is removed and any existing `path` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
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
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: not valid JSON ({err})") from None


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
            yield lineno, rec


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
