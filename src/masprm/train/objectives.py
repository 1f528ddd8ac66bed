"""The scorer objectives (``--mode``): one record each, in one registry.

    ppm   pairwise Bradley–Terry on stage-2 preference pairs, weighted when a pair has a ``weight``
          (masprm.train.pairwise)
    prm   stepwise regression: a label in [-1, 1] on every step (masprm.train.stepwise)
    orm   stepwise with ``train_on_last_step_only``: the final outcome on the last step
    traj  the aggregated step scores of a transcript against its final outcome (masprm.train.trajectory)
    pqm   PQM's comparative ranking of a transcript's step Q-values around its first error
          (masprm.train.qvalue_ranking)
    implicit  the outcome loss on beta * log(pi_theta / pi_ref) summed over a transcript, a causal LM
          (PRIME; masprm.train.implicit)
    gorm / gprm  the LM answers "is every step correct?" after a transcript / after each step
          (Multi-RM's generative verifiers; masprm.train.generative)
    ensemble  ActPRM's value heads on one trunk, trained where they disagree (masprm.train.ensemble)
    biprm  BiPRM's left-to-right and reversed streams fused by a learned gate (masprm.train.bidirectional)

An ``Objective`` says everything the trainer needs about one of them, so the
trainer names no mode: the stage-2 records it reads, how texts are tokenised,
its examples, collator, `Trainer` subclass and metrics, the model kept, whether
dropout stays on, and the batch sampling. The entries are lazy (their modules
import torch); listing them (``--mode`` choices) imports nothing.
A new objective is one module defining an ``Objective`` plus one ``ObjectiveFacts`` line in
``masprm.objective_facts`` (what the rest of the project needs to know of it, and where this recipe lives).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from masprm.objective_facts import OBJECTIVE_FACTS, objective_modes
from masprm.registry import Registry

RECORD_KINDS = ("pairs", "steps")   # stage 2's ppm_pairs_*.jsonl / prm_samples_*.jsonl records
LOSSES = ("mse", "huber", "bce")    # the stepwise objectives' losses (--loss)
EVAL_SPLITS = ("question", "record")   # what the checkpoint-selection split is drawn over (--eval-split-by)


@dataclass
class Objective:
    name: str                             # what it is (pairwise, stepwise, ...); --mode names it in OBJECTIVES
    records: str                          # one of RECORD_KINDS
    text_style: str                       # TextEncoder style: "whole" or "steps" (recorded for inference)
    build_examples: Callable[..., tuple[list[dict], int]]   # (records, encoder, sep, source=) -> (examples, skipped)
    collator: Callable[[int], Callable]   # pad id -> batch collator
    trainer_cls: type                     # a masprm.train.scorer_trainer.ScorerTrainer subclass
    compute_metrics: Callable[[Any], dict[str, float]]
    best_metric: str                      # compared on the eval set to pick the model kept at the end
    greater_is_better: bool
    keep_dropout: bool                    # False: every dropout off, LoRA's included
    sampling: str                         # transformers' train_sampling_strategy
    trainer_kwargs: Callable[[Any], dict] = field(default=lambda cfg: {})   # from the TrainConfig
    usable: Callable[[Sequence[dict]], int] = len   # records that give an example
    meta: Callable[[Any], dict] = field(default=lambda cfg: {})   # recorded in masprm_scorer.json (from the config)
    heads: Callable[[Any], int] = field(default=lambda cfg: 1)   # a token scorer's value heads (ensemble: several)
    records_meta: Callable[[Sequence[dict]], dict] = field(default=lambda records: {})   # recorded, from the data
    choose_best: Callable[[Any], tuple[str, bool]] | None = None   # a config-chosen (best_metric, greater_is_better)
    # --calibrate: the eval predictions and label_ids -> (served values, targets in [0, 1]) Platt scaling is fitted
    # on (masprm.calibration); None: the objective cannot be calibrated yet (refused before training)
    calibration_pairs: Callable[[Any, Any], tuple[list[float], list[float]]] | None = None

    def best(self, cfg: Any) -> tuple[str, bool]:
        """The eval metric that picks the model kept, and whether higher is better, under this config."""
        return self.choose_best(cfg) if self.choose_best else (self.best_metric, self.greater_is_better)


OBJECTIVES: Registry[Objective] = Registry("scorer objective")
# Each objective's recipe is registered from its facts (masprm.objective_facts: one record per objective).
for _mode in objective_modes():
    OBJECTIVES.register_lazy(_mode, OBJECTIVE_FACTS[_mode].recipe)
MODES = objective_modes()   # the registered names, in the order --help shows them
