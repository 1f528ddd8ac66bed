"""The generative-verifier objectives (``--mode gorm`` / ``gprm``): the LM answers a fixed yes/no question.

After Multi-RM's generative outcome and process reward models (gORM, gPRM).
The scorer is the base model as a causal LM with a LoRA adapter
(``masprm.models.generative_verifier``: the question, the answer words, the
score P(yes) - P(no)). gORM asks the question after a finished transcript and
learns the transcript's final correctness (the sign of a steps record's last
label); gPRM asks it after every step of a record, each prefix one example,
and learns the step's label (> 0: yes). The loss is the language-model loss of
the right answer, -log P(answer | transcript, question), averaged over
examples. The model kept has the lowest eval loss; every dropout is off and
batches are grouped by length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from masprm.models.generative_verifier import (answer_ids, question_ids, question_tokens, verdict_log_probs,
                                               verdict_rows, verdict_score)
from masprm.models.text_encoder import TextEncoder
from masprm.state_text import join_steps
from masprm.train.data import record_group
from masprm.train.objectives import Objective
from masprm.train.scorer_trainer import ScorerTrainer


def verifier_examples(records: Sequence[dict], encoder: TextEncoder, sep: str, per_step: bool,
                      source: str = "") -> tuple[list[dict], int]:
    """gORM: one example per record (its outcome); gPRM: one per step of each record (that step's label)."""
    examples, answers, asked = [], answer_ids(encoder.tokenizer), question_tokens(encoder.tokenizer)
    for rec in records:
        steps, labels = rec["completions"], [float(y) for y in rec["labels"]]
        ends = range(1, len(steps) + 1) if per_step else [len(steps)]
        for k in ends:
            examples.append({"text": join_steps(rec["prompt"], steps[:k], sep),
                             "input_ids": question_ids(encoder, rec["prompt"], steps[:k], asked),
                             "answers": answers, "verdict": 1.0 if labels[k - 1] > 0 else 0.0,
                             "group": record_group(rec)})
    return examples, 0


@dataclass
class VerifierCollator:
    """The rows that read every answer word of each example (see `verdict_rows`), and its verdict."""

    pad_id: int

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        rows = verdict_rows([it["input_ids"] for it in items], items[0]["answers"], self.pad_id)
        return {**rows, "verdict": torch.tensor([it["verdict"] for it in items])}


class VerifierTrainer(ScorerTrainer):
    """The language-model loss of the right verdict word."""

    def loss_and_predictions(self, model, inputs):
        logits = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits
        log_probs = verdict_log_probs(logits, inputs)       # (examples, [yes, no])
        verdict = inputs["verdict"].float()
        right = torch.where(verdict > 0.5, log_probs[:, 0], log_probs[:, 1])
        return -right.mean(), verdict_score(log_probs)[:, None], verdict[:, None]


def verdict_metrics(p) -> dict[str, float]:
    """Accuracy of the score's sign against the verdicts."""
    score = np.asarray(p.predictions, dtype=np.float64).ravel()
    verdict = np.asarray(p.label_ids, dtype=np.float64).ravel()
    return {"accuracy": float(np.mean((score > 0) == (verdict > 0.5))) if score.size else 0.0}


def verifier_objective(name: str, per_step: bool) -> Objective:
    def build(records, encoder, sep, **kw):
        return verifier_examples(records, encoder, sep, per_step, **kw)

    return Objective(
        name=name, records="steps", text_style="steps", build_examples=build, collator=VerifierCollator,
        trainer_cls=VerifierTrainer, compute_metrics=verdict_metrics, best_metric="loss", greater_is_better=False,
        keep_dropout=False, sampling="group_by_length")


GORM = verifier_objective("generative_outcome", per_step=False)
GPRM = verifier_objective("generative_process", per_step=True)
