"""Stage 3's options from the original's newer branch (docs/differences.md, "The original's newer branch").

--ppm-best-metric, --weight-decay, --attn-impl auto, the tie and saturation metrics and
float64 values, --init-adapter-dir, --train-new-token-only, and adapters of either
embedding-size convention.
"""

from __future__ import annotations

import json
import random
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from masprm.errors import ConfigError, ModelError
from masprm.train.config import TrainConfig
from masprm.train.metrics import pair_metrics
from helpers import SEP
from helpers_training import config, ppm_record, write_jsonl

# --------------------------------------------------------------------------- ties and saturation (item 6)


def test_pair_metrics_count_float32_ties_and_saturated_logits():
    # rows: r_pos, r_neg, pos_found, neg_found. float32 tanh(10) == tanh(9.5) == 1.0 (saturated from 9.011);
    # tanh(2) > tanh(1); tanh(-9.2) == tanh(-12) == -1.0.
    preds = np.array([[10.0, 9.5, 1, 1], [2.0, 1.0, 1, 1], [-9.2, -12.0, 1, 1]])
    m = pair_metrics(preds)
    assert m["pair_acc"] == 1.0                       # the raw logits order all three pairs
    assert m["tanh_pair_acc"] == pytest.approx(1 / 3)  # the float32 values only the middle one
    assert m["tanh_tie_rate"] == pytest.approx(2 / 3)
    assert m["raw_score_abs_max"] == 12.0
    assert m["raw_score_abs_ge_9p011_rate"] == pytest.approx(4 / 6)   # 10, 9.5, 9.2, 12 of six logits
    # numpy's linear quantile of |z| = [1, 2, 9.2, 9.5, 10, 12] at 0.95: position 4.75, 10 + 0.75 * 2
    assert m["raw_score_abs_p95"] == pytest.approx(11.5)


class _LogitModel(torch.nn.Module):
    """A scorer model whose logit at every position of a row is the row's first token id / 10."""

    def __init__(self):
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask):
        logits = (input_ids[:, :1].float() / 10).expand(input_ids.shape).unsqueeze(-1)
        return SimpleNamespace(logits=logits + 0 * self.anchor)


class _IdEncoder:
    sep_id = 999

    def encode(self, texts):
        return [[int(t), self.sep_id] for t in texts]


def test_scorer_keeps_logits_9_5_and_10_ordered():
    from masprm.models.scorer import HFScorer

    scorer = HFScorer(_LogitModel(), _IdEncoder(), SEP, pad_id=0)
    low, high, mid = scorer.score_batch(["95", "100", "20"])
    assert high > low > mid           # in float32 both would be exactly 1.0 and the search would pick by position
    assert torch.tanh(torch.tensor([9.5, 10.0])).tolist() == [1.0, 1.0]
    assert low == pytest.approx(np.tanh(9.5), abs=1e-15) and high == pytest.approx(np.tanh(10.0), abs=1e-15)
    from masprm.search.scorer_kinds import aggregate_steps
    assert aggregate_steps([high], "last") > aggregate_steps([low], "last")


# --------------------------------------------------------------------------- settings (items 5, 7, 8)


def _cfg(**kw) -> TrainConfig:
    return TrainConfig(**{"mode": "ppm", **kw})


@pytest.mark.parametrize("kw, setting", [
    ({"mode": "prm", "ppm_best_metric": "pair_acc"}, "ppm_best_metric"),
    ({"ppm_best_metric": "accuracy"}, "ppm_best_metric"),
    ({"weight_decay": -0.1}, "weight_decay"),
    ({"weight_decay": float("nan")}, "weight_decay"),
    ({"init_adapter_dir": "x", "lora": False}, "init_adapter_dir"),
    ({"train_new_token_only": True, "lora": False}, "train_new_token_only"),
])
def test_bad_newer_branch_settings_name_their_setting(kw, setting):
    with pytest.raises(ConfigError) as err:
        _cfg(**kw).validate()
    assert err.value.setting == setting


def test_defaults_reproduce_main():
    cfg = TrainConfig()
    assert (cfg.ppm_best_metric, cfg.weight_decay, cfg.attn_impl, cfg.init_adapter_dir,
            cfg.train_new_token_only) == ("loss", 0.0, "sdpa", None, False)
    from masprm.train.objectives import OBJECTIVES
    assert OBJECTIVES["ppm"].best(_cfg()) == ("loss", False)
    assert OBJECTIVES["ppm"].best(_cfg(ppm_best_metric="pair_acc")) == ("pair_acc", True)
    assert OBJECTIVES["prm"].best(_cfg(mode="prm")) == ("pearson", True)


