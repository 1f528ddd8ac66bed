"""The ensemble objective (``--mode ensemble``): ActPRM's heads on one LoRA trunk, trained where they disagree.

After ActPRM (active learning of PRMs with an ensemble of heads). The scorer's
head has ``--ensemble-heads H`` outputs instead of one (H value heads on the
same LoRA trunk, different only by their random start). Every head reads a
step's probability p_h = sigmoid(z_h) at its separator; a step's label is
*trusted* where the heads agree, their spread std_h(p_h) at most
``--ensemble-std`` and their mean confident, max(mean p, 1 - mean p) at least
``--ensemble-confidence`` (``trusted``), and training concentrates on the
rest: the loss is every head's binary cross-entropy against (y + 1) / 2 on
the untrusted steps only (a batch where every step is trusted has loss 0).
At inference the scorer serves the heads' mean read-out, 2 mean(p_h) - 1, and
records their spread (``masprm.models.scorer.EnsembleScorer.last_spread``).
The model kept has the lowest eval loss; every dropout is off and batches are
grouped by length, as the stepwise objectives.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from masprm.train.metrics import PAD
from masprm.train.objectives import Objective
from masprm.train.scorer_trainer import ScorerTrainer
from masprm.train.stepwise import StepCollator, build_step_examples


def trusted(probs: torch.Tensor, max_std: float, min_confidence: float) -> torch.Tensor:
    """Where the heads agree: (..., heads) probabilities -> (...) booleans."""
    mean = probs.mean(dim=-1)
    spread = probs.std(dim=-1, unbiased=False)
    return (spread <= max_std) & (torch.maximum(mean, 1 - mean) >= min_confidence)


def ensemble_loss(logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, max_std: float,
                  min_confidence: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(the mean head BCE over the untrusted labelled steps, the trusted mask); logits (batch, steps, heads)."""
    with torch.no_grad():
        trust = trusted(torch.sigmoid(logits), max_std, min_confidence) & mask
    train = mask & ~trust
    target = ((y + 1) / 2)[..., None].expand_as(logits)
    per = F.binary_cross_entropy_with_logits(logits, target, reduction="none") * train[..., None]
    return per.sum() / (train.sum() * logits.shape[-1]).clamp(min=1), trust


class EnsembleTrainer(ScorerTrainer):
    """Every head's BCE on the steps the heads do not yet agree on."""

    def __init__(self, *args, max_std: float = 0.05, min_confidence: float = 0.9, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_std, self.min_confidence = max_std, min_confidence

    def loss_and_predictions(self, model, inputs):
        out = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits.float()
        index = inputs["target_positions"][..., None].expand(-1, -1, out.shape[-1])
        logits = out.gather(1, index)                                   # (batch, steps, heads)
        y, mask = inputs["target_values"].float(), inputs["target_mask"]
        loss, trust = ensemble_loss(logits, y, mask, self.max_std, self.min_confidence)
        value = 2 * torch.sigmoid(logits).mean(dim=-1) - 1
        preds = torch.stack([torch.where(mask, value, torch.full_like(value, PAD)), trust.float()], dim=-1)
        return loss, preds.flatten(1), torch.where(mask, y, torch.full_like(y, PAD))


def ensemble_metrics(p) -> dict[str, float]:
    """The share of labelled steps the heads trust, and the mean value's accuracy in sign on all of them."""
    preds = np.asarray(p.predictions, dtype=np.float64)
    preds = preds.reshape(preds.shape[0], -1, 2)
    value, trust = preds[..., 0], preds[..., 1]
    y = np.asarray(p.label_ids, dtype=np.float64).reshape(value.shape)
    keep = (y != PAD) & (value != PAD)
    if not keep.any():
        return {"trusted": 0.0, "sign_accuracy": 0.0}
    return {"trusted": float(trust[keep].mean()), "sign_accuracy": float(np.mean((value[keep] > 0) == (y[keep] > 0)))}


ENSEMBLE = Objective(
    name="ensemble", records="steps", text_style="steps", build_examples=build_step_examples, collator=StepCollator,
    trainer_cls=EnsembleTrainer, compute_metrics=ensemble_metrics, best_metric="loss", greater_is_better=False,
    keep_dropout=False, sampling="group_by_length", heads=lambda cfg: cfg.ensemble_heads,
    trainer_kwargs=lambda cfg: {"max_std": cfg.ensemble_std, "min_confidence": cfg.ensemble_confidence},
    meta=lambda cfg: {"ensemble_heads": cfg.ensemble_heads, "ensemble_std": cfg.ensemble_std,
                      "ensemble_confidence": cfg.ensemble_confidence})
