"""Readable condition labels for the printed table and the log header. Pure Python.

The labels are the original's condition names ("SBS + PRM (B1=3, B2=5)",
"DyLAN MCTS + PPM (N=10, 3 children)", ...), followed by the scorer folders
the condition reads, so a table row says what ran. A scorer trained other
than today's (the paper's pairs with ppm, the PRM samples with prm or orm)
also names its label scheme, objective and aggregation (``masprm_scorer.json``)
when its folder's name does not: ``[prm: my-scorer (first_error+prm)]``, but
``[prm: toy-traj-min]``; a public scorer names its format (``masprm.scorer_formats``):
``[orm: my-rm (trl_reward)]``. Log file names keep the method and the fingerprint;
the label is for people.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from masprm.roles import ROLES
from masprm.scorer_folder import ScorerFolder, read_scorer_folder
from masprm.scorer_formats import OWN
from masprm.scorer_meta import PAPER_TRAININGS, default_label_scheme, training_tag

HANDOFF_NAMES = {
    "handoff_fixed": "Fixed schedule + policy likelihood",
    "handoff_random": "Random handoff + policy likelihood",
    "handoff_policy": "Agent-selected handoff + policy likelihood",
    "handoff_prm": "Agent-selected handoff + MASPRM",
}
# scorer kind -> the original's name for it, per search family (best-of-N names it as SBS does)
SBS_SCORERS = {"masprm": "PRM", "logprob": "logprob", "orm": "ORM"}
MCTS_SCORERS = {"masprm": "PPM", "logprob": "logprob", "orm": "ORM", "judge": "LLM judge"}
VOTER_NAMES = {
    "plain": "policy only, no PRM",
    "masprm": "score-weighted, PRM-steps",
    "logprob": "score-weighted, logprob",
    "orm": "score-weighted, ORM end",
    "judge": "LLM judge over the shared pool",
}


def base_label(method: Any, s: Any, roles: Sequence[str] = ()) -> str:
    """The original's name for a condition: ``method`` (a registered Method), ``s`` its settings."""
    if method.name in HANDOFF_NAMES:
        return HANDOFF_NAMES[method.name]
    if method.name == "single_pass":
        return "DyLAN single pass (no scorer)"
    kind, details = method.scorer_kind, []
    if method.family == "sbs":
        name = f"SBS + {SBS_SCORERS.get(kind, kind)}"
        details = [f"B1={s.b1}", f"B2={s.b2}"]
    elif method.family == "mcts":
        search = "MCTS" if s.uct_type == "uct" else "MCTS (PUCT)"
        name = f"{'DyLAN ' if kind == 'masprm' else ''}{search} + {MCTS_SCORERS.get(kind, kind)}"
        details = [f"N={s.n_simulations}", f"{s.max_children} children"]
        if s.distinct_tries:   # the opt-in options, said only when set (the original's labels otherwise)
            details.append(f"distinct tries {s.distinct_tries}")
        if s.pw_k is not None:
            cap = "" if s.pw_max_children is None else f", at most {s.pw_max_children}"
            details.append(f"widening {s.pw_k:g}*N^{s.pw_alpha:g}{cap}")
        if kind == "masprm" and "orm" in roles:   # --orm_leaf: the ORM values the leaves
            details.insert(0, "ORM leaf")
    elif method.family == "bon":
        name = f"Best-of-N + {SBS_SCORERS.get(kind, kind)}"
        details = [f"N={s.bon_n}", f"agg={s.step_agg}"]
    elif method.family == "voter":
        name = f"Greedy + Voter ({VOTER_NAMES.get(kind, kind)})"
    else:   # a method registered outside the original's families
        return method.name
    if kind == "logprob" and s.logprob_agg != "sum":
        details.insert(0, s.logprob_agg.replace("_", "-"))
    return f"{name} ({', '.join(details)})" if details else name


def scorer_name(folder: str | ScorerFolder) -> str:
    """The folder's name, and what the scorer was trained as when that is new and the name does not say it.

    Said means: the objective, the aggregation of a traj scorer and a label scheme other than the
    objective's default (mc for stepwise records, masprm for pairs) are words of the name (split at - . + or space).
    """
    record = folder if isinstance(folder, ScorerFolder) else read_scorer_folder(folder)
    name = record.path.name
    if record.scorer_format not in (None, OWN):   # a public scorer: its format says how it was read
        return f"{name} ({record.scorer_format})"
    training = record.training
    if not training or (training["label_scheme"], training["objective"]) in PAPER_TRAININGS:
        return name
    needed = [training["objective"], *([training["step_agg"]] if training["objective"] == "traj" else [])]
    if training["label_scheme"] != default_label_scheme(training["objective"]):
        needed.append(training["label_scheme"])
    words = set(re.split(r"[-.+\s]+", name.lower()))
    return name if all(w.lower() in words for w in needed) else f"{name} ({training_tag(training)})"


def condition_label(method: Any, settings: Any, roles: Sequence[str],
                    folders: Mapping[str, str | ScorerFolder | None]) -> str:
    """`base_label` plus the folder of each scorer the condition uses, tagged by its role's flag stem
    ("[prm: MASPRM-GSM8K-1.5B]"; ``masprm.roles``)."""
    shown = [f"{ROLES[role].flag_stem}: {scorer_name(folders[role])}" for role in ROLES
             if role in roles and folders.get(role)]
    label = base_label(method, settings, roles)
    return f"{label} [{', '.join(shown)}]" if shown else label
