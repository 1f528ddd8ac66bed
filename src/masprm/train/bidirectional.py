"""The bidirectional objective (``--mode biprm``): a left-to-right and a right-to-left stream fused by a gate.

After BiPRM (a right-to-left evaluation stream by prompt reversal, fused with
the usual left-to-right one by a learned gate). One scorer reads a finished
transcript twice, in the stepwise layout: its steps in order (L2R) and in
reverse order (R2L, the question first as always). Its head has two outputs:
the first is a stream's score z at that stream's last separator, the second,
read at the L2R stream's last separator, is the gate's logit, so the gate is
learned from the transcript's representation at the cost of one more output
row. The fused logit is z = g z_L2R + (1 - g) z_R2L, g = sigmoid(gate logit),
trained with binary cross-entropy against the transcript's final correctness
(the sign of a steps record's last label). The scorer is a re-ranker of
finished transcripts (``masprm.models.scorer.BiprmScorer``): a text with fewer
steps than the shortest training transcript is refused in one line. The model
kept has the lowest eval loss; every dropout is off and batches are grouped
by length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

from masprm.models.bidirectional import read_streams, two_streams
from masprm.models.text_encoder import TextEncoder, pad_right, score_position
from masprm.train.data import outcome_example
from masprm.train.objectives import Objective
from masprm.train.scorer_trainer import ScorerTrainer
from masprm.train.trajectory import outcome_metrics


def build_biprm_examples(records: Sequence[dict], encoder: TextEncoder, sep: str,
                         source: str = "") -> tuple[list[dict], int]:
    examples = []
    for rec in records:
        forward, backward = two_streams(encoder, rec["prompt"], rec["completions"])
        examples.append(outcome_example(rec, sep, forward, reversed_ids=backward,
                                        index=[score_position(forward, encoder.sep_id),
                                               score_position(backward, encoder.sep_id)]))
    return examples, 0


@dataclass
class BiprmCollator:
    """The L2R rows, then the R2L rows, in one padded batch, with each row's last separator."""

    pad_id: int

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = pad_right([it["input_ids"] for it in items] + [it["reversed_ids"] for it in items],
                                              self.pad_id)
        return {"input_ids": input_ids, "attention_mask": attention_mask,
                "score_index": torch.tensor([it["index"][0] for it in items] + [it["index"][1] for it in items]),
                "outcome": torch.tensor([it["outcome"] for it in items])}


class BiprmTrainer(ScorerTrainer):
    def loss_and_predictions(self, model, inputs):
        logits = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits.float()
        z = read_streams(logits, inputs["score_index"])
        outcome = inputs["outcome"].float()
        return F.binary_cross_entropy_with_logits(z, outcome), torch.sigmoid(z)[:, None], outcome[:, None]


BIPRM = Objective(
    name="bidirectional", records="steps", text_style="steps", build_examples=build_biprm_examples,
    collator=BiprmCollator, trainer_cls=BiprmTrainer, compute_metrics=outcome_metrics, best_metric="loss",
    greater_is_better=False, keep_dropout=False, sampling="group_by_length", heads=lambda cfg: 2,
    records_meta=lambda records: {"biprm_min_steps": min(len(r["completions"]) for r in records)})
