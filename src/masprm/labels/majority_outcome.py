"""``--labels majority_outcome``: terminals relabelled by the tree's majority answer (no gold), then the paper's pairs.

Formerly ``self_consistency``, still registered under that name with the same
output (its records say ``meta.label_scheme: self_consistency``). The old name
promised ScalePRM / Spark's step-level self-consistency (several independent
verifications of each step, aggregated); what this scheme does is relabel the
*outcome* of every terminal by the majority final answer, so the name says that.

A terminal's reward becomes +1 when its answer equals the majority answer of
its tree's terminals and -1 otherwise: one vote per terminal node with an
answer, answers grouped by ``masprm.answers.answers_equal``, a tie won by the
answer met first (depth-first, stored order); a terminal without an answer
gets -1. The values are backed up through the tree again and the paper's pairs
are mined from the relabelled tree (its root value decides the window).

Why the back-up is exact. Stage 1 (``masprm.search.mcts.OutcomeGuide``) backs
up one value per simulation along its path, and grades the other terminal
children of an expansion on the spot, one back-up each along the path to them;
a terminal's reward is fixed once graded, and a path that stops at a
non-terminal node (the policy returned nothing) is worth -1. So every back-up
through a node ends at one terminal below it or at a dead end, and

    q_sum(node) = sum over the terminals t below it of visits(t) * reward(t)  -  dead ends at or below it,

where the dead ends at a node are visits(node) - the sum of its children's
visits. Putting the majority reward in place of reward(t) gives each
node's relabelled value from the stored numbers alone. One case is not exact:
a node's JSON keeps only its first MAX_JSON_CHILDREN (8) children, so at a node
with 8 written children the missing visits may have gone through unwritten
ones, whose answers are unknown; those back-ups keep their stored (gold-graded)
sum. Stage 1's default (3 candidates per expansion) never writes 8 children.
The same back-up with the stored rewards must give the stored values back; the
summary counts the trees where it does. Pure Python.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Callable, Sequence

from masprm.answers import answers_equal
from masprm.labels.scheme import LabelContext, LabelScheme, mined_pairs, walk
from masprm.tree_schema import MAX_JSON_CHILDREN, TreeStep, Tree

EXACT_TOL = 1e-6   # stored q_mean is q_sum / visits of integer sums: a back-up reproduces it to rounding


def majority_answer(answers: Sequence[str | None]) -> str | None:
    """The most frequent answer (grouped by answers_equal); a tie goes to the group met first; None without any."""
    votes = Counter(a for a in answers if a is not None and a.strip())   # keeps the order answers are met in
    groups: list[list] = []   # [the group's first answer, its votes]
    for answer, n in votes.items():
        for group in groups:
            if answers_equal(answer, group[0]):
                group[1] += n
                break
        else:
            groups.append([answer, n])
    return max(groups, key=lambda g: g[1])[0] if groups else None   # max keeps the first of equal counts


def _stored_sum(step: TreeStep) -> float:
    return (step.value or 0.0) * step.visits


def back_up(node: TreeStep, reward: Callable[[TreeStep], float], sums: dict[int, float]) -> float:
    """The node's q_sum with every terminal t below it worth ``reward(t)`` per visit (see the module docstring).

    Fills ``sums`` (id(node) -> q_sum) for the node and its descendants.
    """
    if node.is_terminal:
        total = node.visits * reward(node)
    else:
        total = sum(back_up(child, reward, sums) for child in node.children)
        rest = node.visits - sum(child.visits for child in node.children)
        if rest > 0:
            if len(node.children) < MAX_JSON_CHILDREN:
                total -= rest                 # dead ends: -1 under any labelling
            else:                              # maybe unwritten children: keep their stored sum
                total += _stored_sum(node) - sum(_stored_sum(child) for child in node.children)
    sums[id(node)] = total
    return total


def relabel(tree: Tree, notes: Counter) -> None:
    """Replace the tree's values by the majority-outcome back-up, in place, and count the agreement."""
    nodes = list(walk(tree.root))
    terminals = [n for n in nodes if n.is_terminal]
    majority = majority_answer([t.answer for t in terminals])

    agrees = {a: majority is not None and answers_equal(a, majority) for a in {t.answer for t in terminals} if a}

    def consistent(t: TreeStep) -> float:
        return 1.0 if agrees.get(t.answer) else -1.0

    def stored(t: TreeStep) -> float:
        return t.value if t.value is not None else -1.0

    gold_sums: dict[int, float] = {}
    new_sums: dict[int, float] = {}
    back_up(tree.root, stored, gold_sums)
    back_up(tree.root, consistent, new_sums)
    graded = [t for t in terminals if t.visits > 0 and t.value is not None and abs(abs(t.value) - 1.0) <= EXACT_TOL]
    notes["trees"] += 1
    notes["terminals"] += len(graded)
    notes["agree"] += sum(consistent(t) == stored(t) for t in graded)
    notes["majority_is_gold"] += any(consistent(t) > 0 and stored(t) > 0 for t in graded)
    notes["exact_backups"] += all(abs(gold_sums[id(n)] / n.visits - n.value) <= EXACT_TOL
                                  for n in nodes if n.visits > 0 and n.value is not None)
    for n in nodes:
        if n.visits > 0:
            n.value = new_sums[id(n)] / n.visits


def _report(notes: Counter) -> str:
    share = 100.0 * notes["agree"] / notes["terminals"] if notes["terminals"] else 0.0
    return (f"terminal rewards agree with gold {notes['agree']}/{notes['terminals']} ({share:.1f}%) "
            f"| majority answer is gold in {notes['majority_is_gold']}/{notes['trees']} trees "
            f"| exact back-ups {notes['exact_backups']}/{notes['trees']} trees")


SCHEME = LabelScheme(
    "majority_outcome", "pairs", mined_pairs, prepare=lambda tree, ctx: relabel(tree, ctx.notes), report=_report,
    source="the majority answer of the tree's terminals as their reward (no gold answer), then the paper's pairs")

# The old name: the same scheme, its records stamped with the name they always had.
OLD_NAME = dataclasses.replace(SCHEME, name="self_consistency")
