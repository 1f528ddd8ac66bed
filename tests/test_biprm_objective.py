"""--mode biprm (BiPRM): the reversed stream, the gate by hand, and a trained tiny scorer that re-ranks
finished transcripts and refuses partial ones in one line."""

from __future__ import annotations

import json
import math

import pytest
import torch

from masprm.errors import ModelError
from masprm.models.bidirectional import fused_logit, read_streams
from masprm.models.text_encoder import TextEncoder
from masprm.train.bidirectional import BiprmTrainer, build_biprm_examples
from masprm.train.objectives import MODES, OBJECTIVES

from helpers import SEP
from helpers_training import first_eval_batch, train_tiny
from test_generative_verifier import WordTokenizer


def test_the_gate_fuses_the_two_streams_by_hand():
    # g = sigmoid(ln 3) = 3/4: z = 3/4 * 2 + 1/4 * (-2) = 1
    assert fused_logit(torch.tensor(2.0), torch.tensor(-2.0), torch.tensor(math.log(3))).item() == pytest.approx(1.0)
    # two transcripts: rows 0, 1 read in order, rows 2, 3 reversed; column 0 the score, column 1 the gate
    logits = torch.zeros(4, 3, 2, dtype=torch.float64)
    logits[0, 2] = torch.tensor([2.0, math.log(3)])      # transcript 0: L2R 2, gate 3/4, read at index 2
    logits[2, 1] = torch.tensor([-2.0, 99.0])            # its R2L -2 (the R2L gate output is not read)
    logits[1, 0] = torch.tensor([1.0, 0.0])              # transcript 1: L2R 1, gate 1/2; R2L 3
    logits[3, 2] = torch.tensor([3.0, 0.0])
    z = read_streams(logits, torch.tensor([2, 0, 1, 2]))
    assert z.tolist() == pytest.approx([1.0, 2.0])


def test_the_loss_is_the_outcome_bce_of_the_fused_logit():
    class Model(torch.nn.Module):
        def forward(self, input_ids, attention_mask):
            logits = torch.zeros(2, 2, 2)
            logits[0, 1] = torch.tensor([math.log(3), 0.0])    # L2R ln 3, gate 1/2
            logits[1, 1] = torch.tensor([math.log(3), 0.0])    # R2L ln 3: z = ln 3, sigma(z) = 3/4
            return type("Out", (), {"logits": logits})

    trainer = BiprmTrainer.__new__(BiprmTrainer)   # only its loss is used
    for outcome, loss in ((1.0, -math.log(3 / 4)), (0.0, -math.log(1 / 4))):
        value, p, _ = trainer.loss_and_predictions(Model(), {
            "input_ids": torch.zeros(2, 2, dtype=torch.long), "attention_mask": torch.ones(2, 2, dtype=torch.long),
            "score_index": torch.tensor([1, 1]), "outcome": torch.tensor([outcome])})
        assert value.item() == pytest.approx(loss, rel=1e-6) and p.item() == pytest.approx(0.75, rel=1e-6)


def test_the_reversed_stream_reads_the_steps_backwards():
    encoder = TextEncoder(WordTokenizer(), sep_id=3, max_length=512, max_prompt_length=0, style="steps")
    [ex], _ = build_biprm_examples([{"prompt": "q", "completions": ["a", "b c"], "labels": [1.0, -1.0]}],
                                   encoder, SEP)
    q, a, bc = (encoder.tokenizer(t)["input_ids"] for t in ("q", "a", "b c"))
    assert ex["input_ids"] == q + a + [3] + bc + [3] and ex["reversed_ids"] == q + bc + [3] + a + [3]
    assert ex["outcome"] == 0.0 and ex["index"] == [len(ex["input_ids"]) - 1, len(ex["reversed_ids"]) - 1]
    assert "biprm" in MODES and OBJECTIVES["biprm"].heads(None) == 2


class CountingTokenizer(WordTokenizer):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __call__(self, text, add_special_tokens=False):
        self.calls += 1
        return super().__call__(text, add_special_tokens)


def test_both_streams_and_the_implicit_token_steps_tokenise_each_part_once():
    from masprm.models.bidirectional import two_streams
    from masprm.models.implicit_reward import encode_step_tokens

    encoder = TextEncoder(CountingTokenizer(), sep_id=3, max_length=512, max_prompt_length=0, style="steps")
    q, a, bc = encoder.tokenizer("q")["input_ids"], *encoder.tokenizer(["a", "b c"])["input_ids"]
    encoder.tokenizer.calls = 0
    assert two_streams(encoder, "q", ["a", "b c"]) == (q + a + [3] + bc + [3], q + bc + [3] + a + [3])
    assert encoder.tokenizer.calls == 2   # the prompt, then the steps in one call
    assert encode_step_tokens(encoder, "q", ["a", "b c"]) == (q + a + [3] + bc + [3], [-1, 0, -1, 1, 1, -1])
    assert encoder.tokenizer.calls == 4


@pytest.mark.slow
def test_a_trained_biprm_reranks_finished_transcripts_and_refuses_partial_ones(tmp_path, tiny_model_dir):
    from masprm.models.scorer import BiprmScorer, load_scorer
    from masprm.state_text import join_steps
    from masprm.train.bidirectional import BiprmCollator

    result = train_tiny(tmp_path, tiny_model_dir, "biprm", 9)
    meta = json.loads((result.output_dir / "masprm_scorer.json").read_text())
    assert (meta["objective"], meta["biprm_min_steps"]) == ("biprm", 2)
    scorer = load_scorer(result.output_dir)
    assert isinstance(scorer, BiprmScorer)
    example, trainer, batch = first_eval_batch(result, BiprmCollator)
    with torch.no_grad():
        _, p, _ = trainer.loss_and_predictions(trainer.model, batch)
    text = example["text"]
    assert scorer.score_batch([join_steps(text.prompt, text.steps, SEP)])[0] == pytest.approx(2 * p.item() - 1,
                                                                                               abs=1e-5)
    # both streams are read: the usage counts the tokens of both
    forward, backward = example["input_ids"], example["reversed_ids"]
    assert len(forward) == len(backward) and scorer.last_tokens == [2 * len(forward)]
    with pytest.raises(ModelError, match="re-ranks finished transcripts, and this one has 1 step") as err:
        scorer.score_batch([join_steps(text.prompt, text.steps[:1], SEP)])
    assert "\n" not in str(err.value)
