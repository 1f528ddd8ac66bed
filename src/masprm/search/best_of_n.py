"""Best-of-N (bon_*): N complete transcripts, every step scored, the best aggregate first.

The N transcripts are the voters' single passes (`masprm.search.samples`):
one pass through the team each, advanced together, each prompt on its own
random stream, so at one seed every scorer ranks the same N transcripts (and
a store of them lets the conditions share one sampling). A scorer kind gives
each step of each transcript its value (``ScorerKind.steps``), and
``--step_agg`` makes one score of them (`aggregate_steps`): ``min`` (the
weakest step), ``prod`` (the product, summed in log space as the voters do),
``mean``, or ``last`` (the value of the finished transcript: the classic
outcome reranker). With ``last`` only the last step is scored, as nothing
else is read.

Transcripts are ranked by score, best first (the pass@k candidates). Ties
are broken as the voters break them: the transcript whose answer more
transcripts share, then the shorter answer (its group's first member's),
then the earlier answer group, then the earlier transcript.
Pure Python: no torch import.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

from masprm.search.context import SearchContext, SearchResult
from masprm.search.expand import SearchStep
from masprm.search.samples import sample_passes
from masprm.search.scorer_kinds import SCORER_KINDS, aggregate_steps
from masprm.search.vote import group_answers


def rank_transcripts(answers: Sequence[str], scores: Sequence[float]) -> list[int]:
    """Transcript indices, best first: by score, then the voters' tie rules (see the module docstring)."""
    groups = group_answers(answers)
    group_of = {i: g for g, members in enumerate(groups) for i in members}

    def key(i: int) -> tuple:
        g = group_of[i]
        return (scores[i], len(groups[g]), -len(answers[groups[g][0]]), -g, -i)

    return sorted(range(len(answers)), key=key, reverse=True)


def best_of_n(ctx: SearchContext, example: Any, kind: str) -> SearchStep:
    s = ctx.settings
    runs = yield from sample_passes(ctx, example, s.bon_n)
    scorer = SCORER_KINDS[kind]
    scored = [replace(b, trail=b.trail[-1:]) for b in runs] if s.step_agg == "last" else runs
    values = yield from scorer.steps(ctx, scored)
    scores = [aggregate_steps(v, s.step_agg, scorer.log_prob) for v in values]
    answers = [b.state.final_answer() for b in runs]
    order = rank_transcripts(answers, scores)
    return SearchResult(answers[order[0]], [answers[i] for i in order],
                        {"bon_scores": [scores[i] for i in order], "answer_groups": len(group_answers(answers)),
                         "pool": {"answers": answers,   # for the pool metrics; JSON has no -inf: None
                                  "scores": [v if math.isfinite(v) else None for v in scores]}})
