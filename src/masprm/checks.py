"""Checks of user inputs and output locations, made before any expensive work.

Every check raises a domain error (``masprm.errors``) with one line that
starts with the setting it checks (e.g. ``out_root``), names the path and
says what is wrong; the CLI layer shows the setting's flag in its place
(``--out_root``). So a bad input never costs a model load and a run never
dies after hours because its output folder cannot be written. ``label``
replaces the setting at the start of a message when more context helps.

- outputs (defined in ``masprm.outputs``, importable from here):
  ``check_output_dir`` / ``check_output_file`` (a file where a folder goes, a
  folder where a file goes, a location that cannot be written, a location that
  is, or is inside, one of the run's inputs), ``check_csv_output``,
  ``check_no_linked_folders`` (no folder at or below an output is a link),
  ``check_no_outside_links`` (a link that leads out of a folder a run owns),
  ``check_plain_name`` (a user's value that becomes part of a file name);
- numbers every stage takes: ``check_seed`` (``check_seeds``: a settings class's seed fields);
- text inputs: ``read_utf8`` (a config, pairs or data file that is not UTF-8);
- models: ``check_model_source`` (a local folder's config, weights and
  tokenizer; a hub id that cannot be fetched offline),
  ``check_scorer_folder`` (a trained scorer's adapter, weights and status) and
  ``check_scorer_role`` (a scorer of the kind its role needs: ``masprm.roles``).

Pure Python: no torch import (``huggingface_hub`` only to look at its cache).
"""

from __future__ import annotations

import json
import math
import os
import socket
from functools import lru_cache
from pathlib import Path

from masprm.data import DATASETS
from masprm.dataset_sources import is_dataset_source
from masprm.errors import ConfigError, DataError, ModelError, quoted
from masprm.outputs import (check_csv_output, check_no_linked_folders, check_no_outside_links,  # noqa: F401
                            check_output_dir, check_output_file, check_outside_inputs,  # noqa: F401
                            check_plain_name)   # their home: masprm.outputs
from masprm.identity import file_identity  # noqa: F401 (its home: masprm.identity)
from masprm.roles import ROLES
from masprm.scorer_folder import ScorerFolder, read_scorer_folder
from masprm.scorer_formats import OWN, choose_format, role_problem
from masprm.scorer_meta import SCORER_META_FILE

SEED_MAX = 2**32 - 1   # numpy's (and transformers' set_seed's) largest seed

# A local model folder needs one of these to build its tokenizer; without them transformers
# silently builds an empty tokenizer (every text becomes nothing).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model",
                   "sentencepiece.bpe.model")
MODEL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
HUB_PROBE_TIMEOUT_S = 3.0


# --------------------------------------------------------------------------- numbers


def check_seed(value: int, setting: str = "seed") -> int:
    """A seed numpy and torch accept: an integer in 0..2**32-1."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= SEED_MAX:
        raise ConfigError(f"{setting} must be an integer in 0..{SEED_MAX}, got {quoted(value)}", setting=setting)
    return value


def check_seeds(settings: object, names: tuple[str, ...] = ("seed",)) -> None:
    """``check_seed`` on each named field of a settings class that is set (a list: each of its seeds)."""
    for name in names:
        value = getattr(settings, name)
        for seed in value if isinstance(value, (list, tuple)) else () if value is None else (value,):
            check_seed(seed, name)


# --------------------------------------------------------------------------- names and text inputs


def check_known_dataset(name: str, setting: str = "dataset") -> None:
    """A registered benchmark, or a dataset of the user's by hub id (owner/name) or local file or folder."""
    if name not in DATASETS and not is_dataset_source(name):
        raise ConfigError(f"{setting}: {DATASETS.unknown_message(name)}; or a hub dataset id (owner/name) or a "
                          "local file or folder", setting=setting)


def read_utf8(path: str | os.PathLike, what: str = "file") -> str:
    """The text of a file that must be UTF-8; anything else is one line naming the file."""
    path = Path(path)
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: the {what} is not UTF-8 text (byte 0x{err.object[err.start]:02x} "
                        f"at offset {err.start}); save it as UTF-8") from None


def check_text_data_file(path: str | os.PathLike, setting: str = "data_file") -> None:
    """A JSON/JSONL data file must be UTF-8 and hold something."""
    path = Path(path)
    if path.suffix.lower() not in (".json", ".jsonl") or not path.is_file():
        return
    if not read_utf8(path, f"data file (`{setting}`)").strip():
        raise DataError(f"{path}: the data file (`{setting}`) is empty", setting=setting)


