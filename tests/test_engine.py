"""The batched search engine: merged model calls, results independent of batching, failures kept apart."""

from __future__ import annotations

import json

import pytest

from conftest import FakePolicy
from masprm.data import Example, LoadedData
from masprm.eval.runner import ModelSpec, run_conditions
from masprm.graph import MASGraph
from masprm.search.engine import CallStats, LogProbs, RequestKeys, Sample, Score, drive, run_batched
from masprm.eval.tree_runner import TreeJob, run_trees
from masprm.search.train_mcts import TreeSearchSettings
from helpers_eval_world import FakeScorer, chain_graph, prefers_good, settings
from helpers_ray import ray_ships

TEAM = MASGraph.from_dict({
    "agents": [{"name": "reader", "system_prompt": "read"}, {"name": "solver", "system_prompt": "solve"}],
    "edges": [[-1, 0], [0, 1]],
})


def random_respond(messages, k, rng):
    """Outputs drawn from the prompt's own stream, so a result shows whether a stream moved."""
    role = messages[0]["content"]
    if role == "read":
        return rng.choice(["numbers 1 and 2", "one plus two", "a sum"])
    if role == "finish":   # the stage-4 chain's second agent
        return "Answer: 7" if "good" in messages[1]["content"] else rng.choice(["Answer: 5", "Answer: 6"])
    return rng.choice(["Answer: 3", "Answer: 4", "unsure", "bad", "good plan"])


def examples(n: int) -> list[Example]:
    return [Example(i, f"What is 1 + 2? (#{i})", "3", {}) for i in range(n)]


def build(tmp_path, batch_size: int, n: int = 6, respond=random_respond, **kw):
    policy = FakePolicy(respond)
    job = TreeJob(TEAM, TreeSearchSettings(n_rollouts=6, n_candidates=3), str(tmp_path), 7, {"dataset": "x"},
                  plot=False, batch_size=batch_size)
    written, failed = run_trees(job, lambda: policy, examples(n), log=lambda m: None, **kw)
    return policy, written, failed


def tree_bytes(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.json"))}


# --------------------------------------------------------------------------- stage 1


def test_requests_of_several_examples_go_into_one_policy_call(tmp_path):
    one, _, _ = build(tmp_path / "b1", 1)
    four, written, failed = build(tmp_path / "b4", 4)
    assert (written, failed) == (6, [])
    assert {n for _, n in one.calls} == {1}                 # one example's expansion per call
    assert four.calls[0] == ("sample", 4)                    # the first expansions of four examples together
    assert max(n for _, n in four.calls) == 4 and len(four.calls) < len(one.calls) / 2
    # the keys name (seed, example, request, prompt): the first call's are four examples' first requests
    assert four.keys[0] == [(7, i, 1, 0) for i in range(4)]
    assert sum(n for _, n in four.calls) == sum(n for _, n in one.calls)   # the same requests, merged


@pytest.mark.parametrize("batch_size", [3, 16])
def test_trees_are_byte_identical_for_any_batch_size(tmp_path, batch_size):
    build(tmp_path / "one", 1)
    build(tmp_path / "many", batch_size)
    one, many = tree_bytes(tmp_path / "one"), tree_bytes(tmp_path / "many")
    assert len(one) == 6 and one == many
    roots = {json.loads(b)["children"][0]["node_text"] for b in one.values()}
    assert len(roots) > 1   # the examples drew differently: the streams are really per example


@pytest.mark.slow
def test_trees_are_byte_identical_with_two_ray_workers(tmp_path):
    pytest.importorskip("ray")
    ray_ships("conftest", __name__)   # FakePolicy and the scripted answers
    build(tmp_path / "one", 1)
    _, written, failed = build(tmp_path / "ray", 4, workers=2, use_ray=True)
    assert (written, failed) == (6, [])
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "ray")


def test_an_example_that_raises_in_a_batch_fails_alone(tmp_path):
    def respond(messages, k, rng):
        if "(#2)" in messages[1]["content"]:
            raise ValueError("example 2 breaks the policy")
        return random_respond(messages, k, rng)

    # example 2's prompt fails the whole call it is in, as a model error would
    _, written, failed = build(tmp_path / "b", 4, respond=respond)
    assert written == 5 and [idx for idx, _ in failed] == [2] and "example 2 breaks" in failed[0][1]
    build(tmp_path / "ref", 1)
    ref = tree_bytes(tmp_path / "ref")
    del ref["2.json"]
    assert tree_bytes(tmp_path / "b") == ref   # the others are exactly what they are without the failure


