"""One transformers `Trainer` per scorer objective (SPEC §7).

Each trainer computes its loss from the head's token logits at the positions
the collator names, and returns fixed-width prediction rows for the metrics:

- ppm  (`PairTrainer`): Bradley–Terry, -log σ(r_pos - r_neg) on the logits at
  the last separators; best model by eval loss.
- prm  (`StepTrainer`): a label y in [-1, 1] on every step's separator;
  mse/huber against atanh(clamp(y, ±0.95)) in logit space, or bce against
  the soft target (y + 1) / 2; best model by pearson.
- orm  (`StepTrainer`, binary targets): trained on the last step only (bce
  target y > 0); evaluated on every separator, each labelled with the final
  outcome, as the original's ORM evaluation.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from transformers import EvalPrediction, Trainer

from masprm.io import atomic_write_text
from masprm.train import LOSSES
from masprm.train.metrics import PAD, pair_metrics, regression_metrics

ATANH_CLAMP = 0.95


def sort_adapter_modules(folder: Path) -> None:
    """Write adapter_config.json's module lists in sorted order.

    peft keeps them as sets and saves them in hash order, which changes from
    one process to the next; sorted, one seed gives byte-identical scorer folders.
    """
    path = folder / "adapter_config.json"
    if not path.is_file():
        return
    config = json.loads(path.read_text())
    for key in ("target_modules", "modules_to_save"):
        if isinstance(config.get(key), list):
            config[key] = sorted(config[key])
    atomic_write_text(path, json.dumps(config, indent=2, sort_keys=True) + "\n")


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


class ScorerTrainer(Trainer):
    """Shared plumbing: token logits, loss + predictions in one place, eval rows."""

    loss_is_scaled_for_ga = False  # our losses are per-batch means

    def token_logits(self, model, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        out = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        return out.logits[..., 0].float()  # (batch, length); losses in fp32 under mixed precision

    def loss_and_predictions(self, model, inputs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def _inner_training_loop(self, batch_size=None, *args, **kwargs):
        # With auto_find_batch_size, accelerate retries the loop after an out-of-memory error with
        # 0.9x the batch; the original's stack halved it, so every retry halves the batch here.
        if self.args.auto_find_batch_size and batch_size is not None:
            previous = getattr(self, "_oom_batch_size", None)
            batch_size = batch_size if previous is None else previous // 2
            if batch_size < 1:
                raise RuntimeError("out of memory even with a training batch of 1")
            self._oom_batch_size = batch_size
        return super()._inner_training_loop(batch_size, *args, **kwargs)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss, preds, _ = self.loss_and_predictions(model, inputs)
        return (loss, {"predictions": preds}) if return_outputs else loss

    def _save(self, output_dir=None, state_dict=None):
        # The token embeddings are saved as a modules_to_save copy; peft's default would store
        # the resized base matrix twice more (the largest tensor of the model).
        if hasattr(self.model, "peft_config"):
            self.model.save_pretrained = functools.partial(self.model.save_pretrained, save_embedding_layers=False)
        try:
            super()._save(output_dir, state_dict)
        finally:
            self.model.__dict__.pop("save_pretrained", None)
        sort_adapter_modules(Path(output_dir or self.args.output_dir))

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad(), self.compute_loss_context_manager():
            loss, preds, targets = self.loss_and_predictions(model, inputs)
        if prediction_loss_only:
            return loss.detach(), None, None
        return loss.detach(), preds.detach(), targets.detach()


class PairTrainer(ScorerTrainer):
    """Bradley–Terry on (chosen, rejected): the batch holds B chosen rows, then B rejected rows."""

    def loss_and_predictions(self, model, inputs):
        logits = self.token_logits(model, inputs)
        rows = torch.arange(logits.shape[0], device=logits.device)
        r = logits[rows, inputs["score_index"]]
        r_pos, r_neg = r.chunk(2)
        loss = -F.logsigmoid(r_pos - r_neg).mean()
        has_sep = inputs["has_separator"].float()
        preds = torch.stack([r_pos, r_neg, *has_sep.chunk(2)], dim=-1)
        return loss, preds, torch.ones_like(r_pos)[:, None]


class StepTrainer(ScorerTrainer):
    """Per-separator value regression (prm) or outcome classification (orm)."""

    def __init__(self, *args, loss: str = "bce", huber_beta: float = 0.1, binary_targets: bool = False,
                 **kwargs):
        super().__init__(*args, **kwargs)
        if loss not in LOSSES:
            raise ValueError(f"unknown loss {loss!r}; expected one of {LOSSES}")
        self.loss_name, self.huber_beta, self.binary_targets = loss, huber_beta, binary_targets

    def loss_and_predictions(self, model, inputs):
        logits = self.token_logits(model, inputs)
        logit = logits.gather(1, inputs["target_positions"])
        y, mask = inputs["target_values"].float(), inputs["target_mask"]
        per = step_loss(logit, y, self.loss_name, self.huber_beta, self.binary_targets) * mask
        loss = per.sum() / mask.sum().clamp(min=1)
        preds = torch.where(mask, torch.tanh(logit), torch.full_like(logit, PAD))
        targets = torch.where(mask, y, torch.full_like(y, PAD))
        return loss, preds, targets


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Objective:
    trainer_cls: type[ScorerTrainer]
    compute_metrics: Callable[[EvalPrediction], dict[str, float]]
    best_metric: str              # compared on the eval set to pick the model kept at the end
    greater_is_better: bool
    trainer_kwargs: Callable[..., dict] = lambda **flags: {}


def _pair_eval(p: EvalPrediction) -> dict[str, float]:
    return pair_metrics(np.asarray(p.predictions))


def _regression_eval(p: EvalPrediction) -> dict[str, float]:
    return regression_metrics(np.asarray(p.predictions), np.asarray(p.label_ids))


OBJECTIVES: dict[str, Objective] = {
    "ppm": Objective(PairTrainer, _pair_eval, "loss", greater_is_better=False),
    "prm": Objective(StepTrainer, _regression_eval, "pearson", greater_is_better=True,
                     trainer_kwargs=lambda loss, huber_beta: {"loss": loss, "huber_beta": huber_beta}),
    "orm": Objective(StepTrainer, _regression_eval, "pearson", greater_is_better=True,
                     trainer_kwargs=lambda loss, huber_beta: {"loss": loss, "huber_beta": huber_beta,
                                                              "binary_targets": True}),
}
