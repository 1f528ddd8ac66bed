"""Progress bars that honour ``TQDM_DISABLE`` whatever the caller asks for.

tqdm reads ``TQDM_DISABLE`` only as the default of its ``disable`` argument, so a
bar created with an explicit ``disable=...`` ignores it. Stage bars go through
``progress_bar``, which applies the variable itself (read at each call):

    for f in progress_bar(files, terminal_only=True, desc="trees"): ...

``enabled=False`` (a ``--quiet`` flag) and a command's ``-q`` (``masprm.log.quiet``) always hide the bar; ``terminal_only``
shows it only on a terminal (a bar that must leave no line in logs).

Where a bar would leave only carriage returns (a log file), a long loop writes a line every so often instead,
``step_progress_line``: ``[progress] train step 40/480 (8%), loss 0.6931, 1m 12s so far, about 13m 12s left``.
Every such line starts with ``PROGRESS_MARK``, as stage 4's text logs' progress lines do, so a driver that
runs a command into a file (``masprm.running.commands``) can show them. Pure Python.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from tqdm.auto import tqdm

from masprm.log import quiet

ENV_VAR = "TQDM_DISABLE"
_OFF_VALUES = ("", "0", "false", "no", "off")


def bars_disabled_by_env() -> bool:
    """TQDM_DISABLE set to anything but an empty string, 0, false, no or off."""
    return os.environ.get(ENV_VAR, "").strip().lower() not in _OFF_VALUES


def progress_bar(iterable: Iterable | None = None, *, enabled: bool = True, terminal_only: bool = False,
                 **kwargs: Any) -> tqdm:
    """A tqdm bar (``kwargs`` as tqdm's), hidden when disabled by the caller or by TQDM_DISABLE."""
    if not enabled or bars_disabled_by_env() or quiet():
        disable: bool | None = True
    else:
        disable = None if terminal_only else False   # None: tqdm shows it on a terminal only
    return tqdm(iterable, disable=disable, **kwargs)


PROGRESS_MARK = "[progress]"


def duration(seconds: float) -> str:
    """A duration as a person reads it: ``42s``, ``3m 07s``, ``1h 02m``."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def step_progress_line(what: str, step: int, total: int, elapsed: float, timed_steps: int,
                       values: dict[str, float]) -> str:
    """One progress line of a loop of `total` steps at `step`: `values` (``loss``), the time so far and the time
    left at the pace of the `timed_steps` steps that `elapsed` seconds took (a resumed run times only its own)."""
    shown = "".join(f", {name} {value:.4g}" for name, value in values.items())
    left = f", about {duration(elapsed / timed_steps * (total - step))} left" if timed_steps > 0 and total > 0 else ""
    share = f" ({100 * step / total:.0f}%)" if total > 0 else ""
    return f"{PROGRESS_MARK} {what} step {step}/{total}{share}{shown}, {duration(elapsed)} so far{left}"