# --------------------------------------------------------------------------- the engine itself


class Recorder:
    """Models that answer by rule and record each call's size."""

    def __init__(self, fail_on: str | None = None):
        self.calls: list[tuple[str, int]] = []
        self.fail_on = fail_on
        self.last_tokens: list[int] = []   # per-text token counts of the last scoring call
        self.policy = self

    def scorer(self, role):
        return self

    def sample(self, prompts, n, **kw):
        self.calls.append(("sample", len(prompts)))
        if any(p == self.fail_on for p in prompts):
            raise RuntimeError("bad prompt")
        return [[p.upper()] * n for p in prompts]

    def logprob(self, pairs):
        self.calls.append(("logprob", len(pairs)))
        return [-float(len(c)) for _, c in pairs]

    def score_batch(self, texts):
        self.calls.append(("score", len(texts)))
        self.last_tokens = [0] * len(texts)
        return [float(len(t)) for t in texts]


def searcher(name: str, steps: int):
    def search():
        out = []
        for step in range(steps):
            [gens] = yield Sample((f"{name}{step}",), 2, 0.7, 0.95, 8)
            scores = [value for value, _ in (yield Score("masprm", tuple(gens)))]
            [lp] = yield LogProbs(((name, gens[0]),))
            out.append((gens[0], scores[0], lp))
        return out
    return search


def test_slots_refill_as_searches_finish_and_compatible_requests_merge():
    models, stats = Recorder(), CallStats()
    jobs = [(name, searcher(name, steps)) for name, steps in (("a", 1), ("b", 4), ("c", 2))]
    done = list(run_batched(models, jobs, batch_size=2, stats=stats))
    assert [item for item, _, _ in done] == ["a", "c", "b"]   # c took a's slot and finished before b
    assert dict((item, result) for item, result, _ in done)["b"] == [(f"B{i}", 2.0, -2.0) for i in range(4)]
    # round 1: a0 + b0 in one call of each kind; then c0 joins b1, c1 joins b2
    assert models.calls[:3] == [("sample", 2), ("score", 4), ("logprob", 2)]
    assert [c for c in models.calls if c[0] == "sample"] == [("sample", 2)] * 3 + [("sample", 1)]
    assert stats.calls == 12 and stats.by_kind == {"sample": 4, "score": 4, "logprob": 4}
    alone = [drive(searcher(n, s)(), Recorder()) for n, s in (("a", 1), ("b", 4), ("c", 2))]
    assert [dict((i, r) for i, r, _ in done)[n] for n in "abc"] == alone


def test_a_failing_call_is_retried_per_request_so_only_its_search_fails():
    models = Recorder(fail_on="b0")
    done = {item: (result, error) for item, result, error in
            run_batched(models, [(n, searcher(n, 2)) for n in "abc"], batch_size=3)}
    assert done["b"][0] is None and isinstance(done["b"][1], RuntimeError)
    assert done["a"] == ([("A0", 2.0, -2.0), ("A1", 2.0, -2.0)], None)
    assert done["c"] == ([("C0", 2.0, -2.0), ("C1", 2.0, -2.0)], None)
    assert models.calls[:4] == [("sample", 3), ("sample", 1), ("sample", 1), ("sample", 1)]   # then one by one


def test_request_keys_count_the_searchs_own_requests():
    keys = RequestKeys(seed=14, example=3)
    assert keys.next(2) == ((14, 3, 1, 0), (14, 3, 1, 1))
    assert keys.next(1) == ((14, 3, 2, 0),)


# --------------------------------------------------------------------------- stage 4


