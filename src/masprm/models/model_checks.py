"""Will this model folder serve? The checks a stage makes before it loads a policy or a base model.

``masprm.checks.check_model_source`` looks at the files (a config, complete
weights, a tokenizer). What those files say can still be wrong in ways that
show up only deep inside a load, or minutes into a run: another architecture's
config over the weights, an impossible config, a tokenizer with more tokens
than the embeddings, a chat template that raises, a pickle weight file that
``torch.load(weights_only=True)`` refuses, a question longer than the model's
context. ``check_model_serves`` finds each of these in about a second and
without loading a weight: the model is built on the ``meta`` device from its
config and its tensor names and shapes are compared with the weight files'
headers. Every problem is one ModelError (or ConfigError / DataError) line
naming the setting. The weight files are read through ``masprm.models.weight_files``, the readers every
model folder a command reads shares (``masprm.models.scorer_checks`` for scorers and adapters): their
tensor names and shapes from the files alone, and no NaN or inf in any weight.

    check_model_serves(model_id, "model_id", attn_impl="sdpa", chat=True)   # a policy
    check_model_serves(model_id, "model_id")                                 # a scorer's base model
    check_questions_fit(model_id, "model_id", questions, where="data.jsonl")
"""

from __future__ import annotations

import json
import math
import re
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator

from masprm.errors import ConfigError, DataError, ModelError, ModelOutputError, first_line, quoted
from masprm.models.weight_files import check_finite_model, folder_stamp, local_folder, weight_shapes

# Keys a checkpoint may hold that no model expects (old rotary caches).
_IGNORED_EXTRA = re.compile(r"(^|\.)rotary_emb\.inv_freq$")
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
PROBE_CHAT = [{"role": "system", "content": "You are a careful assistant."},
              {"role": "user", "content": "What is 2 + 2?"}]


def _fail(setting: str, model_id: str, problem: str) -> ModelError:
    return ModelError(f"{setting} {model_id}: {problem}", setting=setting)


# --------------------------------------------------------------------------- config against weights


def check_attn_impl_name(attn_impl: str | None) -> None:
    """An attention implementation transformers knows (a hub kernel, ``org/repo``, is left to transformers)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    known = ["eager", *ALL_ATTENTION_FUNCTIONS.valid_keys()]
    if attn_impl is None or "/" in attn_impl or attn_impl in known or attn_impl == "paged|eager":
        return
    raise ConfigError(f"attn_impl {quoted(attn_impl)}: not an attention implementation (known: "
                      f"{', '.join(k for k in known if not k.startswith('paged'))})", setting="attn_impl")


def meta_model(config: Any, attn_impl: str | None, trust_remote_code: bool, setting: str, model_id: str,
                auto_class: Any = None):
    """The config's model (`auto_class`, default the causal LM) built on the ``meta`` device: no weight read."""
    import torch
    from transformers import AutoModelForCausalLM

    check_attn_impl_name(attn_impl)
    try:
        with torch.device("meta"):
            return (auto_class or AutoModelForCausalLM).from_config(config, attn_implementation=attn_impl,
                                                                    trust_remote_code=trust_remote_code)
    except Exception as err:  # noqa: BLE001 - transformers reports an impossible config with many types
        text = first_line(err)
        if attn_impl and ("attn_implementation" in text or "Attention" in text):
            raise ConfigError(f"attn_impl {quoted(attn_impl)}: cannot be used with {model_id} "
                              f"({quoted(text, 200)})", setting="attn_impl") from None
        raise _fail(setting, model_id, f"config.json describes a model that cannot be built "
                                       f"({quoted(text, 200)})") from None


