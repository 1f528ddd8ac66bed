"""--mode ensemble (ActPRM): the trust rule, the loss on untrusted steps with its gradient by hand, and a
trained tiny ensemble that serves its heads' mean and records their spread."""

from __future__ import annotations

import json
import math

import pytest
import torch

from masprm.errors import ConfigError
from masprm.train.config import TrainConfig
from masprm.train.ensemble import ensemble_loss, trusted
from masprm.train.objectives import MODES, OBJECTIVES

from helpers import SEP
from helpers_training import first_eval_batch, train_tiny

LN = math.log


def test_the_heads_are_trusted_where_they_agree_confidently():
    probs = torch.tensor([[0.95, 0.96, 0.97, 0.94],    # spread 0.011, mean 0.955: trusted
                          [0.05, 0.04, 0.06, 0.05],    # confident the other way: trusted
                          [0.55, 0.56, 0.54, 0.55],    # agree, but not confident
                          [0.99, 0.80, 0.99, 0.99]])   # confident mean 0.94, but spread 0.082
    assert trusted(probs, 0.05, 0.9).tolist() == [True, True, False, False]
    assert trusted(probs, 0.1, 0.5).tolist() == [True, True, True, True]


def test_the_loss_trains_every_head_on_the_untrusted_steps_only():
    # two heads, two steps: step 0 at logits ln 19 (p 0.95 each: trusted), step 1 at (0, ln 3): p 0.5, 0.75
    logits = torch.tensor([[[LN(19), LN(19)], [0.0, LN(3)]]], dtype=torch.float64, requires_grad=True)
    y, mask = torch.tensor([[1.0, -1.0]], dtype=torch.float64), torch.ones(1, 2, dtype=torch.bool)
    loss, trust = ensemble_loss(logits, y, mask, 0.05, 0.9)
    assert trust.tolist() == [[True, False]]
    # step 1's target is 0: BCE = log(1 + e^z) per head, mean over the 2 head-steps: (log 2 + log 4) / 2
    assert loss.item() == pytest.approx(1.5 * LN(2), rel=1e-12)
    loss.backward()
    assert logits.grad[0].flatten().tolist() == pytest.approx([0.0, 0.0, 0.5 / 2, 0.75 / 2], rel=1e-12)
    # nothing untrusted: loss 0
    loss, _ = ensemble_loss(logits[:, :1].detach(), y[:, :1], mask[:, :1], 0.05, 0.9)
    assert loss.item() == 0.0


def test_ensemble_is_a_registered_mode_with_its_flags():
    assert "ensemble" in MODES and OBJECTIVES["ensemble"].heads(TrainConfig(mode="ensemble", ensemble_heads=3)) == 3
    with pytest.raises(ConfigError, match="ensemble_heads"):
        TrainConfig(mode="ensemble", ensemble_heads=1).validate()
    with pytest.raises(ConfigError, match="ensemble_confidence"):
        TrainConfig(mode="ensemble", ensemble_confidence=0.3).validate()


@pytest.mark.slow
def test_a_trained_ensemble_serves_its_heads_mean_and_their_spread(tmp_path, tiny_model_dir):
    from masprm.models.scorer import EnsembleScorer, load_scorer
    from masprm.state_text import join_steps
    from masprm.train.stepwise import StepCollator

    result = train_tiny(tmp_path, tiny_model_dir, "ensemble", 8, ensemble_heads=3)
    meta = json.loads((result.output_dir / "masprm_scorer.json").read_text())
    assert (meta["objective"], meta["ensemble_heads"]) == ("ensemble", 3)
    scorer = load_scorer(result.output_dir)
    assert isinstance(scorer, EnsembleScorer)
    example, trainer, batch = first_eval_batch(result, StepCollator)
    with torch.no_grad():
        out = trainer.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.double()
    probs = torch.sigmoid(out[0, example["positions"][-1]])            # the heads at the last separator
    assert probs.shape == (3,)
    text = example["text"]
    values = scorer.score_batch([join_steps(text.prompt, text.steps, SEP), join_steps(text.prompt, text.steps[:1], SEP)])
    assert values[0] == pytest.approx(2 * probs.mean().item() - 1, abs=1e-5)
    assert scorer.last_spread[0] == pytest.approx(probs.std(unbiased=False).item(), abs=1e-5)
    assert len(scorer.last_spread) == 2 and scorer.last_spread[0] > 0   # heads differ by their random start
