"""``--labels first_error``: OmegaPRM-style hard labels, from the tree's Monte Carlo values alone.

Along each graded root-to-terminal path, the first step whose node has no
successful rollout (its value at most ``--first-error-threshold``, default -1:
every rollout through it failed) is labelled -1, the steps before it +1, and
the steps after it are left out (the record stops there). A path without such
a step (it ends at a correct terminal) is +1 throughout. Pure Python.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from masprm.config import arg
from masprm.errors import ConfigError
from masprm.labels.mining import PM1_TOLERANCE
from masprm.labels.scheme import LabelContext, LabelScheme, step_records
from masprm.tree_schema import TreeStep, Tree


@dataclass
class FirstErrorSettings:
    first_error_threshold: float = arg(-1.0, help="first_error: a step is an error when its node's value is at "
                                                  "most this (default -1: no rollout through it succeeded)")

    def __post_init__(self) -> None:
        if not -1.0 <= self.first_error_threshold < 1.0:
            raise ConfigError(f"first_error_threshold must be in [-1, 1), got {self.first_error_threshold}",
                              setting="first_error_threshold")


def first_error_labels(path: list[TreeStep], threshold: float) -> list[float]:
    """+1 before the first step whose value is <= threshold, -1 on it, nothing after; all +1 without one."""
    for i, step in enumerate(path):
        if step.value <= threshold + PM1_TOLERANCE:
            return [1.0] * i + [-1.0]
    return [1.0] * len(path)


def first_error_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    def label(root: TreeStep, path: list[TreeStep]) -> list[float]:
        labels = first_error_labels(path, ctx.settings.first_error_threshold)
        ctx.notes["no_error_paths" if labels[-1] > 0 else f"first_error_at_step_{len(labels) - 1}"] += 1
        return labels

    return step_records(tree, ctx, label)


def _report(notes: Counter) -> str:
    prefix = "first_error_at_step_"
    at = " ".join(f"{k.removeprefix(prefix)}:{notes[k]}" for k in sorted(notes) if k.startswith(prefix))
    return f"paths: no error {notes['no_error_paths']}, first error at step {at or 'none'}"


SCHEME = LabelScheme(
    "first_error", "steps", first_error_records, settings=FirstErrorSettings, report=_report,
    source="OmegaPRM (Luo et al., 2024): the first step without a successful rollout is the error")
