"""Command-line conventions shared by every stage script.

A user error (bad flag value, missing file, malformed config) is reported as
one line on stderr and exit code 2; nothing already written is touched. The
library raises domain errors (``masprm.errors``) that name no flag; ``run_cli``
prefixes the flag of the error's ``setting`` when the script says which it is.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from typing import Callable, Mapping, NoReturn

from masprm import __version__
from masprm.errors import LINE_LIMIT, MasprmError, first_line, no_space_reason


class UsageError(MasprmError):
    """An error in the user's command line whose message already names the flag; one line, exit code 2."""


def finite_float(text: str) -> float:
    """A float flag value; inf and nan are refused (they would end up as non-JSON in the outputs)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


PARSED_FLAGS: dict[str, str] = {}   # filled by ArgumentParser.parse_args: setting (dest) -> flag


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (`error: ...`) instead of a usage dump.

    Every ``type=float`` flag (also in argument groups, which share the
    registry) accepts finite numbers only, and every command has ``--version``.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("type", float, finite_float)
        self.add_argument("--version", action="version", version=f"%(prog)s (masprm {__version__})")

    def parse_known_args(self, args=None, namespace=None):
        # Remember each setting's flag (dest -> first spelling), so run_cli can name the flag of
        # a domain error's setting in this script's own spelling.
        PARSED_FLAGS.update({a.dest: a.option_strings[0] for a in self._actions
                             if a.option_strings and a.dest != "help"})
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {first_line(message, limit=LINE_LIMIT)} (see --help)\n")


def with_flags(text: str, flags: Mapping[str, str] | None = None) -> str:
    """Library text names settings in backquotes (`prm_dir`); show each as this script's flag (--prm_dir).

    A setting the script has no flag for keeps its backquoted name.
    """
    flags = {**COMMON_FLAGS, **PARSED_FLAGS, **(flags or {})}
    return re.sub(r"`(\w+)`", lambda m: flags.get(m.group(1), m.group(0)), text)


def error_line(err: MasprmError, flags: Mapping[str, str] | None = None) -> str:
    """The one line shown for a domain error, naming the flag of its setting when the script has one.

    Backquoted settings in the message become flags (`with_flags`); then a message that starts
    with the setting's name gets the flag in its place, one that starts with the flag or names it
    in parentheses is shown as it is, and any other is prefixed (``--flag: message``).
    """
    setting = err.setting or ""
    flag = (flags or {}).get(setting)
    message = with_flags(first_line(err, limit=LINE_LIMIT), flags)
    if not flag or message.startswith(flag) or f"({flag})" in message:
        return message
    if message.startswith((setting + " ", setting + ":")):   # "epochs must be > 0" -> "--epochs must be > 0"
        return flag + message[len(setting):]
    return f"{flag}: {message}"


# Settings spelled the same way by every stage that has them (the seed README's spellings).
COMMON_FLAGS = {"dataset": "--dataset", "split": "--split", "data_file": "--data_file", "seed": "--seed"}


def run_cli(main: Callable[[], int | None], flags: Mapping[str, str] | None = None) -> NoReturn:
    """Run a stage's main(), turning a domain or usage error, or a full disk, into one clear line + exit 2.

    A setting's flag is the one of the parser the script parsed its arguments with; ``flags``
    (setting -> flag) adds or overrides spellings.
    """
    try:
        code = main()
    except MasprmError as err:
        prog = sys.argv[0].rsplit("/", 1)[-1] if sys.argv else "masprm"
        print(f"{prog}: error: {error_line(err, {**COMMON_FLAGS, **PARSED_FLAGS, **(flags or {})})}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as err:  # noqa: BLE001 - only a full disk is answered here; anything else propagates
        reason = no_space_reason(err)
        if reason is None:
            raise
        prog = sys.argv[0].rsplit("/", 1)[-1] if sys.argv else "masprm"
        where = getattr(err, "filename", None) or "an output file"
        print(f"{prog}: error: {where}: cannot be written ({reason}); nothing finished was lost (finished outputs "
              "are written whole, and the same command resumes); free some space and run it again", file=sys.stderr)
        sys.exit(2)
    sys.exit(code or 0)


def check(condition: bool, message: str) -> None:
    """Raise UsageError(message) unless condition holds."""
    if not condition:
        raise UsageError(message)
