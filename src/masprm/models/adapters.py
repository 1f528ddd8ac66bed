"""Saved LoRA adapter folders: what they say about themselves, read before any model is loaded.

    adapter_config(folder, setting)          adapter_config.json (a clear error when missing or broken)
    adapter_content_id(folder)               a content hash of the adapter's weights and config
    stored_embedding_rows(folder, name)      rows of the full embedding copy the adapter saved (None: none saved)
    fit_embeddings_to_adapter(model, ...)    resize the base's embeddings to those rows before loading

Two embedding conventions exist for the same base model. The original's main
branch (and this project) resizes the embeddings to the tokenizer's length, so a
Qwen2.5 scorer stores 151,666 rows (the tokenizer plus the separator) where the
checkpoint has 151,936; the original's newer branch only ever grows them, so its
adapters store 151,936. An adapter holds a full trainable copy of the embeddings,
so loading it needs the base resized to that copy's row count, whichever it is.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from masprm.errors import ModelError, first_line

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


def adapter_config(folder: str | Path, setting: str) -> dict[str, Any]:
    path = Path(folder) / ADAPTER_CONFIG
    if not path.is_file():
        raise ModelError(f"{setting} {folder}: no LoRA adapter in it ({ADAPTER_CONFIG} is missing)", setting=setting)
    try:
        conf = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ModelError(f"{setting} {path}: not valid JSON ({first_line(err)})", setting=setting) from None
    if not isinstance(conf, dict):
        raise ModelError(f"{setting} {path}: must hold a JSON object", setting=setting)
    return conf


def adapter_content_id(folder: str | Path) -> str:
    """sha256 over the adapter's config and weights (names and bytes): equal ids, equal starting weights."""
    digest = hashlib.sha256()
    for name in (ADAPTER_CONFIG, *ADAPTER_WEIGHTS):
        path = Path(folder) / name
        if path.is_file():
            digest.update(f"{name}\0".encode())
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def stored_embedding_rows(folder: str | Path, embedding_name: str) -> int | None:
    """Rows of the embedding matrix `embedding_name` (e.g. "embed_tokens") saved in the adapter, if any.

    Only the safetensors header is read. An adapter without a full embedding copy (one that
    trained only the separator row, or none) gives None: any base size that holds its token ids fits.
    """
    from safetensors import safe_open

    path = Path(folder) / ADAPTER_WEIGHTS[0]
    if not path.is_file():
        return None
    suffix = f"{embedding_name}.weight"
    with safe_open(str(path), framework="pt") as weights:
        for key in weights.keys():
            if key.endswith(suffix):
                return int(weights.get_slice(key).get_shape()[0])
    return None


def fit_embeddings_to_adapter(model, folder: str | Path, n_tokenizer: int, setting: str) -> None:
    """Resize `model`'s input embeddings to the row count the adapter stores (see the module docstring)."""
    embeddings = model.get_input_embeddings()
    name = next((n.rsplit(".", 1)[-1] for n, m in model.named_modules() if m is embeddings), None)
    rows = stored_embedding_rows(folder, name) if name else None
    if rows is None or rows == embeddings.weight.shape[0]:
        return
    if rows < n_tokenizer:
        raise ModelError(f"{setting} {folder}: the adapter stores {rows} embedding rows but its tokenizer has "
                         f"{n_tokenizer} tokens; the adapter and tokenizer in this folder do not belong together",
                         setting=setting)
    model.resize_token_embeddings(rows)
