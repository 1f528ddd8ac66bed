"""Ranking a turn's proposals: policy log-prob or the handoff PRM.

The PRM sees the whole routed transcript, ``question + Σ(rendered turn + SEP)``
with the candidate as the newest turn. When that is longer than the context
budget, whole turns are dropped oldest first; when even the question and the
newest turn do not fit, the start of the question and the end of the newest
turn are kept (the end holds the candidate's answer and the separator the
score is read at). Pure Python: tokens are counted by a callable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generator, Sequence

from masprm.handoff.protocol import RoutedTurn
from masprm.handoff.team import HandoffRun, Proposal, Selector
from masprm.search.expand import LOGPROB_AGGS, aggregate_logprob
from masprm.state_text import DEFAULT_SEPARATOR

TokenCounter = Callable[[str], int]
ProposalScoring = Generator[Any, Any, list[float]]   # yields model requests (masprm.search.engine)
# A proposal is one step, so avg_step would only repeat sum: the handoff offers the other two.
TURN_LOGPROB_AGGS = tuple(a for a in LOGPROB_AGGS if a != "avg_step")


@dataclass(frozen=True)
class PRMText:
    text: str
    tokens: int            # tokens of ``text``
    full_tokens: int       # tokens of the untruncated transcript
    truncated: bool


def _longest(fits: Callable[[int], bool], n: int) -> int:
    """The largest k in 0..n with fits(k), for a fits that holds up to some k and fails after."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def prm_text(question: str, turns: Sequence[RoutedTurn], *, count_tokens: TokenCounter, limit: int,
             sep: str = DEFAULT_SEPARATOR) -> PRMText:
    """The transcript the handoff PRM scores, cut to at most ``limit`` tokens."""
    pieces = [t.render() + sep for t in turns]
    full = question + "".join(pieces)
    full_tokens = count_tokens(full)
    if full_tokens <= limit:
        return PRMText(full, full_tokens, full_tokens, False)
    for start in range(1, len(pieces)):                      # drop the oldest whole turns
        text = question + "".join(pieces[start:])
        n = count_tokens(text)
        if n <= limit:
            return PRMText(text, n, full_tokens, True)
    newest = pieces[-1] if pieces else ""
    # Even question + newest turn is too long: the question keeps its start within
    # what the newest turn leaves, but at least half the budget if it needs it.
    q_budget = min(count_tokens(question), max(limit // 2, limit - count_tokens(newest)))
    head = question[:_longest(lambda k: count_tokens(question[:k]) <= q_budget, len(question))]
    keep = _longest(lambda k: count_tokens(head + newest[len(newest) - k:]) <= limit, len(newest))
    # Token counts are not exactly monotone in the cut point: shrink until it truly fits.
    while keep and count_tokens(head + newest[len(newest) - keep:]) > limit:
        keep -= 1
    while head and count_tokens(head + newest[len(newest) - keep:]) > limit:
        head = head[:-1]
    text = head + newest[len(newest) - keep:]
    return PRMText(text, count_tokens(text), full_tokens, True)


def prm_selector(ctx: Any, limit: int) -> Selector:
    """Score each proposal as the newest turn of the full transcript with the handoff PRM.

    ``limit`` is --prm_context_length, used as given: the handoff scorer is
    loaded with that maximum length (as the original loads it), so the cut made
    here is the only one. A turn's proposals are one batched PRM call.
    """
    scorer = ctx.scorer("handoff_masprm")

    def select(run: HandoffRun, proposals: list[Proposal]) -> ProposalScoring:
        texts = [prm_text(run.question, [*run.turns, p.turn], count_tokens=scorer.count_tokens, limit=limit,
                          sep=scorer.separator)
                 for p in proposals]
        run.scored.extend({"tokens": t.tokens, "full_tokens": t.full_tokens, "truncated": t.truncated}
                          for t in texts)
        return (yield from ctx.score("handoff_masprm", [t.text for t in texts], batched=True))

    return select


def logprob_selector(ctx: Any, agg: str) -> Selector:
    """Score each proposal by the policy's log-prob of its raw text given the speaker's prompt."""
    if agg not in TURN_LOGPROB_AGGS:
        raise ValueError(f"unknown log-prob aggregation {agg!r} (expected one of {', '.join(TURN_LOGPROB_AGGS)})")

    def select(run: HandoffRun, proposals: list[Proposal]) -> ProposalScoring:
        lps = yield from ctx.logprob([(p.messages, p.text) for p in proposals])
        return [aggregate_logprob([lp], agg) for lp in lps]

    return select
