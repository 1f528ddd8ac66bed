"""Config dataclasses are the one home of a flag: its name(s), default, type and help.

    @dataclass
    class TrainConfig:
        mode: str = arg(choices=MODES, help="ppm: pairs; prm: a value per step")   # required: no default
        model_id: str = arg("Qwen/Qwen2.5-1.5B-Instruct", flags=("--model-id", "--model_id"), help="base model")
        epochs: float = arg(10.0, help="training epochs")                         # flag: --epochs
        lora: bool = arg(True, flags=("--no-lora",), action="store_false", help="full fine-tune")

    parser = ArgumentParser()
    add_config_args(parser, TrainConfig)               # or a parser.add_argument_group(...)
    cfg = config_from_args(TrainConfig, parser.parse_args())

Rules of ``add_config_args``:
- only fields declared with ``arg(...)`` become flags; a plain field stays a
  library-only setting;
- the flag names are ``flags`` when given (the seed README's spellings, mixed
  ``--model-id`` / ``--model_id`` forms included), else ``--`` plus the field name
  with ``_`` written as ``-``; the argparse ``dest`` is always the field name;
- a field without a default (``arg()`` with no value) is a required flag;
  ``arg(positional=True)`` is a positional argument instead;
- the argparse type comes from the annotation (``int``, ``float``, ``str``,
  ``Path``; ``X | None`` is ``X``); a path (``Path``, or ``masprm.paths.PathText``
  for a path kept as text) refuses ``""`` at parse time; a ``bool`` is a switch: ``--flag/--no-flag``
  when it defaults to True or None, ``store_true`` when it defaults to False,
  unless ``action`` says otherwise; ``nargs``, ``metavar``, ``choices`` and
  ``type`` are passed on as given;
- ``only`` / ``skip`` pick a subset of the fields (a stage that shares a group
  of flags with another), ``defaults`` overrides a field's default for this parser;
- ``arg(needs=Needs(what, ok))``: a flag that acts only with other settings (``--pw_alpha``
  without ``--pw_k``, ``--huber-beta`` without ``--loss huber``); given without them it is
  refused at parse time, naming what it needs.

``config_from_args(Cls, namespace, **overrides)`` builds the dataclass from the
attributes named like its fields (others are ignored; a missing one keeps the
field's default). ``config_help(Cls, name)`` gives a field's help text. The argparse
``dest`` being the field name is what lets ``masprm.cli.run_cli`` name the flag
of a domain error's ``setting``.

A settings class checks its values in ``__post_init__`` (``require``, ``require_each``),
raising ``ConfigError`` with the setting's name first: the CLI shows the flag in its place
(``n must be >= 1, got 0`` -> ``--n must be >= 1, got 0``). A stage lists its classes once,
in argument groups: ``add_settings_args(parser, GROUPS)`` adds them, and
``settings_from_args(classes, args)`` builds (and so checks) each. Pure Python: no torch import.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from pathlib import Path
from types import UnionType
from typing import Any, Callable, Iterable, Mapping, Sequence

from masprm.errors import ConfigError
from masprm.paths import PathText, path_value

_KEY = "masprm_flag"   # dataclass field metadata key holding the flag's argparse details


@dataclasses.dataclass(frozen=True)
class Needs:
    """What a flag needs to act: ``ok`` of the settings (or the parsed flags: the same names) is True.

    A flag given on the command line while ``ok`` is False does nothing, so the parser refuses it before any
    work (``masprm.cli.ArgumentParser``): ``"<flag> needs <what>"``, settings in ``what`` named in
    backquotes (shown as flags). Its default value, unless given, is never refused.
    """

    what: str
    ok: Callable[[Any], bool]

    def problem(self, setting: str) -> str:
        return f"`{setting}` needs {self.what}"


def arg(default: Any = dataclasses.MISSING, *, flags: Sequence[str] = (), help: str | None = None,
        positional: bool = False, default_factory: Any = dataclasses.MISSING, needs: Needs | None = None,
        **argparse_kwargs: Any) -> Any:
    """A dataclass field that is also a CLI flag (see the module docstring).

    ``positional=True`` makes it a positional argument named like the field; ``needs``: what the flag
    needs to act (``Needs``), checked when it is given.

    ``argparse_kwargs`` may hold ``action``, ``choices``, ``nargs``, ``metavar``,
    ``type``: what ``parser.add_argument`` takes besides the names, default, dest and help.
    """
    allowed = {"action", "choices", "nargs", "metavar", "type"}
    unknown = set(argparse_kwargs) - allowed
    if unknown:
        raise TypeError(f"arg(): unsupported argparse options {sorted(unknown)} (allowed: {sorted(allowed)})")
    meta = {_KEY: {"flags": tuple(flags), "help": help, "positional": positional, "needs": needs,
                   **argparse_kwargs}}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def flag_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of ``cls`` declared with ``arg(...)``, in declaration order."""
    return [f for f in dataclasses.fields(cls) if _KEY in f.metadata]


def flag_names(cls: type, name: str) -> tuple[str, ...]:
    """The flag spellings of field ``name`` (the first is the one messages quote)."""
    field = next(f for f in dataclasses.fields(cls) if f.name == name)
    return field.metadata[_KEY]["flags"] or ("--" + name.replace("_", "-"),)


def config_help(cls: type, name: str) -> str | None:
    field = next(f for f in dataclasses.fields(cls) if f.name == name)
    return field.metadata.get(_KEY, {}).get("help")


