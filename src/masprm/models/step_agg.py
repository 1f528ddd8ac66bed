"""One score for a transcript from its step scores: the trajectory-level scorers (``--mode traj``).

A step's probability is p = sigmoid(logit at its separator); a transcript's
score A in (0, 1) is, over its steps,

    min       the smallest p
    prod      the product of the p
    mean      the mean p
    softmin   sum_i w_i p_i with w = softmax(-p / T): a smooth minimum (T -> 0: min; large T: mean)

Training (``masprm.train.trajectory``: binary cross-entropy of A against the
transcript's final correctness) and inference (``masprm.models.scorer``: the
value of a partial transcript is 2A - 1 over its steps so far) call this same
function. It returns log A and log(1 - A), computed without cancellation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from masprm.scorer_meta import TRAJ_AGGS

PROD_LOG_CAP = -1e-12   # log A of a product below this, so log(1 - A) stays finite when every p rounds to 1


def log_aggregate(logits: torch.Tensor, mask: torch.Tensor, agg: str,
                  temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(log A, log(1 - A)) per row of ``logits`` (batch, steps); ``mask`` marks the real steps of each row."""
    if agg not in TRAJ_AGGS:
        raise ValueError(f"unknown step aggregation {agg!r} (valid: {', '.join(TRAJ_AGGS)})")
    mask = mask.bool()
    if agg == "min":   # sigmoid is increasing: the smallest p is the sigmoid of the smallest logit
        low = logits.masked_fill(~mask, float("inf")).min(dim=-1).values
        return F.logsigmoid(low), F.logsigmoid(-low)
    if agg == "prod":
        log_a = (F.logsigmoid(logits) * mask).sum(dim=-1)
        return log_a, torch.log(-torch.expm1(log_a.clamp(max=PROD_LOG_CAP)))
    if agg == "mean":
        weights = mask.to(logits.dtype)
        log_w = torch.log(weights / weights.sum(dim=-1, keepdim=True))
    else:
        scaled = (-torch.sigmoid(logits) / temperature).masked_fill(~mask, float("-inf"))
        log_w = torch.log_softmax(scaled, dim=-1)
    # A = sum w p and 1 - A = sum w (1 - p), as log-sum-exps (masked steps have weight 0: log w = -inf)
    return (torch.logsumexp(log_w + F.logsigmoid(logits), dim=-1),
            torch.logsumexp(log_w + F.logsigmoid(-logits), dim=-1))


def aggregate(logits: torch.Tensor, mask: torch.Tensor, agg: str, temperature: float = 1.0) -> torch.Tensor:
    """A per row, in (0, 1)."""
    return log_aggregate(logits, mask, agg, temperature)[0].exp()