def _expected_shapes(model: Any) -> tuple[dict[str, tuple[int, ...]], list[set[str]]]:
    """The model's tensors (parameters and saved buffers) and its groups of tied names (any one suffices)."""
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    shared: dict[int, set[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        shared.setdefault(id(param), set()).add(name)
    groups = [g for g in shared.values() if len(g) > 1]
    groups += [{target, source} for target, source in (getattr(model, "all_tied_weights_keys", None) or {}).items()]
    return expected, groups


def _align_prefix(found: dict, expected: dict, prefix: str) -> dict:
    """Checkpoints saved from the bare model lack the head's prefix (``model.``); add it when that helps."""
    if not prefix or set(found) & set(expected):
        return found
    added = {f"{prefix}.{k}": v for k, v in found.items()}
    return added if set(added) & set(expected) else found


def check_weights_fit_config(model: Any, found: dict[str, tuple[int, ...]], setting: str, model_id: str) -> None:
    """The weight files hold the tensors the config's model has, with its shapes.

    A model type whose checkpoints transformers renames or merges on load (its conversion
    mapping), and a pre-quantized checkpoint (its tensors are the quantizer's), are not
    compared name by name.
    """
    from transformers.conversion_mapping import extract_weight_conversions_for_model

    if extract_weight_conversions_for_model(model) or getattr(model.config, "quantization_config", None):
        return
    expected, tied = _expected_shapes(model)
    found = _align_prefix(found, expected, getattr(model, "base_model_prefix", ""))
    arch = getattr(model.config, "model_type", "?")
    for name, shape in expected.items():
        if name in found and found[name] != shape:
            raise _fail(setting, model_id, f"the weights do not fit config.json ({arch}): {name} is "
                                           f"{list(found[name])} in the weights, {list(shape)} by the config")
    optional = {name for group in tied for name in group if group & set(found)}
    missing = sorted(set(expected) - set(found) - optional)
    ignore = [re.compile(p) for p in (getattr(model, "_keys_to_ignore_on_load_unexpected", None) or [])]
    extra = sorted(k for k in set(found) - set(expected)
                   if not _IGNORED_EXTRA.search(k) and not any(p.search(k) for p in ignore))
    if missing or extra:
        parts = ([f"{len(missing)} tensor(s) it needs are missing (e.g. {missing[0]})"] if missing else []) + \
                ([f"{len(extra)} tensor(s) in the weights are unknown to it (e.g. {extra[0]})"] if extra else [])
        raise _fail(setting, model_id, f"the weights do not fit config.json ({arch}): {' and '.join(parts)}; "
                                       "is config.json another model's?")


# --------------------------------------------------------------------------- tokenizer and chat template


@lru_cache(maxsize=8)
def _tokenizer(folder: str, trust_remote_code: bool, stamp: tuple):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)


def _load_tokenizer(folder: Path, trust_remote_code: bool, setting: str, model_id: str):
    try:
        return _tokenizer(str(folder), trust_remote_code, folder_stamp(str(folder)))
    except Exception as err:  # noqa: BLE001 - tokenizers fail with many exception types
        raise _fail(setting, model_id, f"the tokenizer cannot be loaded ({quoted(first_line(err), 200)})") from None


def check_chat_template(tokenizer: Any, setting: str, model_id: str) -> None:
    """The policy's prompts go through the chat template: it must render a system and a user message."""
    try:
        text = tokenizer.apply_chat_template(PROBE_CHAT, tokenize=False, add_generation_prompt=True)
    except Exception as err:  # noqa: BLE001 - a template can raise anything (raise_exception, a bad filter)
        raise _fail(setting, model_id, f"its chat template fails on a system and a user message "
                                       f"({quoted(first_line(err), 200)}); fix chat_template in the tokenizer "
                                       "files") from None
    if not isinstance(text, str) or PROBE_CHAT[1]["content"] not in text:
        raise _fail(setting, model_id, "its chat template does not show the user's message")


# What a policy's sampling reads from generation_config.json, and the values each may take.
GENERATION_RANGES = {"repetition_penalty": ("> 0", lambda v: v > 0), "temperature": (">= 0", lambda v: v >= 0),
                     "top_p": ("in (0, 1]", lambda v: 0 < v <= 1), "top_k": (">= 0", lambda v: v >= 0)}


def check_generation_config(folder: Path, config: Any, tokenizer: Any, vocab: int, setting: str,
                            model_id: str) -> None:
    """The policy's generation files: generation_config.json parsed strictly (valid JSON, an object), its
    sampling values in range, and an end-of-turn token (its EOS ids, else the config's or the tokenizer's)
    that exists and lies inside the vocabulary; without one every message runs to max_new_tokens."""
    path = folder / "generation_config.json"
    generation: dict = {}
    if path.is_file():
        try:
            generation = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise _fail(setting, model_id, f"generation_config.json cannot be read ({quoted(first_line(err), 160)})"
                        "; fix or remove it") from None
        if not isinstance(generation, dict):
            raise _fail(setting, model_id, "generation_config.json must hold a JSON object")
    for key, (rule, ok) in GENERATION_RANGES.items():
        value = generation.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not ok(value):
            raise _fail(setting, model_id, f"generation_config.json: {key} must be a number {rule}, got {quoted(value)}")
    eos = generation.get("eos_token_id")
    # the tokenizer's EOS counts only when its files name one: a tokenizer class's built-in default
    # (Qwen2's <|endoftext|>) is not the end of a chat turn, and no file of the folder chose it
    named = tokenizer.eos_token_id if _tokenizer_names_eos(folder) else None
    for source in (getattr(config, "eos_token_id", None), named):
        eos = source if eos is None else eos
    ids = [eos] if not isinstance(eos, list) else eos
    ids = [i for i in ids if i is not None]
    if not ids:
        raise _fail(setting, model_id, "no end-of-turn token: neither generation_config.json, config.json nor the "
                                       "tokenizer names an EOS token, so every message would run to max_new_tokens")
    bad = next((i for i in ids if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab), None)
    if bad is not None:
        raise _fail(setting, model_id, f"the EOS token id {quoted(bad)} is outside the vocabulary (0..{vocab - 1}), so "
                                       "no message could end")


def _tokenizer_names_eos(folder: Path) -> bool:
    """Whether tokenizer_config.json or special_tokens_map.json names an EOS token."""
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        try:
            data = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        eos = data.get("eos_token") if isinstance(data, dict) else None
        if (eos.get("content") if isinstance(eos, dict) else eos):
            return True
    return False


def context_length(config: Any) -> int | None:
    """The model's context in tokens, when its config says."""
    for key in CONTEXT_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


# --------------------------------------------------------------------------- the whole check


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' own warnings about the config or long texts would add lines to a one-line answer."""
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)


