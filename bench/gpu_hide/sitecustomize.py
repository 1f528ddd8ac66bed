"""Make the packages named in GPU_CHECK_HIDE look absent, to rehearse the GPU check's skips on any machine.

bench/gpu_check.py puts this folder first on the steps' PYTHONPATH when GPU_CHECK_HIDE is set, and
Python imports ``sitecustomize`` at start-up. A hidden package then behaves as a missing one does
everywhere that matters: ``import`` raises ModuleNotFoundError, ``importlib.util.find_spec`` returns
None (how transformers, accelerate and peft decide what is installed) and ``importlib.metadata``
finds no distribution. Only for dry runs: it takes the place of any other sitecustomize.
"""

import importlib.metadata
import importlib.util
import os
import sys

HIDDEN = {name.strip() for name in os.environ.get("GPU_CHECK_HIDE", "").split(",") if name.strip()}


def _hidden(name: str) -> bool:
    return name.split(".")[0].replace("-", "_").lower() in HIDDEN


class _HiddenFinder:
    """First on sys.meta_path: stops the import of a hidden package before the path finders see it."""

    def find_spec(self, name, path=None, target=None):
        if _hidden(name):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by GPU_CHECK_HIDE)", name=name)
        return None


_find_spec = importlib.util.find_spec
_version = importlib.metadata.version
_distribution = importlib.metadata.distribution


def find_spec(name, package=None):
    return None if _hidden(name) else _find_spec(name, package)


def version(name):
    if _hidden(name):
        raise importlib.metadata.PackageNotFoundError(name)
    return _version(name)


def distribution(name):
    if _hidden(name):
        raise importlib.metadata.PackageNotFoundError(name)
    return _distribution(name)


if HIDDEN:
    sys.meta_path.insert(0, _HiddenFinder())
    importlib.util.find_spec = find_spec
    importlib.metadata.version = version
    importlib.metadata.distribution = distribution
