"""The scripted two-agent world of the evaluation tests (``helpers_eval_world``) behaves as scripted."""

from __future__ import annotations

from conftest import FakePolicy
from helpers_eval_world import example, make_ctx, respond

# --------------------------------------------------------------------------- the world is as scripted


def test_single_pass_of_the_scripted_world_is_wrong_and_counts_usage():
    from masprm.search.beam import single_pass
    from masprm.search.engine import drive

    policy = FakePolicy(respond)
    ctx = make_ctx("single_pass", policy)
    result = drive(single_pass(ctx, example()), ctx)
    assert result.prediction == "Answer: 5"
    assert result.candidates == ["Answer: 5"]
    # Two agents, one sample each, one policy call each; tokens are words.
    assert policy.calls == [("sample", 1), ("sample", 1)]
    assert ctx.usage.agent_runs == 2
    assert ctx.usage.generated_tokens == len("bad".split()) + len("Answer: 5".split())
    assert ctx.usage.scorer_calls == 0
