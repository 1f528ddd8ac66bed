"""``masprm_scorer.json``: the record a trained scorer folder carries.

Training writes it twice: with ``status: "training"`` when the run starts and
``"completed"`` (plus the eval metrics) when the scorer is saved. It names the
objective (``mode``), the separator, the base model, the length limits and the
``text_style`` the scorer was trained with, so inference tokenises texts the same
way. Pure Python: no torch import.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from masprm.errors import ModelError
from masprm.io import atomic_write_json

SCORER_META_FILE = "masprm_scorer.json"
STEP_MODES = ("prm", "orm")   # folders written before `text_style` was recorded: these used the steps style


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
