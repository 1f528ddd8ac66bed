"""Best-of-N: N passes, every step scored, aggregated (min, prod, mean, last), ranked; shared samples."""

from __future__ import annotations

import json
import math

import pytest

from conftest import FakePolicy
from helpers_eval_world import (QUESTION, FakeScorer, chain_graph, make_ctx, prefers_good, run_method, scripted_solver,
                                settings)
from masprm.data import Example, LoadedData
from masprm.eval.runner import ModelSpec, label_of, run_conditions
from masprm.search.best_of_n import rank_transcripts
from masprm.search.scorer_kinds import aggregate_steps

SEP = "</step>"
# Four transcripts (Solver -> Finisher): the Solver says a, b, c or d, the Finisher answers 1, 2, 3 or 4.
ANSWER = {"a": "Answer: 1", "b": "Answer: 2", "c": "Answer: 3", "d": "Answer: 4"}
# The scorer's value of the state after each step, per transcript: every aggregate picks another one.
VALUES = {"a": (1.0, -0.25), "b": (0.5, 0.125), "c": (-0.5, 0.875), "d": (0.25, 0.25)}
#           min     mean     last    prod of (v + 1) / 2
# a       -0.25    0.375   -0.25    1.0   * 0.375  = 0.375
# b        0.125   0.3125   0.125   0.75  * 0.5625 = 0.421875
# c       -0.5     0.1875   0.875   0.25  * 0.9375 = 0.234375
# d        0.25    0.25     0.25    0.625 * 0.625  = 0.390625
RANKED = {"min": "dbac", "mean": "abdc", "last": "cdba", "prod": "bdac"}


def step_value(text: str) -> float:
    """The value of a full state text: which Solver output it holds and how many steps."""
    steps = text[len(QUESTION):].split(SEP)[:-1]
    return VALUES[steps[0]][len(steps) - 1]


def chain_policy():
    """The Solver says a, b, c, d in turn; the Finisher answers after it."""
    solver = scripted_solver(list("abcd"))
    return FakePolicy(lambda messages, k, rng: solver(messages, k, rng) if messages[0]["content"] == "solve"
                      else ANSWER[messages[1]["content"]])


@pytest.mark.parametrize("agg", ["min", "mean", "last", "prod"])
def test_bon_ranks_by_the_hand_computed_aggregate(agg):
    for method, role in (("bon_prm", "masprm"), ("bon_orm", "orm")):
        scorer = FakeScorer(step_value)
        ctx = make_ctx(method, chain_policy(), **{role: scorer}, bon_n=4, step_agg=agg)
        result = run_method(method, ctx)
        assert result.candidates == [ANSWER[t] for t in RANKED[agg]]
        assert result.prediction == ANSWER[RANKED[agg][0]]
        if agg == "last":   # only the finished transcripts are read: the classic outcome reranker
            assert len(scorer.texts) == 4 and all(t.count(SEP) == 2 for t in scorer.texts)
        else:               # every step of every transcript, in one forward
            assert scorer.batches == [8]
    expected = {"min": [0.25, 0.125, -0.25, -0.5], "mean": [0.375, 0.3125, 0.25, 0.1875],
                "last": [0.875, 0.25, 0.125, -0.25],
                "prod": [math.log(x) for x in (0.421875, 0.390625, 0.375, 0.234375)]}[agg]
    assert result.extra["bon_scores"] == pytest.approx(expected)


def test_bon_logprob_sums_step_logprobs_for_prod_and_reads_them_as_they_are():
    # The fake policy's log-prob of a step is -len(text): a Solver step -1, a Finisher step -9.
    logprobs = {"a": -1.0, "b": -3.0, "c": -2.0, "d": -4.0, **{v: -9.0 for v in ANSWER.values()}}
    p = chain_policy()
    p.score = lambda messages, completion: logprobs[completion]
    ctx = make_ctx("bon_logprob", p, bon_n=4, step_agg="prod")
    result = run_method("bon_logprob", ctx)
    assert result.extra["bon_scores"] == [-10.0, -11.0, -12.0, -13.0]   # a sum of log-probs, no rescaling
    assert result.candidates == [ANSWER[t] for t in "acbd"]
    p = chain_policy()
    p.score = lambda messages, completion: logprobs[completion]
    ctx = make_ctx("bon_logprob", p, bon_n=4, step_agg="min")
    assert run_method("bon_logprob", ctx).extra["bon_scores"] == [-9.0] * 4