@lru_cache(maxsize=8)
def _checked(model_id: str, setting: str, attn_impl: str | None, trust_remote_code: bool, chat: bool, stamp: tuple):
    """(tokenizer, context length) of a model that passed every check; cached (per `stamp`, the folder's
    files), so stages may ask twice."""
    with _quiet_transformers():
        return _check(model_id, setting, attn_impl, trust_remote_code, chat)


def _check(model_id: str, setting: str, attn_impl: str | None, trust_remote_code: bool, chat: bool):
    from transformers import AutoConfig

    folder = local_folder(model_id)
    if folder is None:   # a hub id that is not cached: it is checked when it is downloaded
        return None, None
    try:
        config = AutoConfig.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
    except Exception as err:  # noqa: BLE001 - an unknown model_type, bad JSON, bad values
        raise _fail(setting, model_id, f"config.json cannot be used ({quoted(first_line(err), 200)})") from None
    model = meta_model(config, attn_impl, trust_remote_code, setting, model_id)
    shapes = weight_shapes(folder, setting, model_id)
    if shapes:
        check_weights_fit_config(model, shapes, setting, model_id)
        check_finite_model(folder, setting, model_id)
    tokenizer = _load_tokenizer(folder, trust_remote_code, setting, model_id)
    rows = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > rows:
        raise _fail(setting, model_id, f"the tokenizer has {len(tokenizer)} tokens but the model's embeddings "
                                       f"have {rows} rows, so token ids from {rows} on fall outside them "
                                       "(tokenizer files of another model?)")
    if chat:
        check_chat_template(tokenizer, setting, model_id)
        check_generation_config(folder, config, tokenizer, rows, setting, model_id)
    return tokenizer, context_length(config)


