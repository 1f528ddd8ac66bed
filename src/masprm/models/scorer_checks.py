"""Will this scorer folder serve? Its values and its LoRA shapes, checked before any model loads.

``masprm.checks.check_scorer_folder`` looks at the files (finished, adapter, weights, base model).
``check_scorer_fits`` reads what they say: the adapter config's rank, alpha, dropout and target
modules, the record's text lengths, and the shape of every LoRA matrix against the module of the base
model it adapts, from the weight files' headers (no weight is loaded). One ModelError naming the setting,
so a bad folder costs neither a policy load nor a log file.
"""

from __future__ import annotations

import re
from typing import Any

from masprm.errors import ModelError, quoted
from masprm.models.model_checks import _safetensors_shapes, local_folder, weight_shapes

# adapter_config.json values a LoRA scorer loads with: key -> (rule, test); a missing key is peft's default
ADAPTER_VALUES = {
    "r": ("a whole number >= 1", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1),
    "lora_alpha": ("a number > 0", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0),
    "lora_dropout": ("a number in [0, 1)", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                     and 0 <= v < 1),
    "target_modules": ("a module name or a list of them", lambda v: isinstance(v, str)
                       or (isinstance(v, list) and all(isinstance(x, str) for x in v))),
}
# masprm_scorer.json lengths the scorer's texts are cut to
META_LENGTHS = {"max_length": 2, "max_prompt_length": 0}
_LORA = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.lora_(?P<kind>[AB])(?:\.[^.]+)?\.weight$")


def check_scorer_fits(record: Any, setting: str, base_model_id: str | None) -> None:
    """A scorer folder (``masprm.scorer_folder.ScorerFolder``) checked whole before any model loads: its
    adapter config's and its record's values in range, and every LoRA matrix shaped for the module of the
    base it adapts (read from the weight files' headers: no weight is loaded). One ModelError naming `setting`."""
    where = f"{setting} {record.path}"
    for key, least in META_LENGTHS.items():
        value = record.meta.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise ModelError(f"{where}: masprm_scorer.json: {key} must be a whole number >= {least}, got "
                             f"{quoted(value)}", setting=setting)
    if not record.is_adapter or record.adapter is None:
        return
    for key, (rule, ok) in ADAPTER_VALUES.items():
        if record.adapter.get(key) is not None and not ok(record.adapter[key]):
            raise ModelError(f"{where}: adapter_config.json: {key} must be {rule}, got "
                             f"{quoted(record.adapter[key])}", setting=setting)
    base = local_folder(base_model_id) if base_model_id else None
    weights = record.target / "adapter_model.safetensors"
    if base is None or not weights.is_file():
        return
    adapter = _safetensors_shapes(weights)
    found = weight_shapes(base, setting, base_model_id)
    rank = record.adapter.get("r")
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
