"""The pairwise objective (``--mode ppm``): Bradley–Terry on stage-2 preference pairs.

A pair is two texts, ``prompt + steps + SEP`` for the chosen and the rejected
branch, each tokenised whole; a branch's score r is the head's logit at its last
separator, and the loss is -log σ(r_chosen - r_rejected), averaged over the batch.
Pairs with a ``weight`` field (stage 2's margin_pairs) give a weighted mean,
sum w·loss / sum w, a pair without one weighing 1; a batch where no pair has one
takes the plain mean, so today's pairs train exactly as before. Pairs whose
chosen and rejected steps are identical are skipped. The model kept is the one with the
lowest eval loss (``--ppm-best-metric pair_acc``: the highest pair accuracy, the original's newer rule); LoRA dropout stays on and batches are drawn at random, as the
original's pairwise trainer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from masprm.models.text_encoder import TextEncoder, pad_right, score_position
from masprm.labels.mining import ppm_texts
from masprm.train.data import record_group
from masprm.train.metrics import pair_metrics
from masprm.train.objectives import Objective
from masprm.train.scorer_trainer import ScorerTrainer


def differing(records: Sequence[dict]) -> int:
    """Records that give a pair: chosen and rejected steps differ."""
    return sum(1 for rec in records if rec["chosen_actions"] != rec["rejected_actions"])


def build_pair_examples(records: Sequence[dict], encoder: TextEncoder, sep: str,
                        source: str = "") -> tuple[list[dict], int]:
    """ppm examples and the number of records skipped (chosen == rejected)."""
    kept = [rec for rec in records if rec["chosen_actions"] != rec["rejected_actions"]]
    pairs = [ppm_texts(rec, sep) for rec in kept]
    pos_ids = encoder.encode_whole([p for p, _ in pairs])
    neg_ids = encoder.encode_whole([n for _, n in pairs])
    examples = [
        {"pos_text": pos, "neg_text": neg, "pos_ids": pi, "neg_ids": ni,
         "pos_index": score_position(pi, encoder.sep_id), "neg_index": score_position(ni, encoder.sep_id),
         "pos_has_sep": encoder.sep_id in pi, "neg_has_sep": encoder.sep_id in ni,
         "group": record_group(rec), **({"weight": float(rec["weight"])} if "weight" in rec else {})}
        for (pos, neg), pi, ni, rec in zip(pairs, pos_ids, neg_ids, kept)
    ]
    return examples, len(records) - len(examples)


@dataclass
class PairCollator:
    """Chosen rows first, then rejected rows, in one padded batch."""

    pad_id: int

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = pad_right([it["pos_ids"] for it in items] + [it["neg_ids"] for it in items],
                                              self.pad_id)
        weights = {"pair_weight": torch.tensor([float(it.get("weight", 1.0)) for it in items])} \
            if any("weight" in it for it in items) else {}
        return {**weights,
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "score_index": torch.tensor([it["pos_index"] for it in items] + [it["neg_index"] for it in items]),
            "has_separator": torch.tensor([it["pos_has_sep"] for it in items] + [it["neg_has_sep"] for it in items]),
        }


def bt_loss(r_pos: torch.Tensor, r_neg: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """Bradley–Terry: -log σ(r_pos - r_neg), the mean over pairs, or sum w·loss / sum w with weights."""
    if weight is None:
        return -F.logsigmoid(r_pos - r_neg).mean()
    weight = weight.to(r_pos.dtype)
    return -(weight * F.logsigmoid(r_pos - r_neg)).sum() / weight.sum()


class PairTrainer(ScorerTrainer):
    """Bradley–Terry on (chosen, rejected): the batch holds B chosen rows, then B rejected rows."""

    def loss_and_predictions(self, model, inputs):
        logits = self.token_logits(model, inputs)
        rows = torch.arange(logits.shape[0], device=logits.device)
        r = logits[rows, inputs["score_index"]]
        r_pos, r_neg = r.chunk(2)
        loss = bt_loss(r_pos, r_neg, inputs.get("pair_weight"))
        has_sep = inputs["has_separator"].float()
        preds = torch.stack([r_pos, r_neg, *has_sep.chunk(2)], dim=-1)
        return loss, preds, torch.ones_like(r_pos)[:, None]


def _best(cfg) -> tuple[str, bool]:
    return ("pair_acc", True) if cfg.ppm_best_metric == "pair_acc" else ("loss", False)


def _eval(p) -> dict[str, float]:
    return pair_metrics(np.asarray(p.predictions))


def _calibration_pairs(predictions, label_ids) -> tuple[list[float], list[float]]:
    """The served values tanh(r) of each pair's preferred side (target 1) and of its other side (target 0)."""
    rows = np.asarray(predictions, dtype=np.float64)
    values = np.tanh(np.concatenate([rows[:, 0], rows[:, 1]]))
    return values.tolist(), [1.0] * len(rows) + [0.0] * len(rows)


PAIRWISE = Objective(
    name="pairwise", records="pairs", text_style="whole", build_examples=build_pair_examples, collator=PairCollator,
    trainer_cls=PairTrainer, compute_metrics=_eval, best_metric="loss", greater_is_better=False,
    keep_dropout=True, sampling="random", usable=differing, choose_best=_best, calibration_pairs=_calibration_pairs)
