"""Command-line conventions shared by every stage script.

A user error (bad flag value, missing file, malformed config) is reported as
one line on stderr and exit code 2; nothing already written is touched.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Callable, NoReturn


class UsageError(Exception):
    """An error caused by the user's input; reported as one line, exit code 2."""


def finite_float(text: str) -> float:
    """A float flag value; inf and nan are refused (they would end up as non-JSON in the outputs)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (`error: ...`) instead of a usage dump.

    Every ``type=float`` flag (also in argument groups, which share the
    registry) accepts finite numbers only.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("type", float, finite_float)

    def error(self, message: str) -> NoReturn:  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def run_cli(main: Callable[[], int | None]) -> NoReturn:
    """Run a stage's main(), turning UsageError into one clear line + exit 2."""
    try:
        code = main()
    except UsageError as err:
        prog = sys.argv[0].rsplit("/", 1)[-1] if sys.argv else "masprm"
        print(f"{prog}: error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code or 0)


def check(condition: bool, message: str) -> None:
    """Raise UsageError(message) unless condition holds."""
    if not condition:
        raise UsageError(message)
