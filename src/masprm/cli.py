"""Command-line conventions shared by every stage script.

A user error (bad flag value, missing file, malformed config) is reported as
one line on stderr and exit code 2; nothing already written is touched.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, NoReturn


class UsageError(Exception):
    """An error caused by the user's input; reported as one line, exit code 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (`error: ...`) instead of a usage dump."""

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
