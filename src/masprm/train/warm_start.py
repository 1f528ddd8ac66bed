"""``--init-adapter-dir``: the checks that a saved adapter can start this training run, and its record.

The adapter's own settings decide its shape, so a run that asks for other ones
would silently train something else: a different base model, LoRA rank, alpha
or dropout, separator, or embedding convention (full copy or separator row only)
is refused, naming both values. Before that the folder is checked whole as a
scorer's adapter is (``masprm.models.scorer_checks.check_adapter``: its values, a
sane weight file, no pickle of objects, finite weights, shapes against the base),
so a bad adapter is one line before the output folder is made. The adapter's
content id goes into the new scorer's masprm_scorer.json, so two warm starts from
different adapters never look alike. No torch import at import time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from masprm.errors import ConfigError
from masprm.models.adapters import adapter_config, adapter_content_id
from masprm.models.scorer_checks import check_adapter
from masprm.scorer_meta import read_scorer_meta

SETTING = "init_adapter_dir"


def _same_model(a: str | None, b: str) -> bool:
    if a == b:
        return True
    return bool(a) and os.path.exists(a) and os.path.exists(b) and os.path.realpath(a) == os.path.realpath(b)


def check_warm_start(cfg: Any) -> dict[str, Any]:
    """Refuse an adapter that does not fit `cfg` (a TrainConfig); the record to keep in the scorer's metadata."""
    folder = cfg.init_adapter_dir
    conf = adapter_config(folder, SETTING)
    # its values, weight file, finite weights and shapes against the base, as a scorer's adapter is checked
    check_adapter(Path(folder), conf, cfg.model_id, SETTING, f"{SETTING} {folder}")
    base = conf.get("base_model_name_or_path") or read_scorer_meta(folder).get("base_model_id")
    if not _same_model(base, cfg.model_id):
        raise ConfigError(f"init_adapter_dir {folder}: its base model is {base}, not --model-id {cfg.model_id}; "
                          "warm-start from an adapter of the same base model", setting=SETTING)
    for flag, mine, key in (("--lora-r", cfg.lora_r, "r"), ("--lora-alpha", cfg.lora_alpha, "lora_alpha"),
                            ("--lora-dropout", cfg.lora_dropout, "lora_dropout")):
        if conf.get(key) is not None and float(conf[key]) != float(mine):
            raise ConfigError(f"init_adapter_dir {folder}: the adapter has {key} {conf[key]}, but {flag} is {mine}; "
                              f"pass {flag} {conf[key]} (an adapter keeps its own shape)", setting=SETTING)
    separator = read_scorer_meta(folder).get("separator")
    if separator is not None and separator != cfg.separator:
        raise ConfigError(f"init_adapter_dir {folder}: the adapter was trained with separator {separator!r}, "
                          f"not --step-separator {cfg.separator!r}", setting=SETTING)
    token_rows_only = bool(conf.get("trainable_token_indices"))
    full_copy = any("embed" in name for name in conf.get("modules_to_save") or ())
    if (token_rows_only and not cfg.train_new_token_only) or (full_copy and cfg.train_new_token_only):
        theirs = "only the separator row" if token_rows_only else "a full copy of the embeddings"
        raise ConfigError(f"init_adapter_dir {folder}: the adapter trained {theirs}; "
                          f"{'pass' if token_rows_only else 'drop'} --train-new-token-only to match it",
                          setting=SETTING)
    return {"init_adapter": {"dir": str(Path(folder)), "content_id": adapter_content_id(folder)}}
