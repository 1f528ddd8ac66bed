"""Will this scorer folder serve? Its values, its head and its LoRA shapes, checked before any model loads.

``masprm.checks.check_scorer_folder`` looks at the files (finished, adapter, weights, base model).
``check_scorer_fits`` reads what they say: config.json's labels, the record's counts, a full model's head
(``check_model_head``: present in the weights, of the size the format reads) or an adapter whole
(``check_adapter``: its config's rank, alpha, dropout and target modules, its weight file, every LoRA
matrix against the module of the base it adapts; ``check_adapter_head``), all from the weight files'
headers, and every weight finite. One ModelError naming the setting, so a bad folder costs neither a
policy load nor a log file. A warm-start adapter (stage 3's ``--init-adapter-dir``) goes through
``check_adapter`` too.

    check_scorer_fits(record, "prm_dir", base_model_id)
    check_adapter(folder, adapter_config, base_model_id, "init_adapter_dir", f"init_adapter_dir {folder}")
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from masprm.errors import ModelError, first_line, quoted
from masprm.models.model_checks import meta_model
from masprm.models.weight_files import (check_finite_model, check_finite_weights, file_shapes, local_folder,
                                        weight_files, weight_shapes)

# adapter_config.json values a LoRA scorer loads with: key -> (rule, test); a missing key is peft's default
ADAPTER_VALUES = {
    "r": ("a whole number >= 1", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1),
    "lora_alpha": ("a number > 0", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0),
    "lora_dropout": ("a number in [0, 1)", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                     and 0 <= v < 1),
    "target_modules": ("a module name or a list of them", lambda v: isinstance(v, str)
                       or (isinstance(v, list) and all(isinstance(x, str) for x in v))),
}
# masprm_scorer.json counts the loader reads: key -> the least value (the texts' lengths, an ensemble's heads)
META_LENGTHS = {"max_length": 2, "max_prompt_length": 0, "ensemble_heads": 1}
_LORA = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.lora_(?P<kind>[AB])(?:\.[^.]+)?\.weight$")
ADAPTER_FILES = ("adapter_model.safetensors", "adapter_model.bin")   # as peft picks them


def check_scorer_fits(record: Any, setting: str, base_model_id: str | None, *, trust_remote_code: bool = False) -> None:
    """A scorer folder (``masprm.scorer_folder.ScorerFolder``) checked whole before any model loads: its
    config.json's and its record's values in range; an adapter by ``check_adapter`` against the base; a full
    model's head (``check_model_head``) and weights finite. One ModelError naming `setting`. `trust_remote_code`:
    a config whose model runs its own code may be built (the loader's own setting)."""
    where = f"{setting} {record.path}"
    if record.config_error:
        raise ModelError(f"{where}: {record.config_error}", setting=setting)
    for key, least in META_LENGTHS.items():
        value = record.meta.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise ModelError(f"{where}: masprm_scorer.json: {key} must be a whole number >= {least}, got "
                             f"{quoted(value)}", setting=setting)
    if record.target is None:
        return
    if record.is_adapter:
        if record.adapter is not None:
            check_adapter(record.target, record.adapter, base_model_id, setting, where)
            check_adapter_head(record, setting, base_model_id, trust_remote_code)
        return
    check_model_head(record, setting, trust_remote_code)


def check_adapter(folder: Path, conf: dict[str, Any], base_model_id: str | None, setting: str, where: str) -> None:
    """A LoRA adapter folder checked whole before it loads (a scorer's, or a warm start's): its config's
    values in range, its weight file sane (a safetensors header that describes the file, a pickle of tensors
    only), every weight finite (the base's too) and, against the base model's weight headers, every target
    module present and every LoRA matrix shaped for the module it adapts. One ModelError `where: ...`."""
    for key, (rule, ok) in ADAPTER_VALUES.items():
        if conf.get(key) is not None and not ok(conf[key]):
            raise ModelError(f"{where}: adapter_config.json: {key} must be {rule}, got {quoted(conf[key])}",
                             setting=setting)
    label = where.removeprefix(f"{setting} ")
    files = weight_files(folder, setting, label, ADAPTER_FILES)
    adapter = {k: v for path in files for k, v in file_shapes(path, setting, label).items()}
    check_finite_weights(files, setting, label)
    base = local_folder(base_model_id) if base_model_id else None
    if base is None:   # a hub id not downloaded yet: its shapes are checked when it loads
        return
    found = weight_shapes(base, setting, base_model_id)
    check_finite_model(base, setting, f"{label}: base model {base_model_id}")   # read once per command
    _check_targets(conf.get("target_modules"), found, base_model_id, setting, where)
    rank = None if conf.get("rank_pattern") else conf.get("r")   # per-module ranks: each matrix's own
    for name, shape in sorted(adapter.items()):
        match = _LORA.match(name)
        if match is None:
            continue
        name_in_base = match.group("module")
        module = next((found[k] for k in (f"{name_in_base}.weight", f"model.{name_in_base}.weight",
                                          f"{name_in_base.removeprefix('model.')}.weight") if k in found), None)
        if module is None:
            raise ModelError(f"{where}: the adapter adapts {match.group('module')}, which base model {base_model_id} "
                             "does not have (an adapter of another model?)", setting=setting)
        kind, out_features, in_features = match.group("kind"), module[0], module[-1]
        expected = (rank or shape[0], in_features) if kind == "A" else (out_features, rank or shape[-1])
        if tuple(shape) != tuple(expected):
            raise ModelError(f"{where}: the adapter does not fit base model {base_model_id}: {name} is {list(shape)}, "
                             f"the base's {match.group('module')} needs {list(expected)}", setting=setting)


def _check_targets(targets: Any, found: dict[str, tuple[int, ...]], base_model_id: str, setting: str,
                   where: str) -> None:
    """Each of the adapter's target modules names a module of the base, by peft's rule (a name matches a
    module whose path ends in it; a single string is a regular expression over whole paths); peft would
    otherwise refuse it only once the base is loaded."""
    if not targets or targets == "all-linear":
        return
    modules = {name.rsplit(".", 1)[0] for name in found if "." in name}
    modules |= {m.removeprefix("model.") for m in modules}
    if isinstance(targets, str):
        if not any(re.fullmatch(targets, m) for m in modules):
            raise ModelError(f"{where}: adapter_config.json: target_modules {targets!r} matches no module of base "
                             f"model {base_model_id} (an adapter of another model?)", setting=setting)
        return
    missing = next((t for t in targets if not any(m == t or m.endswith(f".{t}") for m in modules)), None)
    if missing is not None:
        raise ModelError(f"{where}: adapter_config.json: target module {missing!r} is not a module of base model "
                         f"{base_model_id} (an adapter of another model?)", setting=setting)


def check_model_head(record: Any, setting: str, trust_remote_code: bool = False) -> None:
    """A full-model scorer holds the trained head its format reads, of the size it reads, and finite weights:
    transformers would fill a missing or mismatched head at random (the loader mutes that report), and the
    scorer would rank at random with no word."""
    from masprm.scorer_formats import OWN, SCORER_FORMATS, head_of, label_count

    kind, labels = head_of(record)
    target, label = record.target, str(record.path)
    fmt = SCORER_FORMATS[record.scorer_format or OWN]
    if fmt.name != OWN and labels is not None and label_count(record.config or {}) != labels:
        raise ModelError(f"{setting} {label}: config.json names {label_count(record.config or {})} labels, but a "
                         f"{fmt.title} (scorer format {fmt.name}) reads {labels}; a head of another size would be "
                         "made up at random", setting=setting)
    if kind == "causal_lm" or record.config is None:
        check_finite_model(target, setting, label)
        return
    head = _head_shapes(target, kind, labels, setting, label, trust_remote_code)
    _check_head(head, weight_shapes(target, setting, label), fmt.title, labels, setting, label)
    check_finite_model(target, setting, label, only=set(head))


def check_adapter_head(record: Any, setting: str, base_model_id: str | None, trust_remote_code: bool = False) -> None:
    """A LoRA scorer's adapter holds the head its format reads (peft keeps it as a module to save): without it
    the head would be the base's fresh random one. Named as the base model names it (``score.weight``)."""
    from masprm.scorer_formats import OWN, SCORER_FORMATS, head_of

    kind, labels = head_of(record)
    base = local_folder(base_model_id) if base_model_id else None
    if kind == "causal_lm" or base is None:
        return
    label = str(record.path)
    head = _head_shapes(base, kind, labels, setting, label, trust_remote_code)
    files = weight_files(record.target, setting, label, ADAPTER_FILES)
    found = {_ADAPTER_WRAP.sub("", name.removeprefix("base_model.model.")): shape
             for path in files for name, shape in file_shapes(path, setting, label).items()}
    fmt = SCORER_FORMATS[record.scorer_format or OWN]
    _check_head(head, found, fmt.title, labels, setting, label)


# peft's wrapper around a module it saves whole (``score.modules_to_save.default.weight`` is ``score.weight``)
_ADAPTER_WRAP = re.compile(r"\.(modules_to_save|original_module)(\.default)?(?=\.)")


def _head_shapes(config_folder: Path, kind: str, labels: int | None, setting: str, label: str,
                 trust_remote_code: bool = False) -> dict:
    """The head's tensors (name -> shape) of the format's model built from `config_folder`'s config.json on no
    device: every tensor outside its base model (``score.weight``, ``score.bias`` of a Qwen2 classifier)."""
    from transformers import AutoConfig

    from masprm.models.token_scorer import HEADS   # transformers' head classes (the loader's own table)

    try:
        config = AutoConfig.from_pretrained(str(config_folder), num_labels=labels, trust_remote_code=trust_remote_code)
    except Exception as err:  # noqa: BLE001 - an unknown model_type, bad values
        raise ModelError(f"{setting} {label}: config.json cannot be used ({quoted(first_line(err), 200)})",
                         setting=setting) from None
    model = meta_model(config, None, trust_remote_code, setting, label, HEADS[kind][0])
    prefix = f"{model.base_model_prefix}."
    return {k: tuple(v.shape) for k, v in model.state_dict().items() if not k.startswith(prefix)}


def _check_head(head: dict, found: dict, title: str, labels: int | None, setting: str, label: str) -> None:
    """Each of the head's tensors is in `found` (name -> shape, from the weight files' headers) with its shape."""
    for name, shape in sorted(head.items()):
        if name not in found:
            raise ModelError(f"{setting} {label}: the weights hold no trained head ({name} {list(shape)} is "
                             f"missing): loaded as a {title} it would score with a random one", setting=setting)
        if tuple(found[name]) != shape:
            raise ModelError(f"{setting} {label}: the head does not fit: {name} is {list(found[name])} in the "
                             f"weights, a {title} of {labels} output(s) reads {list(shape)}", setting=setting)
