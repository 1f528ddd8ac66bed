"""Readable condition labels for the printed table and the log header. Pure Python.

The labels are the original's condition names ("SBS + PRM (B1=3, B2=5)",
"DyLAN MCTS + PPM (N=10, 3 children)", ...), followed by the scorer folders
the condition reads, so a table row says what ran. A scorer trained other
than today's (the paper's pairs with ppm, the PRM samples with prm or orm)
also names its label scheme, objective and aggregation (``masprm_scorer.json``)
when its folder's name does not: ``[prm: my-scorer (first_error+prm)]``, but
``[prm: toy-traj-min]``. Log file names keep the method and the fingerprint;
the label is for people.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from masprm.scorer_meta import PAPER_TRAININGS, default_label_scheme, read_scorer_meta, training_of, training_tag

HANDOFF_NAMES = {
    "handoff_fixed": "Fixed schedule + policy likelihood",
    "handoff_random": "Random handoff + policy likelihood",
    "handoff_policy": "Agent-selected handoff + policy likelihood",
    "handoff_prm": "Agent-selected handoff + MASPRM",
}
VOTER_NAMES = {
    "plain": "policy only, no PRM",
    "prm": "score-weighted, PRM-steps",
    "logprob": "score-weighted, logprob",
    "orm": "score-weighted, ORM end",
}
MCTS_SCORERS = {"prm": "PPM", "logprob": "logprob", "orm": "ORM"}
# scorer role -> the setting of its folder; a label names the folder by the flag's prefix ("[prm: X]")
SCORER_FOLDERS = (("masprm", "prm_dir"), ("orm", "orm_dir"), ("handoff_masprm", "handoff_prm_dir"))


def _ranker_name(scorer: str) -> str:
    """The scorer's name in SBS and best-of-N labels (the MASPRM is "PRM" there, "PPM" under MCTS)."""
    return "PRM" if scorer == "prm" else MCTS_SCORERS.get(scorer, scorer)


def base_label(method: str, s: Any) -> str:
    """The original's name for a condition under the run's settings."""
    if method in HANDOFF_NAMES:
        return HANDOFF_NAMES[method]
    if method == "single_pass":
        return "DyLAN single pass (no scorer)"
    family, _, scorer = method.partition("_")
    details: list[str] = []
    if family not in ("sbs", "mcts", "voter", "bon"):   # a method registered outside the original's families
        return method
    if family == "sbs":
        name = f"SBS + {_ranker_name(scorer)}"
        details = [f"B1={s.b1}", f"B2={s.b2}"]
    elif family == "mcts":
        search = "MCTS" if s.uct_type == "uct" else "MCTS (PUCT)"
        name = f"{'DyLAN ' if method == 'mcts_prm' else ''}{search} + {MCTS_SCORERS.get(scorer, scorer)}"
        details = [f"N={s.n_simulations}", f"{s.max_children} children"]
        if method == "mcts_prm" and getattr(s, "orm_leaf", False):
            details.insert(0, "ORM leaf")
    elif family == "bon":
        name = f"Best-of-N + {_ranker_name(scorer)}"
        details = [f"N={s.bon_n}", f"agg={s.step_agg}"]
    else:
        name = f"Greedy + Voter ({VOTER_NAMES.get(scorer, scorer)})"
    if scorer == "logprob" and s.logprob_agg != "sum":
        details.insert(0, s.logprob_agg.replace("_", "-"))
    return f"{name} ({', '.join(details)})" if details else name


def scorer_name(folder: str) -> str:
    """The folder's name, and what the scorer was trained as when that is new and the name does not say it.

    Said means: the objective, the aggregation of a traj scorer and a label scheme other than the
    objective's default (mc for stepwise records, masprm for pairs) are words of the name (split at - . + or space).
    """
    name = Path(folder).name
    training = training_of(read_scorer_meta(folder))
    if not training or (training["label_scheme"], training["objective"]) in PAPER_TRAININGS:
        return name
    needed = [training["objective"], *([training["step_agg"]] if training["objective"] == "traj" else [])]
    if training["label_scheme"] != default_label_scheme(training["objective"]):
        needed.append(training["label_scheme"])
    words = set(re.split(r"[-.+\s]+", name.lower()))
    return name if all(w.lower() in words for w in needed) else f"{name} ({training_tag(training)})"


def condition_label(method: str, settings: Any, roles: tuple[str, ...] = ()) -> str:
    """`base_label` plus the folder of each scorer the condition uses ("[prm: MASPRM-GSM8K-1.5B]")."""
    folders = [f"{setting.removesuffix('_dir')}: {scorer_name(getattr(settings, setting))}"
               for role, setting in SCORER_FOLDERS if role in roles and getattr(settings, setting, None)]
    label = base_label(method, settings)
    return f"{label} [{', '.join(folders)}]" if folders else label
