"""Domain errors of the library, and the one rule for showing an error in one line.

The library raises these (all ``ValueError`` subclasses) with a message about
the thing that is wrong -- a file, a record, a setting's value -- and never a
CLI flag: only the CLI layer (``masprm.cli``) knows which flag supplied the
value and prefixes it. Pure Python.
"""

from __future__ import annotations


class MasprmError(ValueError):
    """Base of the library's errors about its inputs.

    ``setting`` optionally names the setting (a config field such as ``"data_file"``)
    whose value is wrong; the CLI layer turns it into that flag's spelling.
    """

    def __init__(self, message: str = "", *, setting: str | None = None):
        super().__init__(message)
        self.setting = setting


class ConfigError(MasprmError):
    """A setting or configuration file is invalid (a value out of range, an unknown name)."""


class DataError(MasprmError):
    """A data file or its records cannot be used (missing fields, unreadable answers, too few rows)."""


class TreeError(MasprmError):
    """A search tree file does not follow the tree format."""


class ModelError(MasprmError):
    """A model or scorer folder cannot be loaded (missing files, incompatible metadata)."""


class UnknownNameError(ConfigError, KeyError):
    """A name that is not in a registry; also a KeyError, so ``registry[name]`` behaves like a dict lookup."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def first_line(err: BaseException | str, *, with_cause: bool = False, limit: int | None = None) -> str:
    """An error's message cut to its first non-empty line (the rest is usually a traceback or a hint list).

    An exception with an empty message gives its class name; ``with_cause`` appends
    the first line of the exception it was raised from (``A: B``); ``limit`` cuts the result.
    """
    text = err if isinstance(err, str) else str(err)
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    if not line and not isinstance(err, str):
        line = type(err).__name__
    cause = None if isinstance(err, str) else err.__cause__
    if with_cause and cause is not None and str(cause).strip():
        line = f"{line}: {first_line(cause)}"
    return line[:limit] if limit else line
