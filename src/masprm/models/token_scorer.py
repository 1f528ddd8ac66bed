"""The scorer model: a token-classification head with one output on a base LM.

The score of a text is the head's logit at the last separator token, and the
value is tanh(logit). The separator is a single token: a `<...>` separator the
tokenizer does not know is added as a special token (and the embeddings are
resized), so it is never merged with neighbouring text. On CUDA a 4-bit base is
NF4 with the score head unquantised. Used by the scorer loader and by training
(which adds LoRA, `masprm.train.lora`).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any

import torch
from transformers import (AutoModelForCausalLM, AutoModelForSequenceClassification, AutoModelForTokenClassification,
                          BitsAndBytesConfig)
from transformers.utils import logging as hf_logging

from masprm.errors import ConfigError, ModelError, first_line
from masprm.models.loading import check_model_id, choose_dtype, quantization_config

SCORE_HEAD = "score"  # the head's attribute name in transformers' *ForTokenClassification


@contextmanager
def _transformers_errors_only():
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)


# --------------------------------------------------------------------------- precision


def _local_cuda_device() -> int:
    """This process's GPU (LOCAL_RANK under torchrun / accelerate launch, else the current device)."""
    rank = os.environ.get("LOCAL_RANK")
    return int(rank) if rank else torch.cuda.current_device()


def nf4_config(compute_dtype: torch.dtype) -> BitsAndBytesConfig:
    """4-bit NF4 with double quantisation; the score head stays unquantised (it is trained/needed exact)."""
    return quantization_config(compute_dtype, skip_modules=[SCORE_HEAD])


# --------------------------------------------------------------------------- tokenizer + separator


def separator_token_id(tokenizer, separator: str, add_if_missing: bool = True) -> int:
    """The separator's single token id; a `<...>` separator is registered as a special token.

    Registering makes the tokenizer split it out before BPE, so it is never
    merged with neighbouring text. A `<...>` separator missing from the
    vocabulary is added (when `add_if_missing`); the caller resizes the
    embeddings to `len(tokenizer)`.
    """
    if not separator:
        raise ConfigError("the step separator must not be empty", setting="separator")
    looks_like_tag = len(separator) > 2 and separator.startswith("<") and separator.endswith(">")
    known = separator in tokenizer.get_vocab()
    if looks_like_tag and (known or add_if_missing):
        if separator not in tokenizer.all_special_tokens:
            tokenizer.add_special_tokens({"extra_special_tokens": [separator]}, replace_extra_special_tokens=False)
        return tokenizer.convert_tokens_to_ids(separator)
    ids = tokenizer(separator, add_special_tokens=False)["input_ids"]
    if len(ids) == 1:
        return ids[0]
    how = ("allow adding it as a new token" if looks_like_tag else
           "only a separator of the form <...> can be added as a new token")
    raise ConfigError(f"step separator {separator!r} is {len(ids)} tokens for this tokenizer, not one; {how}",
                      setting="separator")


# --------------------------------------------------------------------------- model


def load_token_scorer(source: str, *, n_tokens: int | None = None, load_in_4bit: bool = False,
                      dtype: torch.dtype | None = None, device_map: Any = None, attn_impl: str = "sdpa",
                      trust_remote_code: bool = False, pad_token_id: int | None = None,
                      setting: str = "model_id", heads: int = 1):
    """`AutoModelForTokenClassification` (num_labels = `heads`, 1 but for an ensemble) on `source`,
    embeddings resized to `n_tokens`.

    Without `dtype`, weights load in fp32 (CPU training, and fp32 master
    weights under mixed precision); with 4-bit, in the compute dtype (bf16/fp16
    on CUDA, fp32 on CPU).
    """
    return _load_model(AutoModelForTokenClassification, "a token-classification model", {"num_labels": heads}, source,
                       n_tokens=n_tokens, load_in_4bit=load_in_4bit, dtype=dtype, device_map=device_map,
                       attn_impl=attn_impl, trust_remote_code=trust_remote_code, pad_token_id=pad_token_id,
                       setting=setting)


def load_causal_lm(source: str, **kwargs):
    """The base LM with its own head (`AutoModelForCausalLM`), loaded as `load_token_scorer` loads a scorer:
    the scorers that read the LM's token probabilities (``--mode implicit``)."""
    return _load_model(AutoModelForCausalLM, "a causal language model", {}, source, **kwargs)


# the transformers head a public scorer format names (masprm.scorer_formats.ScorerFormat.model)
HEADS = {"sequence_classification": (AutoModelForSequenceClassification, "a sequence-classification model"),
         "token_classification": (AutoModelForTokenClassification, "a token-classification model"),
         "causal_lm": (AutoModelForCausalLM, "a causal language model")}


def load_head_model(head: str, num_labels: int | None, source: str, **kwargs):
    """`source` with the head ``head`` (a key of HEADS) of ``num_labels`` outputs (None: the LM's own),
    loaded as `load_token_scorer` loads a scorer."""
    auto_class, what = HEADS[head]
    return _load_model(auto_class, what, {"num_labels": num_labels} if num_labels else {}, source, **kwargs)


def _load_model(auto_class, what: str, extra: dict[str, Any], source: str, *, n_tokens: int | None = None,
                load_in_4bit: bool = False, dtype: torch.dtype | None = None, device_map: Any = None,
                attn_impl: str = "sdpa", trust_remote_code: bool = False, pad_token_id: int | None = None,
                setting: str = "model_id"):
    source = check_model_id(source, setting)
    kwargs: dict[str, Any] = {**extra, "attn_implementation": attn_impl, "trust_remote_code": trust_remote_code}
    if load_in_4bit:
        # bitsandbytes places the quantised weights at load time, so the device is fixed here.
        on_cuda = torch.cuda.is_available()
        compute_dtype = dtype or choose_dtype("cuda" if on_cuda else "cpu")
        kwargs.update(quantization_config=nf4_config(compute_dtype), dtype=compute_dtype,
                      device_map=device_map or {"": _local_cuda_device() if on_cuda else "cpu"})
    else:
        kwargs["dtype"] = dtype or torch.float32
        if device_map is not None:
            kwargs["device_map"] = device_map
    # transformers would report the new head as "missing" and explain how the separator row is
    # initialised: both expected here (the head is trained, or comes from the adapter).
    with _transformers_errors_only():
        try:
            model = auto_class.from_pretrained(source, **kwargs)
        except (OSError, ValueError, KeyError, ImportError, RuntimeError) as err:
            raise ModelError(f"{setting} {source}: cannot load as {what}: {first_line(err)}",
                             setting=setting) from None
        if n_tokens is not None and n_tokens != model.get_input_embeddings().weight.shape[0]:
            model.resize_token_embeddings(n_tokens)
    if pad_token_id is not None:
        model.config.pad_token_id = pad_token_id
    return model
