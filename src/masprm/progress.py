"""Progress bars that honour ``TQDM_DISABLE`` whatever the caller asks for.

tqdm reads ``TQDM_DISABLE`` only as the default of its ``disable`` argument, so a
bar created with an explicit ``disable=...`` ignores it. Stage bars go through
``progress_bar``, which applies the variable itself (read at each call):

    for f in progress_bar(files, terminal_only=True, desc="trees"): ...

``enabled=False`` (a ``--quiet`` flag) and a command's ``-q`` (``masprm.log.quiet``) always hide the bar; ``terminal_only``
shows it only on a terminal (a bar that must leave no line in logs). Pure Python.
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
