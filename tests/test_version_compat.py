"""Found by the GPU check's rehearsal with the lent machine's packages (transformers 5.17, no datasets)."""

import sys

import pytest

from masprm.data import read_data_file
from masprm.errors import DataError
from masprm.train.lora import enable_activation_checkpointing


class _Model:
    def __init__(self, *names):
        self.calls = []
        for name in names:
            setattr(self, name, lambda _name=name, **kw: self.calls.append((_name, kw)))


def test_activation_checkpointing_under_the_new_name():
    model = _Model("activation_checkpointing_enable", "gradient_checkpointing_enable")
    enable_activation_checkpointing(model)
    assert model.calls == [("activation_checkpointing_enable",
                            {"activation_checkpointing_kwargs": {"use_reentrant": False}})]


def test_activation_checkpointing_under_the_old_name_of_transformers_5_17():
    model = _Model("gradient_checkpointing_enable")   # what 5.17's models have
    enable_activation_checkpointing(model)
    assert model.calls == [("gradient_checkpointing_enable",
                            {"gradient_checkpointing_kwargs": {"use_reentrant": False}})]


def test_a_data_file_without_datasets_installed_is_one_clear_error(tmp_path, monkeypatch):
    data = tmp_path / "rows.jsonl"
    data.write_text('{"question": "q", "answer": "#### 1"}\n')
    monkeypatch.setitem(sys.modules, "datasets", None)   # import datasets now raises ImportError
    with pytest.raises(DataError) as err:
        read_data_file(data)
    assert err.value.setting == "data_file"
    assert str(err.value).startswith("loading data needs the `datasets` package") and "\n" not in str(err.value)
