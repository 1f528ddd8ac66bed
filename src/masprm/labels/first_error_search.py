"""``first_error_search``: OmegaPRM's binary search for the first error along a path, with fresh rollouts.

A prefix is an error when none of K fresh completions of it succeeds
(OmegaPRM's rule). Assuming, as OmegaPRM does, that a prefix with a
successful completion has only such prefixes before it, the first error of
a path of n steps is found by binary search over the prefixes in about
log2(n) completions of K each instead of n: the steps before it are +1, it
is -1, and the record stops there (as ``first_error``, whose errors are read
off the tree's values instead, after as few as one visit). The last step of a
graded path is its own outcome. Records are the PRM samples' paths. Pure
Python; the completions come from ``LabelContext.rollouts``.
"""

from __future__ import annotations

from dataclasses import dataclass

from masprm.config import arg, require_each
from masprm.labels.rollouts import success_rates
from masprm.labels.scheme import LabelContext, LabelScheme, step_records
from masprm.tree_schema import TreeStep, Tree


@dataclass
class FirstErrorSearchSettings:
    search_rollouts: int = arg(8, help="first_error_search: completions per prefix probed (default 8)")

    def __post_init__(self) -> None:
        require_each(self, ("search_rollouts",), lambda v: v >= 1, "must be at least 1")


def binary_search_first_error(n: int, succeeds) -> int:
    """The smallest i in [0, n) with ``succeeds(i)`` false (n when every prefix succeeds), by bisection."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if succeeds(mid):
            lo = mid + 1
        else:
            hi = mid
    return lo


def first_error_search_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    k = ctx.settings.search_rollouts

    def label(root: TreeStep, path: list[TreeStep]) -> list[float]:
        def succeeds(i: int) -> bool:
            ctx.notes["probes"] += 1
            return success_rates(ctx, "first_error_search", tree, path, [i], k)[i] > 0

        first = binary_search_first_error(len(path), succeeds)
        return [1.0] * len(path) if first == len(path) else [1.0] * first + [-1.0]

    return step_records(tree, ctx, label)


SCHEME = LabelScheme(
    "first_error_search", "steps", first_error_search_records, settings=FirstErrorSearchSettings,
    needs_rollouts=True,
    source="OmegaPRM (Luo et al., 2024): binary search for the first prefix without a successful fresh completion")
