"""Logging of every command: one logger per package under ``masprm``, lines as the stages always printed them.

    from masprm.log import RESULT, get_logger
    log = get_logger(__name__)          # "masprm.stages" for masprm.stages.trees
    log.info("skipped 3 examples")      # progress and notes: stderr
    log.info(table, extra=RESULT)       # a stage's summary and results: stdout

A record is its message alone (no level or time prefix), so by default every
line reads and goes where the stage's ``print`` put it. ``-q/--quiet`` (every
command, ``masprm.cli``) keeps warnings and errors only and turns the progress
bars off, transformers' and datasets' included; ``-v/--verbose`` shows debug
lines. Pure Python.
"""

from __future__ import annotations

import logging
import os
import sys

RESULT = {"stream": "stdout"}   # extra= of a summary or result line: it goes to stdout
_ROOT = "masprm"


class _LineHandler(logging.Handler):
    """Writes each record's message to the stream its record asks for, looked up when it is written
    (a test's captured stream, a pipe-safe stdout)."""

    def emit(self, record: logging.LogRecord) -> None:
        stream = sys.stdout if getattr(record, "stream", None) == "stdout" else sys.stderr
        try:
            stream.write(self.format(record) + "\n")
            if stream is sys.stderr:
                stream.flush()
        except Exception:   # noqa: BLE001 - logging's own rule: a failed write never ends the run
            self.handleError(record)


def _root() -> logging.Logger:
    root = logging.getLogger(_ROOT)
    if not any(isinstance(h, _LineHandler) for h in root.handlers):
        root.addHandler(_LineHandler())
        root.setLevel(logging.INFO)
        root.propagate = False   # the lines are ours to write once, not the application's root logger's
    return root


def get_logger(module: str) -> logging.Logger:
    """The logger of the package `module` belongs to: masprm.stages.trees -> masprm.stages; masprm.io -> masprm."""
    _root()
    parts = module.split(".")
    return logging.getLogger(".".join(parts[:2]) if len(parts) > 2 else _ROOT)


_HUSHED: list = []   # the Hugging Face libraries -q silenced, so a later command without it restores them


def quiet() -> bool:
    """Whether the command runs with -q (its logger shows warnings and errors only)."""
    return _root().level > logging.INFO


def set_verbosity(*, quiet: bool = False, verbose: bool = False) -> None:
    """-q: warnings and errors only, no progress bars (ours, transformers', datasets'); -v: debug lines too.

    Libraries imported later are told through their variables, for this process and the stages it starts.
    """
    _root().setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)
    if quiet:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_DATASETS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for name in ("transformers", "datasets"):
        module = sys.modules.get(name)   # already imported: told directly
        hf_logging = getattr(getattr(module, "utils", None), "logging", None)
        if hf_logging is None:
            continue
        if quiet and name not in _HUSHED:
            _HUSHED.append(name)
            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
        elif not quiet and name in _HUSHED:
            _HUSHED.remove(name)
            hf_logging.set_verbosity_warning()
            hf_logging.enable_progress_bar()
