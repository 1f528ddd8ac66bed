"""The implicit-PRM objective (``--mode implicit``): process rewards as log-likelihood ratios (PRIME).

After "Free Process Rewards without Process Labels" (Yuan et al., 2024) and
PRIME (Cui et al., 2025). The scorer is the base model as a causal LM with a
LoRA adapter, pi_theta; the same model with the adapter disabled is the
reference pi_ref, the base policy (so the adapter may train nothing else: no
bias, no full copies). A step's reward is

    r_k = beta * sum over the step's tokens t of (log pi_theta(y_t | y_<t) - log pi_ref(y_t | y_<t)),

the prompt and the separators left out, and a transcript's outcome logit is
q = sum_k r_k, trained with binary cross-entropy against its final
correctness (the sign of the record's last label: any steps file). No step
label is used. At inference the value of a (partial) transcript is the
partial sum over its steps so far, read as a probability: 2 sigma(q) - 1 =
tanh(q / 2) (``masprm.models.scorer.ImplicitScorer``); a step's own reward
r_k is the difference of two such sums. The model kept has the lowest eval
loss; every dropout is off and batches are grouped by length.

pi_ref never changes during training (the base is frozen and every dropout is
off), so its log-probs are computed once per token sequence, in the first batch
that holds it, and read back from a cache in every later epoch and evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

from masprm.models.implicit_reward import encode_step_tokens, step_rewards, token_log_probs
from masprm.models.text_encoder import TextEncoder, pad_right
from masprm.train.data import outcome_example
from masprm.train.objectives import Objective
from masprm.train.scorer_trainer import ScorerTrainer
from masprm.train.trajectory import outcome_metrics

DEFAULT_BETA = 0.05   # PRIME's published beta; fixed in advance, not tuned here


def build_implicit_examples(records: Sequence[dict], encoder: TextEncoder, sep: str,
                            source: str = "") -> tuple[list[dict], int]:
    """One example per record: its tokens, each token's step, and the outcome (last label > 0)."""
    examples = []
    for rec in records:
        ids, steps = encode_step_tokens(encoder, rec["prompt"], rec["completions"])
        examples.append(outcome_example(rec, sep, ids, token_steps=steps))
    return examples, 0


@dataclass
class ImplicitCollator:
    pad_id: int

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = pad_right([it["input_ids"] for it in items], self.pad_id)
        token_steps = torch.full_like(input_ids, -1)
        for i, it in enumerate(items):
            token_steps[i, :len(it["token_steps"])] = torch.tensor(it["token_steps"])
        return {"input_ids": input_ids, "attention_mask": attention_mask, "token_steps": token_steps,
                "outcome": torch.tensor([it["outcome"] for it in items])}


def implicit_loss(logp: torch.Tensor, ref_logp: torch.Tensor, token_steps: torch.Tensor, outcome: torch.Tensor,
                  beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean binary cross-entropy of sigma(q) against the outcomes, q = the sum of the step rewards)."""
    q = step_rewards(logp, ref_logp, token_steps, beta).sum(dim=1)
    return F.binary_cross_entropy_with_logits(q, outcome.to(q.dtype)), q


def reference_log_probs(model, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """pi_ref's token log-probs: the base policy, read with the adapter off."""
    with torch.no_grad(), model.disable_adapter():
        return token_log_probs(model(input_ids=ids, attention_mask=mask).logits, ids)


class ImplicitTrainer(ScorerTrainer):
    """The outcome loss on beta * log(pi_theta / pi_ref) summed over a transcript's steps."""

    def __init__(self, *args, beta: float = DEFAULT_BETA, **kwargs):
        super().__init__(*args, **kwargs)
        self.beta = beta
        self.reference_cache: dict[tuple[int, ...], torch.Tensor] = {}   # token ids -> pi_ref log-probs

    def cached_reference(self, model, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """pi_ref's log-probs of a right-padded batch (0 on the padding); one forward, over the rows never
        seen before, trimmed to their longest."""
        lengths = mask.sum(dim=1).tolist()
        keys = [tuple(row[:n].tolist()) for row, n in zip(ids, lengths)]
        first_row: dict[tuple[int, ...], int] = {}
        for i, key in enumerate(keys):
            if key not in self.reference_cache:
                first_row.setdefault(key, i)   # a sequence twice in one batch is read once
        new = list(first_row.values())
        if new:
            width = max(lengths[i] for i in new)
            fresh = reference_log_probs(model, ids[new, :width], mask[new, :width])
            for row, i in enumerate(new):
                self.reference_cache[keys[i]] = fresh[row, :lengths[i]].clone()
        out = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
        for i, key in enumerate(keys):
            out[i, :lengths[i]] = self.reference_cache[key]
        return out

    def loss_and_predictions(self, model, inputs):
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        logp = token_log_probs(model(input_ids=ids, attention_mask=mask).logits, ids)
        ref_logp = self.cached_reference(model, ids, mask)
        outcome = inputs["outcome"].float()
        loss, q = implicit_loss(logp, ref_logp, inputs["token_steps"], outcome, self.beta)
        return loss, torch.sigmoid(q)[:, None], outcome[:, None]


IMPLICIT = Objective(
    name="implicit", records="steps", text_style="steps", build_examples=build_implicit_examples,
    collator=ImplicitCollator, trainer_cls=ImplicitTrainer, compute_metrics=outcome_metrics, best_metric="loss",
    greater_is_better=False, keep_dropout=False, sampling="group_by_length",
    trainer_kwargs=lambda cfg: {"beta": cfg.implicit_beta}, meta=lambda cfg: {"implicit_beta": cfg.implicit_beta})
