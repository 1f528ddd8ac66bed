"""Checks of user inputs and output locations, made before any expensive work."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def file_identity(path: str | os.PathLike) -> str:
    digest = hashlib.sha1()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]
