"""Loading Hugging Face causal LMs and tokenizers with `ModelOptions` (``masprm.models.options``).

`load_causal_lm` / `load_tokenizer` load a hub id or a local folder with them;
`scorer_options` gives a scorer its own precision. A model that cannot be found
is a user error: one line, exit code 2.
"""

from __future__ import annotations

import functools
import warnings
from contextlib import contextmanager
from dataclasses import replace

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

from masprm.checks import check_model_source, looks_like_path
from masprm.errors import ConfigError, ModelError, first_line
from masprm.models.options import QUANT_TYPES, SCORER_PRECISIONS, ModelOptions

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}


_warned: set[str] = set()


def warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


@contextmanager
def peft_alias_warning_silenced():
    """peft reads transformers' deprecated `is_gradient_checkpointing` alias; the warning is not ours to fix."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated")
        yield


def scorer_options(options: ModelOptions, precision: str = "auto") -> ModelOptions:
    """A scorer's loading options: the policy's device and attention flags, its own precision.

    "auto" is the original's choice, independent of the policy's --load_in_4bit:
    a 4-bit NF4 base on CUDA, and fp32 on a CPU. "4bit" quantises on CPU too;
    bf16/fp16/fp32 load unquantised in that dtype. A 4-bit base computes in
    `choose_dtype`'s dtype for the device. A scorer's 4-bit format is always
    NF4, as the original's, whatever the policy's --bnb_4bit_quant_type.
    """
    if precision not in SCORER_PRECISIONS:
        raise ConfigError(f"scorer_precision {precision!r}: expected one of {', '.join(SCORER_PRECISIONS)}",
                          setting="scorer_precision")
    if precision == "auto":
        return replace(options, load_in_4bit=resolve_device(options.device_map).type == "cuda", dtype=None,
                       quant_type="nf4")
    if precision == "4bit":
        return replace(options, load_in_4bit=True, dtype=None, quant_type="nf4")
    return replace(options, load_in_4bit=False, dtype=precision, quant_type="nf4")


# ---------------------------------------------------------------------------
# Devices and model ids


def cuda_unavailable_reason() -> str:
    """Why CUDA cannot be used here, naming the torch build and what torch.cuda.is_available() said."""
    if not torch.version.cuda:
        return (f"torch {torch.__version__} is a CPU-only build (torch.cuda.is_available() returned False); "
                "install a CUDA build of torch (README, Installation)")
    return (f"torch {torch.__version__} is built for CUDA {torch.version.cuda}, but torch.cuda.is_available() "
            f"returned False: no GPU is visible or the NVIDIA driver is too old for CUDA {torch.version.cuda} "
            "(README, Installation)")


def resolve_device(device_map: str = "auto") -> torch.device:
    """The device inputs go to: 'auto' -> cuda:0 when available, else cpu."""
    if device_map in ("auto", "", None):
        if torch.cuda.is_available():
            return torch.device("cuda:0")
        if torch.version.cuda:  # a CUDA build that cannot see a GPU: say so instead of silently using the CPU
            warn_once(f"running on CPU: {cuda_unavailable_reason()}")
        return torch.device("cpu")
    try:
        device = torch.device(device_map)
    except RuntimeError:
        raise ConfigError(f"device_map {device_map!r}: expected auto, cpu, cuda or cuda:N",
                          setting="device_map") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device_map {device_map!r}: {cuda_unavailable_reason()}", setting="device_map")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"device_map {device_map!r}: only {torch.cuda.device_count()} GPU(s) are visible",
                              setting="device_map")
    return device


# ---------------------------------------------------------------------------
# Precision: the one rule that policy, scorers and trainer share


def choose_dtype(device: torch.device | str, requested: str | torch.dtype | None = None) -> torch.dtype:
    """The dtype to compute in on `device`: `requested` when given, else the rule below.

    CPU: fp32 (its kernels are fastest and exact there). CUDA: bf16 from
    compute capability 8 (Ampere) on, fp16 before. The capability decides,
    not `torch.cuda.is_bf16_supported`, which also says True on T4/V100,
    where bf16 is emulated and slow. Callers pass their own default as
    `requested` (None or "auto" means: this rule).
    """
    if isinstance(requested, torch.dtype):
        return requested
    if requested not in (None, "auto"):
        if requested not in DTYPES:
            raise ConfigError(f"dtype {requested!r}: expected auto or one of {', '.join(DTYPES)}", setting="dtype")
        return DTYPES[requested]
    device = torch.device(device)
    if device.type != "cuda":
        return torch.float32
    major, _ = torch.cuda.get_device_capability(device)
    return torch.bfloat16 if major >= 8 else torch.float16


def resolve_attn_impl(name: str) -> str:
    """The attention kernel `name` means: "auto" is flash_attention_2 where it runs, else sdpa; others as given.

    Flash attention runs on an Ampere-or-newer CUDA GPU with the flash-attn package installed
    (the rule of the original's newer trainer); the kernel changes the numbers a little, so the
    resolved name, not "auto", is what a run records.
    """
    if name != "auto":
        return name
    import importlib.util

    ampere = torch.cuda.is_available() and torch.cuda.get_device_capability(0)[0] >= 8
    return "flash_attention_2" if ampere and importlib.util.find_spec("flash_attn") is not None else "sdpa"


def check_model_id(model_id: str, setting: str = "model_id") -> str:
    """Reject a missing or non-model local folder (or an unfetchable hub id) before anything is loaded."""
    return check_model_source(model_id, setting)


def _load_error(model_id: str, setting: str, err: Exception) -> ModelError:
    where = "local folder" if looks_like_path(model_id) else "hub id (not cached, and the hub is unreachable or has no such repo)"
    return ModelError(f"{setting} {model_id}: cannot load as a {where}: {first_line(err)}", setting=setting)


# ---------------------------------------------------------------------------
# Loading


def load_tokenizer(model_id: str, trust_remote_code: bool = False, *, padding_side: str = "left",
                   setting: str = "model_id"):
    """Tokenizer with a pad token (EOS when missing), left padding for generation."""
    model_id = check_model_source(model_id, setting, need_tokenizer=True)  # else an empty tokenizer, silently
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_id, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, ImportError) as err:
        raise _load_error(model_id, setting, err) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = padding_side
    return tokenizer


def policy_dtype(options: ModelOptions, device: torch.device | str) -> torch.dtype:
    """The policy computes in fp16 on CUDA unless --dtype says otherwise, as the original loaded it."""
    cuda = torch.device(device).type == "cuda"
    return choose_dtype(device, options.dtype or ("float16" if cuda else None))


def quantization_config(compute_dtype: torch.dtype, skip_modules: list[str] | None = None, *,
                        quant_type: str = "nf4"):
    """bitsandbytes 4-bit (`quant_type` fp4 or nf4) with double quantisation, computing in `compute_dtype`."""
    if quant_type not in QUANT_TYPES:
        raise ConfigError(f"bnb_4bit_quant_type {quant_type!r}: expected one of {', '.join(QUANT_TYPES)}",
                          setting="bnb_4bit_quant_type")
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=quant_type, bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute_dtype, llm_int8_skip_modules=skip_modules)


def load_causal_lm(model_id: str, options: ModelOptions = ModelOptions(), *, setting: str = "model_id",
                   n_tokens: int | None = None):
    """AutoModelForCausalLM in eval mode on the resolved device, per `options`.

    With `n_tokens` (the tokenizer's length) the embeddings are resized to it when they differ, as the
    original did for its policy: Qwen2.5's padded rows beyond the tokenizer are then never sampled.
    """
    model_id = check_model_id(model_id, setting)
    device = resolve_device(options.device_map)
    dtype = policy_dtype(options, device)
    kwargs = dict(dtype=dtype, attn_implementation=options.attn_impl, trust_remote_code=options.trust_remote_code)
    if device.type == "cuda":
        # "auto" lets accelerate spread a large model over every visible GPU.
        kwargs["device_map"] = "auto" if options.device_map == "auto" else {"": device.index or 0}
    if options.load_in_4bit:
        # bitsandbytes places the quantised weights while loading (on CPU too, computing in fp32 there).
        kwargs["quantization_config"] = quantization_config(dtype, quant_type=options.quant_type)
        kwargs.setdefault("device_map", {"": "cpu"})
    try:
        model = AutoModelForCausalLM.from_pretrained(model_id, **kwargs)
    except (OSError, ValueError, ImportError) as err:
        raise _load_error(model_id, setting, err) from None
    if "device_map" not in kwargs:
        model.to(device)
    if n_tokens is not None and n_tokens != model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(n_tokens)
    model.eval()
    if options.compile:
        model = try_compile(model)
    return model


def cache_argument(model) -> str:
    """The name of the model forward's KV-cache argument (and output): transformers 5 renamed
    `past_key_values` to `cache` (5.17 still has the old name, 5.24 the new)."""
    import inspect

    return "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"


def try_compile(model):
    """torch.compile the forward pass (CUDA only); any compiler failure: warn and run eagerly.

    Compilation is lazy, so a failure shows up on the first real call; the
    wrapper then switches back to the eager forward and repeats that call.
    On CPU compiling a model takes minutes (measured: ~3 min on 2 cores for
    a 2-layer model, for a ~15% faster decode), so it is skipped there.
    """
    if model.device.type != "cuda":
        warn_once("torch.compile is skipped on CPU (compiling costs minutes and gains little there)")
        return model
    return compile_with_fallback(model, torch.compile)


def compile_with_fallback(model, compiler):
    """Replace model.forward by compiler(forward); the first failing call reverts to eager."""
    eager_forward = model.forward
    model.eager_forward = eager_forward   # the uncompiled forward, for code that compiles its own step

    def revert() -> None:
        model.forward = eager_forward

    # `generate` reads forward's signature to decide what to pass: without `wraps` (in eager_fallback) it would
    # stop sending logits_to_keep=1 and position_ids, and prefill would compute logits for every position.
    model.forward = eager_fallback(eager_forward, compiler(eager_forward, dynamic=True), revert)
    return model


def eager_fallback(eager, compiled, on_failure=None):
    """A function that calls `compiled` until one call fails, then `eager` for good (that call repeated).

    Compilation is lazy, so a compiler failure shows up on the first real call: it is warned about once
    and `on_failure()` runs (e.g. to put the eager function back in place)."""
    failed = []

    @functools.wraps(eager)
    def call(*args, **kwargs):
        if failed:
            return eager(*args, **kwargs)
        try:
            return compiled(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - any compiler failure means: run eagerly
            failed.append(err)
            if on_failure is not None:
                on_failure()
            detail = first_line(err, limit=200) if str(err).strip() else ""
            warn_once(f"torch.compile failed ({type(err).__name__}: {detail}); continuing without compilation")
            return eager(*args, **kwargs)

    return call
