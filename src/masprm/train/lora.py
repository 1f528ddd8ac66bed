"""LoRA / QLoRA on the scorer model for training.

LoRA trains adapters on the attention and MLP projections plus all biases,
and full copies of the score head, the norms and the token embeddings (the
separator is a new token). On CUDA the base is 4-bit NF4 (QLoRA); on CPU it
stays fp32 (4-bit by flag).
"""

from __future__ import annotations

import functools

import torch
from peft import LoraConfig, PeftModel, TaskType, get_peft_model, prepare_model_for_kbit_training

from masprm.errors import ModelError, first_line
from masprm.models.loading import peft_alias_warning_silenced

LORA_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


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


def enable_activation_checkpointing(model) -> None:
    """Non-reentrant activation checkpointing, under either of transformers 5's names for it.

    Later 5.x releases call it ``activation_checkpointing_enable``; earlier ones (5.17, on the lent GPU
    machine) only ``gradient_checkpointing_enable``, with the same keyword under the old name.
    """
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def attach_lora(model, *, r: int, alpha: float, dropout: float, quantized: bool,
                init_adapter_dir: str | None = None, new_token_ids: list[int] | None = None,
                reference_kept: bool = False):
    """Wrap `model` in a trainable LoRA adapter (QLoRA preparation when `quantized`).

    `init_adapter_dir`: start from that saved adapter's weights (its settings were checked against
    r/alpha/dropout by `masprm.train.warm_start`). `new_token_ids`: train only these embedding rows
    (peft's trainable token indices) instead of a full trainable copy of the embeddings; an empty
    list (the separator was already a token) trains no embedding row at all, as the original's newer branch.
    `reference_kept`: the base model must stay what it was (the implicit objective reads it back with the
    adapter disabled as pi_ref): a causal-LM adapter on the projections only, no bias, no full copies and
    no embedding rows.
    """
    if quantized:
        # Freeze the 4-bit base, cast the other weights to fp32; recompute activations to save memory
        # (non-reentrant checkpointing needs no input-grad hook).
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
        enable_activation_checkpointing(model)
        keep_4bit_biases_fp32(model)
    saved = modules_to_save(model)
    token_rows = None
    if new_token_ids is not None:
        embeddings = model.get_input_embeddings()
        embedding_name = next(n.rsplit(".", 1)[-1] for n, m in model.named_modules() if m is embeddings)
        saved = [name for name in saved if name != embedding_name]
        token_rows = {embedding_name: list(new_token_ids)} if new_token_ids else None
    config = LoraConfig(
        task_type=TaskType.CAUSAL_LM if reference_kept else TaskType.TOKEN_CLS,
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=LORA_TARGET_MODULES,
        bias="none" if reference_kept else "all",
        modules_to_save=None if reference_kept else saved,
        trainable_token_indices=None if reference_kept else token_rows,
    )
    try:
        with peft_alias_warning_silenced():
            if init_adapter_dir:   # the caller fitted the embeddings to it (fit_embeddings_to_adapter)
                return PeftModel.from_pretrained(model, init_adapter_dir, is_trainable=True)
            return get_peft_model(model, config)
    except ValueError as err:  # e.g. an architecture without these projection names
        raise ModelError(f"cannot attach LoRA ({first_line(err)}); the targets are {', '.join(LORA_TARGET_MODULES)}"
                         "; train without LoRA (a full fine-tune) instead", setting="lora") from None


def keep_4bit_biases_fp32(model) -> int:
    """Keep the (trainable) biases of 4-bit layers in fp32; returns how many layers were changed.

    bitsandbytes' Linear4bit.forward overwrites its bias with a copy in the
    compute dtype on every call, so after k-bit preparation made it fp32 it is
    bf16/fp16 again from the first step on, and AdamW at lr 1e-5 updates it by
    less than one bf16 rounding step: the q/k/v biases would not train. Here
    the layer runs without its bias and the fp32 bias is added to the output
    through a differentiable cast, so gradients and updates stay in fp32.
    """
    import bitsandbytes as bnb   # optional (the `gpu` extra): only for a 4-bit base

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
