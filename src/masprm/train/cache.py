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

from masprm.errors import ConfigError
from masprm.io import atomic_write_json
from masprm.log import get_logger
from masprm.train.objectives import OBJECTIVES

log = get_logger(__name__)
CACHE_DIR = "map_cache"
FORMAT_VERSION = 3  # bump when the example layout or the tokenisation rules change (2: each example's group;
                    # 3: the file carries its key and a digest of its content)


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


def _digest(examples: Any, skipped: Any) -> str:
    """The hash a cache file carries of its own content: an edited, cut or foreign file cannot match it."""
    return hashlib.sha256(json.dumps({"examples": examples, "skipped": skipped}, sort_keys=True).encode()).hexdigest()


def _problem(stored: Any, key: str) -> str | None:
    """Why a cache file is not one this module wrote for `key` (None: it is), in a few words.

    The layout {"key", "digest", "examples": [{field: value}], "skipped": n} is checked first, then the
    key and the digest of the content: a file of another layout, another key, edited, cut or copied from
    elsewhere is rebuilt instead of reaching the trainer (where a missing field was a traceback).
    """
    if not isinstance(stored, dict) or not isinstance(stored.get("skipped"), int) or stored["skipped"] < 0:
        return "not the cache's layout"
    examples = stored.get("examples")
    if not (isinstance(examples, list) and examples
            and all(isinstance(ex, dict) and ex and all(_field(v) for v in ex.values()) for ex in examples)):
        return "its examples are not the cache's layout"
    if stored.get("key") != key:
        return "written for other data or settings"
    if stored.get("digest") != _digest(examples, stored["skipped"]):
        return "its content does not match its digest (edited or cut)"
    return None


def cached_examples(cfg: Any, records: Sequence[dict], encoder: Any, out: Path,
                    write: bool = True) -> tuple[list[dict], int, bool]:
    """(examples, skipped, read_from_cache): the cached examples when the key matches, else built and stored.

    ``write=False`` (every data-parallel process but the first) builds them without storing: one writer.
    A file at the key's name that is not what this module wrote for it is rebuilt, said in one line.
    """
    key = cache_key(cfg, encoder.tokenizer)
    path = out / CACHE_DIR / f"{cfg.mode}_{key}.json"
    if path.is_file() and not path.is_symlink():
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            stored, problem = None, f"unreadable ({type(err).__name__})"
        else:
            problem = _problem(stored, key)
        if problem is None:
            return stored["examples"], stored["skipped"], True
        log.warning(f"tokenised-data cache {path}: {problem}; rebuilt")
    build = OBJECTIVES[cfg.mode].build_examples
    examples, skipped = build(records, encoder, cfg.separator, source=str(cfg.data_file))
    if not write:
        return examples, skipped, False
    for stale in path.parent.glob(f"{cfg.mode}_*.json"):  # only the newest key of a mode is kept
        if stale.is_dir() and not stale.is_symlink():   # not this module's: never removed, named instead
            raise ConfigError(f"output_dir {out}: {stale.relative_to(out)} is a folder where a cache file goes; "
                              "move it away", setting="output_dir")
        stale.unlink()
    atomic_write_json(path, {"key": key, "digest": _digest(examples, skipped), "examples": examples,
                             "skipped": skipped}, indent=None)
    return examples, skipped, False