def test_attn_auto_is_flash_only_on_ampere_with_flash_attn(monkeypatch):
    import importlib.util

    from masprm.models import loading

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert loading.resolve_attn_impl("auto") == "sdpa"
    assert loading.resolve_attn_impl("eager") == "eager"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (8, 0))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "flash_attn" else real(name, *a))
    assert loading.resolve_attn_impl("auto") == "flash_attention_2"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (7, 0))   # V100: no flash attention
    assert loading.resolve_attn_impl("auto") == "sdpa"


def _fake_adapter(folder, value: float = 0.0, **conf):
    """An adapter config over a small real weight file (the warm-start check reads the file whole)."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps(conf))
    save_file({"w": torch.full((2,), value)}, str(folder / "adapter_model.safetensors"))
    return folder


def test_warm_start_refuses_another_base_model_and_disagreeing_lora_settings(tmp_path):
    from masprm.train.warm_start import check_warm_start

    folder = _fake_adapter(tmp_path / "a", base_model_name_or_path="Qwen/Qwen2.5-1.5B-Instruct", r=256,
                           lora_alpha=32, lora_dropout=0.05, modules_to_save=["embed_tokens", "norm"])
    record = check_warm_start(_cfg(init_adapter_dir=str(folder)))
    assert len(record["init_adapter"]["content_id"]) == 64
    _fake_adapter(folder, 1.0, **json.loads((folder / "adapter_config.json").read_text()))   # other weights
    assert check_warm_start(_cfg(init_adapter_dir=str(folder)))["init_adapter"] != record["init_adapter"]
    cases = [({"model_id": "Qwen/Qwen2.5-7B-Instruct"}, "its base model is Qwen/Qwen2.5-1.5B-Instruct"),
             ({"lora_r": 8}, "the adapter has r 256, but --lora-r is 8"),
             ({"lora_alpha": 16}, "--lora-alpha 32"),
             ({"train_new_token_only": True}, "a full copy of the embeddings")]
    for kw, words in cases:
        with pytest.raises(ConfigError, match=words):
            check_warm_start(_cfg(init_adapter_dir=str(folder), **kw))
    with pytest.raises(ModelError, match="adapter_config.json is missing"):
        check_warm_start(_cfg(init_adapter_dir=str(tmp_path)))


# --------------------------------------------------------------------------- trained on the tiny model


@pytest.fixture(scope="module")
def pair_data(tmp_path_factory):
    rng = random.Random(3)
    return write_jsonl(tmp_path_factory.mktemp("pairs") / "pairs.jsonl", [ppm_record(rng) for _ in range(24)])


@pytest.mark.slow
def test_newer_trainer_options_reach_the_trainer_and_the_metadata(tmp_path, pair_data, tiny_model_dir):
    from masprm.models.adapters import adapter_content_id
    from masprm.scorer_meta import read_scorer_meta
    from masprm.train import train_scorer

    first = train_scorer(config(tmp_path, pair_data, tiny_model_dir, "ppm", max_steps=2, eval_steps=1,
                                ppm_best_metric="pair_acc", weight_decay=0.01, attn_impl="auto"))
    args = first.trainer.args
    assert (args.metric_for_best_model, args.greater_is_better, args.weight_decay) == ("pair_acc", True, 0.01)
    meta = read_scorer_meta(first.output_dir)
    assert meta["attn_kernel"] == "sdpa" and "init_adapter" not in meta   # CPU: auto is sdpa
    assert "eval_tanh_tie_rate" in meta["eval_metrics"] and "eval_tanh_pair_acc" in meta["eval_metrics"]

    bad = config(tmp_path, pair_data, tiny_model_dir, "ppm", output_dir=str(tmp_path / "bad"),
                 init_adapter_dir=str(first.output_dir), lora_r=4)
    with pytest.raises(ConfigError, match="the adapter has r 8, but --lora-r is 4"):
        train_scorer(bad)
    # A learning rate too small to move any weight: the warm-started scorer is the first one.
    warm = train_scorer(config(tmp_path, pair_data, tiny_model_dir, "ppm", output_dir=str(tmp_path / "warm"),
                               init_adapter_dir=str(first.output_dir), max_steps=1, lr=1e-30))
    assert read_scorer_meta(warm.output_dir)["init_adapter"]["content_id"] == adapter_content_id(first.output_dir)
    from safetensors.torch import load_file
    a, b = load_file(first.output_dir / "adapter_model.safetensors"), load_file(warm.output_dir / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    lora_b = [k for k in a if "lora_B" in k]
    assert lora_b and any(a[k].abs().sum() > 0 for k in lora_b)   # trained, so not peft's zero init
    for k in a:
        torch.testing.assert_close(a[k], b[k])


@pytest.mark.slow
def test_new_token_only_trains_just_the_separator_row(tmp_path, pair_data, tiny_model_dir):
    from masprm.models.adapters import stored_embedding_rows
    from masprm.models.scorer import load_scorer
    from masprm.train import train_scorer

    result = train_scorer(config(tmp_path, pair_data, tiny_model_dir, "ppm", max_steps=2, eval_steps=1,
                                 train_new_token_only=True))
    model = result.trainer.model
    trainable = {n: p.numel() for n, p in model.named_parameters() if p.requires_grad}
    embed = [n for n in trainable if "embed_tokens" in n]
    hidden = model.get_input_embeddings().weight.shape[1] if hasattr(model.get_input_embeddings(), "weight") else 64
    assert embed and sum(trainable[n] for n in embed) == hidden   # one row: the separator's
    assert stored_embedding_rows(result.output_dir, "embed_tokens") is None
    conf = json.loads((result.output_dir / "adapter_config.json").read_text())
    assert conf["trainable_token_indices"] == {"embed_tokens": [len(result.trainer.processing_class) - 1]}
    scorer = load_scorer(result.output_dir)
    expected = np.tanh(result.trainer.predict(result.eval_examples).predictions)
    got = scorer.score_batch([e["pos_text"] for e in result.eval_examples])
    np.testing.assert_allclose(got, expected[:, 0], atol=1e-4)


def _adapter_with_rows(tmp_path, base_dir, rows: int, name: str):
    """An adapter saved from the base resized to `rows` embedding rows, and the scores it gives."""
    from masprm.models.loading import load_tokenizer
    from masprm.models.token_scorer import load_token_scorer, separator_token_id
    from masprm.scorer_meta import write_scorer_meta
    from masprm.train.lora import attach_lora

    torch.manual_seed(0)
    tok = load_tokenizer(str(base_dir), padding_side="right")
    separator_token_id(tok, SEP)
    model = attach_lora(load_token_scorer(str(base_dir), n_tokens=rows), r=4, alpha=8, dropout=0.0,
                        quantized=False)
    with torch.no_grad():   # a trained look: nonzero LoRA B, a changed separator row
        for n, p in model.named_parameters():
            if "lora_B" in n or "modules_to_save" in n:
                p.add_(0.05 * torch.randn_like(p))
    model.eval()
    out = tmp_path / name
    model.save_pretrained(out)
    tok.save_pretrained(out)
    write_scorer_meta(out, {"mode": "ppm", "objective": "ppm", "separator": SEP, "text_style": "whole",
                            "base_model_id": str(base_dir), "max_length": 64})
    ids = tok(f"Q: 1 plus 2? Read.{SEP}", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logit = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids))).logits[0, -1, 0]
    return out, float(torch.tanh(logit.double()))


@pytest.mark.slow
def test_adapters_of_both_embedding_conventions_load(tmp_path, tiny_model_dir):
    """main's adapters store the tokenizer's length (here 513 rows), the newer branch's the checkpoint's (520)."""
    from transformers import AutoModelForCausalLM

    from masprm.models.adapters import stored_embedding_rows
    from masprm.models.scorer import load_scorer

    base = tmp_path / "padded_base"   # a checkpoint with more rows than its tokenizer, as Qwen2.5's 151,936
    shutil.copytree(tiny_model_dir, base)
    lm = AutoModelForCausalLM.from_pretrained(base)
    n_tok = lm.config.vocab_size
    lm.resize_token_embeddings(n_tok + 7)
    lm.save_pretrained(base)
    for rows in (n_tok + 1, n_tok + 7):
        folder, expected = _adapter_with_rows(tmp_path, base, rows, f"rows{rows}")
        assert stored_embedding_rows(folder, "embed_tokens") == rows
        got = load_scorer(folder).score_batch([f"Q: 1 plus 2? Read.{SEP}"])
        assert got[0] == pytest.approx(expected, abs=1e-5)
