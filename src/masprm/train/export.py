"""A LoRA scorer merged into its base: one standalone transformers model folder (``masprm-export-scorer``).

    merge_scorer("checkpoints/MASPRM-GSM8K-1.5B", "exports/MASPRM-GSM8K-1.5B-merged")

The base is loaded unquantised in fp32 on the CPU (merging into a 4-bit base
would round the adapter away), the adapter's weights are added into it and its
saved copies (score head, norms, embeddings with the separator token) take the
place of the base's. The folder gets the tokenizer, ``masprm_scorer.json`` (with
``lora: false`` and where it came from) and its own model card; the masprm
scorer loader and ``AutoModelForTokenClassification`` load it without peft. The
folder is written next to its final name and renamed into place when complete.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from masprm.checks import check_output_dir, check_scorer_folder
from masprm.errors import ConfigError, ModelError, first_line
from masprm.io import honour_umask
from masprm.models.scorer_checks import check_scorer_fits
from masprm.scorer_folder import read_scorer_folder
from masprm.scorer_meta import write_scorer_meta
from masprm.train.card import write_model_card


def merged_meta(meta: dict[str, Any], source: Path, base: str) -> dict[str, Any]:
    """The merged folder's record: the scorer's, as a full model, naming the adapter and base it came from."""
    return {**meta, "lora": False, "merged_from": {"adapter": source.name, "base_model_id": base}}


def check_merged_out(out: str | Path, setting: str = "merged", inputs: dict | None = None) -> Path:
    """A new or empty folder that can be written, outside the `inputs` (setting -> path: the scorer,
    the base model); a ConfigError before any model loads otherwise."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{setting} {out}: exists and is not an empty folder; choose a new one", setting=setting)
    check_output_dir(out, setting, inputs=inputs)
    return out


def merge_scorer(folder: str | Path, out: str | Path, *, base_model_id: str | None = None,
                 hub_model_id: str | None = None, setting: str = "scorer") -> Path:
    """Write the adapter scorer in ``folder`` merged into its base as a standalone model in ``out``."""
    out = check_merged_out(out, inputs={setting: folder, "base_model_id": base_model_id})
    # the whole folder, before any model loads: an unfinished training (status "training") is refused
    record = read_scorer_folder(folder)
    check_scorer_folder(record, setting, base_model_id=base_model_id, base_setting="base_model_id")
    check_scorer_fits(record, setting, base_model_id or record.base_model)   # its values, weights, shapes
    import torch
    from peft import PeftModel

    from masprm.models.loading import load_tokenizer, peft_alias_warning_silenced
    from masprm.models.scorer import adapter_base_model, resolve_scorer_folder
    from masprm.models.token_scorer import load_token_scorer, separator_token_id
    from masprm.state_text import DEFAULT_SEPARATOR

    source = resolve_scorer_folder(folder, setting, record)
    if not record.is_adapter:
        raise ConfigError(f"{setting} {folder}: already a standalone model (no LoRA adapter to merge); "
                          "use the folder as it is", setting=setting)
    meta = record.meta
    base = adapter_base_model(record, base_model_id, setting)

    tokenizer = load_tokenizer(str(source), padding_side="right", setting=setting)
    separator_token_id(tokenizer, meta.get("separator", DEFAULT_SEPARATOR))
    model = load_token_scorer(base, n_tokens=len(tokenizer), dtype=torch.float32, device_map={"": "cpu"},
                              pad_token_id=tokenizer.pad_token_id, setting="base_model_id")
    try:
        with peft_alias_warning_silenced():
            model = PeftModel.from_pretrained(model, str(source)).merge_and_unload()
    except (RuntimeError, ValueError, KeyError, OSError) as err:
        raise ModelError(f"{setting} {source}: the adapter does not fit base model {base}: {first_line(err)}",
                         setting=setting) from None

    tmp = out.with_name(f".{out.name}.tmp")
    if tmp.is_symlink():
        tmp.unlink()   # a planted link is removed, never written through
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        meta = merged_meta(meta, source, base)
        write_scorer_meta(tmp, meta)
        write_model_card(tmp, meta, hub_model_id=hub_model_id, merged=True)
        honour_umask(tmp)   # safetensors writes its files private (0600)
        if out.exists():
            out.rmdir()   # the empty folder the user named
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
