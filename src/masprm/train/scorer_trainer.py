"""The transformers `Trainer` every scorer objective builds on.

An objective's trainer computes its loss from the head's token logits at the
positions its collator names (``loss_and_predictions``) and returns fixed-width
prediction rows for its metrics. Shared here: the logits in fp32, the batch halved
on out-of-memory as the original, and saved adapters without a second copy of the
embeddings and with sorted module lists (one seed gives byte-identical folders).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import torch
from transformers import Trainer

from masprm.io import atomic_write_text



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

    def _get_train_sampler(self, train_dataset=None):
        # group_by_length sorts by length inside "megabatches" of one process's batch; under data
        # parallelism a megabatch is the whole step (every process's batches), so a step holds the
        # examples a single process with the same effective batch would take.
        world = self.args.world_size
        if self.args.train_sampling_strategy != "group_by_length" or world <= 1:
            return super()._get_train_sampler(train_dataset)
        from transformers.trainer_pt_utils import LengthGroupedSampler

        return LengthGroupedSampler(world * self.args.train_batch_size * self.args.gradient_accumulation_steps,
                                    dataset=train_dataset if train_dataset is not None else self.train_dataset,
                                    model_input_name="input_ids")

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
