"""``--labels mc``: Math-Shepherd-style soft labels, every step labelled with its node's Monte Carlo value.

The records are the PRM samples (``prm_samples_<run>.jsonl``: graded root-to-
terminal paths, labels = q_mean of each step's node), each with
``meta.label_scheme``; ``--mode prm`` trains a value per step on them.
Pure Python.
"""

from __future__ import annotations

from masprm.labels.mining import mc_labels
from masprm.labels.scheme import LabelContext, LabelScheme, step_records
from masprm.tree_schema import Tree


def mc_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    return step_records(tree, ctx, mc_labels)


SCHEME = LabelScheme(
    "mc", "steps", mc_records,
    source="Math-Shepherd (Wang et al., 2024): the step's Monte Carlo value, the share of rollouts through it "
           "that succeed (here on [-1, 1])")
