"""The tiny model builder: loadable by the Auto classes, small, deterministic, exact tokenizer."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
from transformers import AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer  # noqa: E402

from masprm.models.tiny import IM_END, PAD_TOKEN, build_tiny_model, build_tokenizer, default_corpus  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 12+7?"}]


def folder_digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_loads_in_all_three_auto_classes(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    lm = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    head = AutoModelForTokenClassification.from_pretrained(tiny_model_dir, num_labels=1)
    assert type(lm).__name__ == "Qwen2ForCausalLM"
    assert lm.config.tie_word_embeddings and lm.lm_head.weight.data_ptr() == lm.model.embed_tokens.weight.data_ptr()
    assert head.score.out_features == 1
    # eos / pad wired through tokenizer, model config and generation config alike
    assert tok.eos_token == IM_END and tok.pad_token == PAD_TOKEN
    assert lm.config.eos_token_id == tok.eos_token_id == lm.generation_config.eos_token_id
    assert lm.config.pad_token_id == tok.pad_token_id == lm.generation_config.pad_token_id
    assert lm.config.vocab_size == len(tok)
    assert (tiny_model_dir / "model.safetensors").exists()


def test_folder_is_small(tiny_model_dir):
    total = sum(p.stat().st_size for p in tiny_model_dir.iterdir() if p.is_file())
    assert total < 1_000_000, total


def test_chat_template_renders_chatml(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n"
                    "<|im_start|>user\nWhat is 12+7?<|im_end|>\n<|im_start|>assistant\n")
    without = tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=False)
    assert not without.endswith("assistant\n")
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert ids.count(tok.convert_tokens_to_ids("<|im_start|>")) == 3  # markers are single tokens
    assert ids.count(tok.eos_token_id) == 2


@pytest.mark.parametrize("text", [
    "Tom has 123 apples and gives 7 away.\n  Two  spaces, tabs\tand (parens)!",
    "x = 3.14; 1,000,000 $5 #### 42</step>VERDICT: INCORRECT it's",
    "Answer with a single letter (A, B, C, or D) only.\n\nFinal Answer: C",
])
def test_saved_tokenizer_decodes_exactly_and_matches_the_built_one(tiny_model_dir, text):
    built = build_tokenizer()
    loaded = AutoTokenizer.from_pretrained(tiny_model_dir)
    ids = loaded(text, add_special_tokens=False)["input_ids"]
    assert loaded.decode(ids) == text
    assert built(text, add_special_tokens=False)["input_ids"] == ids


def test_digits_are_single_tokens(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    pieces = tok.convert_ids_to_tokens(tok("12345 + 67890", add_special_tokens=False)["input_ids"])
    digits = [p.lstrip("Ġ") for p in pieces if any(c.isdigit() for c in p)]
    assert digits == list("12345") + list("67890")


def test_deterministic_for_a_seed_and_different_across_seeds(tmp_path):
    import torch

    torch.manual_seed(11)
    expected_next = torch.rand(3)
    torch.manual_seed(11)
    a = build_tiny_model(tmp_path / "a", seed=3)
    assert torch.equal(torch.rand(3), expected_next)  # the caller's RNG stream is untouched
    b = build_tiny_model(tmp_path / "b", seed=3)
    c = build_tiny_model(tmp_path / "c", seed=4)
    assert folder_digest(a) == folder_digest(b)
    assert folder_digest(a)["model.safetensors"] != folder_digest(c)["model.safetensors"]
    assert folder_digest(a)["tokenizer.json"] == folder_digest(c)["tokenizer.json"]


def test_custom_corpus_and_sizes(tmp_path):
    corpus = ["alpha beta gamma 1 2 3"] * 20 + default_corpus(50)
    out = build_tiny_model(tmp_path / "m", corpus=corpus, vocab_size=300, hidden_size=32, num_layers=1)
    lm = AutoModelForCausalLM.from_pretrained(out)
    assert lm.config.hidden_size == 32 and lm.config.num_hidden_layers == 1
    assert lm.config.vocab_size == len(AutoTokenizer.from_pretrained(out)) <= 300


@pytest.mark.slow   # builds a model with the command end to end
def test_cli_writes_a_model(tmp_path):
    out = tmp_path / "cli_model"
    proc = subprocess.run([sys.executable, "-m", "masprm.models.tiny", str(out), "--seed", "1"],
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (out / "config.json").exists() and (out / "tokenizer.json").exists()


def test_the_bitsandbytes_cpu_kernel_notice_is_silenced_and_nothing_else(caplog):
    import logging

    import masprm.models.loading  # noqa: F401  (every model loader goes through masprm.models)

    logger = logging.getLogger("bitsandbytes.backends.cpu.ops")
    with caplog.at_level(logging.WARNING):
        logger.warning("Failed to load CPU gemm_4bit_forward from kernels-community: %s. Please make sure you "
                       "already `pip install kernels` and the kernels >= 0.11.1", "No module named 'kernels'")
        logger.warning("a real bitsandbytes problem")
    assert [r.getMessage() for r in caplog.records] == ["a real bitsandbytes problem"]
