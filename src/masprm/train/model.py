"""The scorer model (SPEC §7): a token-classification head with one output on a base LM.

The score of a text is the head's logit at the last separator token, and the
value is tanh(logit). The separator is a single token: a `<...>` separator the
tokenizer does not know is added as a special token (and the embeddings are
resized), so it is never merged with neighbouring text.

LoRA trains adapters on the attention and MLP projections plus all biases,
and full copies of the score head, the norms and the token embeddings (the
separator is a new token). On CUDA the base is 4-bit NF4 (QLoRA); on CPU it
stays fp32 (4-bit by flag). Shared by the trainer and the scorer loader.
"""

from __future__ import annotations

import functools
import os
from contextlib import contextmanager
from typing import Any

import torch
from peft import LoraConfig, TaskType, get_peft_model, prepare_model_for_kbit_training
from transformers import AutoModelForTokenClassification, BitsAndBytesConfig
from transformers.utils import logging as hf_logging

from masprm.cli import UsageError
from masprm.models.loading import check_model_id, choose_dtype, peft_alias_warning_silenced, quantization_config

LORA_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
SCORE_HEAD = "score"  # the head's attribute name in transformers' *ForTokenClassification


@contextmanager
def _transformers_errors_only():
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


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
        raise UsageError("--step-separator must not be empty")
    looks_like_tag = len(separator) > 2 and separator.startswith("<") and separator.endswith(">")
    known = separator in tokenizer.get_vocab()
    if looks_like_tag and (known or add_if_missing):
        if separator not in tokenizer.all_special_tokens:
            tokenizer.add_special_tokens({"extra_special_tokens": [separator]}, replace_extra_special_tokens=False)
        return tokenizer.convert_tokens_to_ids(separator)
    ids = tokenizer(separator, add_special_tokens=False)["input_ids"]
    if len(ids) == 1:
        return ids[0]
    how = ("pass --ensure-step-token to add it" if looks_like_tag else
           "only a separator of the form <...> can be added as a new token")
    raise UsageError(f"--step-separator {separator!r} is {len(ids)} tokens for this tokenizer, not one; {how}")


# --------------------------------------------------------------------------- model


def load_token_scorer(source: str, *, n_tokens: int | None = None, load_in_4bit: bool = False,
                      dtype: torch.dtype | None = None, device_map: Any = None, attn_impl: str = "sdpa",
                      trust_remote_code: bool = False, pad_token_id: int | None = None,
                      flag: str = "--model-id"):
    """`AutoModelForTokenClassification` (num_labels=1) on `source`, embeddings resized to `n_tokens`.

    Without `dtype`, weights load in fp32 (CPU training, and fp32 master
    weights under mixed precision); with 4-bit, in the compute dtype (bf16/fp16
    on CUDA, fp32 on CPU).
    """
    source = check_model_id(source, flag)
    kwargs: dict[str, Any] = {"num_labels": 1, "attn_implementation": attn_impl,
                              "trust_remote_code": trust_remote_code}
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
            model = AutoModelForTokenClassification.from_pretrained(source, **kwargs)
        except (OSError, ValueError, KeyError, ImportError, RuntimeError) as err:
            raise UsageError(f"{flag} {source}: cannot load as a token-classification model: "
                             f"{_first_line(err)}") from None
        if n_tokens is not None and n_tokens != model.get_input_embeddings().weight.shape[0]:
            model.resize_token_embeddings(n_tokens)
    if pad_token_id is not None:
        model.config.pad_token_id = pad_token_id
    return model


def modules_to_save(model) -> list[str]:
    """Names (last path component) of the token embeddings and every norm layer.

    The score head is added by peft itself for TaskType.TOKEN_CLS.
    """
    embeddings = model.get_input_embeddings()
    names = set()
    for name, module in model.named_modules():
        if module is embeddings or "norm" in type(module).__name__.lower():
            names.add(name.rsplit(".", 1)[-1])
    return sorted(names)


def disable_dropout(model) -> None:
    """Set every dropout module to p=0, LoRA's included (what TRL's disable_dropout=True does)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


def attach_lora(model, *, r: int, alpha: float, dropout: float, quantized: bool):
    """Wrap `model` in a trainable LoRA adapter (QLoRA preparation when `quantized`)."""
    if quantized:
        # Freeze the 4-bit base, cast the other weights to fp32; recompute activations to save memory
        # (non-reentrant checkpointing needs no input-grad hook).
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        keep_4bit_biases_fp32(model)
    config = LoraConfig(
        task_type=TaskType.TOKEN_CLS,
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=LORA_TARGET_MODULES,
        bias="all",
        modules_to_save=modules_to_save(model),
    )
    try:
        with peft_alias_warning_silenced():
            return get_peft_model(model, config)
    except ValueError as err:  # e.g. an architecture without these projection names
        raise UsageError(f"cannot attach LoRA ({_first_line(err)}); the targets are {', '.join(LORA_TARGET_MODULES)}"
                         "; use --no-lora for a full fine-tune") from None


def keep_4bit_biases_fp32(model) -> int:
    """Keep the (trainable) biases of 4-bit layers in fp32; returns how many layers were changed.

    bitsandbytes' Linear4bit.forward overwrites its bias with a copy in the
    compute dtype on every call, so after k-bit preparation made it fp32 it is
    bf16/fp16 again from the first step on, and AdamW at lr 1e-5 updates it by
    less than one bf16 rounding step: the q/k/v biases would not train. Here
    the layer runs without its bias and the fp32 bias is added to the output
    through a differentiable cast, so gradients and updates stay in fp32.
    """
    import bitsandbytes as bnb

    changed = 0
    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit) and module.bias is not None:
            module.forward = functools.partial(_forward_with_fp32_bias, module, module.forward)
            changed += 1
    return changed


def _forward_with_fp32_bias(layer, forward, x, *args, **kwargs):
    bias = layer._parameters["bias"]
    layer._parameters["bias"] = None  # hidden from bitsandbytes' in-place cast for this call
    try:
        out = forward(x, *args, **kwargs)
    finally:
        layer._parameters["bias"] = bias
    return out + bias.to(out.dtype)