def check_model_serves(model_id: str, setting: str, *, attn_impl: str | None = "sdpa",
                       trust_remote_code: bool = False, device_map: str | None = None, chat: bool = False) -> None:
    """One line (ModelError/ConfigError naming `setting`) when the model cannot serve; nothing is loaded.

    ``chat`` also renders the chat template (a policy's prompts go through it);
    ``device_map`` is resolved first (a device that does not exist is the flag's fault).
    """
    if device_map is not None:
        from masprm.models.loading import resolve_device

        resolve_device(device_map)
    _checked(model_id, setting, attn_impl, trust_remote_code, chat, folder_stamp(model_id))


def check_questions_fit(model_id: str, setting: str, questions: Iterable[str], *, where: str,
                        trust_remote_code: bool = False, prompts: Iterable[str] = (),
                        prompts_from: str = "mas_config") -> None:
    """Every question, with the longest of the team's system `prompts`, fits the model's context (when its
    config gives one); a DataError names the first that does not (a ConfigError naming `prompts_from` when a
    prompt alone fills it), so a run does not spend minutes on it and then fail or silently cut it."""
    tokenizer, context = _checked(model_id, setting, None, trust_remote_code, False, folder_stamp(model_id))
    if tokenizer is None or context is None:
        return
    prompts = [p for p in prompts if p]
    with _quiet_transformers():
        prompt = max((len(ids) for ids in tokenizer(prompts, add_special_tokens=False)["input_ids"]), default=0) \
            if prompts else 0
    if prompt >= context:
        raise ConfigError(f"{prompts_from}: a system prompt is {prompt} tokens, more than the context of "
                          f"{model_id} ({context} tokens)", setting=prompts_from)
    questions = list(questions)
    for start in range(0, len(questions), 256):
        batch = questions[start:start + 256]
        with _quiet_transformers():
            lengths = [len(ids) for ids in tokenizer(batch, add_special_tokens=False)["input_ids"]]
        for k, n in enumerate(lengths):
            if n + prompt >= context:
                with_prompt = f" (with the longest system prompt, {n + prompt})" if prompt else ""
                raise DataError(f"{where}: example {start + k}: the question is {n} tokens{with_prompt}, more than "
                                f"the context of {model_id} ({context} tokens)")


def model_context(model_id: str, setting: str, trust_remote_code: bool = False) -> int | None:
    """The context of a model that passed ``check_model_serves`` (None when its config does not say)."""
    return _checked(model_id, setting, None, trust_remote_code, False, folder_stamp(model_id))[1]


def check_policy(model_id: str, setting: str, options: Any, *, questions: Iterable[Any] = (),
                 where: str = "the data", prompts: Iterable[str] = ()) -> None:
    """What a stage checks of its policy before any output: the loading flags of `options`
    (``masprm.models.loading.ModelOptions``: device, attention), the folder (``check_model_serves``
    with the chat template) and, when given, that the `questions` (strings or examples), each with the
    longest of the team's system `prompts`, fit its context."""
    check_model_serves(model_id, setting, attn_impl=options.attn_impl, trust_remote_code=options.trust_remote_code,
                       device_map=options.device_map, chat=True)
    texts = [getattr(q, "question", q) for q in questions]
    if texts:
        check_questions_fit(model_id, setting, texts, where=str(where), trust_remote_code=options.trust_remote_code,
                            prompts=prompts)


def check_finite_outputs(values: Iterable[float], setting: str, source: str, what: str) -> None:
    """No NaN or inf leaves a model: `values` (a scorer's values, a policy's log-probs) are finite,
    else one ModelError naming the setting whose model gave them.

    A model whose weights or dtype overflow gives NaN; a search that ranked by it would pick at random
    and still report its condition COMPLETED.
    """
    bad = next((v for v in values if not math.isfinite(v)), None)
    if bad is not None:
        raise ModelOutputError(f"{setting} {source}: the model gave {bad} as {what} (not a finite number); its "
                               "weights or its precision are broken", setting=setting)
