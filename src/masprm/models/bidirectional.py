"""BiPRM's two streams (``--mode biprm``): a transcript read in order and reversed, fused by a learned gate.
Shared by training (``masprm.train.bidirectional``) and inference (``masprm.models.scorer.BiprmScorer``).
"""

from __future__ import annotations

from typing import Sequence

import torch

from masprm.models.text_encoder import TextEncoder


def two_streams(encoder: TextEncoder, prompt: str, steps: Sequence[str]) -> tuple[list[int], list[int]]:
    """The transcript's ids with its steps in order and reversed (each part tokenised once)."""
    prompt_ids, chunks = encoder.tokenize_steps(prompt, steps)
    return encoder.join_steps(prompt_ids, chunks)[0], encoder.join_steps(prompt_ids, chunks[::-1])[0]


def fused_logit(z_forward: torch.Tensor, z_backward: torch.Tensor, gate_logit: torch.Tensor) -> torch.Tensor:
    """g z_L2R + (1 - g) z_R2L with g = sigmoid(gate logit)."""
    g = torch.sigmoid(gate_logit)
    return g * z_forward + (1 - g) * z_backward


def read_streams(logits: torch.Tensor, score_index: torch.Tensor) -> torch.Tensor:
    """The fused logit of each transcript from the head's two outputs over its L2R and R2L rows."""
    at = logits[torch.arange(logits.shape[0], device=logits.device), score_index]   # (2B, 2)
    forward, backward = at.chunk(2)
    return fused_logit(forward[:, 0], backward[:, 0], forward[:, 1])
