"""Scorer texts as token ids, the same way in training and at inference.

A scorer's value for a text is read at one position: the last separator
token, or the last token when the text has none (``score_position``). Texts
are cut from the left, so the end (and the last separator) survives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from masprm.state_text import StepText


def score_position(ids: Sequence[int], sep_id: int) -> int:
    """Index of the last separator, or of the last token when there is none."""
    for i in range(len(ids) - 1, -1, -1):
        if ids[i] == sep_id:
            return i
    return len(ids) - 1


@dataclass
class TextEncoder:
    """Token ids of scorer texts, built the same way in training and at inference.

    ``whole`` (ppm): the text is tokenised in one piece with the tokenizer's
    special tokens (a BOS where it has one) and cut from the left to
    ``max_length``, as the original ppm trainer did.

    ``steps`` (prm/orm): as TRL's PRM trainer, the prompt and every step are
    tokenised separately and joined, each step followed by the separator's
    ids; a BOS is prepended to the prompt when the tokenizer has one; the
    prompt is cut to its last ``max_prompt_length`` tokens, then the whole
    sequence to its last ``max_length`` tokens (so the last separator survives).
    """

    tokenizer: Any
    sep_id: int
    max_length: int = 2048
    max_prompt_length: int = 0  # <= 0: no separate cut of the prompt part (steps style only)
    style: str = "whole"        # "whole" (ppm) or "steps" (prm/orm)

    def encode_whole(self, texts: Sequence[str]) -> list[list[int]]:
        tok = self.tokenizer
        side = tok.truncation_side
        tok.truncation_side = "left"  # keep the end: the last separator carries the score
        try:
            enc = tok(list(texts), add_special_tokens=True, truncation=True, max_length=self.max_length)
        finally:
            tok.truncation_side = side
        return [list(ids) for ids in enc["input_ids"]]

    def encode_steps(self, prompt: str, steps: Sequence[str]) -> tuple[list[int], list[int]]:
        """(ids, label positions): the positions are the last token of every surviving step chunk."""
        return self.join_steps(*self.tokenize_steps(prompt, steps))

    def tokenize_steps(self, prompt: str, steps: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        """(prompt ids, each step's ids): the prompt with its BOS, cut to ``max_prompt_length``."""
        tok = self.tokenizer
        prompt_ids = list(tok(prompt, add_special_tokens=False)["input_ids"]) if prompt else []
        if tok.bos_token_id is not None:
            prompt_ids = [tok.bos_token_id] + prompt_ids
        if self.max_prompt_length > 0:
            prompt_ids = prompt_ids[-self.max_prompt_length:]
        return prompt_ids, [list(c) for c in tok(list(steps), add_special_tokens=False)["input_ids"]] if steps else []

    def join_steps(self, prompt_ids: Sequence[int], step_ids: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
        """`encode_steps` of parts already tokenised (`tokenize_steps`), so a caller reading them twice
        (reordered, or counted) tokenises once."""
        ids, ends = list(prompt_ids), []
        for chunk in step_ids:
            ids.extend(chunk)
            ids.append(self.sep_id)
            ends.append(len(ids) - 1)
        cut = max(0, len(ids) - self.max_length)
        return ids[cut:], [e - cut for e in ends if e >= cut]

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Inference: a StepText is tokenised in parts in the steps style; anything else whole."""
        if self.style != "steps":
            return self.encode_whole(texts)
        return [self.encode_steps(t.prompt, t.steps)[0] if isinstance(t, StepText) else self.encode_whole([t])[0]
                for t in texts]


def pad_right(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask), padded on the right so every row keeps positions 0..len-1."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask
