"""The stepwise objective: a value for every step (``--mode prm``), or, with
``train_on_last_step_only``, for the last step only (``--mode orm``, the outcome model).

A record is a prompt, its steps and one label y in [-1, 1] per step. The prompt
and every step are tokenised apart, each step followed by the separator (as TRL's
PRM trainer), and the label sits on that step's separator. Losses on the head's
logit: mse/huber against atanh(clamp(y, ±0.95)) (the value is tanh(logit)), or
bce against the soft target (y + 1) / 2 -- the last-step-only variant's bce target
is binary, y > 0. The last-step-only variant is evaluated on every separator, each
labelled with the final outcome, as the original's ORM evaluation. The model kept
has the highest eval pearson; every dropout is off and batches are grouped by
length, as TRL's PRM trainer. ``--head-read step_mean`` reads each step's logit as
the mean over the step's tokens instead of at its separator (`masprm.models.step_read`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from masprm.errors import ConfigError, DataError
from masprm.models.step_read import read_logits
from masprm.models.text_encoder import TextEncoder, pad_right
from masprm.models.token_scorer import separator_token_id
from masprm.scorer_meta import HEAD_READS
from masprm.state_text import join_steps
from masprm.train.data import record_group
from masprm.train.metrics import PAD, regression_metrics
from masprm.train.objectives import LOSSES, Objective
from masprm.train.scorer_trainer import ScorerTrainer

ATANH_CLAMP = 0.95


def step_loss(logit: torch.Tensor, y: torch.Tensor, loss: str = "bce", huber_beta: float = 0.1,
              binary_targets: bool = False) -> torch.Tensor:
    """Elementwise loss of head logits against labels y in [-1, 1] (prm/orm)."""
    if loss == "bce":
        target = (y > 0).float() if binary_targets else (y + 1) / 2
        return F.binary_cross_entropy_with_logits(logit, target, reduction="none")
    target = torch.atanh(y.clamp(-ATANH_CLAMP, ATANH_CLAMP))  # regress in logit space: value = tanh(logit)
    if loss == "mse":
        return (logit - target) ** 2
    return F.smooth_l1_loss(logit, target, beta=huber_beta, reduction="none")


def check_labels_on_separators(ids: Sequence[int], positions: Sequence[int], sep_id: int, where: str,
                               sep: str) -> None:
    """Every label sits on a separator and every separator carries a label (the original's check)."""
    n_seps = sum(1 for t in ids if t == sep_id)
    if n_seps != len(positions) or any(ids[p] != sep_id for p in positions):
        raise DataError(f"{where}: the step separator {sep!r} also occurs inside the prompt or a step "
                         f"({n_seps} separator tokens for {len(positions)} labels), so labels would not sit "
                         "on the step ends; use a separator that never occurs in the text, e.g. </step>")


def build_step_examples(records: Sequence[dict], encoder: TextEncoder, sep: str, last_only: bool = False,
                        source: str = "") -> tuple[list[dict], int]:
    """prm examples (every step labelled) or orm (`last_only`: the last step, with the final label).

    Each example also carries ``eval_positions``/``eval_targets``: for orm
    every surviving separator labelled with the final outcome, as the
    original's ORM evaluation did; for prm the same as the training labels.
    """
    examples = []
    for n, rec in enumerate(records):
        ids, positions = encoder.encode_steps(rec["prompt"], rec["completions"])
        labels = [float(y) for y in rec["labels"]]
        check_labels_on_separators(ids, positions, encoder.sep_id, f"{source}: record {n + 1}".lstrip(": "), sep)
        # Truncation drops early steps: the surviving separators carry the last labels.
        targets = labels[len(labels) - len(positions):]
        if last_only:
            train_pos, train_y = positions[-1:], labels[-1:]
            eval_pos, eval_y = positions, labels[-1:] * len(positions)
        else:
            train_pos, train_y = eval_pos, eval_y = positions, targets
        examples.append({"text": join_steps(rec["prompt"], rec["completions"], sep), "input_ids": ids,
                         "positions": train_pos, "targets": train_y,
                         "eval_positions": eval_pos, "eval_targets": eval_y, "group": record_group(rec)})
    return examples, 0


@dataclass
class StepCollator:
    """Texts with their labelled separator positions (padded, with a mask)."""

    pad_id: int

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = pad_right([it["input_ids"] for it in items], self.pad_id)
        width = max(len(it["positions"]) for it in items)
        positions = torch.zeros((len(items), width), dtype=torch.long)
        targets = torch.zeros((len(items), width), dtype=torch.float32)
        target_mask = torch.zeros((len(items), width), dtype=torch.bool)
        for i, it in enumerate(items):
            n = len(it["positions"])
            positions[i, :n] = torch.tensor(it["positions"])
            targets[i, :n] = torch.tensor(it["targets"])
            target_mask[i, :n] = True
        return {"input_ids": input_ids, "attention_mask": attention_mask,
                "target_positions": positions, "target_values": targets, "target_mask": target_mask}


class StepTrainer(ScorerTrainer):
    """Per-separator value regression (prm) or outcome classification (orm)."""

    def __init__(self, *args, loss: str = "bce", huber_beta: float = 0.1, binary_targets: bool = False,
                 head_read: str = HEAD_READS[0], separator: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if loss not in LOSSES:
            raise ConfigError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r}", setting="loss")
        self.loss_name, self.huber_beta, self.binary_targets = loss, huber_beta, binary_targets
        self.head_read = head_read
        # a step's span ends at its separator (the tokenizer already holds it: the training added it first)
        self.sep_id = (separator_token_id(self.processing_class, separator, add_if_missing=False)
                       if head_read != HEAD_READS[0] else None)

    def loss_and_predictions(self, model, inputs):
        logits = self.token_logits(model, inputs)
        logit = read_logits(logits, inputs["input_ids"], inputs["target_positions"], self.sep_id, self.head_read)
        y, mask = inputs["target_values"].float(), inputs["target_mask"]
        per = step_loss(logit, y, self.loss_name, self.huber_beta, self.binary_targets) * mask
        loss = per.sum() / mask.sum().clamp(min=1)
        # The eval predictions are the served values (scorer_meta.logit_scale): tanh(z / 2) for BCE.
        scale = 0.5 if self.loss_name == "bce" else 1.0
        preds = torch.where(mask, torch.tanh(scale * logit), torch.full_like(logit, PAD))
        targets = torch.where(mask, y, torch.full_like(y, PAD))
        return loss, preds, targets


def _eval(p) -> dict[str, float]:
    return regression_metrics(np.asarray(p.predictions), np.asarray(p.label_ids))


def _calibration_pairs(predictions, label_ids) -> tuple[list[float], list[float]]:
    """Each labelled step's served value and its target (v + 1) / 2, the padding left out."""
    values, labels = np.asarray(predictions, dtype=np.float64), np.asarray(label_ids, dtype=np.float64)
    kept = labels != PAD
    return values[kept].tolist(), ((labels[kept] + 1) / 2).tolist()


def stepwise_objective(name: str, *, train_on_last_step_only: bool) -> Objective:
    def build(records, encoder, sep, **kw):
        return build_step_examples(records, encoder, sep, last_only=train_on_last_step_only, **kw)

    def trainer_kwargs(cfg) -> dict:
        return {"loss": cfg.loss, "huber_beta": cfg.huber_beta, "binary_targets": train_on_last_step_only,
                "head_read": cfg.head_read, "separator": cfg.separator}

    def meta(cfg) -> dict:   # head_read only when not the original's, so default scorers' records are unchanged
        read = {} if cfg.head_read == HEAD_READS[0] else {"head_read": cfg.head_read}
        return {"read_out": "sigmoid" if cfg.loss == "bce" else "tanh", **read}

    return Objective(
        name=name, records="steps", text_style="steps", build_examples=build, collator=StepCollator,
        trainer_cls=StepTrainer, compute_metrics=_eval, best_metric="pearson", greater_is_better=True,
        keep_dropout=False, sampling="group_by_length", trainer_kwargs=trainer_kwargs,
        meta=meta, calibration_pairs=_calibration_pairs)


STEPWISE = stepwise_objective("stepwise", train_on_last_step_only=False)
LAST_STEP = stepwise_objective("last_step", train_on_last_step_only=True)
