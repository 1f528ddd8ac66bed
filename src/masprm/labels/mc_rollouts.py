"""``mc_rollouts``: Math-Shepherd's estimator, K fresh completions from every step's prefix.

A step's soft label is 2 f - 1, f the share of the K completions of its
prefix (the recorded messages up to and including the step) that reach the
gold answer, on the [-1, 1] scale of ``mc``; with ``--mc-hard`` it is +1 when
any completion succeeds and -1 when none does (Math-Shepherd's hard
estimator). The last step of a graded path is its own outcome. Unlike ``mc``,
which reads the tree's Monte Carlo values (how the search's simulations
through a node ended), the completions are fresh and i.i.d., K per prefix.
Records are the PRM samples' paths. Pure Python; the completions come from
``LabelContext.rollouts``.
"""

from __future__ import annotations

from dataclasses import dataclass

from masprm.config import arg, require_each
from masprm.labels.rollouts import success_rates
from masprm.labels.scheme import LabelContext, LabelScheme, step_records
from masprm.tree_schema import TreeStep, Tree


@dataclass
class McRolloutsSettings:
    mc_rollouts: int = arg(8, help="mc_rollouts: completions per step prefix (default 8, Math-Shepherd's N)")
    mc_hard: bool = arg(False, help="mc_rollouts: hard labels, +1 when any completion succeeds (default: soft)")

    def __post_init__(self) -> None:
        require_each(self, ("mc_rollouts",), lambda v: v >= 1, "must be at least 1")


def mc_rollout_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    s = ctx.settings

    def label(root: TreeStep, path: list[TreeStep]) -> list[float]:
        rates = success_rates(ctx, "mc_rollouts", tree, path, range(len(path)), s.mc_rollouts)
        return [(1.0 if rates[i] > 0 else -1.0) if s.mc_hard else 2 * rates[i] - 1 for i in range(len(path))]

    return step_records(tree, ctx, label)


SCHEME = LabelScheme(
    "mc_rollouts", "steps", mc_rollout_records, settings=McRolloutsSettings, needs_rollouts=True,
    source="Math-Shepherd (Wang et al., 2024): the share of K fresh completions of the step's prefix that succeed")
