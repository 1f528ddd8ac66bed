"""Where a run's code came from: the checkout's commit and the last commit of a file (a pre-registration).

Both ask git and never fail: outside a repository, or without git, they answer "none". The lab's report
(`masprm.worlds.runs`) and a run's archive card (`masprm.archive`) record them. Pure Python.
"""

from __future__ import annotations

import subprocess
from typing import Any, Callable


def preregistration_commit(path: str, run: Callable[..., Any] = subprocess.run) -> str:
    """The last commit that touched `path` (`git log -1 --format=%H -- PATH`), or "none" (no such commit, no git)."""
    try:
        out = run(["git", "log", "-1", "--format=%H", "--", path], capture_output=True, text=True, check=False)
    except OSError:
        return "none"
    commit = (out.stdout or "").strip() if out.returncode == 0 else ""
    return commit or "none"


def code_commit(run: Callable[..., Any] = subprocess.run) -> dict:
    """The checkout's commit (`git rev-parse HEAD`) and whether its tracked files differ from it ("none": no git)."""
    try:
        head = run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
        status = run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                     check=False)
    except OSError:
        return {"commit": "none", "dirty": None}
    commit = (head.stdout or "").strip() if head.returncode == 0 else ""
    return {"commit": commit or "none", "dirty": bool((status.stdout or "").strip()) if status.returncode == 0 else None}