# --------------------------------------------------------------------------- model folders


# Bytes per element of each safetensors dtype (the format's own list), to check each tensor's byte count.
SAFETENSORS_DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I16": 2, "U16": 2,
                           "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
# The safetensors library refuses a JSON header over 100 MB; a length beyond it is a corrupt file, not a model.
SAFETENSORS_HEADER_MAX = 100_000_000


def safetensors_header(path: Path, setting: str, label: str | None = None) -> dict[str, dict]:
    """The tensors of a safetensors file by name ({"dtype", "shape", "data_offsets"}), the file checked whole
    from its header alone: an 8-byte header length within the file and the format's limit, a JSON object,
    each tensor's dtype known, its shape whole numbers, its bytes its shape's count times its dtype's size
    and inside the file, and the file ending where the last tensor ends. One ModelError naming `setting`
    (`label` in its place at the start of the line) otherwise, before any loader reads the file."""
    where = f"{label or setting}: {path}"

    def bad(why: str) -> ModelError:
        return ModelError(f"{where} is not a readable safetensors file (truncated or corrupt: {why})",
                          setting=setting)

    size = path.stat().st_size
    with open(path, "rb") as fh:
        if size < 8:
            raise bad(f"{size} bytes, less than its 8-byte header length")
        n = int.from_bytes(fh.read(8), "little")
        if n > SAFETENSORS_HEADER_MAX or 8 + n > size:
            raise bad(f"its header length says {n} bytes, the file has {size}")
        try:
            header = json.loads(fh.read(n))
        except (ValueError, UnicodeDecodeError):
            raise bad("its header is not JSON") from None
    if not isinstance(header, dict):
        raise bad("its header is not a JSON object")
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    end = 0
    for name, entry in tensors.items():
        ok = isinstance(entry, dict) and entry.get("dtype") in SAFETENSORS_DTYPE_BYTES
        shape, offsets = (entry.get("shape"), entry.get("data_offsets")) if ok else (None, None)
        if not (ok and _counts(shape) and _counts(offsets) and len(offsets) == 2 and offsets[0] <= offsets[1]):
            raise bad(f"tensor {name!r} has no valid dtype, shape and data_offsets")
        count = math.prod(shape) * SAFETENSORS_DTYPE_BYTES[entry["dtype"]]
        if offsets[1] - offsets[0] != count:
            raise bad(f"tensor {name!r} of shape {shape} needs {count} bytes, its offsets give "
                      f"{offsets[1] - offsets[0]}")
        end = max(end, offsets[1])
    if 8 + n + end != size:
        raise ModelError(f"{where} is truncated or corrupt ({size} bytes, its header describes {8 + n + end})",
                         setting=setting)
    return tensors


def _counts(values: object) -> bool:
    """A JSON list of whole numbers >= 0 (a shape, or a tensor's byte offsets)."""
    return isinstance(values, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                            for x in values)


def check_safetensors(path: Path, setting: str) -> None:
    """The file is complete (``safetensors_header``)."""
    safetensors_header(path, setting)


def _check_weights(folder: Path, names: tuple[str, ...], setting: str, what: str, label: str | None = None) -> None:
    present = [folder / name for name in names if (folder / name).is_file()]
    shards = sorted(folder.glob("*.safetensors")) if any(p.name.endswith(".index.json") for p in present) else []
    if not present:
        raise ModelError(f"{label or setting} {folder}: no {what} weights (expected {' or '.join(names)})",
                         setting=setting)
    for file in {*present, *shards}:
        if file.suffix == ".safetensors":
            check_safetensors(file, setting)


def has_tokenizer(folder: Path) -> bool:
    return any((folder / name).is_file() for name in TOKENIZER_FILES)


def looks_like_path(model_id: str) -> bool:
    """A hub id is 'name' or 'org/name'; anything else is meant as a local folder."""
    return (model_id.startswith((".", "/", "~")) or "\\" in model_id or model_id.count("/") > 1
            or Path(model_id).exists())