def _field_default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _value_type(annotation: Any) -> Any:
    """``int | None`` -> int; ``list[int]`` -> int; ``tuple[float, float]`` -> float; others unchanged."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _value_type(inner[0]) if len(inner) == 1 else str
    if origin in (list, tuple, Sequence, typing.Sequence):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return _value_type(args[0]) if args else str
    return annotation


def add_config_args(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, *,
                    only: Iterable[str] | None = None, skip: Iterable[str] = (),
                    defaults: dict[str, Any] | None = None, prefix: str = "",
                    needs: Mapping[str, Needs] | None = None) -> None:
    """Add one argparse argument per ``arg(...)`` field of dataclass ``cls`` (rules: module docstring).

    ``needs`` gives a field that declares none its ``Needs`` by name: what only the stage knows (stage 4's
    method flags act only when a method in ``--methods`` reads them, and the methods are registered later).

    ``prefix`` adds a second copy of the same flags for another model or role: ``--{prefix}name``,
    dest ``{prefix}name`` (read it back with ``config_from_args(cls, ns, prefix=...)``).
    """
    hints = typing.get_type_hints(cls)
    wanted = set(only) if only is not None else None
    skipped, defaults = set(skip), dict(defaults or {})
    for field in flag_fields(cls):
        if (wanted is not None and field.name not in wanted) or field.name in skipped:
            continue
        spec = dict(field.metadata[_KEY])
        positional, need = spec.pop("positional"), spec.pop("needs") or (needs or {}).get(field.name)
        names = (field.name,) if positional else spec.pop("flags") or ("--" + field.name.replace("_", "-"),)
        spec.pop("flags", None)
        if prefix:
            names = tuple(f"--{prefix}{name.lstrip('-')}" for name in names)
        default = defaults.pop(field.name, _field_default(field))
        kwargs: dict[str, Any] = {"help": spec.pop("help")} if positional else {"dest": prefix + field.name,
                                                                                "help": spec.pop("help")}
        kwargs.update(spec)
        value_type = _value_type(hints[field.name])
        if value_type is bool and "action" not in kwargs:
            kwargs["action"] = "store_true" if default is False else argparse.BooleanOptionalAction
        if kwargs.get("action") is None and "type" not in kwargs and value_type in (int, float):
            kwargs["type"] = value_type
        if kwargs.get("action") is None and "type" not in kwargs and value_type in (Path, PathText):
            kwargs["type"] = path_value(value_type)   # "" is refused at parse time
        if kwargs.get("action") is None:
            kwargs.pop("action", None)
        if default is not dataclasses.MISSING:
            kwargs["default"] = default
        elif not positional:   # a positional argument is required by itself
            kwargs["required"] = True
        action = parser.add_argument(*names, **kwargs)
        if need is not None:   # read by the parser once the flags are parsed (masprm.cli.ArgumentParser)
            action.needs = need
    if defaults:
        raise TypeError(f"add_config_args({cls.__name__}): defaults for fields that are not flags: {sorted(defaults)}")


def config_from_args(cls: type, namespace: argparse.Namespace | dict, *, prefix: str = "",
                     **overrides: Any) -> Any:
    """``cls(**...)`` from the namespace attributes named like its fields (``prefix`` + name), then ``overrides``."""
    values = vars(namespace) if isinstance(namespace, argparse.Namespace) else dict(namespace)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    kwargs = {k[len(prefix):]: v for k, v in values.items() if k.startswith(prefix) and k[len(prefix):] in names}
    kwargs.update(overrides)
    return cls(**kwargs)


# --------------------------------------------------------------------------- checks and stages


def require(ok: bool, setting: str, message: str) -> None:
    """A settings check: ConfigError(message) naming ``setting`` unless ``ok``.

    Start the message with the setting's name (the CLI puts its flag there); name other
    settings in backquotes (```ray```), which the CLI also shows as flags.
    """
    if not ok:
        raise ConfigError(message, setting=setting)


def require_each(settings: Any, names: Iterable[str], ok: Callable[[Any], bool], rule: str) -> None:
    """``require`` for each named field that is set (None passes): ``"<name> <rule>, got <value>"``."""
    for name in names:
        value = getattr(settings, name)
        require(value is None or ok(value), name, f"{name} {rule}, got {value}")


Groups = Sequence[tuple[str | None, Sequence[type]]]   # (argparse group title or None, settings classes)


def add_settings_args(parser: argparse.ArgumentParser, groups: Groups,
                      needs: Mapping[str, Needs] | None = None) -> None:
    """Every class's flags, each group in its own argparse group (None: the parser itself).

    A field several classes share (e.g. ``top_p``) is one flag, added with its first class; ``needs``: as
    in ``add_config_args``.
    """
    seen: set[str] = set()
    for title, classes in groups:
        target = parser.add_argument_group(title) if title else parser
        for cls in classes:
            names = {f.name for f in flag_fields(cls)}
            add_config_args(target, cls, skip=seen & names, needs=needs)
            seen |= names


def settings_from_args(classes: Iterable[type], namespace: argparse.Namespace | dict) -> dict[type, Any]:
    """Each class built from the parsed flags, in order (its ``__post_init__`` checks the values)."""
    return {cls: config_from_args(cls, namespace) for cls in dict.fromkeys(classes)}


def group_classes(groups: Groups) -> tuple[type, ...]:
    return tuple(dict.fromkeys(cls for _, classes in groups for cls in classes))
