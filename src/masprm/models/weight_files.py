"""Reading a model folder's weight files without loading a model: which files, their tensors, their values.

A loader picks one set of weight files from a folder (``weight_files``: safetensors before a pickle, a single
file or the shards its ``.index.json`` names). Their tensor names and shapes come from the files alone
(``file_shapes`` / ``weight_shapes``): a safetensors file is checked whole from its header
(``masprm.checks.safetensors_header``), a pickle is read with ``weights_only`` on no device, so one that holds
anything but tensors is refused. ``check_finite_weights`` / ``check_finite_model`` read the values and refuse
a NaN or inf weight. Every problem is one ModelError naming the setting. The checks of whether a folder
serves (``masprm.models.model_checks``) and of scorer folders and adapters (``masprm.models.scorer_checks``)
both read the weights through these functions.

    files = weight_files(folder, "prm_dir", label, ("adapter_model.safetensors", "adapter_model.bin"))
    shapes = weight_shapes(folder, "model_id", model_id)
    check_finite_model(folder, "model_id", model_id)
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path
from typing import Any, Iterator

from masprm.checks import in_hub_cache, looks_like_path, safetensors_header
from masprm.errors import ModelError, first_line, quoted

# --------------------------------------------------------------------------- the model's folder


def local_folder(model_id: str) -> Path | None:
    """The folder holding the model's files: the local folder, or a hub id's cached snapshot (else None)."""
    if looks_like_path(model_id):
        path = Path(model_id).expanduser()
        return path if path.is_dir() else None
    if not in_hub_cache(model_id):
        return None
    from huggingface_hub import try_to_load_from_cache

    return Path(try_to_load_from_cache(model_id, "config.json")).parent


def folder_stamp(model_id: str) -> tuple:
    """What identifies a model folder's current files for the caches: its real path, names, sizes and times."""
    folder = local_folder(model_id)
    if folder is None:
        return (model_id,)
    real = folder.resolve()
    return (str(real), tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                                    for p in real.iterdir() if p.is_file())))


def _fail(setting: str, model_id: str, problem: str) -> ModelError:
    return ModelError(f"{setting} {model_id}: {problem}", setting=setting)


# --------------------------------------------------------------------------- the weight files' tensors


def _safetensors_shapes(path: Path, setting: str, model_id: str) -> dict[str, tuple[int, ...]]:
    """Shapes from the file's header, the file checked whole first (``masprm.checks.safetensors_header``)."""
    return {k: tuple(v["shape"]) for k, v in safetensors_header(path, setting, f"{setting} {model_id}").items()}


def _load_pickle(path: Path, setting: str, model_id: str, device: str) -> Any:
    """A torch pickle read as transformers and peft read it (``weights_only``: tensors and plain containers,
    never code); anything else is one line naming the setting."""
    import torch

    try:
        try:
            return torch.load(path, map_location=device, weights_only=True, mmap=True)
        except RuntimeError as err:
            if "mmap" not in str(err):
                raise
            return torch.load(path, map_location=device, weights_only=True)   # the old, non-zip format
    except (pickle.UnpicklingError, RuntimeError, ValueError, EOFError, AttributeError) as err:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(err))
        why = f"it holds a {found.group(1)} object, not only tensors" if found else quoted(first_line(err), 160)
        raise _fail(setting, model_id, f"{path.name} cannot be loaded safely (torch.load with weights_only "
                                       f"refuses it: {why}); use a safetensors copy of the weights") from None


def _pickle_tensors(path: Path, setting: str, model_id: str, device: str) -> dict[str, Any]:
    state = _load_pickle(path, setting, model_id, device)
    if not isinstance(state, dict):
        raise _fail(setting, model_id, f"{path.name} does not hold a state dict (it holds "
                                       f"{type(state).__name__})")
    return {k: v for k, v in state.items() if hasattr(v, "shape")}


def _pickle_shapes(path: Path, setting: str, model_id: str) -> dict[str, tuple[int, ...]]:
    """Shapes from a ``pytorch_model.bin`` read on no device."""
    return {k: tuple(v.shape) for k, v in _pickle_tensors(path, setting, model_id, "meta").items()}


def file_shapes(path: Path, setting: str, model_id: str) -> dict[str, tuple[int, ...]]:
    """Every tensor name and shape of one weight file (safetensors from its header, a pickle on no device)."""
    reader = _safetensors_shapes if path.suffix == ".safetensors" else _pickle_shapes
    return reader(path, setting, model_id)


