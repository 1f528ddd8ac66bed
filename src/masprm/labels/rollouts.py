"""What the rollout-based label schemes share: fresh completions of a path's prefixes, and their grades.

A scheme of this kind (``mc_rollouts``, ``first_error_search``,
``step_consistency``; ``shapley`` replays instead) asks ``LabelContext.rollouts``
(a ``masprm.search.rollouts.RolloutSource``: the policy, the team, the grader)
for K completions of a prefix; the source caches them by prefix, so schemes
and paths that share a prefix pay for it once. Pure Python.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from masprm.errors import ConfigError
from masprm.labels.scheme import LabelContext
from masprm.tree_schema import TreeStep, Tree


class Completer(Protocol):
    grade: object   # (question, final answer) -> outcome in [-1, 1]

    def completions(self, question: str, prefixes: Sequence[Sequence[tuple[int, str]]],
                    k: int) -> list[list[str]]:
        """The final answers of k completions of each prefix."""


def source(ctx: LabelContext, scheme: str, what: str = "completions of each step's prefix") -> Completer:
    """The context's rollout source; one line naming the scheme when there is none."""
    if ctx.rollouts is None:
        raise ConfigError(f"label scheme {scheme!r} needs fresh policy samples ({what}), and no policy was given "
                          "for them (masprm.search.rollouts.RolloutSource)", setting="labels")
    return ctx.rollouts


def prefixes(path: Sequence[TreeStep]) -> list[list[tuple[int, str]]]:
    """The messages up to and including each step of a path."""
    messages = [(s.agent, s.text) for s in path]
    return [messages[:i + 1] for i in range(len(messages))]


def success_rates(ctx: LabelContext, scheme: str, tree: Tree, path: Sequence[TreeStep], steps: Sequence[int],
                  k: int) -> dict[int, float]:
    """For each step index asked, the share of k completions of its prefix graded correct (> 0). The last
    step of a finished path is its own outcome: nothing is left to complete."""
    rollouts = source(ctx, scheme)
    last = len(path) - 1
    asked = [i for i in steps if i != last]
    answers = rollouts.completions(tree.question, [prefixes(path)[i] for i in asked], k) if asked else []
    rates = {i: sum(rollouts.grade(tree.question, a) > 0 for a in found) / k for i, found in zip(asked, answers)}
    if last in steps:
        rates[last] = 1.0 if path[-1].value > 0 else 0.0
    ctx.notes["completed_prefixes"] += len(asked)
    return rates
