"""Voters (voter_*): k independent single passes, answers grouped and weighted.

The k runs advance together (one policy call per agent; `masprm.search.samples`);
a scorer kind gives each run a log-weight and the heaviest group of equal
answers wins.
Pure Python: no torch import.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from masprm.answers import answers_equal
from masprm.search.context import SearchContext, SearchResult
from masprm.search.expand import SearchStep
from masprm.search.samples import sample_passes
from masprm.search.scorer_kinds import SCORER_KINDS


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def group_answers(answers: Sequence[str], same: Callable[[str, str], bool] = answers_equal) -> list[list[int]]:
    """Run indices grouped by `same` against each group's first member, groups in order of first appearance."""
    groups: list[list[int]] = []
    for i, answer in enumerate(answers):
        for group in groups:
            if same(answer, answers[group[0]]):
                group.append(i)
                break
        else:
            groups.append([i])
    return groups


def vote(answers: Sequence[str], log_weights: Sequence[float],
         same: Callable[[str, str], bool] = answers_equal) -> tuple[int, list[list[int]]]:
    """Index of the winning answer, and the groups (lists of run indices).

    Answers are grouped by `same` against each group's first member. The
    group with the largest total weight wins; ties go to the larger group,
    then the shorter representative (the group's first member, as in the
    original), then the earlier group. The prediction is the winning group's
    shortest member.
    """
    groups = group_answers(answers, same)

    def shortest(group: list[int]) -> int:
        return min(group, key=lambda i: (len(answers[i]), i))

    def rank(g: int) -> tuple:
        group = groups[g]
        return (_logsumexp([log_weights[i] for i in group]), len(group), -len(answers[group[0]]), -g)

    best = max(range(len(groups)), key=rank)
    return shortest(groups[best]), groups


def voter_family(ctx: SearchContext, example: Any, kind: str) -> SearchStep:
    runs = yield from sample_passes(ctx, example, ctx.settings.voter_k)
    answers = [b.state.final_answer() for b in runs]
    weights = yield from SCORER_KINDS[kind].weight(ctx, runs)
    winner, groups = vote(answers, weights)
    # the pool and its weights, for the pool metrics (masprm.eval.pool_metrics)
    pool = {"pool": {"answers": answers, "scores": [w if math.isfinite(w) else None for w in weights]}}
    return SearchResult(answers[winner], answers, {"answer_groups": len(groups), **pool})
