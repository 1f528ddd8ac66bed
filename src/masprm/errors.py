"""Domain errors of the library, and the one rule for showing an error in one line.

The library raises these (all ``ValueError`` subclasses) with a message about
the thing that is wrong -- a file, a record, a setting's value -- and never a
CLI flag: only the CLI layer (``masprm.cli``) knows which flag supplied the
value and prefixes it. Pure Python.
"""

from __future__ import annotations


class MasprmError(ValueError):
    """Base of the library's errors about its inputs."""


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


def first_line(err: BaseException | str) -> str:
    """An error's message cut to its first non-empty line (the rest is usually a traceback or a hint list).

    Falls back to the exception's class name when the message is empty.
    """
    text = err if isinstance(err, str) else str(err)
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return "" if isinstance(err, str) else type(err).__name__
