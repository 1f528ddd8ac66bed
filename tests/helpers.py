"""General utilities the test files share (imported as ``helpers``: pytest puts tests/ on the path).

The checkout's root (``REPO``), the step separator (``SEP``), the values of a flag in a command line,
and two pictures of a folder (``snapshot``: every entry with its hash and mode, for "nothing outside,
nothing lost"; ``files_under``: every file's bytes, for byte-for-byte comparisons). Use it for what any
kind of test needs; shared code of one kind lives beside it in ``helpers_<kind>.py`` (trees, training,
eval_world, stage1_jobs, cli, ray, stage4_logs, datasets, bad_inputs, bad_input_files), and each name
is imported from the module that defines it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
SEP = "</step>"


def flag(cmd: list[str], name: str) -> list[str]:
    """The values after `name` in a command line, up to the next flag."""
    i = cmd.index(name)
    out = []
    for value in cmd[i + 1:]:
        if value.startswith("--"):
            break
        out.append(value)
    return out


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root`: a file's content hash and mode, a folder (a new empty one counts too),
    a link's target; "nothing outside, nothing lost" compares two of these."""
    out = {}
    for p in sorted(root.rglob("*")):
        key = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[key] = f"-> {os.readlink(p)}"
        elif p.is_dir():
            out[key] = "folder"
        elif p.is_file():
            out[key] = hashlib.sha1(p.read_bytes()).hexdigest() + oct(p.stat().st_mode & 0o777)
        else:
            out[key] = "special"   # a FIFO: never read
    return out


def files_under(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` by its relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
