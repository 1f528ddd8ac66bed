"""Domain errors of the library, and the one rule for showing an error in one line.

The library raises these (all ``ValueError`` subclasses) with a message about
the thing that is wrong -- a file, a record, a setting's value -- and never a
CLI flag: only the CLI layer (``masprm.cli``) knows which flag supplied the
value and prefixes it. Pure Python.
"""

from __future__ import annotations

import errno

# What a message may quote of a user's value, and how long one error line may get: a value that is
# a megabyte of text (or a structure of a billion items) must not become a megabyte of stderr.
QUOTE_LIMIT = 120
LINE_LIMIT = 2000

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


class ModelOutputError(ModelError):
    """A model gave an impossible output (NaN or inf): the model is broken, so the whole run stops (one
    example's failure would repeat on every other)."""


class OutputError(MasprmError):
    """An output could not be written (the disk is full, a quota is exceeded); nothing finished was lost."""


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


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` for a message, cut to about ``limit`` characters (the size is said when cut).

    The one place that formats a user's value inside an error message. A long
    string is cut before its repr is built; a list or mapping shows its first
    items and nesting levels only (``reprlib``), so a structure of a billion
    items costs no more than a short one.
    """
    import reprlib

    if isinstance(value, str):
        return repr(value) if len(value) <= limit else f"{value[:limit]!r}... ({len(value)} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * limit:
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother, short.maxlong = 2, limit, limit, limit
    short.maxlist = short.maxtuple = short.maxdict = short.maxset = short.maxfrozenset = 6
    text = short.repr(value)
    if len(text) > limit:
        text = text[:limit] + "..."
    if isinstance(value, (list, tuple, dict, set, frozenset)) and "..." in text:
        text += f" ({len(value)} items)"
    return text


# errno values that mean "no room to write": the disk is full, a quota is used up, or the file is
# larger than the process may write (ulimit -f).
NO_SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# How libraries that write without a Python OSError say the same (safetensors, torch.save), and the
# reason each is shown as (the C library's wording).
_NO_SPACE_TEXTS = {"no space left on device": "No space left on device", "disk quota exceeded": "Disk quota exceeded",
                   "file too large": "File too large", "storagefull": "No space left on device",
                   "file write failed": "the file write failed (is the disk full?)"}


def no_space_reason(err: BaseException | None) -> str | None:
    """Why writing failed when `err` (or an exception it was raised from) means the disk is full, else None."""
    seen = 0
    while err is not None and seen < 10:
        if isinstance(err, OSError) and err.errno in NO_SPACE_ERRNOS:
            return err.strerror or errno.errorcode.get(err.errno, "no space")
        text = str(err).lower()
        hit = next((t for t in _NO_SPACE_TEXTS if t in text), None)
        if hit:
            return _NO_SPACE_TEXTS[hit]
        err, seen = err.__cause__ or err.__context__, seen + 1
    return None
