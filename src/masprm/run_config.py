"""``--config FILE``: a command's settings read from a YAML file, flags on the command line winning. Pure Python.

A run file is one YAML mapping from a command's settings to their values, the way TRL and
``HfArgumentParser`` users keep a stage's settings (examples: ``configs/runs/``)::

    # masprm-mcts --config run.yaml --n 4  (configs/runs/toy_stage1_trees.yaml is a full one)
    dataset: toy
    n_rollouts: 2
    mas_config: configs/toy.yaml
    no_plot: true

A key is a setting's name as the command's ``--help`` spells its flag, without the dashes (``n_rollouts``
and ``n-rollouts`` both work; a switch like ``--no-lora`` is also reachable by its setting, ``lora: false``).
The file's settings become command-line tokens placed before the command line's own, so argparse checks
them exactly as it checks typed flags, and a flag given on the command line wins (it comes later). A
value of ``null`` leaves the setting at its default; a switch takes ``true``/``false``; a flag of several
values takes a list. Paths in the file are read from the working folder, as typed flags are.

What the file may not do is refused in one line naming the file and the key, before any work (exit 2): a
key the command has no setting for (with the closest one), a value of the wrong type (a list for a
number, ``yes`` for a count, text that is not a number), a value outside a flag's choices, a file that is
missing, not UTF-8, not YAML, or not a mapping.

A team config (a mapping with ``agents``: ``configs/toy.yaml``) is not a run file. Given to ``--config``
of a command that takes a team (``--mas_config``), it is read as ``--mas_config`` (said at -v): stage 2
spelled its team flag ``--config`` before it had run files, and that spelling keeps working. Elsewhere it
is refused with a pointer to ``--mas_config``.
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path
from typing import Any, Sequence

from masprm.errors import MasprmError, first_line, quoted
from masprm.io import load_yaml
from masprm.log import get_logger

log = get_logger(__name__)

FLAG = "--config"
DEST = "run_config"     # not a setting: nothing downstream of the parser sees it
TEAM_FLAG = "--mas_config"
HELP = ("a YAML file of this command's settings (keys: the flags' names without dashes, e.g. n_rollouts: 40); "
        "flags given on the command line win over the file's (examples: configs/runs/). A team config (agents: "
        "...) given here is read as --mas_config")


class RunConfigError(Exception):
    """A run file that cannot be used; the message is one line naming the file (and the key)."""


def split_config_flag(args: list[str]) -> tuple[str | None, list[str]]:
    """The value of ``--config FILE`` / ``--config=FILE`` among ``args`` (before a ``--``) and the other args.

    Given twice, the last wins, as for any flag. ``--config`` with no value is left in place for argparse
    to refuse (``expected one argument``)."""
    end = args.index("--") if "--" in args else len(args)
    path, rest, i = None, [], 0
    while i < end:
        token = args[i]
        if token.startswith(FLAG + "="):
            path = token[len(FLAG) + 1:]
        elif token == FLAG and i + 1 < end and not args[i + 1].startswith("-"):
            path = args[i + 1]
            i += 1
        else:
            rest.append(token)
        i += 1
    return path, rest + args[end:]


def is_team_config(data: Any) -> bool:
    """A team config (``masprm.graph``'s MAS config) rather than a run file: a mapping with ``agents``."""
    return isinstance(data, dict) and "agents" in data


def _read(path: str) -> Any:
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise RunConfigError(f"{FLAG} {path}: no such file") from None
    except IsADirectoryError:
        raise RunConfigError(f"{FLAG} {path}: a folder, not a YAML file") from None
    except UnicodeDecodeError:
        raise RunConfigError(f"{FLAG} {path}: not UTF-8 text; save it as UTF-8") from None
    except OSError as err:
        raise RunConfigError(f"{FLAG} {path}: cannot be read ({err.strerror})") from None
    try:
        return load_yaml(text, path)
    except MasprmError as err:   # "<path>: not valid YAML (...)"
        raise RunConfigError(f"{FLAG} {first_line(err)}") from None


def _settings(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Key -> action: every optional flag by its setting (dest) and by each long spelling without dashes."""
    found: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", "version", DEST) or \
                isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        found.setdefault(action.dest, action)
        for flag in action.option_strings:
            if flag.startswith("--"):
                found.setdefault(flag[2:], action)
                found.setdefault(flag[2:].replace("-", "_"), action)
                found.setdefault(flag[2:].replace("_", "-"), action)
    return found


def _flag(action: argparse.Action) -> str:
    return next((f for f in action.option_strings if f.startswith("--")), action.option_strings[0])


def _scalar_token(parser: argparse.ArgumentParser, action: argparse.Action, where: str, value: Any) -> str:
    """One value as the text a user would type, checked by the flag's own type and choices."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        kind = "true/false" if isinstance(value, bool) else "a list" if isinstance(value, list) else \
            "a mapping" if isinstance(value, dict) else type(value).__name__
        raise RunConfigError(f"{where}: expected a value for {_flag(action)}, got {kind} ({quoted(value)})")
    token = value if isinstance(value, str) else repr(value)
    try:
        converted = parser._get_value(action, token)   # argparse's own conversion: int, finite float, path...
        parser._check_value(action, converted)          # and its choices
    except argparse.ArgumentError as err:
        raise RunConfigError(f"{where}: {first_line(err.message)}") from None
    return token


def _tokens(parser: argparse.ArgumentParser, action: argparse.Action, where: str, value: Any) -> list[str]:
    """The command-line tokens that give ``action`` the file's ``value`` ([] for null: the default stays)."""
    if value is None:
        return []
    flag = _flag(action)
    if action.nargs == 0:   # a switch: store_true / store_false / --flag/--no-flag
        if not isinstance(value, bool):
            raise RunConfigError(f"{where}: {flag} is a switch: give true or false, got {quoted(value)}")
        if isinstance(action, argparse.BooleanOptionalAction):
            positive = next(f for f in action.option_strings if not f.startswith("--no-"))
            negative = next(f for f in action.option_strings if f.startswith("--no-"))
            return [positive if value else negative]
        # a store_true flag sets const (True), a store_false one sets False: give it when that is the value
        return [flag] if value == action.const or (value and not isinstance(action.const, bool)) else []
    if isinstance(action, argparse._AppendAction):
        items = value if isinstance(value, list) else [value]
        return [f"{flag}={_scalar_token(parser, action, where, item)}" for item in items]
    if action.nargs in (None, "?"):   # flag=value: a value that starts with '-' stays a value
        return [f"{flag}={_scalar_token(parser, action, where, value)}"]
    items = value if isinstance(value, list) else [value]
    if isinstance(action.nargs, int) and len(items) != action.nargs:
        raise RunConfigError(f"{where}: {flag} takes {action.nargs} values, got {len(items)} ({quoted(value)})")
    if action.nargs == "+" and not items:
        raise RunConfigError(f"{where}: {flag} takes at least one value, got an empty list")
    return [flag, *(_scalar_token(parser, action, where, item) for item in items)]


def config_tokens(parser: argparse.ArgumentParser, path: str) -> list[str]:
    """The command-line tokens a run file stands for, checked against ``parser``; RunConfigError when bad."""
    shipped = _shipped_team(path)
    data = None if shipped else _read(path)
    settings = _settings(parser)
    if shipped or is_team_config(data):
        team = settings.get(TEAM_FLAG[2:])
        if team is None:
            raise RunConfigError(f"{FLAG} {path}: a team config (agents: ...), and this command takes no team; "
                                 f"{FLAG} names a YAML file of its settings")
        log.debug("%s %s is a team config: read as %s %s (%s otherwise names a YAML file of settings)",
                  FLAG, path, _flag(team), path, FLAG)
        return [f"{_flag(team)}={path}"]
    if not isinstance(data, dict):
        raise RunConfigError(f"{FLAG} {path}: expected a mapping of settings (key: value), got "
                             f"{'an empty file' if data is None else type(data).__name__}")
    tokens: list[str] = []
    for key, value in data.items():
        where = f"{FLAG} {path}: key {quoted(key)}"
        action = settings.get(key) if isinstance(key, str) else None
        if action is None:
            close = difflib.get_close_matches(str(key), sorted({a.dest for a in settings.values()}), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise RunConfigError(f"{where}: no such setting{hint}; the settings are the flags of --help without "
                                 "their dashes")
        tokens += _tokens(parser, action, where, value)
    return tokens


def _shipped_team(path: str) -> bool:
    """A shipped team named by its name (``--config gsm8k``), as stage 2's old team flag took it."""
    if Path(path).exists():
        return False
    from masprm.graph import resolve_config_path   # only here: the graph's imports are not the parser's
    try:
        resolve_config_path(path)
    except MasprmError:
        return False
    return True


def with_run_config(parser: argparse.ArgumentParser, args: Sequence[str]) -> list[str]:
    """``args`` with ``--config FILE`` replaced by the file's tokens, placed first so typed flags win."""
    path, rest = split_config_flag(list(args))
    if path is None:
        return list(args)
    return config_tokens(parser, path) + rest
