"""``step_consistency``: gold-free step labels, fresh rollouts as the independent judges of each step.

Spark / ScalePRM label a step by aggregating several independent
verifications of it; here the judges are K fresh completions of the step's
prefix: a step's label is 2 f - 1, f the share of its completions whose final
answer equals the majority answer over every completion of the tree's
question (all prefixes of all its graded paths; answers grouped as the voters
group them, a tie won by the answer met first). No gold answer is read (a
path's own last step is judged by its final answer against the same
majority). Records are the PRM samples' paths. Pure Python; the completions
come from ``LabelContext.rollouts``.
"""

from __future__ import annotations

from dataclasses import dataclass

from masprm.answers import answers_equal
from masprm.config import arg, require_each
from masprm.labels.majority_outcome import majority_answer
from masprm.labels.mining import candidate_paths, is_graded
from masprm.labels.rollouts import prefixes, source
from masprm.labels.scheme import LabelContext, LabelScheme, step_records
from masprm.tree_schema import TreeStep, Tree


@dataclass
class StepConsistencySettings:
    consistency_rollouts: int = arg(8, help="step_consistency: completions per step prefix (default 8)")

    def __post_init__(self) -> None:
        require_each(self, ("consistency_rollouts",), lambda v: v >= 1, "must be at least 1")


def step_consistency_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    rollouts, k = source(ctx, "step_consistency"), ctx.settings.consistency_rollouts
    paths = [p for p in candidate_paths(tree.root, ctx.options.target_nodes) if is_graded(p)]
    # every prefix but a path's finished one is completed; its own answer is the last step's judge
    answers: dict[tuple, list[str]] = {}
    for path in paths:
        open_prefixes = prefixes(path)[:-1]
        for prefix, found in zip(open_prefixes, rollouts.completions(tree.question, open_prefixes, k)):
            answers[tuple(prefix)] = found
        answers[tuple(prefixes(path)[-1])] = [path[-1].answer or path[-1].text]
    majority = majority_answer([a for found in answers.values() for a in found])
    ctx.notes["trees"] += 1

    def agrees(found: list[str]) -> float:
        return sum(majority is not None and answers_equal(a, majority) for a in found) / len(found)

    def label(root: TreeStep, path: list[TreeStep]) -> list[float]:
        return [2 * agrees(answers[tuple(p)]) - 1 for p in prefixes(path)]

    return step_records(tree, ctx, label)


SCHEME = LabelScheme(
    "step_consistency", "steps", step_consistency_records, settings=StepConsistencySettings, needs_rollouts=True,
    source="Spark / ScalePRM's step-level self-consistency, fresh completions of each prefix as the judges")
