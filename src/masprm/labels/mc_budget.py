"""``mc_rollouts_uniform`` and ``mc_rollouts_active``: a fixed budget of extra rollouts per tree, spent evenly or
where an ensemble's heads disagree (ActPRM's active Monte Carlo estimation).

The units are a tree's distinct open prefixes: the recorded messages up to a
step of a graded path, its last (finished) step excluded, in the order the
PRM samples' paths meet them (one prefix is one state of the team, however many
tree nodes share its text). ``--rollout-budget B`` fresh completions per tree
are shared among them (``masprm.labels.allocation``):

- ``mc_rollouts_uniform``: evenly, B // n each, one more for the first B % n;
- ``mc_rollouts_active``: ranked by the spread of an ``ensemble`` scorer's heads
  on the prefix (``--rollout-ensemble``; highest first, ties to the prefix met
  first), ``--active-rollouts K`` each in rank order until the budget is spent.

A step's label is its node's Monte Carlo value with the extra rollouts pooled
in: (q_sum + Σ outcomes) / (visits + a) for a node with a fresh completions
(each outcome ±1, as the search's back-ups), its ``mc`` label unchanged when
a = 0 (a prefix the budget does not reach). A budget of 0 is refused: it would
load the policy to write ``mc``'s records. The last step of a graded
path is its own outcome. Records are the PRM samples' paths. Pure Python;
the completions come from ``LabelContext.rollouts``, the spreads from
``LabelContext.spreads``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from masprm.config import arg, require, require_each
from masprm.errors import ConfigError
from masprm.labels.allocation import even_split, ranked_split
from masprm.labels.mining import candidate_paths, clamp, is_graded
from masprm.labels.rollouts import prefixes, source
from masprm.labels.scheme import LabelContext, LabelScheme, step_records
from masprm.tree_schema import TreeStep, Tree

Prefix = tuple[tuple[int, str], ...]


class Spreads(Protocol):
    def spreads(self, question: str, prefixes: Sequence[Sequence[tuple[int, str]]]) -> list[float]:
        """The ensemble heads' spread on each prefix (the std of their probabilities at its last step)."""


@dataclass
class BudgetSettings:
    rollout_budget: int = arg(32, help="mc_rollouts_uniform, mc_rollouts_active: fresh completions per tree, "
                                       "shared among its open prefixes, at least 1 (default 32)")

    def __post_init__(self) -> None:
        # 0 would load the policy and sample nothing: the records would be --labels mc's
        require(self.rollout_budget >= 1, "rollout_budget", f"rollout_budget must be at least 1, got "
                f"{self.rollout_budget} (a budget of 0 samples nothing: --labels mc writes those records)")


@dataclass
class ActiveSettings(BudgetSettings):
    active_rollouts: int = arg(8, help="mc_rollouts_active: completions per prefix chosen, in rank order "
                                       "(default 8, Math-Shepherd's N)")

    def __post_init__(self) -> None:
        super().__post_init__()
        require_each(self, ("active_rollouts",), lambda v: v >= 1, "must be at least 1")


Allocate = Callable[[Tree, LabelContext, list[Prefix]], list[int]]


def open_prefixes(tree: Tree, target_nodes: int) -> list[Prefix]:
    """The distinct prefixes of the tree's graded paths that a completion can continue, in first-met order."""
    found: dict[Prefix, None] = {}
    for path in candidate_paths(tree.root, target_nodes):
        if is_graded(path):
            found.update(dict.fromkeys(tuple(p) for p in prefixes(path)[:-1]))
    return list(found)


def pooled(step: TreeStep, wins: int, fresh: int) -> float:
    """The node's Monte Carlo value with ``fresh`` more rollouts, ``wins`` of them correct, backed up as ±1."""
    if fresh == 0 or step.visits + fresh == 0:
        return clamp(step.value)
    return clamp((step.value * step.visits + 2 * wins - fresh) / (step.visits + fresh))


def budget_records(tree: Tree, ctx: LabelContext, scheme: str, allocate: Allocate) -> list[dict]:
    rollouts = source(ctx, scheme)
    units = open_prefixes(tree, ctx.options.target_nodes)
    shares = allocate(tree, ctx, units)
    wins: dict[Prefix, tuple[int, int]] = {}
    for k in sorted(set(shares) - {0}):   # one batch of completions per share size, smallest first
        asked = [u for u, a in zip(units, shares) if a == k]
        for unit, answers in zip(asked, rollouts.completions(tree.question, [list(u) for u in asked], k)):
            wins[unit] = (sum(rollouts.grade(tree.question, a) > 0 for a in answers), k)
    ctx.notes["prefixes"] += len(units)
    ctx.notes["rollouts"] += sum(shares)

    def label(root: TreeStep, path: list[TreeStep]) -> list[float]:
        opened = [tuple(p) for p in prefixes(path)[:-1]]
        return [pooled(s, *wins.get(u, (0, 0))) for s, u in zip(path, opened)] + [clamp(path[-1].value)]

    return step_records(tree, ctx, label)


def uniform_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    return budget_records(tree, ctx, "mc_rollouts_uniform",
                          lambda t, c, units: even_split(len(units), c.settings.rollout_budget))


def active_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    if ctx.spreads is None:
        raise ConfigError("label scheme 'mc_rollouts_active' ranks the prefixes by an ensemble scorer's spread, and "
                          "no ensemble scorer was given for it", setting="rollout_ensemble")

    def allocate(t: Tree, c: LabelContext, units: list[Prefix]) -> list[int]:
        spreads = c.spreads.spreads(t.question, [list(u) for u in units]) if units else []
        return ranked_split(spreads, c.settings.rollout_budget, c.settings.active_rollouts)

    return budget_records(tree, ctx, "mc_rollouts_active", allocate)


UNIFORM = LabelScheme(
    "mc_rollouts_uniform", "steps", uniform_records, settings=BudgetSettings, needs_rollouts=True,
    source="Math-Shepherd's completions under a fixed budget per tree, spread evenly over the open prefixes and "
           "pooled with the tree's Monte Carlo values (the control of mc_rollouts_active)")
ACTIVE = LabelScheme(
    "mc_rollouts_active", "steps", active_records, settings=ActiveSettings, needs_rollouts=True, needs_spreads=True,
    source="ActPRM (active learning of PRMs): the same budget spent where an ensemble scorer's heads disagree most")
