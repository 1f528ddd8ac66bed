"""``masprm_scorer.json``: the record a trained scorer folder carries.

Training writes it twice: with ``status: "training"`` when the run starts and
``"completed"`` (plus the eval metrics) when the scorer is saved. It names the
objective (``mode``), the separator, the base model, the length limits and the
``text_style`` the scorer was trained with, so inference tokenises texts the same
way, and what the scorer was trained as: ``objective`` (the mode), ``label_scheme``
(stage 2's ``meta.label_scheme`` of its records) and, for a trajectory-level scorer,
``step_agg`` and ``softmin_temperature`` (``training_of`` reads them, with today's
defaults for folders written before they were recorded), and ``read_out``, how
the head's logit z becomes a value in [-1, 1] (``logit_scale``). Pure Python: no torch import.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

from masprm.errors import ModelError
from masprm.io import atomic_write_json
from masprm.objective_facts import objective_modes

SCORER_META_FILE = "masprm_scorer.json"
TRAJ_AGGS = ("min", "softmin", "prod", "mean")   # how a traj scorer aggregates its step scores (--agg)
DEFAULT_SOFTMIN_TEMPERATURE = 0.1
PAPER_TRAININGS = {("masprm", "ppm"), ("mc", "prm"), ("mc", "orm")}   # (label scheme, objective) of today's scorers
# Objectives whose scorer is the base model's LM head with an adapter (masprm.models.scorer loads them so).
CAUSAL_LM_OBJECTIVES = objective_modes(model_kind="causal_lm")
# The read-out: a logit trained with BCE on p = (v + 1) / 2 is served as 2 sigmoid(z) - 1 = tanh(z / 2), the
# value it was trained to predict; the original serves tanh(z) for every scorer, which is right for a logit
# regressed as atanh(v) (--loss mse / huber) and is kept for the Bradley-Terry logits of the paper's ppm.
READ_OUTS = {"tanh": 1.0, "sigmoid": 0.5}    # read_out -> the factor on z inside tanh
# Where a stepwise (prm / orm) scorer's head reads a step (--head-read, recorded as head_read only when not the
# first, the original's): at the step's separator, or the mean of the head's token logits over the step's tokens.
HEAD_READS = ("step_end", "step_mean")
BCE_OBJECTIVES = ("prm", "orm")


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


def text_style(meta: dict[str, Any], folder: str | Path, setting: str) -> str:
    """How the scorer's texts are tokenised: "steps" (prompt and steps apart) or "whole".

    A folder without a record (an adapter trained elsewhere, e.g. by the original's ppm trainer)
    is read whole; a record that does not say is refused rather than guessed.
    """
    if not meta:
        return "whole"
    if meta.get("text_style") not in ("whole", "steps"):
        raise ModelError(f"{setting} {folder}: {SCORER_META_FILE} does not record the text_style the scorer was "
                         "trained with; retrain it", setting=setting)
    return meta["text_style"]


def default_label_scheme(objective: str) -> str:
    """The records an objective trained on before schemes were recorded: the paper's pairs, else the PRM samples."""
    return "masprm" if objective == "ppm" else "mc"


def training_of(meta: dict[str, Any]) -> dict[str, Any]:
    """What the scorer was trained as: objective, label_scheme (+ step_agg, softmin_temperature for traj).

    {} when the folder has no record. A folder written before the label scheme was recorded was trained
    on today's records: the paper's pairs (ppm) or the PRM samples (prm, orm).
    """
    objective = meta.get("objective") or meta.get("mode")
    if not objective:
        return {}
    out = {"objective": objective, "label_scheme": meta.get("label_scheme") or default_label_scheme(objective)}
    if objective == "traj":
        out.update(step_agg=meta.get("step_agg", "min"),
                   softmin_temperature=meta.get("softmin_temperature", DEFAULT_SOFTMIN_TEMPERATURE))
    if objective == "implicit":
        out["implicit_beta"] = meta["implicit_beta"]
    return out


def training_tag(training: dict[str, Any]) -> str:
    """``first_error+prm``, ``mc+traj-min``, ``mc+traj-softmin0.1``: the scheme, the objective and its aggregation."""
    tag = f"{training['label_scheme']}+{training['objective']}"
    if training["objective"] == "traj":
        agg = training["step_agg"]
        tag += f"-{agg}" + (f"{training['softmin_temperature']:g}" if agg == "softmin" else "")
    return tag


def read_out_of(meta: dict[str, Any]) -> str:
    """The recorded read-out; for a folder written before it was recorded, "sigmoid" for a prm / orm
    scorer trained with --loss bce (the default), else "tanh"."""
    if "read_out" in meta:
        if meta["read_out"] not in READ_OUTS:
            raise ModelError(f"{SCORER_META_FILE}: read_out {meta['read_out']!r} is not one of {', '.join(READ_OUTS)}")
        return meta["read_out"]
    bce = (meta.get("settings") or {}).get("loss", "bce") == "bce"
    return "sigmoid" if training_of(meta).get("objective") in BCE_OBJECTIVES and bce else "tanh"


def platt_of(meta: dict[str, Any], warn: Callable[[str], Any] | None = None) -> tuple[float, float] | None:
    """The Platt scaling (a, b) ``--calibrate`` recorded (masprm.calibration), None for an uncalibrated scorer
    and for a recorded slope a <= 0, which is not applied (``warn`` is told why)."""
    platt = meta.get("platt")
    if platt is None:
        return None
    try:
        a, b = float(platt["a"]), float(platt["b"])
    except (TypeError, KeyError, ValueError):
        raise ModelError(f"{SCORER_META_FILE}: platt must hold numbers a and b, got {platt!r}") from None
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ModelError(f"{SCORER_META_FILE}: platt must hold finite numbers a and b, got {platt!r}")
    if a <= 0:
        # Calibration sets the scale of a scorer's values and must keep their order: a slope a <= 0, fitted on a
        # split the scorer ranks backwards or not at all (toy_deep's MASPRM: 48 held-out values, a = -0.14),
        # would serve the scorer's negation, so a search would follow the opposite of what was trained.
        if warn is not None:
            warn(f"{SCORER_META_FILE}: Platt slope a = {a:.4g} <= 0 would reverse the scorer's order; "
                 "served uncalibrated (docs/pipeline.md, --calibrate)")
        return None
    return a, b


def head_read_of(meta: dict[str, Any]) -> str:
    """Where the scorer's head reads a step: the recorded head_read, else the original's step end."""
    read = meta.get("head_read", HEAD_READS[0])
    if read not in HEAD_READS:
        raise ModelError(f"{SCORER_META_FILE}: head_read {read!r} is not one of {', '.join(HEAD_READS)}")
    return read


def logit_scale(meta: dict[str, Any]) -> float:
    """The factor on the logit inside the served tanh: 0.5 for a BCE-trained logit, else 1."""
    return READ_OUTS[read_out_of(meta)]


def held_out_auc(folder: str | Path) -> float | None:
    """The outcome AUC a trajectory-level scorer recorded on its eval split (training questions held out of its
    training: the calibration split); None for another objective, an older folder or an unreadable record."""
    try:
        meta = read_scorer_meta(folder)
    except ModelError:
        return None
    value = ((meta if isinstance(meta, dict) else {}).get("eval_metrics") or {}).get("eval_auc")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
