"""What every part of the project needs to know about a scorer objective (``--mode``), in one record each.

Training (``masprm.train``), serving (``masprm.models.scorer``), the scorer's metadata
(``masprm.scorer_meta``), the roles (``masprm.roles``) and the lab (``masprm.stages``)
all ask the same questions of an objective: is it trained on final correctness alone,
does it score only finished transcripts, can ``--calibrate`` fit on it, is its model a
value head or the base model's LM head, which role may serve it, and where its
training recipe (``masprm.train.objectives.Objective``) lives. They read the answers
here, so an objective's properties are spelt once: a new objective is its training
module plus one ``ObjectiveFacts`` line below (``masprm.train.objectives`` registers
its recipe from ``recipe``).

Pure Python: no torch import (the recipes themselves import torch and are loaded lazily).
"""

from __future__ import annotations

from dataclasses import dataclass

from masprm.registry import Registry

MODEL_KINDS = ("token_scorer", "causal_lm")   # a value head on the base, or the base's own LM head (+ adapter)


@dataclass(frozen=True)
class ObjectiveFacts:
    mode: str                  # the --mode name
    recipe: str                # "module:attribute" of its masprm.train.objectives.Objective (imported on first use)
    outcome_only: bool = False   # trained on final correctness alone: no step labels whose quality can be measured
    finished_only: bool = False  # scores finished transcripts only: no SBS, MCTS or step benchmark
    calibratable: bool = False   # --calibrate can fit Platt scaling on its eval predictions
    model_kind: str = "token_scorer"   # one of MODEL_KINDS
    serves_steps: bool = True    # may be the MASPRM role (read at every step); False: the ORM head, served there
                                 # on purpose only (`allow_scorer_kind_mismatch`)

    def __post_init__(self):
        assert self.model_kind in MODEL_KINDS, self.model_kind   # a typo here is the developer's, not the user's

    @property
    def causal_lm(self) -> bool:
        return self.model_kind == "causal_lm"


OBJECTIVE_FACTS: Registry[ObjectiveFacts] = Registry("scorer objective")
_ORDER: list[str] = []   # registration order: the order --help lists the modes in (the registry's is sorted)


def register_objective(facts: ObjectiveFacts, *, replace: bool = False) -> ObjectiveFacts:
    """Add an objective's facts (its training recipe is registered from them by masprm.train.objectives)."""
    OBJECTIVE_FACTS.register(facts.mode, facts, replace=replace)
    if facts.mode not in _ORDER:
        _ORDER.append(facts.mode)
    return facts


# In the order --help lists them.
for _facts in (
        ObjectiveFacts("ppm", "masprm.train.pairwise:PAIRWISE", calibratable=True),
        ObjectiveFacts("prm", "masprm.train.stepwise:STEPWISE", calibratable=True),
        ObjectiveFacts("orm", "masprm.train.stepwise:LAST_STEP", outcome_only=True, calibratable=True,
                       serves_steps=False),
        ObjectiveFacts("traj", "masprm.train.trajectory:TRAJECTORY", outcome_only=True),
        ObjectiveFacts("pqm", "masprm.train.qvalue_ranking:QVALUE_RANKING"),
        ObjectiveFacts("implicit", "masprm.train.implicit:IMPLICIT", outcome_only=True, model_kind="causal_lm"),
        ObjectiveFacts("gorm", "masprm.train.generative:GORM", outcome_only=True, model_kind="causal_lm"),
        ObjectiveFacts("gprm", "masprm.train.generative:GPRM", model_kind="causal_lm"),
        ObjectiveFacts("ensemble", "masprm.train.ensemble:ENSEMBLE"),
        ObjectiveFacts("biprm", "masprm.train.bidirectional:BIPRM", outcome_only=True, finished_only=True)):
    register_objective(_facts)


def objective_modes(**wanted: bool) -> tuple[str, ...]:
    """The registered modes, in order, whose facts have every given value: objective_modes(calibratable=True)."""
    return tuple(mode for mode in _ORDER if mode in OBJECTIVE_FACTS
                 and all(getattr(OBJECTIVE_FACTS[mode], key) == value for key, value in wanted.items()))