def check_model_source(model_id: str, setting: str, *, need_tokenizer: bool = False,
                       need_weights: bool = False, label: str | None = None) -> str:
    """A local model folder that can load, or a hub id that can be fetched; returns the id to load."""
    label = label or setting
    if not model_id:
        raise ModelError(f"{label}: empty model id", setting=setting)
    if not looks_like_path(model_id):
        check_hub_id(model_id, setting, label=label)
        return model_id
    path = Path(model_id).expanduser()
    if not path.is_dir():
        raise ModelError(f"{label} {model_id}: no such model folder", setting=setting)
    is_model, is_adapter = (path / "config.json").is_file(), (path / "adapter_config.json").is_file()
    if not (is_model or is_adapter):
        raise ModelError(f"{label} {model_id}: not a model folder (no config.json)", setting=setting)
    if need_weights and is_adapter and not is_model:
        base = _adapter_base(path)
        raise ModelError(f"{label} {model_id}: is a PEFT adapter (adapter_config.json, no config.json), not a full "
                         f"model; pass its base model{f' ({base})' if base else ''} here", setting=setting)
    if need_weights and is_model:
        _check_weights(path, MODEL_WEIGHTS, setting, "model", label)
    if need_tokenizer and not has_tokenizer(path):
        raise ModelError(f"{label} {model_id}: no tokenizer files in the folder (expected one of "
                         f"{', '.join(TOKENIZER_FILES[:3])}); save the tokenizer next to the model", setting=setting)
    return str(path)


def _adapter_base(folder: Path) -> str | None:
    try:
        base = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError):
        return None
    return base if isinstance(base, str) else None


def check_local_model(model_id: str, setting: str) -> str:
    """What stages 1, 3 and 4 need of their policy or base model: weights and a tokenizer."""
    return check_model_source(model_id, setting, need_tokenizer=True, need_weights=True)


# --------------------------------------------------------------------------- hub ids


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def hub_offline() -> bool:
    return _env_flag("HF_HUB_OFFLINE") or _env_flag("TRANSFORMERS_OFFLINE")


