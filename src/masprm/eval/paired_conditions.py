"""Conditions written with a paired comparison: a compared condition waits for its partner of the same
command, so the comparison goes into its log before the status line and its summary, and no log is
rewritten once it says COMPLETED. Pure Python (the comparisons themselves are stage 4's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Comparison:
    """A paired comparison a condition's log and summary carry: it waits for its ``partner`` condition of the
    same command, and its lines go before the status line (a log is final once it says COMPLETED)."""
    partner: str    # the method compared with
    key: str        # the summary key of its result
    # (this condition's records, the partner's records, seed, the partner's log name) -> (result, log lines)
    compare: Callable[[list[dict], list[dict], int, str], tuple[dict, list[str]]]


def finisher(conditions: Sequence[Any], comparisons: dict[str, Comparison],
             write: Callable[[Any, tuple[Comparison, Any] | None], None]) -> Callable[[Any], None]:
    """``finish(cond)``, called once a condition has all its records: ``write``s it, unless it waits for the
    partner of its comparison, and then writes any condition that waited for it. A condition has
    ``method``, ``reused`` and ``summary`` (None until written), as ``masprm.eval.runner.Condition``."""
    by_method = {c.method: c for c in conditions}
    waits = {c.method: comparisons[c.method] for c in conditions
             if not c.reused and c.method in comparisons and comparisons[c.method].partner in by_method}
    complete = {c.method for c in conditions if c.reused}

    def finish(cond: Any) -> None:
        complete.add(cond.method)
        for c in [cond, *(by_method[m] for m, w in waits.items() if w.partner == cond.method)]:
            wait = waits.get(c.method)
            if c.summary is None and c.method in complete and (wait is None or wait.partner in complete):
                write(c, (wait, by_method[wait.partner]) if wait else None)
    return finish
