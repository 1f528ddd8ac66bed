"""--mode implicit (PRIME): step rewards as beta-scaled log-likelihood ratios, the loss and gradient by hand,
and a trained tiny scorer that values partial transcripts by their partial sums."""

from __future__ import annotations

import json
import math

import pytest
import torch

from masprm.errors import ConfigError
from masprm.models.implicit_reward import step_of_tokens, step_rewards, token_log_probs
from masprm.train.config import TrainConfig
from masprm.train.implicit import implicit_loss
from masprm.objective_facts import OBJECTIVE_FACTS
from masprm.train.objectives import MODES, OBJECTIVES

from helpers import SEP
from helpers_training import first_eval_batch, train_tiny

LN = math.log
# two prompt tokens, step 1 = two tokens + separator, step 2 = one token + separator
STEPS = torch.tensor([[-1, -1, 0, 0, -1, 1, -1]])
THETA = [0.0, -3.0, LN(1 / 2), LN(1 / 4), -0.1, LN(1 / 2), -0.2]
REF = [0.0, -1.0, LN(1 / 4), LN(1 / 4), -0.3, LN(1 / 8), -0.4]   # the prompt and separators differ: ignored
BETA = 0.5


def test_two_step_transcript_rewards_loss_and_gradient_by_hand():
    logp = torch.tensor([THETA], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([REF], dtype=torch.float64)
    # r_1 = beta (log 2 + 0) = 0.5 log 2; r_2 = beta (log(1/2) - log(1/8)) = log 2
    assert step_rewards(logp, ref, STEPS, BETA)[0].tolist() == pytest.approx([0.5 * LN(2), LN(2)], rel=1e-12)
    loss, q = implicit_loss(logp, ref, STEPS, torch.tensor([1.0], dtype=torch.float64), BETA)
    assert q.item() == pytest.approx(1.5 * LN(2), rel=1e-12)
    # a correct transcript: -log sigma(q) = log(1 + 2^-1.5); dL/dq = sigma(q) - 1 = -1 / (1 + 2^1.5)
    assert loss.item() == pytest.approx(LN(1 + 2 ** -1.5), rel=1e-12)
    loss.backward()
    g = -BETA / (1 + 2 ** 1.5)
    assert logp.grad[0].tolist() == pytest.approx([0, 0, g, g, 0, g, 0], rel=1e-12, abs=1e-15)
    # a wrong one: -log(1 - sigma(q)) = log(1 + 2^1.5)
    loss, _ = implicit_loss(logp.detach(), ref, STEPS, torch.tensor([0.0], dtype=torch.float64), BETA)
    assert loss.item() == pytest.approx(LN(1 + 2 ** 1.5), rel=1e-12)
    # the partial transcript (step 1 only) is worth tanh(r_1 / 2) = (sqrt 2 - 1) / (sqrt 2 + 1)
    r1 = step_rewards(logp, ref, STEPS, BETA)[0, 0].item()
    assert math.tanh(r1 / 2) == pytest.approx((2 ** 0.5 - 1) / (2 ** 0.5 + 1), rel=1e-12)


def test_each_token_knows_its_step_and_the_cut_keeps_the_surviving_steps():
    sep = 9
    assert step_of_tokens([1, 2, 5, 6, sep, 7, sep], sep, 5) == [-1, -1, 0, 0, -1, 1, -1]
    # 7 step tokens (separators included) of which the cut left 4: the partly cut step is step 0
    assert step_of_tokens([6, sep, 7, sep], sep, 7) == [0, -1, 1, -1]


def test_token_log_probs_read_the_next_token():
    logits = torch.tensor([[[0.0, 0.0], [LN(3), 0.0], [0.0, 0.0]]])   # position 1 predicts token 0 with p 3/4
    ids = torch.tensor([[1, 1, 0]])
    assert token_log_probs(logits, ids)[0].tolist() == pytest.approx([0.0, LN(1 / 2), LN(3 / 4)])


def test_implicit_is_a_registered_causal_lm_mode_that_needs_lora():
    assert "implicit" in MODES and OBJECTIVE_FACTS["implicit"].causal_lm
    assert OBJECTIVES["implicit"].meta(TrainConfig(mode="implicit", implicit_beta=0.1)) == {"implicit_beta": 0.1}
    with pytest.raises(ConfigError, match="mode implicit needs LoRA"):
        TrainConfig(mode="implicit", lora=False).validate()
    with pytest.raises(ConfigError, match="implicit_beta"):
        TrainConfig(mode="implicit", implicit_beta=0.0).validate()


@pytest.mark.slow
def test_a_trained_implicit_scorer_values_prefixes_by_their_partial_sums(tmp_path, tiny_model_dir):
    from masprm.models.scorer import ImplicitScorer, load_scorer
    from masprm.state_text import join_steps
    from masprm.train.implicit import ImplicitCollator

    result = train_tiny(tmp_path, tiny_model_dir, "implicit", 6, implicit_beta=0.5, lr=3e-2)
    meta = json.loads((result.output_dir / "masprm_scorer.json").read_text())
    assert (meta["objective"], meta["implicit_beta"]) == ("implicit", 0.5)
    adapter = json.loads((result.output_dir / "adapter_config.json").read_text())
    assert adapter["bias"] == "none" and not adapter.get("modules_to_save")   # the base stays pi_ref
    scorer = load_scorer(result.output_dir)
    assert isinstance(scorer, ImplicitScorer) and hasattr(scorer.model, "disable_adapter")   # never merged
    example, trainer, batch = first_eval_batch(result, ImplicitCollator)
    with torch.no_grad():
        _, p, _ = trainer.loss_and_predictions(trainer.model, batch)
    text = example["text"]
    value = scorer.score_batch([join_steps(text.prompt, text.steps, SEP)])[0]
    assert value == pytest.approx(2 * p.item() - 1, abs=1e-5) and value != 0.0   # the adapter moved pi_theta
    # a partial transcript: the sum over its first step only
    first = scorer.score_batch([join_steps(text.prompt, text.steps[:1], SEP)])[0]
    with torch.no_grad():
        ids = batch["input_ids"]
        logp = token_log_probs(trainer.model(input_ids=ids).logits, ids)
        with trainer.model.disable_adapter():
            ref = token_log_probs(trainer.model(input_ids=ids).logits, ids)
        r1 = step_rewards(logp, ref, batch["token_steps"], 0.5)[0, 0].item()
    assert first == pytest.approx(math.tanh(r1 / 2), abs=1e-5)


@pytest.mark.slow
def test_cached_reference_log_probs_train_as_recomputing_them_every_batch(tmp_path, tiny_model_dir, monkeypatch):
    """pi_ref is read once per record over three epochs and evaluations, and the run's losses, eval
    metrics and adapter equal those of the old path that re-ran pi_ref on every batch."""
    from safetensors.torch import load_file

    import masprm.train.implicit as implicit

    class Recomputing(implicit.ImplicitTrainer):   # the old path
        def cached_reference(self, model, ids, mask):
            return implicit.reference_log_probs(model, ids, mask)

    rows_read = []
    reading = implicit.reference_log_probs
    monkeypatch.setattr(implicit, "reference_log_probs", lambda m, ids, mask: rows_read.append(len(ids)) or
                        reading(m, ids, mask))
    runs = {}
    for name, trainer_cls in (("cached", implicit.ImplicitTrainer), ("recomputed", Recomputing)):
        monkeypatch.setattr(OBJECTIVES["implicit"], "trainer_cls", trainer_cls)
        rows_read.clear()
        (tmp_path / name).mkdir()
        result = train_tiny(tmp_path / name, tiny_model_dir, "implicit", 7, max_steps=6, eval_steps=3,
                            implicit_beta=0.5, lr=3e-2)
        runs[name] = (result, sum(rows_read), load_file(result.output_dir / "adapter_model.safetensors"))
    (cached, cached_rows, cached_w), (old, old_rows, old_w) = runs["cached"], runs["recomputed"]
    distinct = {tuple(e["input_ids"]) for e in cached.train_examples + cached.eval_examples}
    assert len(cached.train_examples) == 15 and cached_rows == len(distinct)   # 6 batches of 8 = 3 epochs
    assert old_rows == 3 * 15 + 3 * 1   # every train record in each of 3 epochs, the eval record at 3 evaluations
    losses = [[log[k] for log in run.trainer.state.log_history for k in ("loss", "eval_loss") if k in log]
              for run in (cached, old)]
    assert len(losses[0]) == 6 + 2 + 1 and losses[0] == pytest.approx(losses[1], rel=1e-5, abs=1e-6)
    values = [{k: v for k, v in run.metrics.items() if not k.endswith(("_runtime", "_per_second"))}
              for run in (cached, old)]
    assert "eval_loss" in values[0] and values[0] == pytest.approx(values[1], rel=1e-5, abs=1e-6)
    assert cached_w.keys() == old_w.keys()
    for key in cached_w:
        assert torch.allclose(cached_w[key], old_w[key], rtol=1e-4, atol=1e-6), key