def test_aggregates_of_no_steps_rank_last_and_unknown_names_fail():
    assert aggregate_steps([], "min") == -math.inf
    assert aggregate_steps([0.5, -1.0], "prod") == pytest.approx(math.log(0.75) + math.log(1e-6))   # floor 1e-6
    with pytest.raises(ValueError, match="min, prod, mean, last"):
        aggregate_steps([0.5], "max")


def test_ties_are_broken_as_the_voters_break_them():
    # Equal scores: the answer more transcripts share (7, twice) first, its earlier transcript first.
    assert rank_transcripts(["Answer: 5", "Answer: 7", "Answer: 7"], [0.0, 0.0, 0.0]) == [1, 2, 0]
    # Equal scores and group sizes: the shorter answer, then the earlier group.
    assert rank_transcripts(["the answer is 5", "Answer: 7"], [0.1, 0.1]) == [1, 0]
    assert rank_transcripts(["Answer: 4", "Answer: 3"], [0.1, 0.1]) == [0, 1]
    # A higher score beats every tie rule.
    assert rank_transcripts(["Answer: 5", "Answer: 7", "Answer: 7"], [0.2, 0.0, 0.0]) == [0, 1, 2]
    # End to end: a scorer that values every state the same leaves the majority answer first.
    ctx = make_ctx("bon_prm", FakePolicy(scripted_solver(["bad", "good plan", "good plan"])),
                   masprm=FakeScorer(lambda t: 0.5), bon_n=3)
    assert run_method("bon_prm", ctx).prediction == "Answer: 7"


def test_settings_enter_the_fingerprint_and_the_label():
    s = settings(bon_n=8, step_agg="last", prm_dir="ckpt/toy-lab-mc-prm")
    assert label_of("bon_prm", s) == "Best-of-N + PRM (N=8, agg=last) [prm: toy-lab-mc-prm]"
    assert label_of("bon_logprob", settings(logprob_agg="avg_token")) == \
        "Best-of-N + logprob (avg-token, N=8, agg=min)"
    assert label_of("bon_orm", s) == "Best-of-N + ORM (N=8, agg=last)"


# --------------------------------------------------------------------------- shared samples, through the runner

SPECS = {"policy": ModelSpec("policy", "fake-policy"), "masprm": ModelSpec("scorer", "fake-prm"),
         "orm": ModelSpec("scorer", "fake-orm")}


def random_solver(messages, k, rng):
    """The Solver's text comes from the prompt's own random stream: equal keys, equal samples."""
    if messages[0]["content"] == "solve":
        return rng.choice(["bad", "good plan", "good idea", "bad again"])
    return "Answer: 7" if "good" in messages[1]["content"] else "Answer: 5"


class World:
    def __init__(self):
        self.policy = FakePolicy(random_solver)
        self.asked: list[str] = []     # the completions the log-prob was asked about
        self.policy.score = lambda messages, completion: self.asked.append(completion) or -float(len(completion))
        self.prm, self.orm = FakeScorer(lambda t: 0.5 if "good" in t else -0.5), FakeScorer(lambda t: 0.0)

    def loader(self, spec):
        return {"fake-policy": self.policy, "fake-prm": self.prm, "fake-orm": self.orm}[spec.model_id]

    def run(self, logs, methods, **overrides):
        s = settings(**{"dataset": "chain", "split": "test", "gen_model_id": "fake-policy", "prm_dir": "fake-prm",
                        "orm_dir": "fake-orm", "seed": 14, "bon_n": 4, "methods": methods, **overrides})
        data = LoadedData([Example(i, f"What is 3 + 4? (#{i})", "7", {}) for i in range(3)], skipped=0)
        return run_conditions(methods, s, chain_graph(), data, SPECS, logs_dir=logs, loader=self.loader,
                              announce=lambda m: None)


def sampled(world) -> int:
    """Prompts the policy sampled for."""
    return sum(n for kind, n in world.policy.calls if kind == "sample")


def records(cond) -> list[dict]:
    return [json.loads(line) for line in cond.files.records.read_text().splitlines()]


