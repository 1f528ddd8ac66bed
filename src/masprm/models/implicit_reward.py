"""Implicit process rewards (PRIME): a step's reward is beta times the log-likelihood ratio of its tokens
under the trained LM and the reference LM. Shared by training (``masprm.train.implicit``) and inference
(``masprm.models.scorer.ImplicitScorer``), so both read the same tokens the same way.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from masprm.models.text_encoder import TextEncoder


def step_of_tokens(ids: Sequence[int], sep_id: int, n_step_tokens: int) -> list[int]:
    """Per token, the index of the step it belongs to (counted among the steps that survive the cut),
    -1 for the prompt and the separators. The steps are the last ``n_step_tokens`` tokens (each step's
    tokens and its separator); a step cut at its start keeps the tokens that survive."""
    start = max(0, len(ids) - n_step_tokens)
    out, step = [-1] * len(ids), 0
    for i in range(start, len(ids)):
        if ids[i] == sep_id:
            step += 1
        else:
            out[i] = step
    return out


def encode_step_tokens(encoder: TextEncoder, prompt: str, steps: Sequence[str]) -> tuple[list[int], list[int]]:
    """(ids, step index per token): the stepwise layout (``TextEncoder.encode_steps``) with each token's step."""
    prompt_ids, chunks = encoder.tokenize_steps(prompt, steps)
    ids, _ = encoder.join_steps(prompt_ids, chunks)
    return ids, step_of_tokens(ids, encoder.sep_id, sum(len(c) + 1 for c in chunks))


def token_log_probs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """log p(token t | tokens < t) at every position t >= 1 (position 0, which nothing predicts, is 0)."""
    logits = logits[:, :-1].float()
    picked = logits.gather(-1, input_ids[:, 1:, None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return F.pad(picked, (1, 0))


def step_rewards(logp: torch.Tensor, ref_logp: torch.Tensor, token_steps: torch.Tensor, beta: float) -> torch.Tensor:
    """(batch, steps): r_k = beta * the sum of the log-ratios of step k's tokens."""
    n_steps = int(token_steps.max().item()) + 1 if token_steps.numel() else 0
    ratio = (logp - ref_logp) * (token_steps >= 0)
    index = token_steps.clamp(min=0)
    rewards = torch.zeros(logp.shape[0], max(n_steps, 1), dtype=logp.dtype, device=logp.device)
    return beta * rewards.scatter_add(1, index, ratio)
