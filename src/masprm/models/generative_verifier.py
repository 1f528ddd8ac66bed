"""Generative verifiers (Multi-RM's gORM / gPRM): the LM asked a fixed yes/no question, scored P(yes) - P(no).

After a transcript (gORM) or a prefix of it (gPRM) in the stepwise layout
(prompt, then every step followed by the separator) comes ``QUESTION``; the
verifier's answer is one of ``ANSWERS``, and its probability is the product
of the answer's token probabilities under the LM head (teacher-forced, so an
answer of several tokens is read whole). The score is P(yes) - P(no), in
[-1, 1]. Shared by training (``masprm.train.generative``) and inference
(``masprm.models.scorer.GenerativeScorer``).

When every answer is one token, one forward of the context reads them all at
its last position (``verdict_rows``); an answer of several tokens needs a row
per answer (``answer_rows``): the tiny model's tokenizer splits " yes" into 3
tokens and " no" into 2.
"""

from __future__ import annotations

from typing import Sequence

import torch

from masprm.models.implicit_reward import token_log_probs
from masprm.models.text_encoder import TextEncoder, pad_right

QUESTION = "\nIs every step above correct? Answer yes or no.\nAnswer:"
ANSWERS = (" yes", " no")   # fixed in advance: the verdict words, each read whole


def question_tokens(tokenizer) -> list[int]:
    """The question's token ids (tokenised once by each caller, read after every transcript)."""
    return list(tokenizer(QUESTION, add_special_tokens=False)["input_ids"])


def question_ids(encoder: TextEncoder, prompt: str, steps: Sequence[str], asked: Sequence[int]) -> list[int]:
    """The transcript in the stepwise layout, then the question's ids `asked` (``question_tokens``)."""
    ids, _ = encoder.encode_steps(prompt, steps)
    return ids + list(asked)


def answer_ids(tokenizer) -> list[list[int]]:
    """The token ids of each answer word, in the order of ``ANSWERS``."""
    return [list(tokenizer(a, add_special_tokens=False)["input_ids"]) for a in ANSWERS]


def answer_rows(contexts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]],
                pad_id: int) -> tuple[torch.Tensor, ...]:
    """Every context once with each answer: (input_ids, attention_mask, answer_mask), the rows of the first
    answer first; ``answer_mask`` marks the answer's tokens."""
    pairs = [(list(c), list(a)) for a in answers for c in contexts]
    input_ids, attention_mask = pad_right([c + a for c, a in pairs], pad_id)
    answer_mask = torch.zeros_like(input_ids, dtype=torch.bool)
    for r, (c, a) in enumerate(pairs):
        answer_mask[r, len(c):len(c) + len(a)] = True
    return input_ids, attention_mask, answer_mask


def verdict_rows(contexts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]],
                 pad_id: int) -> dict[str, torch.Tensor]:
    """The batch one forward reads every answer of every context from. Answers of one token each: every
    context once, ``answer_at`` its last position (whose next-token distribution holds the answers) and
    ``answer_tokens`` the answers' ids; else `answer_rows`' rows and ``answer_mask``."""
    if any(len(a) != 1 for a in answers):
        input_ids, attention_mask, answer_mask = answer_rows(contexts, answers, pad_id)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "answer_mask": answer_mask}
    input_ids, attention_mask = pad_right(contexts, pad_id)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "answer_at": attention_mask.sum(dim=1) - 1,
            "answer_tokens": torch.tensor([a[0] for a in answers])}


def verdict_log_probs(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(contexts, answers): log P(answer | context) from a `verdict_rows` batch and the model's logits on it."""
    if "answer_at" not in batch:
        return answer_log_probs(logits, batch["input_ids"], batch["answer_mask"])
    at = logits[torch.arange(logits.shape[0], device=logits.device), batch["answer_at"]].float()
    return torch.log_softmax(at, dim=-1)[:, batch["answer_tokens"]]


def answer_log_probs(logits: torch.Tensor, input_ids: torch.Tensor, answer_mask: torch.Tensor) -> torch.Tensor:
    """(contexts, answers): log P(answer | context), the rows laid out as `answer_rows` lays them out."""
    logp = (token_log_probs(logits, input_ids) * answer_mask).sum(dim=1)
    return torch.stack(logp.chunk(len(ANSWERS)), dim=1)


def verdict_score(log_probs: torch.Tensor) -> torch.Tensor:
    """P(yes) - P(no) per context."""
    return log_probs[:, 0].exp() - log_probs[:, 1].exp()
