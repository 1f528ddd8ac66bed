"""Where a stepwise scorer's value head reads a step (``--head-read``; `masprm.scorer_meta.HEAD_READS`).

The head gives one logit per token. ``step_end`` (the original's) reads a step's value at its
separator; ``step_mean`` reads the mean of the logits over the step's own tokens: from the token after
the separator before it (for the first step, from the start of the text, the question included) up to
and including its separator. One function serves training (`masprm.train.stepwise`) and the scorer at
inference (`masprm.models.scorer`), so both read a step the same way.
"""

from __future__ import annotations

import torch

from masprm.scorer_meta import HEAD_READS


def read_logits(logits: torch.Tensor, input_ids: torch.Tensor, positions: torch.Tensor, sep_id: int,
                read: str = HEAD_READS[0]) -> torch.Tensor:
    """The (batch, n) logits of the steps whose separators sit at ``positions`` ((batch, n) token indices) in
    (batch, length) ``logits`` of the texts ``input_ids``."""
    if read == "step_end":
        return logits.gather(1, positions)
    if read != "step_mean":
        raise ValueError(f"head read must be one of {', '.join(HEAD_READS)}, got {read!r}")
    batch, length = input_ids.shape
    index = torch.arange(length, device=input_ids.device).expand(batch, length)
    # the last separator at or before each token, -1 before the first
    last_sep = torch.where(input_ids == sep_id, index, torch.full_like(index, -1)).cummax(dim=1).values
    before = torch.cat([torch.full_like(last_sep[:, :1], -1), last_sep[:, :-1]], dim=1)   # strictly before
    start = before.gather(1, positions) + 1
    sums = torch.cat([torch.zeros_like(logits[:, :1]), logits.cumsum(dim=1)], dim=1)   # sums[:, k] = the first k
    total = sums.gather(1, positions + 1) - sums.gather(1, start)
    return total / (positions + 1 - start).to(logits.dtype)
