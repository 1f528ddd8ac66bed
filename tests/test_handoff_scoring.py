"""Ranking proposals: the handoff PRM's truncated transcript and policy log-prob aggregation."""

import random
from types import SimpleNamespace

import pytest

from helpers_eval_world import FakeScorer

from masprm.search.context import SearchContext
from masprm.graph import MASGraph
from masprm.search.engine import drive
from masprm.handoff.protocol import FINAL, RoutedTurn
from masprm.handoff.scoring import logprob_selector, prm_selector, prm_text
from masprm.handoff.team import HandoffRun, Proposal
from masprm.interfaces import LogProb

SEP = "</step>"
words = lambda text: len(text.split())


def turns(n, words_per_message=10):
    return [RoutedTurn(f"R{i}", f"R{i + 1}", " ".join([f"m{i}"] * words_per_message), f"A{i}")
            for i in range(n)]


def test_transcript_is_question_then_rendered_turns_each_followed_by_the_separator():
    ts = turns(2, 2)
    out = prm_text("Q?", ts, count_tokens=words, limit=10_000, sep=SEP)
    assert out.text == "Q?" + ts[0].render() + SEP + ts[1].render() + SEP
    assert not out.truncated and out.tokens == out.full_tokens == words(out.text)


def test_oldest_whole_turns_are_dropped_first():
    question = "Q " * 20
    ts = turns(5)
    pieces = [t.render() + SEP for t in ts]
    limit = words(question + "".join(pieces[2:]))          # room for the three newest turns exactly
    out = prm_text(question, ts, count_tokens=words, limit=limit, sep=SEP)
    assert out.truncated and out.text == question + "".join(pieces[2:])
    assert out.tokens == limit < out.full_tokens
    out = prm_text(question, ts, count_tokens=words, limit=limit - 1, sep=SEP)
    assert out.text == question + "".join(pieces[3:])


@pytest.mark.parametrize("limit", [5, 12, 25, 40, 59])
def test_when_even_the_newest_turn_does_not_fit_keep_question_start_and_newest_end(limit):
    question = " ".join(f"q{i}" for i in range(40))
    ts = turns(3, words_per_message=40)
    newest = ts[-1].render() + SEP
    assert words(question) + words(newest) > 59
    out = prm_text(question, ts, count_tokens=words, limit=limit, sep=SEP)
    assert out.truncated and out.tokens <= limit and words(out.text) == out.tokens
    assert out.text.startswith("q0 q1")                   # the question's start survives
    assert out.text.endswith("CURRENT_ANSWER: A2" + SEP)  # the newest turn's end survives
    assert "m1" not in out.text and "m0" not in out.text  # older turns are gone
    assert out.tokens >= limit - 2                        # and the budget is used, not wasted


def test_truncation_never_exceeds_the_limit_with_a_character_counter():
    question = "Find the sum of all integers n such that n^2 < 50."
    ts = turns(6, words_per_message=7)
    for limit in range(1, 600, 7):
        out = prm_text(question, ts, count_tokens=len, limit=limit, sep=SEP)
        assert len(out.text) <= limit
        if limit >= 40:
            assert out.text.startswith("Find the") and out.text.endswith(SEP)


def newest_turn_good(text):
    """A transcript's value: whether its newest turn carries GOOD."""
    return 1.0 if "GOOD" in text.rsplit("SPEAKER:", 1)[-1] else -1.0


def make_ctx(scorer=None, policy=None):
    graph = MASGraph.from_dict({"agents": [{"name": "A"}, {"name": "B"}], "handoff": {"initial_role": "A"}})
    return SearchContext(policy=policy, graph=graph, settings=SimpleNamespace(), scorers={"handoff_masprm": scorer},
                       rng=random.Random(0))


def test_prm_selector_scores_the_whole_transcript_plus_each_candidate_in_one_batch():
    scorer = FakeScorer(newest_turn_good)
    ctx = make_ctx(scorer)
    run = HandoffRun("Q?", turns=[RoutedTurn("A", "B", "first", "1")])
    props = [Proposal(RoutedTurn("B", "A", msg, "2"), "raw", []) for msg in ("meh", "GOOD", "bad")]
    scores = drive(prm_selector(ctx, limit=1000)(run, props), ctx)
    assert scores == [-1.0, 1.0, -1.0]
    assert len(scorer.calls) == 1
    assert scorer.calls[0][1] == "Q?" + run.turns[0].render() + SEP + props[1].turn.render() + SEP
    # one PRM call for the turn's batch (the original's count), three evaluations
    assert ctx.usage.scorer_calls == 1 and ctx.usage.scorer_tokens == scorer.tokens_seen
    assert [s["truncated"] for s in run.scored] == [False] * 3
    drive(prm_selector(ctx, limit=10)(run, props[:1]), ctx)           # 15 words: the first turn is dropped
    assert run.scored[-1]["truncated"] and run.scored[-1]["tokens"] == 8
    assert "first" not in scorer.calls[-1][0]


def test_the_budget_is_the_flag_never_the_scorers_training_length():
    # the original loads the handoff scorer with max_length = --prm_context_length: no silent cap
    scorer = FakeScorer(newest_turn_good)
    scorer.max_length = 10
    run = HandoffRun("Q?", turns=[RoutedTurn("A", "B", "first", "1")])
    ctx = make_ctx(scorer)
    drive(prm_selector(ctx, limit=1000)(run, [Proposal(RoutedTurn("B", "A", "x", "2"), "raw", [])]), ctx)
    assert not run.scored[0]["truncated"] and run.scored[0]["tokens"] == 15 and "first" in scorer.calls[0][0]


def test_prm_selector_needs_a_scorer():
    with pytest.raises(RuntimeError, match="needs a handoff_masprm scorer"):
        prm_selector(make_ctx(None), limit=10)


def test_logprob_aggregation_sum_versus_average_per_token():
    class Policy:
        def logprob(self, requests):
            # proposal 0: -6 over 6 tokens (avg -1); proposal 1: -4 over 2 tokens (avg -2)
            return [LogProb(-6.0, 5, 6), LogProb(-4.0, 5, 2)][:len(requests)]
    ctx = make_ctx(policy=Policy())
    props = [Proposal(RoutedTurn("A", FINAL, "m", "1"), "t", []) for _ in range(2)]
    assert drive(logprob_selector(ctx, "avg_token")(HandoffRun("Q"), props), ctx) == [-1.0, -2.0]
    assert drive(logprob_selector(ctx, "sum")(HandoffRun("Q"), props), ctx) == [-6.0, -4.0]
    with pytest.raises(ValueError):
        logprob_selector(ctx, "avg_step")
