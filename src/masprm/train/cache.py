"""Cache of the tokenised training data (the original trainer's ``map_cache``).

Tokenising a large stage-2 file is the slow part of starting a run, so the
examples are kept in ``<output-dir>/map_cache/<mode>_<key>.json``. The key
hashes everything the examples depend on: the data file's bytes, the seed,
the length limits, the separator, the tokenizer and this module's format
version, so a change to any of them builds (and writes) a fresh file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

from masprm.io import atomic_write_json
from masprm.train.objectives import OBJECTIVES

CACHE_DIR = "map_cache"
FORMAT_VERSION = 2  # bump when the example layout or the tokenisation rules change (2: each example's group)


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cache_key(cfg: Any, tokenizer: Any) -> str:
    parts = {"version": FORMAT_VERSION, "data": _file_digest(Path(cfg.data_file)), "seed": cfg.seed,
             "mode": cfg.mode, "max_length": cfg.max_length, "max_prompt_length": cfg.max_prompt_length,
             "separator": cfg.separator, "tokenizer": getattr(tokenizer, "name_or_path", ""),
             "vocab": len(tokenizer), "bos": tokenizer.bos_token_id}
    return hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _field(value: Any) -> bool:
    """What a tokenised example's field holds: a text, a flag, a number, or a (nested) list of numbers."""
    if isinstance(value, list):
        return all(_field(v) and not isinstance(v, str) for v in value)
    return value is None or isinstance(value, (str, int, float))


def _well_formed(stored: Any) -> bool:
    """A cache file of the layout this module writes: {"examples": [{field: value}], "skipped": n}.

    Anything else (a file of another layout, edited, or cut) is rebuilt instead of reaching the trainer.
    """
    if not isinstance(stored, dict) or not isinstance(stored.get("skipped"), int) or stored["skipped"] < 0:
        return False
    examples = stored.get("examples")
    return (isinstance(examples, list) and bool(examples)
            and all(isinstance(ex, dict) and ex and all(_field(v) for v in ex.values()) for ex in examples))


def cached_examples(cfg: Any, records: Sequence[dict], encoder: Any, out: Path,
                    write: bool = True) -> tuple[list[dict], int, bool]:
    """(examples, skipped, read_from_cache): the cached examples when the key matches, else built and stored.

    ``write=False`` (every data-parallel process but the first) builds them without storing: one writer.
    """
    path = out / CACHE_DIR / f"{cfg.mode}_{cache_key(cfg, encoder.tokenizer)}.json"
    if path.is_file() and not path.is_symlink():
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            stored = None   # unreadable: rebuilt below
        if _well_formed(stored):
            return stored["examples"], stored["skipped"], True
    build = OBJECTIVES[cfg.mode].build_examples
    examples, skipped = build(records, encoder, cfg.separator, source=str(cfg.data_file))
    if not write:
        return examples, skipped, False
    for stale in path.parent.glob(f"{cfg.mode}_*.json"):  # only the newest key of a mode is kept
        stale.unlink()
    atomic_write_json(path, {"examples": examples, "skipped": skipped}, indent=None)
    return examples, skipped, False
