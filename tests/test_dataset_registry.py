"""The dataset registry: the hub datasets listed, a plug-in registered, an unknown name answered with the
known ones."""

from __future__ import annotations

import sys

import pytest

from masprm import data
from masprm.errors import MasprmError
from masprm.registry import Registry
from masprm.data import Example, LoadedData, dataset_names, load_examples, register_dataset


def test_registry_lists_the_hub_datasets():
    names = dataset_names()
    for name in ("gsm8k", "competition_math", "mmlu", "logiqa", "gpqa", "aqua_rat", "svamp"):
        assert name in names


def test_register_dataset_plugin_gets_only_set_options(monkeypatch):
    calls = []

    def loader(split, *, n=None, seed=42, data_file=None):
        calls.append((split, n, seed, data_file))
        return [Example(0, "q?", "1", {})]

    monkeypatch.setattr(data, "DATASETS", Registry("dataset"))  # a throwaway registry
    register_dataset("plugin_test")(loader)
    loaded = load_examples("plugin_test", "test", n=1, seed=9)
    assert isinstance(loaded, LoadedData) and loaded.examples == [Example(0, "q?", "1", {})]
    assert calls == [("test", 1, 9, None)]


def test_unknown_dataset_lists_known_ones(monkeypatch):
    # the worlds absent (the dataset registry's provider, masprm.worlds, not installed): still one clean error
    monkeypatch.setitem(sys.modules, "masprm.worlds", None)
    with pytest.raises(MasprmError) as err:
        load_examples("nope", "train")
    msg = str(err.value)
    assert "unknown dataset 'nope'" in msg and "gsm8k" in msg and "\n" not in msg
