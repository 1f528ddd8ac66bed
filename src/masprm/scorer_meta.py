"""``masprm_scorer.json``: the record a trained scorer folder carries.

Training writes it twice: with ``status: "training"`` when the run starts and
``"completed"`` (plus the eval metrics) when the scorer is saved. It names the
objective (``mode``), the separator, the base model, the length limits and the
``text_style`` the scorer was trained with, so inference tokenises texts the same
way. ``ROLE_MODES`` says which objectives serve each scorer role at test time
(``check_scorer_kind``: an ORM is not a MASPRM). Pure Python: no torch import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masprm.config import arg
from masprm.errors import ModelError
from masprm.io import atomic_write_json

SCORER_META_FILE = "masprm_scorer.json"
STEP_MODES = ("prm", "orm")   # folders written before `text_style` was recorded: these used the steps style
# scorer role at test time (masprm.search.context.SCORER_ROLES) -> the training modes that make one;
# a new objective that serves a role is added here
ROLE_MODES = {"masprm": ("ppm", "prm", "traj"), "orm": ("orm",), "handoff_masprm": ("ppm", "prm", "traj")}
KIND_OVERRIDE = "allow_scorer_kind_mismatch"   # the setting that accepts any kind


@dataclass
class ScorerKindFlags:
    """The flag that lets a scorer folder of another kind serve a role (stage 4 and any scorer user)."""

    allow_scorer_kind_mismatch: bool = arg(False, flags=("--allow_scorer_kind_mismatch",),
                                           help="use a scorer folder whose training mode is not the role's "
                                                "(an ORM as --prm_dir, a plain model as a scorer) on purpose")


def write_scorer_meta(folder: str | Path, meta: dict[str, Any]) -> None:
    atomic_write_json(Path(folder) / SCORER_META_FILE, meta)


def read_scorer_meta(folder: str | Path) -> dict[str, Any]:
    """The record of the folder, or of the run folder above a ``checkpoint-*``; {} when there is none."""
    folder = Path(folder)
    for candidate in (folder / SCORER_META_FILE, folder.parent / SCORER_META_FILE):
        if candidate.is_file():
            try:
                return json.loads(candidate.read_text(encoding="utf-8"))
            except json.JSONDecodeError as err:
                raise ModelError(f"{candidate}: not valid JSON ({err.msg})") from None
    return {}


def text_style(meta: dict[str, Any]) -> str:
    """How the scorer's texts are tokenised: "steps" (prompt and steps apart) or "whole"."""
    return meta.get("text_style") or ("steps" if meta.get("mode") in STEP_MODES else "whole")


def scorer_kind_problem(meta: dict[str, Any], role: str, *, is_adapter: bool) -> str | None:
    """Why a folder with this record cannot serve as the `role` scorer (None when it can, or cannot be told).

    A record names its training mode; a folder with no record and no adapter is a plain
    model, whose score head was never trained. An adapter without a record is accepted.
    """
    wanted = ROLE_MODES.get(role)
    if wanted is None:
        return None
    mode = meta.get("objective") or meta.get("mode")
    if mode is None:
        if is_adapter or meta:
            return None
        return (f"holds a plain model (no {SCORER_META_FILE}, no adapter), not a trained scorer: "
                "its score head would be untrained")
    if mode not in wanted:
        return (f"holds a scorer trained with --mode {mode} ({SCORER_META_FILE}), but the {role} role needs "
                f"--mode {' or '.join(wanted)}")
    return None


def check_scorer_kind(meta: dict[str, Any], role: str, setting: str, path: Any, *, is_adapter: bool,
                      allow_any: bool = False) -> None:
    """A ModelError naming the folder when it holds the wrong kind of scorer (see ``scorer_kind_problem``)."""
    problem = None if allow_any else scorer_kind_problem(meta, role, is_adapter=is_adapter)
    if problem:
        raise ModelError(f"{setting} {path}: {problem}; pass `{KIND_OVERRIDE}` to use it anyway", setting=setting)