def in_hub_cache(model_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache   # heavy, and needed only for a hub id
        return isinstance(try_to_load_from_cache(model_id, "config.json"), str)
    except Exception:  # noqa: BLE001 - an id the hub client rejects is not cached
        return False


def connect_problem(host: str, port: int, timeout: float) -> str | None:
    """Why a TCP connection to host:port fails within `timeout` seconds ("no answer", "Connection refused",
    ...), or None when it opens: a server's client would instead retry for minutes."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return None
    except OSError as err:
        return "no answer" if isinstance(err, TimeoutError) else (err.strerror or type(err).__name__)


def url_endpoint(url: str, default_port: int | None = None) -> tuple[str, int] | None:
    """(host, port) of 'scheme://host:port/path' or 'host:port'; None without a port (and no default)."""
    host, _, port = url.split("://", 1)[-1].split("/")[0].rpartition(":")
    if not host or not port.isdigit():
        host = url.split("://", 1)[-1].split("/")[0]
        if not host or default_port is None or ":" in host:
            return None
        return host, default_port
    return host.strip("[]"), int(port)


@lru_cache(maxsize=None)
def hub_reachable(endpoint: str | None = None) -> bool:
    """One quick TCP connection to the hub, instead of the hub client's ~30 s of retries."""
    where = url_endpoint(endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co", 443)
    return where is not None and connect_problem(*where, HUB_PROBE_TIMEOUT_S) is None


def check_hub_id(model_id: str, setting: str, *, label: str | None = None) -> None:
    """A hub id must be in the local cache, or the hub must be reachable to fetch it."""
    if in_hub_cache(model_id):
        return
    why = "HF_HUB_OFFLINE is set" if hub_offline() else "the hub is unreachable" if not hub_reachable() else ""
    if why:
        raise ModelError(f"{label or setting} {model_id}: not a local folder and not in the Hugging Face cache, "
                         f"and {why}; pass a local model folder", setting=setting)


# --------------------------------------------------------------------------- trained scorers


def _scorer_folder(folder: str | os.PathLike | ScorerFolder) -> ScorerFolder:
    return folder if isinstance(folder, ScorerFolder) else read_scorer_folder(folder)


def check_scorer_folder(folder: str | os.PathLike | ScorerFolder, setting: str, *, base_model_id: str | None = None,
                        base_setting: str = "prm_base_model_id", allow_unfinished: bool = False) -> str | None:
    """A trained scorer folder that will load: finished (unless allowed), adapter, weights, base model.

    ``folder`` is a path or the record ``masprm.scorer_folder.read_scorer_folder`` read of it.
    Returns a warning line when an unfinished training is used (``allow_unfinished``), else None.
    """
    record = _scorer_folder(folder)
    path = record.path

    def fail(problem: str, where: Path = path) -> ModelError:
        return ModelError(f"{setting} {where}: {problem}", setting=setting)

    if not path.is_dir():
        raise fail("no such folder")
    if not any(not p.name.startswith(".") for p in path.iterdir()):
        raise fail("the folder is empty (no trained scorer in it)")
    if record.meta_error and (path / SCORER_META_FILE).is_file():
        raise fail(record.meta_error)
    meta = record.meta if record.own_meta else {}
    unfinished = "`allow_unfinished_scorer` to use its newest checkpoint, or finish it with trainer.py --resume"
    status = meta.get("status")
    finished = status in (None, "completed")
    if not finished and not allow_unfinished:
        raise fail(f"its training did not finish ({SCORER_META_FILE} says status {status!r}); pass {unfinished}")
    target = record.target
    if record.checkpoint or target is None:
        if target is None:
            raise fail("no adapter (adapter_config.json), model (config.json) or checkpoint-* folder in it")
        if not allow_unfinished:
            raise fail(f"holds only training checkpoints (newest {target.name}), not a finished scorer; "
                       f"pass {unfinished}")
        finished = False
    if record.is_adapter:
        if record.adapter_error:
            raise fail(record.adapter_error, target)
        _check_weights(target, ADAPTER_WEIGHTS, setting, "adapter")
        base = base_model_id or record.adapter_base or meta.get("base_model_id")
        if not base:
            raise fail(f"the adapter does not name its base model; pass `{base_setting}`")
        if base_model_id:
            check_model_source(base, base_setting, need_tokenizer=not has_tokenizer(target), need_weights=True)
        else:
            check_model_source(base, setting, need_tokenizer=not has_tokenizer(target), need_weights=True,
                               label=f"{setting} {path}: base model (from adapter_config.json)")
    else:
        _check_weights(target, MODEL_WEIGHTS, setting, "model")
        if not has_tokenizer(target):
            raise fail("no tokenizer files next to the model")
    return None if finished else f"warning: `{setting}` {path}: using an unfinished training ({target.name})"


def check_scorer_role(folder: str | os.PathLike | ScorerFolder, role: str, setting: str, *,
                      allow_any: bool = False) -> None:
    """The folder holds a scorer of the kind `role` needs (its record's ``modes`` in ``masprm.roles.ROLES``:
    an ORM is no MASPRM, a plain model's score head was never trained), unless ``allow_any``.

    Judged only where the folder says what it holds; an empty or unreadable folder is left to
    ``check_scorer_folder``, which names what is missing.
    """
    record = _scorer_folder(folder)
    if allow_any or not record.path.is_dir() or record.meta_error or record.target is None:
        return
    record = choose_format(record, setting=setting)   # the detected one, unless stage 4 named it already
    problem = (role_problem(record, ROLES[role]) if record.scorer_format != OWN and role in ROLES else
               scorer_kind_problem(record.meta if record.own_meta else {}, role, is_adapter=record.is_adapter))
    if problem:
        raise ModelError(f"{setting} {record.path}: {problem}; pass `{KIND_OVERRIDE}` to use it anyway",
                         setting=setting)


# --------------------------------------------------------------------------- scorer roles

KIND_OVERRIDE = "allow_scorer_kind_mismatch"   # the setting that accepts any kind (masprm.eval.settings.RunSettings)


def scorer_kind_problem(meta: dict, role: str, *, is_adapter: bool) -> str | None:
    """Why a folder with this record cannot serve as the `role` scorer (None when it can, or cannot be told).

    A record names its training objective; a folder with no record and no adapter is a plain
    model, whose score head was never trained. An adapter without a record is accepted.
    """
    if role not in ROLES:
        return None
    wanted = ROLES[role].modes
    mode = meta.get("objective") or meta.get("mode")
    if mode is None:
        if is_adapter or meta:
            return None
        return (f"holds a plain model (no {SCORER_META_FILE}, no adapter; a public PRM's format is named with "
                "`scorer_format`), not a trained scorer: its score head would be untrained")
    if mode not in wanted:
        return (f"holds a scorer trained with --mode {mode} ({SCORER_META_FILE}), but the {role} role needs "
                f"--mode {' or '.join(wanted)}")
    return None
