"""The Q-value ranking objective (``--mode pqm``): PQM's comparative loss over a transcript's steps.

After "Process Reward Model with Q-Value Rankings" (Li and Li, 2025). The
head's logit at a step's separator is that step's Q-value. A steps record
marks where its transcript first goes wrong: the first step with a negative
label (the outcome-derived first-error positions of ``--labels first_error``,
whose records stop there; on other steps files every step from it on). The
steps before it are the correct ones c_1..c_k, the step and every one after
it the wrong ones W. With c_0 the question itself, a fixed Q of 0 (it is not
a scored step), the loss of one transcript is, for ζ = ``--pqm-margin``,

    L = - 1/|T| Σ_{t in T} log( e^{Q_{c_t}} / ( Σ_{q=0..t} e^{Q_{c_q}} + Σ_{w in W} e^{Q_w + ζ} ) )

over T = {0..k} when W is not empty and {1..k} when it is (the t = 0 term is
then identically 0): every correct step is ranked above every wrong one by
the margin ζ and above the correct steps before it (the paper's ordering:
Q-values ascend while the transcript is right, and the first error drops them).
The batch loss is the mean over transcripts. At inference the scorer is an
ordinary step scorer (a tanh of the logit: monotone, so the ranking is the
trained one). The model kept has the lowest eval loss; every dropout is off
and batches are grouped by length, as the stepwise objectives.
"""

from __future__ import annotations

import numpy as np
import torch

from masprm.train.metrics import PAD
from masprm.train.objectives import Objective
from masprm.train.scorer_trainer import ScorerTrainer
from masprm.train.stepwise import StepCollator, build_step_examples

DEFAULT_MARGIN = 4.0   # the authors' published default ζ; fixed in advance, not tuned here
# Masked entries: a finite floor rather than -inf, whose logsumexp over an empty set would give NaN gradients.
FLOOR = -1e4


def first_errors(labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per row, the index of the first step with a negative label (the row's width when there is none)."""
    width = labels.shape[1]
    wrong = (labels < 0) & mask
    index = torch.arange(width, device=labels.device).expand_as(labels)
    return torch.where(wrong, index, torch.full_like(index, width)).min(dim=1).values


def pqm_loss(q: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, margin: float) -> torch.Tensor:
    """The comparative loss above, averaged over the rows of a batch (q, labels, mask: (batch, steps))."""
    rows, width = q.shape
    first = first_errors(labels, mask)[:, None]
    index = torch.arange(width, device=q.device)[None, :]
    correct = mask & (index < first)
    wrong = mask & (index >= first)
    neg_inf = torch.full_like(q, FLOOR)
    # log Σ_w e^{Q_w + ζ} per row (about FLOOR without wrong steps: e^FLOOR is 0 in float32)
    log_wrong = torch.logsumexp(torch.where(wrong, q + margin, neg_inf), dim=1, keepdim=True)
    # log Σ_{q <= t} e^{Q_{c_q}} with c_0 = 0: a running logsumexp over the correct steps, the question first
    correct_q = torch.where(correct, q, neg_inf)
    log_running = torch.logcumsumexp(torch.cat([torch.zeros_like(q[:, :1]), correct_q], dim=1), dim=1)
    terms_q = torch.cat([torch.zeros_like(q[:, :1]), correct_q], dim=1)             # Q_{c_t}, t = 0..k
    present = torch.cat([wrong.any(dim=1, keepdim=True), correct], dim=1)           # which t count
    log_denominator = torch.logaddexp(log_running, log_wrong.expand_as(log_running))
    terms = torch.where(present, log_denominator - terms_q, torch.zeros_like(terms_q))
    per_row = terms.sum(dim=1) / present.sum(dim=1).clamp(min=1)
    return per_row.mean()


class QValueRankingTrainer(ScorerTrainer):
    """PQM's comparative loss on the head's logits at the step separators."""

    def __init__(self, *args, margin: float = DEFAULT_MARGIN, **kwargs):
        super().__init__(*args, **kwargs)
        self.margin = margin

    def loss_and_predictions(self, model, inputs):
        logits = self.token_logits(model, inputs)
        q = logits.gather(1, inputs["target_positions"])
        y, mask = inputs["target_values"].float(), inputs["target_mask"]
        loss = pqm_loss(q, y, mask, self.margin)
        preds = torch.where(mask, q, torch.full_like(q, PAD))
        targets = torch.where(mask, y, torch.full_like(y, PAD))
        return loss, preds, targets


def ranking_accuracy(q: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The share of (correct, wrong) step pairs of a transcript whose Q-values are in the right order."""
    right = total = 0
    for row_q, row_y in zip(np.asarray(q, dtype=np.float64), np.asarray(labels, dtype=np.float64)):
        keep = row_y != PAD
        row_q, row_y = row_q[keep], row_y[keep]
        wrong_at = np.flatnonzero(row_y < 0)
        if not wrong_at.size or not wrong_at[0]:
            continue
        good, bad = row_q[:wrong_at[0]], row_q[wrong_at[0]:]
        right += int((good[:, None] > bad[None, :]).sum())
        total += good.size * bad.size
    return {"ranking_accuracy": right / total if total else 0.0, "ranked_pairs": float(total)}


def _eval(p) -> dict[str, float]:
    return ranking_accuracy(p.predictions, p.label_ids)


QVALUE_RANKING = Objective(
    name="qvalue_ranking", records="steps", text_style="steps", build_examples=build_step_examples,
    collator=StepCollator, trainer_cls=QValueRankingTrainer, compute_metrics=_eval, best_metric="loss",
    greater_is_better=False, keep_dropout=False, sampling="group_by_length",
    trainer_kwargs=lambda cfg: {"margin": cfg.pqm_margin}, meta=lambda cfg: {"pqm_margin": cfg.pqm_margin})