def weight_files(folder: Path, setting: str, model_id: str,
                 names: tuple[str, ...] = ("model.safetensors", "pytorch_model.bin")) -> list[Path]:
    """The weight files a loader reads from the folder: the first of `names` present (safetensors first, as
    transformers and peft pick), or the shards its ``.index.json`` names; [] when there are none."""
    for single in names:
        index_name = f"{single}.index.json"
        if (folder / single).is_file():
            return [folder / single]
        if (folder / index_name).is_file():
            try:
                shards = sorted(set(json.loads((folder / index_name).read_text(encoding="utf-8"))["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                raise _fail(setting, model_id, f"{index_name} is not a valid weight index") from None
            missing = next((shard for shard in shards if not (folder / shard).is_file()), None)
            if missing is not None:
                raise _fail(setting, model_id, f"{index_name} names {missing}, which is missing")
            return [folder / shard for shard in shards]
    return []


def weight_shapes(folder: Path, setting: str, model_id: str,
                  names: tuple[str, ...] = ("model.safetensors", "pytorch_model.bin")) -> dict[str, tuple[int, ...]]:
    """Every tensor name and shape in the folder's weight files (``weight_files``)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for path in weight_files(folder, setting, model_id, names):
        shapes.update(file_shapes(path, setting, model_id))
    return shapes


# --------------------------------------------------------------------------- the weights' values

# Weights up to this size are read whole for NaN and inf before a model loads: about 1 s per 128 MB of bf16
# on 2 busy cores (AMD EPYC, AVX2, no AVX-512), so a 1.5B model's 3 GB costs some 25 s once per command. A
# larger model's are not (reading 100 GB twice would double its start): its scorer head is, and its first
# output is checked at run time (``check_finite_outputs``).
FINITE_SCAN_MAX_BYTES = 4 << 30
_FINITE_CHUNK = 1 << 24   # elements reduced at a time, so no temporary grows with the tensor


def _tensors(path: Path, setting: str, model_id: str, only: set[str] | None) -> Iterator[tuple[str, Any]]:
    """(name, tensor) of one weight file on the CPU, one at a time (`only`: those names alone)."""
    if path.suffix != ".safetensors":
        for name, tensor in _pickle_tensors(path, setting, model_id, "cpu").items():
            if only is None or name in only:
                yield name, tensor
        return
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        for name in fh.keys():
            if only is None or name in only:
                yield name, fh.get_tensor(name)


def check_finite_weights(files: list[Path], setting: str, model_id: str, *, only: set[str] | None = None) -> None:
    """Every floating-point tensor of `files` (`only`: those names) is finite: a NaN or inf weight gives NaN
    values, which a search would rank by at random and a training would carry into every tensor it saves.
    One ModelError naming the tensor and the file."""
    import torch

    for path in files:
        for name, tensor in _tensors(path, setting, model_id, only):
            if not tensor.is_floating_point():
                continue
            flat = tensor.reshape(-1)
            for at in range(0, flat.numel(), _FINITE_CHUNK):
                what = _not_finite(flat[at:at + _FINITE_CHUNK])
                if what:
                    raise _fail(setting, model_id, f"{path.name}: tensor {name} holds {what} (the weights are "
                                                   "broken; a model of them gives no usable value)")


def _not_finite(chunk: Any) -> str | None:
    """"NaN" or "inf" when the chunk holds one, else None. Its float32 sum screens it (one reduction, faster
    than an elementwise test, and NaN or inf anywhere makes it non-finite); only a non-finite sum is looked
    at element by element, which also clears finite values whose sum merely overflowed."""
    import torch

    if chunk.element_size() == 1:   # float8: no reductions of its own
        chunk = chunk.float()
    if bool(torch.isfinite(torch.sum(chunk, dtype=torch.float32))):
        return None
    return "NaN" if bool(torch.isnan(chunk).any()) else "inf" if bool(torch.isinf(chunk).any()) else None


_FINITE_PASSED: set[tuple] = set()   # (folder stamp, names) whose weights were read and found finite


def check_finite_model(folder: Path, setting: str, model_id: str, *, only: set[str] | None = None) -> None:
    """``check_finite_weights`` on the folder's weight files: all tensors while they total at most
    FINITE_SCAN_MAX_BYTES, above it only `only`'s (a scorer's head), when given. A folder that passed is
    not read again while its files stay the same (a policy that is also a scorer's base)."""
    key = (folder_stamp(str(folder)), frozenset(only) if only is not None else None)
    if key in _FINITE_PASSED:
        return
    files = weight_files(folder, setting, model_id)
    if sum(p.stat().st_size for p in files) <= FINITE_SCAN_MAX_BYTES:
        check_finite_weights(files, setting, model_id)
    elif only is not None:
        check_finite_weights(files, setting, model_id, only=only)
    _FINITE_PASSED.add(key)
