"""--mode gorm / gprm (Multi-RM's generative verifiers): P(yes) - P(no) by hand, the examples, the loss,
and a trained tiny verifier whose score is the trainer's own."""

from __future__ import annotations

import json
import math

import pytest
import torch

from masprm.models.generative_verifier import (ANSWERS, answer_log_probs, answer_rows, verdict_log_probs, verdict_rows,
                                               verdict_score)
from masprm.models.text_encoder import TextEncoder
from masprm.train.generative import VerifierTrainer, verifier_examples
from masprm.objective_facts import OBJECTIVE_FACTS
from masprm.train.objectives import MODES

from helpers import SEP
from helpers_training import first_eval_batch, train_tiny

LN = math.log
YES, NO = [1], [2, 1]          # the answer words' token ids in the hand example (no: two tokens)


def hand_logits():
    """Rows: context [5] + yes, context [5] + no (padded). At the context both rows see logits (0, ln 3, ln 2):
    p(1) = 1/2, p(2) = 1/3; after [5, 2] the logits (0, ln 2, 0) give p(1) = 1/2."""
    logits = torch.zeros(2, 3, 3, dtype=torch.float64)
    logits[:, 0] = torch.tensor([0.0, LN(3), LN(2)])
    logits[1, 1] = torch.tensor([0.0, LN(2), 0.0])
    return logits


def test_the_score_is_p_yes_minus_p_no_with_answers_read_whole():
    ids, mask, answers = answer_rows([[5]], [YES, NO], pad_id=0)
    assert ids.tolist() == [[5, 1, 0], [5, 2, 1]] and answers.tolist() == [[False, True, False], [False, True, True]]
    log_probs = answer_log_probs(hand_logits(), ids, answers)
    # P(yes) = 1/2; P(no) = p(2) p(1 | 2) = 1/3 * 1/2 = 1/6; the score 1/2 - 1/6 = 1/3
    assert log_probs[0].tolist() == pytest.approx([LN(1 / 2), LN(1 / 6)], rel=1e-6)   # log-probs in float32
    assert verdict_score(log_probs).tolist() == pytest.approx([1 / 3], rel=1e-6)


def test_answers_of_one_token_are_read_from_one_row_at_the_context_end():
    batch = verdict_rows([[5], [5, 2]], [[1], [2]], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 0], [5, 2]] and batch["answer_at"].tolist() == [0, 1]
    assert "answer_mask" in verdict_rows([[5]], [YES, NO], pad_id=0)   # a two-token answer: a row per answer
    # after [5] the logits (0, ln 3, ln 2): P(yes = 1) = 3/6, P(no = 2) = 2/6; after [5, 2] (0, ln 2, 0): 2/4, 1/4
    log_probs = verdict_log_probs(hand_logits()[1:], batch)
    assert log_probs.ravel().tolist() == pytest.approx([LN(1 / 2), LN(1 / 3), LN(1 / 2), LN(1 / 4)], rel=1e-6)
    assert verdict_score(log_probs).tolist() == pytest.approx([1 / 6, 1 / 4], rel=1e-6)


class HandModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(1.0, dtype=torch.float64))

    def forward(self, input_ids, attention_mask):
        return type("Out", (), {"logits": self.scale * hand_logits()})


@pytest.mark.parametrize("verdict, loss", [(1.0, LN(2)), (0.0, LN(6))])
def test_the_loss_is_minus_log_the_right_answers_probability(verdict, loss):
    ids, mask, answers = answer_rows([[5]], [YES, NO], pad_id=0)
    trainer = VerifierTrainer.__new__(VerifierTrainer)   # only its loss is used
    value, score, target = trainer.loss_and_predictions(
        HandModel(), {"input_ids": ids, "attention_mask": mask, "answer_mask": answers,
                      "verdict": torch.tensor([verdict])})
    assert value.item() == pytest.approx(loss, rel=1e-6) and score.item() == pytest.approx(1 / 3, rel=1e-6)


class WordTokenizer:
    """One id per whitespace-separated word (a new word gets the next id); no BOS."""

    bos_token_id = None

    def __init__(self):
        self.vocab = {}

    def __call__(self, text, add_special_tokens=False):
        def ids(t):
            return [self.vocab.setdefault(w, len(self.vocab) + 10) for w in t.split()]
        return {"input_ids": [ids(t) for t in text] if isinstance(text, list) else ids(text)}


def test_gorm_asks_once_per_transcript_and_gprm_after_every_step():
    encoder = TextEncoder(WordTokenizer(), sep_id=3, max_length=512, max_prompt_length=0, style="steps")
    rec = {"prompt": "q", "completions": ["a b", "c", "d"], "labels": [1.0, -1.0, -1.0]}
    outcome, _ = verifier_examples([rec], encoder, SEP, per_step=False)
    steps, _ = verifier_examples([rec], encoder, SEP, per_step=True)
    assert [e["verdict"] for e in outcome] == [0.0] and [e["verdict"] for e in steps] == [1.0, 0.0, 0.0]
    q = encoder.tokenizer("\nIs every step above correct? Answer yes or no.\nAnswer:")["input_ids"]
    ids = encoder.tokenizer(["q", "a b", "c"])["input_ids"]
    assert steps[1]["input_ids"] == ids[0] + ids[1] + [3] + ids[2] + [3] + q   # the prefix, then the question
    assert outcome[0]["answers"] == encoder.tokenizer(list(ANSWERS))["input_ids"]
    assert {"gorm", "gprm"} <= set(MODES) and OBJECTIVE_FACTS["gprm"].causal_lm


@pytest.mark.slow
def test_a_trained_gorm_scores_a_transcript_as_its_trainer_does(tmp_path, tiny_model_dir):
    from masprm.models.scorer import GenerativeScorer, load_scorer
    from masprm.state_text import join_steps
    from masprm.train.generative import VerifierCollator

    result = train_tiny(tmp_path, tiny_model_dir, "gorm", 7)
    assert json.loads((result.output_dir / "masprm_scorer.json").read_text())["objective"] == "gorm"
    scorer = load_scorer(result.output_dir)
    assert isinstance(scorer, GenerativeScorer)
    example, trainer, batch = first_eval_batch(result, VerifierCollator)
    with torch.no_grad():
        _, score, _ = trainer.loss_and_predictions(trainer.model, batch)
    text = example["text"]
    value = scorer.score_batch([join_steps(text.prompt, text.steps, SEP)])[0]
    assert value == pytest.approx(score.item(), abs=1e-5) and -1.0 <= value <= 1.0
    # the tiny tokenizer splits " yes" and " no" (3 and 2 tokens): a row per answer word; answers of one token
    # each (their first tokens here) are read from one row per transcript with the same log-probs
    assert VerifierCollator(0)(result.eval_examples)["input_ids"].shape[0] == 2 * len(result.eval_examples)
    contexts = [e["input_ids"] for e in result.train_examples + result.eval_examples]   # of several lengths
    firsts = [a[:1] for a in example["answers"]]
    new_rows = verdict_rows(contexts, firsts, 0)
    ids, mask, answers = answer_rows(contexts, firsts, 0)
    with torch.no_grad():
        logits = trainer.model(input_ids=new_rows["input_ids"], attention_mask=new_rows["attention_mask"]).logits
        new = verdict_log_probs(logits, new_rows)
        old = answer_log_probs(trainer.model(input_ids=ids, attention_mask=mask).logits, ids, answers)
    assert new_rows["input_ids"].shape[0] == len(contexts) == 16 and ids.shape[0] == 32
    assert new.ravel().tolist() == pytest.approx(old.ravel().tolist(), rel=1e-5)
