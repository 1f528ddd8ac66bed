"""``--labels advantage``: counterfactual credit, a step's value minus the mean value of its siblings.

A step's siblings are the other messages its agent sent from the same state
(the other children of its parent node); those never visited have no value
and are left out. The label is (value - mean of the siblings' values) / 2, in
[-1, 1], so a message is credited for what it changed rather than for where it
sits (the leave-one-out advantage of C3-style credit assignment). A step with
no visited sibling has no counterfactual: its label is 0. Records are the PRM
samples' paths. Pure Python.
"""

from __future__ import annotations

from masprm.labels.scheme import LabelContext, LabelScheme, step_records
from masprm.tree_schema import TreeStep, Tree


def advantage(step: TreeStep, parent: TreeStep) -> float | None:
    """(value - mean visited sibling value) / 2; None when no sibling was visited."""
    others = [c.value for c in parent.children if c is not step and c.visits > 0 and c.value is not None]
    if not others:
        return None
    return (step.value - sum(others) / len(others)) / 2


def advantage_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    def label(root: TreeStep, path: list[TreeStep]) -> list[float]:
        labels = []
        for parent, step in zip([root] + path[:-1], path):
            a = advantage(step, parent)
            ctx.notes["steps"] += 1
            ctx.notes["no_sibling_steps"] += a is None
            labels.append(0.0 if a is None else a)
        return labels

    return step_records(tree, ctx, label)


SCHEME = LabelScheme(
    "advantage", "steps", advantage_records,
    source="leave-one-out advantage (C3-style counterfactual credit): value minus the siblings' mean value")
