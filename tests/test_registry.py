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


# -- providers: a registry completed by a function named by a string, asked once on first need ---------------

def fake_module(monkeypatch, name: str, **attributes):
    """A module in sys.modules for this test only (a provider or a lazy entry names it by string)."""
    module = type(sys)(name)
    module.__dict__.update(attributes)
    monkeypatch.setitem(sys.modules, name, module)
    return module


def scripted(*answers):
    """A provider that gives its answers in turn (an exception is raised) and counts its calls."""
    def provide():
        provide.calls += 1
        answer = answers[min(provide.calls, len(answers)) - 1]
        if isinstance(answer, BaseException):
            raise answer
        return answer
    provide.calls = 0
    return provide


def test_a_provider_is_asked_once_on_the_first_need_of_a_name_not_held(monkeypatch):
    provide = scripted([("w", "lazy_world_mod:VALUE"), ("fields", ("question",))])
    fake_module(monkeypatch, "fake_provider_mod", provide=provide)
    reg: Registry[object] = Registry("plugin")
    reg.register("held", 1)
    reg.register_provider("fake_provider_mod:provide")
    assert reg["held"] == 1 and "held" in reg and reg.get("held") == 1 and provide.calls == 0   # held: not asked
    assert "provider" in repr(reg) and provide.calls == 0                                      # repr: not asked
    assert "w" in reg and provide.calls == 1                  # a name not held: asked
    assert reg.names() == ["fields", "held", "w"] and "nope" not in reg and len(reg) == 3 and provide.calls == 1
    assert reg["fields"] == ("question",)                     # an object as it is
    assert "lazy_world_mod" not in sys.modules                # a string is a lazy entry, not imported by listing
    value = fake_module(monkeypatch, "lazy_world_mod", VALUE=object()).VALUE
    assert reg["w"] is value and provide.calls == 1


@pytest.mark.parametrize("need", [
    lambda reg: reg.names(), lambda reg: list(reg), lambda reg: len(reg), lambda reg: "x" in reg,
    lambda reg: reg.get("x"), lambda reg: reg["x"], lambda reg: reg.unknown_message("y")])
def test_every_need_of_a_name_not_held_asks_the_provider(monkeypatch, need):
    provide = scripted({"x": 5})   # a mapping is as good as pairs
    fake_module(monkeypatch, "fake_provider_mod", provide=provide)
    reg: Registry[int] = Registry("plugin")
    reg.register_provider("fake_provider_mod:provide")
    need(reg)
    need(reg)
    assert provide.calls == 1 and reg["x"] == 5


def test_an_unknown_name_lists_the_provided_ones(monkeypatch):
    fake_module(monkeypatch, "fake_provider_mod", provide=scripted([("gsm8k", 0), ("toy", 1)]))
    reg: Registry[int] = Registry("dataset")
    reg.register_provider("fake_provider_mod:provide")
    with pytest.raises(UnknownNameError, match=r"^unknown dataset 'tyo' \(valid: gsm8k, toy; did you mean 'toy'\?\)$"):
        reg["tyo"]


def test_a_provided_name_held_twice_is_an_error_unless_it_is_the_same_thing(monkeypatch):
    loader = lambda: None   # noqa: E731
    fake_module(monkeypatch, "self_registered_mod", loader=loader)   # registered itself on import
    fake_module(monkeypatch, "fake_provider_mod", same=scripted([("a", "self_registered_mod:loader"), ("b", "json:dumps"),
                                                                 ("c", 3), ("c", 3)]),
                other=scripted([("a", "json:loads")]), within=scripted([("d", 1), ("d", 2)]))
    reg: Registry[object] = Registry("widget")
    reg.register("a", loader)
    reg.register_lazy("b", "json:dumps")
    reg.register_provider("fake_provider_mod:same")
    assert reg.names() == ["a", "b", "c"] and reg["a"] is loader
    for provider in ("other", "within"):
        reg = Registry("widget")
        reg.register("a", object())
        reg.register_provider(f"fake_provider_mod:{provider}")
        with pytest.raises(ConfigError, match=rf"widget '[ad]' registered twice \(again by the provider "
                                              rf"'fake_provider_mod:{provider}'\)"):
            reg.names()


