"""The trajectory-level objective (``--mode traj``): step scores trained from the final outcome alone.

After "Learning Discriminative PRMs without Step Labels" (Kim, Liu and Wei,
2026): the scorer gives every step of a finished transcript a probability
(sigmoid of the head's logit at the step's separator), the probabilities are
aggregated into one transcript score A (``--agg min | softmin | prod | mean``,
``masprm.models.step_agg``), and A is trained with binary cross-entropy against
the transcript's final correctness, read from the sign of the record's last
label (any steps file: the PRM samples, or a label scheme's). No step label
is used. At inference the scorer values a (partial) transcript by the same
aggregate over its steps so far (``masprm.models.scorer``), so SBS, MCTS and
the voters use it unchanged.

Texts are tokenised as the stepwise objectives do (prompt and steps apart,
each step followed by the separator). The model kept ranks the eval split's
finished transcripts best (the highest outcome AUC, what best-of-N asks of
it): in the toy world no checkpoint's eval loss beats the constant base-rate
prediction, so the lowest loss kept the checkpoint nearest that constant,
whatever its ranking (docs/scorer_lab.md, "Trajectory rows"). Every dropout
is off and batches are grouped by length.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from masprm.models.step_agg import log_aggregate
from masprm.models.text_encoder import TextEncoder
from masprm.state_text import join_steps
from masprm.step_metrics import auc
from masprm.train.data import record_group
from masprm.train.objectives import Objective
from masprm.train.scorer_trainer import ScorerTrainer
from masprm.train.stepwise import StepCollator, check_labels_on_separators


def build_traj_examples(records: Sequence[dict], encoder: TextEncoder, sep: str,
                        source: str = "") -> tuple[list[dict], int]:
    """One example per record: every surviving step separator, each carrying the outcome (last label > 0).

    The layout is the stepwise objective's, so its collator batches them.
    """
    examples = []
    for n, rec in enumerate(records):
        ids, positions = encoder.encode_steps(rec["prompt"], rec["completions"])
        check_labels_on_separators(ids, positions, encoder.sep_id, f"{source}: record {n + 1}".lstrip(": "), sep)
        outcome = 1.0 if float(rec["labels"][-1]) > 0 else 0.0
        examples.append({"text": join_steps(rec["prompt"], rec["completions"], sep), "input_ids": ids,
                         "positions": positions, "targets": [outcome] * len(positions), "group": record_group(rec)})
    return examples, 0


def traj_loss(step_logits: torch.Tensor, step_mask: torch.Tensor, outcome: torch.Tensor, agg: str,
              temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean binary cross-entropy of A against the outcomes, A per transcript)."""
    log_a, log_not_a = log_aggregate(step_logits, step_mask, agg, temperature)
    loss = -(outcome * log_a + (1 - outcome) * log_not_a).mean()
    return loss, log_a.exp()


class TrajTrainer(ScorerTrainer):
    """BCE of the aggregated step probabilities against the final outcome."""

    def __init__(self, *args, agg: str = "min", temperature: float = 0.1, **kwargs):
        super().__init__(*args, **kwargs)
        self.agg, self.temperature = agg, temperature

    def loss_and_predictions(self, model, inputs):
        logits = self.token_logits(model, inputs)
        step_logits = logits.gather(1, inputs["target_positions"])
        outcome = inputs["target_values"][:, 0].float()
        loss, score = traj_loss(step_logits, inputs["target_mask"], outcome, self.agg, self.temperature)
        return loss, score[:, None], outcome[:, None]


def outcome_metrics(p) -> dict[str, float]:
    """Accuracy of A > 1/2, the Brier score and the outcome AUC (A as a ranker of the held-out transcripts;
    0.5 when one class is missing), against the outcomes."""
    score = np.asarray(p.predictions, dtype=np.float64).ravel()
    outcome = np.asarray(p.label_ids, dtype=np.float64).ravel()
    if not score.size:
        return {"accuracy": 0.0, "brier": 0.0, "auc": 0.5}
    ranked = auc(score.tolist(), (outcome > 0.5).astype(int).tolist())
    return {"accuracy": float(np.mean((score > 0.5) == (outcome > 0.5))),
            "brier": float(np.mean((score - outcome) ** 2)), "auc": 0.5 if ranked is None else ranked}


TRAJECTORY = Objective(
    name="trajectory", records="steps", text_style="steps", build_examples=build_traj_examples, collator=StepCollator,
    trainer_cls=TrajTrainer, compute_metrics=outcome_metrics, best_metric="auc", greater_is_better=True,
    keep_dropout=False, sampling="group_by_length",
    trainer_kwargs=lambda cfg: {"agg": cfg.step_agg, "temperature": cfg.softmin_temperature},
    meta=lambda cfg: {"step_agg": cfg.step_agg, "softmin_temperature": cfg.softmin_temperature})