def stage4(tmp_path, methods, batch_size: int, respond=random_respond) -> dict[str, list[str]]:
    policy, prm = FakePolicy(respond), FakeScorer(prefers_good)
    specs = {"policy": ModelSpec("policy", "fake-policy"), "masprm": ModelSpec("scorer", "fake-prm")}
    s = settings(dataset="chain", split="test", gen_model_id="fake-policy", prm_dir="fake-prm", seed=14,
                 methods=methods, search_batch_size=batch_size, n_simulations=4)
    data = LoadedData([Example(i, f"What is 3 + 4? (#{i})", "7", {}) for i in range(5)], skipped=0)
    conds = run_conditions(methods, s, chain_graph(), data, specs, logs_dir=tmp_path,
                           loader=lambda spec: {"fake-policy": policy, "fake-prm": prm}[spec.model_id],
                           announce=lambda m: None)
    return {c.method: [c.files.log.read_text(), c.files.records.read_text()] for c in conds}, policy


METHODS = ["single_pass", "sbs_prm", "sbs_logprob", "mcts_prm", "mcts_logprob", "voter_prm"]


def test_stage4_logs_are_identical_for_batch_sizes_1_3_16(tmp_path):
    one, policy_one = stage4(tmp_path / "1", METHODS, 1)
    for size in (3, 16):
        many, policy_many = stage4(tmp_path / str(size), METHODS, size)
        assert many == one
    assert max(n for _, n in policy_many.calls) > max(n for _, n in policy_one.calls)


def test_stage4_example_that_raises_is_a_failed_record_the_others_unchanged(tmp_path):
    def respond(messages, k, rng):
        if "(#3)" in messages[1]["content"]:
            raise ValueError("no answer for 3")
        return random_respond(messages, k, rng)

    ref, _ = stage4(tmp_path / "ref", ["sbs_prm"], 1)
    got, _ = stage4(tmp_path / "got", ["sbs_prm"], 16, respond)
    records = [json.loads(line) for line in got["sbs_prm"][1].splitlines()]
    assert [r["index"] for r in records if r["error"]] == [3] and "no answer for 3" in records[3]["error"]
    expected = [json.loads(line) for line in ref["sbs_prm"][1].splitlines()]
    assert [r for r in records if r["index"] != 3] == [r for r in expected if r["index"] != 3]


# --------------------------------------------------------------------------- the Scorer protocol


class ProtocolScorer:
    """Exactly the members of `masprm.interfaces.Scorer`, nothing else: a start token plus one per word."""

    separator = "|"

    def __init__(self):
        self.last_tokens: list[int] = []

    def score_batch(self, texts):
        self.last_tokens = [1 + len(t.split()) for t in texts]
        return [0.5] * len(texts)

    def count_tokens(self, text):
        return len(text.split())


def test_a_scorer_written_to_the_protocol_alone_counts_each_examples_tokens():
    from masprm.interfaces import Scorer
    from masprm.search.context import SearchContext
    from masprm.search.engine import LoadedModels

    declared = set(Scorer.__annotations__) | {n for n in vars(Scorer) if not n.startswith("_")}
    assert {n for n in vars(ProtocolScorer) if not n.startswith("_")} | {"last_tokens"} == declared

    def scoring(ctx, texts):
        return (yield from ctx.score("masprm", texts))

    scorer = ProtocolScorer()
    a = SearchContext(policy=None, graph=None, settings=None, scorers={"masprm": scorer})
    b = SearchContext(policy=None, graph=None, settings=None, scorers={"masprm": scorer})
    jobs = [("a", lambda: scoring(a, ["two words", "x"])), ("b", lambda: scoring(b, ["three more words"]))]
    stats = CallStats()
    done = list(run_batched(LoadedModels(None, {"masprm": scorer}), jobs, batch_size=2, stats=stats))
    assert stats.by_kind == {"score": 1} and stats.rows == 3          # one shared scorer call
    assert [(item, values) for item, values, _ in done] == [("a", [0.5, 0.5]), ("b", [0.5])]
    # by hand: "two words" 1 + 2, "x" 1 + 1; "three more words" 1 + 3
    assert (a.usage.scorer_tokens, a.usage.scorer_calls) == (5, 2)
    assert (b.usage.scorer_tokens, b.usage.scorer_calls) == (4, 1)
    alone = SearchContext(policy=None, graph=None, settings=None, scorers={"masprm": scorer})
    assert drive(scoring(alone, ["two words", "x"]), alone) == [0.5, 0.5]
    assert (alone.usage.scorer_tokens, alone.usage.scorer_calls) == (5, 2)
