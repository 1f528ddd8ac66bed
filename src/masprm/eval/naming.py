"""Readable condition labels for the printed table and the log header. Pure Python.

The labels are the original's condition names ("SBS + PRM (B1=3, B2=5)",
"DyLAN MCTS + PPM (N=10, 3 children)", ...), followed by the scorer folders
the condition reads, so a table row says what ran. Log file names keep the
method and the fingerprint; the label is for people.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def condition_label(method: str, settings: Any, roles: tuple[str, ...] = ()) -> str:
    """`base_label` plus the folder of each scorer the condition uses ("[prm: MASPRM-GSM8K-1.5B]")."""
    folders = [f"{setting.removesuffix('_dir')}: {Path(getattr(settings, setting)).name}"
               for role, setting in SCORER_FOLDERS if role in roles and getattr(settings, setting, None)]
    label = base_label(method, settings)
    return f"{label} [{', '.join(folders)}]" if folders else label
