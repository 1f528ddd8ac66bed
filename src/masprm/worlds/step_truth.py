"""``--labels step_truth``: the supervised row, each step labelled by its toy world's step truth.

The toy worlds know every story, so every message of a tree's graded paths can be judged for free
(`masprm.worlds.StepTruth`: `steplabel` for the toy world, `deep_label` for toy_deep). This
scheme gives the scorer those verdicts as its labels: +1 for a right message, -1 for a wrong one. It
is the lab's learnability ceiling, the analog of human step labels (PRM800K) beside the
outcome-only schemes; it exists only where a world can check each message, so trees of any other
dataset are refused (one line, exit 2) before any output is opened.

The rule is the **per-message verdict**, not "right while every message so far is right" (the rule
of the `oracle_step` search scorer), for two reasons:

- the step benchmark's AUC, which the lab's learnability gate reads (docs/learnability.md,
  "Learnability on toy_deep: design"), scores a step's value against that step's own verdict; a row
  trained on the prefix rule would be marked down by construction wherever the two differ;
- in these worlds a message is judged against the story's truth, never against the messages it was
  given, so a verdict already carries the history (an Op agent that goes on from a wrong total is
  wrong), and where the two rules differ the per-message one is the state's real standing: on
  toy_deep the Planner reads the question too, so a Planner that writes the story's plan after a
  misreading Reader puts the team back on its path (the Op agents follow the plan), which the prefix
  rule would call wrong for ever.

How often the rules differ on the trees is counted in the summary line (``right_after_error``).
Which world's truth applies is the dataset the trees record (``meta.dataset`` of the first tree file,
else the input folder's name before ``_res_``). Pure Python: no torch import.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from masprm.cli import UsageError
from masprm.errors import DataError
from masprm.labels.scheme import LabelContext, LabelScheme, step_records
from masprm.outputs import lexical_path
from masprm.tree_schema import Tree, TreeStep
from masprm.worlds import WORLDS


@dataclass(frozen=True)
class StepTruthInput:
    """What the scheme read from its input before labelling: the toy world whose step truth applies."""

    world: str


def recorded_dataset(files: Sequence[Path], input_path: Path) -> tuple[str | None, str]:
    """(the dataset the trees record, where it was read): the first tree file's ``meta.dataset``, else the
    input folder's name before ``_res_`` (stage 1's run-folder name), else (None, the first file)."""
    first = files[0]
    try:
        meta = json.loads(first.read_text(encoding="utf-8")).get("meta") or {}
    except (OSError, ValueError, AttributeError):
        meta = {}   # an unreadable tree is reported (and skipped) with the others; the folder's name may tell
    if isinstance(meta, dict) and isinstance(meta.get("dataset"), str):
        return meta["dataset"], f"meta.dataset of {first}"
    folder = lexical_path(input_path)
    folder = folder.parent if folder.is_file() else folder
    if "_res_" in folder.name:
        return folder.name.split("_res_")[0], f"the input folder's name {folder.name!r}"
    return None, str(first)


def check_input(files: Sequence[Path], input_path: Path) -> StepTruthInput:
    """The toy world of the trees, or one line (UsageError) naming the dataset found and where."""
    dataset, where = recorded_dataset(files, input_path)
    if dataset not in WORLDS:
        found = f"dataset {dataset!r} ({where})" if dataset else f"no dataset ({where} records none)"
        raise UsageError(f"--labels step_truth: the trees are of {found}; the step truth exists only in the toy "
                         f"worlds ({', '.join(WORLDS.names())}), whose stories check every message")
    return StepTruthInput(dataset)


def message_labels(world: str, question: str, messages: Sequence[str]) -> list[bool]:
    """Each message's own verdict (team order) under the world's step truth."""
    truth = WORLDS[world].truth
    return [step.correct for step in truth.label(truth.story_of(question), messages).steps]


def step_truth_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    world = ctx.settings.world

    def label(root: TreeStep, path: list[TreeStep]) -> list[float]:
        try:
            right = message_labels(world, tree.question, [s.text for s in path])
        except (DataError, ValueError) as err:   # a question of another world, or more messages than the team
            raise UsageError(f"--labels step_truth: tree {tree.name}: {err} (the trees record dataset "
                             f"{world!r})") from None
        ctx.notes["right"] += sum(right)
        ctx.notes["wrong"] += len(right) - sum(right)
        wrong_before = [not all(right[:i]) for i in range(len(right))]
        ctx.notes["right_after_error"] += sum(r and w for r, w in zip(right, wrong_before))
        return [1.0 if r else -1.0 for r in right]

    return step_records(tree, ctx, label)


def _report(notes: Counter) -> str:
    return (f"steps: right {notes['right']}, wrong {notes['wrong']}, right after an earlier wrong message "
            f"{notes['right_after_error']} (where the prefix rule would say wrong)")


SCHEME = LabelScheme(
    "step_truth", "steps", step_truth_records, report=_report, check_input=check_input,
    source="the toy world's step truth (the supervised ceiling; the analog of PRM800K's human step labels)")