def test_a_provider_that_raises_adds_nothing_and_is_asked_again(monkeypatch):
    provide = scripted(
        (pair for pair in [("a", 1), ("b", "no colon")]),   # its second entry is wrong: not even "a" is added
        RuntimeError("the world's folder is broken"), [("a", 1)])
    fake_module(monkeypatch, "fake_provider_mod", provide=provide)
    reg: Registry[int] = Registry("widget")
    reg.register_provider("fake_provider_mod:provide")
    with pytest.raises(ConfigError, match=r"widget 'b' from provider 'fake_provider_mod:provide': 'no colon' is not "
                                          "'module:attribute'"):
        "a" in reg
    with pytest.raises(RuntimeError, match="broken"):
        reg["a"]
    assert "a" in reg and reg.names() == ["a"] and provide.calls == 3
    assert reg.names() == ["a"] and provide.calls == 3


def test_a_provider_whose_module_is_not_installed_is_an_optional_part_left_out(monkeypatch):
    monkeypatch.setitem(sys.modules, "absent_worlds", None)   # as if not installed
    reg: Registry[int] = Registry("dataset")
    reg.register("gsm8k", 0)
    reg.register_provider("absent_worlds.inner:provide")
    with pytest.raises(UnknownNameError, match=r"^unknown dataset 'toy' \(valid: gsm8k\)$"):
        reg["toy"]
    # installed later (asked again at the next need); a module that is there but imports a missing one raises
    fake_module(monkeypatch, "absent_worlds", __path__=[])
    fake_module(monkeypatch, "absent_worlds.inner", provide=scripted([("toy", 1)]))
    assert reg.names() == ["gsm8k", "toy"]
    broken = Registry("dataset")
    broken.register_provider("broken_provider_mod:provide")

    def provide():
        import absent_worlds_helper  # noqa: F401
    fake_module(monkeypatch, "broken_provider_mod", provide=provide)
    monkeypatch.setitem(sys.modules, "absent_worlds_helper", None)
    with pytest.raises(ModuleNotFoundError):
        broken.names()


def test_a_lookup_while_the_provider_runs_does_not_ask_it_again(monkeypatch):
    reg: Registry[int] = Registry("widget")

    def provide():
        provide.calls += 1
        return [("inner", int("inner" in reg)), ("late", 2)]   # a provider reading its own registry sees no loop
    provide.calls = 0
    fake_module(monkeypatch, "fake_provider_mod", provide=provide)
    reg.register_provider("fake_provider_mod:provide")
    assert reg["late"] == 2 and reg["inner"] == 0 and provide.calls == 1


def test_a_provider_is_named_once_by_module_and_function():
    reg = Registry("widget")
    with pytest.raises(ConfigError, match="widget provider: 'no_colon' is not 'module:attribute'"):
        reg.register_provider("no_colon")
    reg.register_provider("json:dumps")
    with pytest.raises(ConfigError, match="widget provider 'json:dumps' registered twice"):
        reg.register_provider("json:dumps")


def test_the_packages_own_providers_resolve():
    """A provider whose module is missing counts as an optional part left out (asked again later), so a misspelt
    provider in the package would drop every world without a word: each one the package names must resolve."""
    import importlib
    import re

    from helpers import REPO

    found = set()
    for path in (REPO / "src" / "masprm").rglob("*.py"):
        found |= set(re.findall(r'register_provider\("([\w.]+):(\w+)"\)', path.read_text(encoding="utf-8")))
    assert len(found) >= 4   # datasets, text fields, step oracles, world runs
    for module, function in sorted(found):
        assert callable(getattr(importlib.import_module(module), function, None)), f"{module}:{function}"
