"""The generic registry: one duplicate rule, helpful unknown names, lazy entries."""

import sys

import pytest

from masprm.errors import ConfigError, UnknownNameError
from masprm.registry import Registry


def test_register_direct_and_decorator_and_lookup():
    reg: Registry[int] = Registry("widget")
    assert reg.register("one", 1) == 1

    @reg.register("fn")
    def fn():
        return 7

    assert fn() == 7 and reg["fn"] is fn and reg["one"] == 1
    assert "one" in reg and "two" not in reg and reg.get("two") is None and reg.get("two", 5) == 5
    assert sorted(reg) == ["fn", "one"] and len(reg) == 2 and dict(reg.items()) == {"fn": fn, "one": 1}


def test_duplicate_name_is_an_error_unless_replaced():
    reg: Registry[int] = Registry("widget")
    reg.register("a", 1)
    with pytest.raises(ConfigError, match="widget 'a' registered twice"):
        reg.register("a", 2)
    reg.register("a", 3, replace=True)
    assert reg["a"] == 3
    reg.register_lazy("b", "json:dumps")
    with pytest.raises(ConfigError, match="registered twice"):
        reg.register_lazy("b", "json:loads")


def test_unknown_name_lists_valid_names_and_a_close_match():
    reg: Registry[int] = Registry("dataset")
    for name in ("gsm8k", "mmlu", "competition_math"):
        reg.register(name, 0)
    with pytest.raises(UnknownNameError) as err:
        reg["gms8k"]
    assert str(err.value) == ("unknown dataset 'gms8k' (valid: competition_math, gsm8k, mmlu; "
                              "did you mean 'gsm8k'?)")
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)
    assert "did you mean" not in reg.unknown_message("zzzzzzzz")


def test_lazy_entry_is_imported_on_first_lookup_only(tmp_path, monkeypatch):
    (tmp_path / "lazy_plugin_mod.py").write_text("VALUE = object()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry[object] = Registry("plugin")
    reg.register_lazy("p", "lazy_plugin_mod:VALUE")
    assert "p" in reg and reg.names() == ["p"] and "lazy_plugin_mod" not in sys.modules
    value = reg["p"]
    assert value is sys.modules["lazy_plugin_mod"].VALUE and reg["p"] is value


def test_lazy_entry_whose_module_registers_itself(tmp_path, monkeypatch):
    """A module that registers with the decorator on import resolves its own lazy entry."""
    reg: Registry[object] = Registry("plugin")
    monkeypatch.setitem(sys.modules, "shared_reg_mod", type(sys)("shared_reg_mod"))
    sys.modules["shared_reg_mod"].REG = reg
    (tmp_path / "self_registering_mod.py").write_text(
        "from shared_reg_mod import REG\n@REG.register('q')\ndef loader():\n    return 'q'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg.register_lazy("q", "self_registering_mod:loader")
    assert reg["q"]() == "q" and reg.names() == ["q"]


def test_lazy_target_must_name_module_and_attribute():
    with pytest.raises(ConfigError, match="not 'module:attribute'"):
        Registry("plugin").register_lazy("x", "no_colon_here")
