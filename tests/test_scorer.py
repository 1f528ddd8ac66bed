"""The scorer loader and `HFScorer.score_batch`, against adapters the trainer wrote."""

from __future__ import annotations

import random
import shutil

import numpy as np
import pytest
import torch

from masprm.errors import ConfigError, ModelError
from masprm.models.scorer import load_scorer, resolve_scorer_folder
from masprm.train import train_scorer
from helpers import SEP
from helpers_training import config, ppm_record, step_record, write_jsonl

pytestmark = pytest.mark.slow   # trains a scorer (module fixture)


@pytest.fixture(scope="module")
def ppm_run(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("ppm_run")
    rng = random.Random(5)
    data = write_jsonl(tmp / "pairs.jsonl", [ppm_record(rng) for _ in range(60)])
    # Dropout on, so scores only match if the loader really is in eval mode.
    return train_scorer(config(tmp, data, tiny_model_dir, "ppm", max_steps=6, eval_steps=3, lora_dropout=0.1))


@pytest.fixture(scope="module")
def scorer(ppm_run):
    return load_scorer(ppm_run.output_dir)


def trainer_eval_predictions(result) -> np.ndarray:
    """The trainer's own eval predictions for its held-out examples."""
    return result.trainer.predict(result.eval_examples).predictions


def test_loaded_adapter_reproduces_the_trainers_eval_scores(ppm_run, scorer):
    expected = np.tanh(trainer_eval_predictions(ppm_run))  # ppm rows: logits [r_pos, r_neg, ...]
    pos = scorer.score_batch([e["pos_text"] for e in ppm_run.eval_examples])
    neg = scorer.score_batch([e["neg_text"] for e in ppm_run.eval_examples])
    np.testing.assert_allclose(pos, expected[:, 0], atol=1e-4)
    np.testing.assert_allclose(neg, expected[:, 1], atol=1e-4)
    assert scorer.separator == SEP and not scorer.model.training


def test_an_adapter_is_merged_into_its_base_and_scores_as_it_did_apart(ppm_run, scorer):
    from peft import PeftModel
    apart = load_scorer(ppm_run.output_dir, merge=False)
    assert isinstance(apart.model, PeftModel) and not isinstance(scorer.model, PeftModel)
    assert not [name for name, _ in scorer.model.named_modules() if "lora_" in name]   # no adapter left to run
    texts = [e["pos_text"] for e in ppm_run.eval_examples] + [e["neg_text"] for e in ppm_run.eval_examples]
    np.testing.assert_allclose(scorer.score_batch(texts), apart.score_batch(texts), atol=1e-5)


def test_full_fine_tune_is_loaded_as_a_plain_model(tmp_path, tiny_model_dir):
    rng = random.Random(6)
    data = write_jsonl(tmp_path / "prm.jsonl", [step_record(rng) for _ in range(30)])
    result = train_scorer(config(tmp_path, data, tiny_model_dir, "prm", lora=False, max_steps=3, eval_steps=3,
                                 lr=1e-3))
    assert (result.output_dir / "model.safetensors").is_file()
    assert not (result.output_dir / "adapter_config.json").exists()
    expected = trainer_eval_predictions(result)
    loaded = load_scorer(result.output_dir, setting="orm_dir")
    got = loaded.score_batch([e["text"] for e in result.eval_examples])
    # prm rows hold the served value, tanh(logit / 2) for BCE, per labelled separator (-100 padding);
    # the last one is the text's score.
    last = [row[row != -100][-1] for row in expected]
    np.testing.assert_allclose(got, last, atol=1e-4)


def test_long_texts_are_scored_at_their_last_separator(scorer):
    tail = "Read." + SEP + "CORRECT 3 + 4 = 7." + SEP
    window = 12
    scorer.encoder.max_length = window
    try:
        a = "Q: " + "apples " * 300 + tail
        b = "Q: " + "pens and cards " * 300 + tail
        sa, sb = scorer.score_batch([a, b])
        assert sa == pytest.approx(sb, abs=1e-6)  # only the window before the last separator counts
        # By hand: the last `window` tokens, logit at the final token (the separator).
        ids = scorer.encoder.tokenizer(a, add_special_tokens=False)["input_ids"][-window:]
        assert ids[-1] == scorer.encoder.sep_id
        with torch.no_grad():
            logit = scorer.model(input_ids=torch.tensor([ids])).logits[0, -1, 0]
        assert sa == pytest.approx(torch.tanh(logit).item(), abs=1e-5)
        # Text after the last separator does not move the score position.
        trailing = scorer.score_batch([a + " and more words"])[0]
        ids_t = scorer.encoder.tokenizer(a + " and more words", add_special_tokens=False)["input_ids"][-window:]
        sep_at = max(i for i, t in enumerate(ids_t) if t == scorer.encoder.sep_id)
        with torch.no_grad():
            logit_t = scorer.model(input_ids=torch.tensor([ids_t])).logits[0, sep_at, 0]
        assert trailing == pytest.approx(torch.tanh(logit_t).item(), abs=1e-5)
    finally:
        scorer.encoder.max_length = 2048


def test_text_without_separator_is_scored_at_its_last_token(scorer):
    text = "Q: 2 plus 2? 2 + 2 = 4."
    ids = scorer.encoder.tokenizer(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logit = scorer.model(input_ids=torch.tensor([ids])).logits[0, -1, 0]
    assert scorer.score_batch([text])[0] == pytest.approx(torch.tanh(logit).item(), abs=1e-5)


def test_batches_keep_input_order_and_count_tokens(scorer):
    texts = ["Q: 1 plus 2? " + "Read." + SEP * (i % 2) + "x " * (7 - i) + SEP for i in range(7)] + [""]
    before = scorer.tokens_seen
    scorer.batch_size = 3
    try:
        batched = scorer.score_batch(texts)
    finally:
        scorer.batch_size = 16
    one_by_one = [scorer.score_batch([t])[0] for t in texts]
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    assert all(-1 <= v <= 1 for v in batched) and scorer.score_batch([]) == []
    n_tokens = sum(max(1, len(scorer.encoder.tokenizer(t, add_special_tokens=False)["input_ids"])) for t in texts)
    assert scorer.tokens_seen - before == 2 * n_tokens


def test_folder_without_adapter_uses_its_newest_checkpoint(ppm_run, tmp_path):
    run = tmp_path / "run"
    for name in ("checkpoint-3", "checkpoint-6"):
        shutil.copytree(ppm_run.output_dir / name, run / name)
    shutil.copy(ppm_run.output_dir / "masprm_scorer.json", run / "masprm_scorer.json")
    (run / "checkpoint-10-notes").mkdir()  # not a checkpoint name: ignored
    assert resolve_scorer_folder(run) == run / "checkpoint-6"
    from_checkpoint = load_scorer(run)
    text = ppm_run.eval_examples[0]["pos_text"]
    # checkpoint-6 is the final step; the top-level adapter is the best by eval loss, which may differ,
    # so compare against a scorer loaded straight from that checkpoint folder.
    direct = load_scorer(ppm_run.output_dir / "checkpoint-6")
    assert from_checkpoint.score_batch([text]) == pytest.approx(direct.score_batch([text]), abs=1e-6)
    assert from_checkpoint.separator == SEP


def test_unusable_folders_and_base_models_are_one_line_errors(ppm_run, tmp_path):
    with pytest.raises(ModelError, match=r"^prm_dir .*: no such folder"):
        load_scorer(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match=r"^orm_dir .*: no adapter .* or checkpoint-\* folder"):
        load_scorer(tmp_path / "empty", setting="orm_dir")
    with pytest.raises(ModelError, match=r"^prm_dir .*no_such_base.*") as err:
        load_scorer(ppm_run.output_dir, base_model_id=str(tmp_path / "no_such_base"))
    assert "\n" not in str(err.value)
    from masprm.models.tiny import build_tiny_model

    narrower = build_tiny_model(tmp_path / "narrower", hidden_size=32, num_heads=2, num_kv_heads=1,
                                intermediate_size=64)
    with pytest.raises(ModelError, match=r"the adapter does not fit base model .*narrower") as err:
        load_scorer(ppm_run.output_dir, base_model_id=str(narrower))
    assert "\n" not in str(err.value)


def test_4bit_base_with_adapter_scores_on_cpu_close_to_fp32(ppm_run, scorer):
    """A scorer loaded on a 4-bit NF4 base (fp32 compute on CPU) plus its adapter, against the fp32 load."""
    import bitsandbytes as bnb

    from masprm.models.loading import ModelOptions

    quantized = load_scorer(ppm_run.output_dir, options=ModelOptions(device_map="cpu", load_in_4bit=True))
    inner = quantized.model.base_model.model
    assert isinstance(inner.model.layers[0].self_attn.q_proj.base_layer, bnb.nn.Linear4bit)
    assert not isinstance(inner.score.modules_to_save["default"], bnb.nn.Linear4bit)  # the head stays exact
    texts = [e["pos_text"] for e in ppm_run.eval_examples] + [e["neg_text"] for e in ppm_run.eval_examples]
    got, reference = np.array(quantized.score_batch(texts)), np.array(scorer.score_batch(texts))
    # NF4 rounding of this tiny model (hidden size 64) moves the values in [-1, 1] by at most 0.07 (measured);
    # allow 0.15, and the 4-bit load must not be a silent fp32 one.
    assert np.abs(got - reference).max() <= 0.15 and not np.allclose(got, reference, atol=1e-6)
    assert not quantized.model.training


def test_scorer_precision_is_its_own_and_defaults_to_the_originals(monkeypatch):
    """auto: 4-bit on CUDA whatever the policy's --load_in_4bit says (the original), fp32 on a CPU."""
    from masprm.models import loading
    from masprm.models.loading import ModelOptions, scorer_options

    policy_full, policy_4bit = ModelOptions(), ModelOptions(load_in_4bit=True)
    for policy in (policy_full, policy_4bit):
        monkeypatch.setattr(loading, "resolve_device", lambda device_map: torch.device("cuda:0"))
        assert scorer_options(policy).load_in_4bit and scorer_options(policy).dtype is None
        monkeypatch.setattr(loading, "resolve_device", lambda device_map: torch.device("cpu"))
        assert not scorer_options(policy).load_in_4bit
    assert scorer_options(policy_full, "4bit").load_in_4bit and scorer_options(policy_full, "4bit").quant_type == "nf4"
    assert scorer_options(policy_4bit, "bf16") == ModelOptions(load_in_4bit=False, dtype="bf16", quant_type="nf4")
    with pytest.raises(ConfigError, match="^scorer_precision 'int3'"):
        scorer_options(policy_full, "int3")