def test_every_scorer_ranks_the_same_samples_and_the_store_changes_no_result(tmp_path):
    # Each condition in its own world and logs folder: nothing shared but the seed.
    alone = {m: World() for m in ("bon_prm", "bon_orm", "bon_logprob")}
    conds = {m: w.run(tmp_path / m, [m])[0] for m, w in alone.items()}
    # The same transcripts are scored: the PRM and the ORM read the same prefix states, the log-prob
    # is asked about the same steps.
    texts = alone["bon_prm"].prm.texts
    assert texts == alone["bon_orm"].orm.texts and len(texts) == 3 * 4 * 2   # 3 questions x 4 passes x 2 steps
    # the step a prefix ends with: "What is 3 + 4? (#0)bad</step>" -> "bad"
    assert alone["bon_logprob"].asked == [t.split(SEP)[-2].split(")", 1)[-1] for t in texts]
    assert alone["bon_prm"].policy.keys == alone["bon_orm"].policy.keys == alone["bon_logprob"].policy.keys
    generated = {m: [r["extra"]["generated_answers"] for r in records(c)] for m, c in conds.items()}
    assert generated["bon_prm"] == generated["bon_orm"] == generated["bon_logprob"]

    # One folder: the first condition samples and stores, the others read the passes back.
    shared = World()
    together = {c.method: c for c in shared.run(tmp_path / "shared", ["bon_prm", "bon_orm", "bon_logprob"])}
    assert sampled(shared) == 3 * 4 * 2   # 3 questions x 4 passes x 2 agents, once
    stored = sorted((tmp_path / "shared" / "sampled_passes").rglob("*.json"))
    assert len(stored) == 3
    for method, cond in conds.items():
        assert records(together[method]) == records(cond)   # usage included: reused samples count as sampled

    # Another seed is another key: sampled afresh.
    other = World()
    other.run(tmp_path / "shared", ["bon_prm"], seed=24)
    assert sampled(other) == 3 * 4 * 2


def test_a_damaged_or_foreign_store_file_is_sampled_again(tmp_path):
    first = World().run(tmp_path, ["bon_prm"])[0]
    stored = sorted((tmp_path / "sampled_passes").rglob("0.json"))
    stored[0].write_text("{")
    other = sorted((tmp_path / "sampled_passes").rglob("1.json"))
    entry = json.loads(other[0].read_text())
    entry["key"]["question"] = "another question"
    other[0].write_text(json.dumps(entry))
    world = World()
    again = world.run(tmp_path, ["bon_orm"])[0]
    assert sampled(world) == 2 * 4 * 2   # examples 0 and 1 sampled again, example 2 read back
    assert [r["extra"]["generated_answers"] for r in records(again)] == \
        [r["extra"]["generated_answers"] for r in records(first)]


def test_usage_is_counted_as_for_the_voters():
    # 5 passes of 2 agents: 10 agent runs whatever the scorer; the PRM reads every step (10 calls) under min
    # and only the finished transcripts (5) under last; the log-prob is scorer tokens, no scorer call.
    pattern = ["bad", "good plan", "bad", "bad", "good plan"]
    runs = {}
    for agg in ("min", "last"):
        ctx = make_ctx("bon_prm", FakePolicy(scripted_solver(pattern)), masprm=FakeScorer(prefers_good), bon_n=5,
                       step_agg=agg)
        run_method("bon_prm", ctx)
        runs[agg] = ctx.usage
    assert runs["min"].agent_runs == runs["last"].agent_runs == 10
    assert (runs["min"].scorer_calls, runs["last"].scorer_calls) == (10, 5)
    voter = make_ctx("voter_prm", FakePolicy(scripted_solver(pattern)), masprm=FakeScorer(prefers_good), voter_k=5)
    run_method("voter_prm", voter)
    assert voter.usage == runs["min"]   # the same passes, every step read: the voter's cost exactly
    ctx = make_ctx("bon_logprob", FakePolicy(scripted_solver(pattern)), bon_n=5)
    run_method("bon_logprob", ctx)
    solver = 5 * 6 + (1 + 2 + 1 + 1 + 2)          # prompt + completion tokens of each scored step
    finisher = 3 * (2 + 2) + 2 * (3 + 2)
    assert ctx.usage.scorer_tokens == solver + finisher and ctx.usage.scorer_calls == 0


def test_n_and_the_aggregation_define_the_condition(tmp_path):
    names = {(n, agg): World().run(tmp_path, ["bon_prm"], bon_n=n, step_agg=agg)[0].files.log.name
             for n, agg in ((4, "min"), (4, "last"), (2, "min"))}
    assert len(set(names.values())) == 3                       # each its own fingerprint
    again = World().run(tmp_path, ["bon_prm"], bon_n=4, step_agg="min", b1=7)[0]
    assert again.reused and again.files.log.name == names[(4, "min")]   # SBS settings do not define it
