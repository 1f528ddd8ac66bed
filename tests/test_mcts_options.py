"""Inference MCTS's opt-in options: --distinct_tries (sample again until distinct) and progressive
widening (--pw_k, --pw_alpha, --pw_max_children). Off, the trees are the original's, exactly."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from conftest import FakePolicy
from helpers_eval_world import FakeScorer, chain_graph, make_ctx, settings
from helpers_stage1_jobs import BRANCHY
from masprm.data import Example
from masprm.errors import ConfigError, MasprmError
from masprm.eval.methods import METHODS
from masprm.search import mcts
from masprm.search.context import SearchContext
from masprm.search.engine import RequestKeys, drive
from masprm.search.node import progressive_widening
from masprm.search.settings import MCTSSettings


def solver_in_order(texts):
    """A respond() whose Solver samples are `texts` in order, call after call; the Finisher says "Answer: 7"."""
    stream = iter(texts)

    def respond(messages, k, rng):
        return next(stream) if messages[0]["content"] == "solve" else "Answer: 7"
    return respond


def numbered_plans():
    """A fresh Solver text at every sample ("plan 1", "plan 2", ...); the Finisher is always the same."""
    return solver_in_order(f"plan {i}" for i in range(1, 100))


def prompt_words(state, agent):
    return sum(len(m["content"].split()) for m in state.messages(agent))


def tree(ctx):
    return drive(mcts.search_tree(ctx, "What is 3 + 4?", step_scorer="masprm", leaf_value="masprm"), ctx)


# --------------------------------------------------------------------------- --distinct_tries


def test_distinct_tries_samples_the_missing_children_again_and_counts_every_sample():
    # The Solver gives "plan A" twice, then "plan B": the first draw of 2 holds one distinct text, the second
    # draw (1 sample, the number missing) completes the 2 children. The simulation goes on into a child,
    # whose Finisher samples are always "Answer: 7": 2, then 1 and 1 more (both tries spent), one child.
    respond = solver_in_order(["plan A", "plan A", "plan B"])
    policy = FakePolicy(respond)
    ctx = make_ctx("mcts_prm", policy, masprm=FakeScorer(lambda t: 0.0), max_children=2, distinct_tries=2,
                   n_simulations=1)
    root = tree(ctx)
    assert [c.text for c in root.children] == ["plan A", "plan B"]
    entered = next(c for c in root.children if c.children)
    assert [c.text for c in entered.children] == ["Answer: 7"]
    assert policy.calls == [("sample", 1)] * 5                      # 2 Solver draws, 3 Finisher draws
    assert ctx.usage.agent_runs == 3 + 4
    assert ctx.usage.generated_tokens == 3 * 2 + 4 * 2                 # two words per text
    assert ctx.usage.prompt_tokens == 2 * prompt_words(root.state, 0) + 3 * prompt_words(entered.state, 1)


def test_without_distinct_tries_identical_samples_merge_as_in_the_original():
    policy = FakePolicy(solver_in_order(["plan A", "plan A", "plan B"]))
    ctx = make_ctx("mcts_prm", policy, masprm=FakeScorer(lambda t: 0.0), max_children=2, n_simulations=1)
    root = tree(ctx)
    assert [c.text for c in root.children] == ["plan A"]
    assert ctx.usage.agent_runs == 2 + 2 and policy.calls == [("sample", 1)] * 2


def test_distinct_tries_stop_when_the_policy_returns_nothing():
    class Silent(FakePolicy):
        def sample(self, prompts, n, **kw):
            self.calls.append(("sample", len(prompts)))
            return [[] for _ in prompts]

    policy = Silent(lambda m, k, r: "")
    ctx = make_ctx("mcts_prm", policy, masprm=FakeScorer(lambda t: 0.0), distinct_tries=5, n_simulations=1)
    root = tree(ctx)
    assert root.children == [] and policy.calls == [("sample", 1)]     # a dead end, asked once


# --------------------------------------------------------------------------- progressive widening


def test_the_widening_rule_by_hand():
    # k = 1, alpha = 0.5: a node with 1 child gains a second at 2 visits (sqrt 2 = 1.41 > 1), not at 1;
    # a third at 5 (2.24 > 2), not at 4 (2 = 2); a fourth at 10 (3.16 > 3), not at 9
    assert [progressive_widening(1, n, 1.0, 0.5, None) for n in (0, 1, 2)] == [False, False, True]
    assert [progressive_widening(2, n, 1.0, 0.5, None) for n in (4, 5)] == [False, True]
    assert [progressive_widening(3, n, 1.0, 0.5, None) for n in (9, 10)] == [False, True]
    assert not progressive_widening(3, 10, 1.0, 0.5, 3)                   # the cap holds
    assert progressive_widening(3, 3, 2.0, 0.5, None) and not progressive_widening(3, 2, 2.0, 0.5, None)  # 3.46, 2.83


def widened(n_simulations, **overrides):
    policy = FakePolicy(numbered_plans())
    ctx = make_ctx("mcts_prm", policy, masprm=FakeScorer(lambda t: -0.5), max_children=1, pw_k=1.0, pw_alpha=0.5,
                   c_uct=2.0, n_simulations=n_simulations, **overrides)
    return tree(ctx), ctx


def test_progressive_widening_adds_a_child_at_the_visits_the_formula_says():
    # max_children 1 is the first expansion's width. Every value is -0.5 (the scorer's), so UCT prefers the
    # less visited child, the first stored on a tie. The root has N = s - 1 visits when simulation s passes:
    # s=3 (N=2) adds plan 2; s=4 (N=3, 2 < 1.73 no) visits it; s=5 (N=4, 2 < 2 no) goes into plan 1 (2 visits
    # each, a tie), where 2 visits allow a second child: its Finisher sample repeats "Answer: 7", nothing added;
    # s=6 (N=5, 2 < 2.24) adds plan 3.
    children = {s: [c.text for c in widened(s)[0].children] for s in range(1, 7)}
    assert children == {1: ["plan 1"], 2: ["plan 1"], 3: ["plan 1", "plan 2"], 4: ["plan 1", "plan 2"],
                        5: ["plan 1", "plan 2"], 6: ["plan 1", "plan 2", "plan 3"]}
    root, ctx = widened(6)
    assert [c.visits for c in root.children] == [3, 2, 1]
    assert [len(c.children) for c in root.children] == [1, 1, 1]
    # 3 Solver samples, 4 Finisher samples (one of them the repeat at plan 1, counted though merged)
    assert ctx.usage.agent_runs == 3 + 4
    # a new child starts as every new child does: its step score as one visit
    assert all((c.init_value, c.init_visits, c.info["score"]) == (-0.5, 1, -0.5) for c in root.children)
    assert [c.info["prior"] for c in root.children] == [pytest.approx(1 / 3)] * 3


def test_widening_samples_with_distinct_tries_and_stops_at_the_cap():
    # As above, with one more try: plan 1's repeat at s=5 is sampled twice.
    assert widened(6, distinct_tries=1)[1].usage.agent_runs == 3 + 5
    # capped at 2 children, s=6 adds nothing: the root keeps plan 1 and plan 2, and no sample is drawn for it
    root, ctx = widened(6, pw_max_children=2)
    assert [c.text for c in root.children] == ["plan 1", "plan 2"] and ctx.usage.agent_runs == 2 + 4


def test_puct_priors_are_taken_again_over_all_children_when_one_joins():
    # the fake log-prob is -len(text) over its words: "go" -2/1, "a b c d" -7/4
    policy = FakePolicy(solver_in_order(["go", "a b c d"]))
    ctx = make_ctx("mcts_prm", policy, masprm=FakeScorer(lambda t: 0.0), uct_type="puct", max_children=1,
                   pw_k=1.0, n_simulations=1)
    guide = mcts.ScorerGuide(ctx, "masprm", "masprm")
    root = mcts.Node(ctx.graph.start("q"), init_visits=1)
    drive(guide.expand(root), ctx)
    assert root.children[0].info["prior"] == 1.0
    root.visits = 2                                       # sqrt(2) > 1 child: room for one more
    [new] = drive(guide.widen(root), ctx)
    assert new.text == "a b c d"
    z = math.exp(-2.0) + math.exp(-1.75)
    assert [c.info["prior"] for c in root.children] == [pytest.approx(math.exp(-2.0) / z),
                                                        pytest.approx(math.exp(-1.75) / z)]
    root.visits = 3                                       # 2 children >= sqrt(3): nothing sampled
    assert drive(guide.widen(root), ctx) == [] and policy.calls.count(("sample", 1)) == 2


# --------------------------------------------------------------------------- off: the original's trees


def _random_team(messages, k, rng):
    role = messages[0]["content"]
    if role == "solve":
        return rng.choice(["Answer: 3", "Answer: 4", "unsure, maybe 3", "unsure, 4?"])
    if role == "refine":
        return rng.choice(["Answer: 3", "Answer: 5"])
    return rng.choice(["numbers 1 and 2", "one plus two", "1, 2"])


def _trees_digest(**overrides) -> str:
    """Six 12-simulation trees on a branchy team with keyed random texts (duplicates are common): every node's
    text, visits, values and prior; then each search's answer, candidates, tree statistics and usage."""
    def ctx(idx):
        return SearchContext(policy=FakePolicy(_random_team, score=lambda m, c: -0.3 * len(c)), graph=BRANCHY,
                             settings=settings(n_simulations=12, **overrides).method_settings("mcts_prm"),
                             scorers={"masprm": FakeScorer(lambda t: ((len(t) * 7) % 11 - 5) / 5)},
                             keys=RequestKeys(14, idx))

    trees = []
    for idx in range(6):
        c = ctx(idx)
        root = drive(mcts.search_tree(c, f"What is {idx} + 2?", step_scorer="masprm", leaf_value="masprm"), c)
        trees.append([[n.depth, n.text, n.visits, round(n.q_sum, 9), round(n.init_value, 9),
                       round(n.info.get("prior", 0), 9)] for n in root.walk()])
    results = []
    for idx in range(6):
        c = ctx(idx)
        r = drive(mcts.mcts(c, Example(idx, f"What is {idx} + 2?", str(idx + 2), {}), step_scorer="masprm",
                            leaf_value="masprm"), c)
        results.append({"prediction": r.prediction, "candidates": r.candidates, "extra": r.extra,
                        "usage": vars(c.usage)})
    data = {"trees": trees, "results": results}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


# Computed with the code before the options existed (main at 63b322f), UCT and PUCT
ORIGINAL = {"uct": "9551e27795f4120f", "puct": "6d380d1919a245d9"}


@pytest.mark.parametrize("rule, flags", [("uct", {}), ("puct", {"uct_type": "puct", "c_uct": 1.0})])
def test_off_the_trees_are_the_originals_exactly(rule, flags):
    assert _trees_digest(**flags) == ORIGINAL[rule]
    # widening too slow to reach a second child in 12 visits (0.25 * 12^0.5 = 0.87 < 1) never samples: the same trees
    assert _trees_digest(pw_k=0.25, **flags) == ORIGINAL[rule]
    # and these options do change them (the comparison can fail)
    assert _trees_digest(distinct_tries=2, **flags) != ORIGINAL[rule]
    assert _trees_digest(pw_k=1.0, **flags) != ORIGINAL[rule]


# --------------------------------------------------------------------------- settings, fingerprint, label, flags

PAPER_KEYS = {"top_p", "max_new_tokens", "n_simulations", "max_children", "c_uct", "uct_type", "mcts_temperature",
              "view_mode", "orm_leaf"}


def test_the_options_join_the_fingerprint_only_when_set():
    from masprm.eval.runner import condition_manifest
    from test_eval_runner import SPECS, data

    def manifest(**kw):
        s = settings(dataset="chain", split="test", gen_model_id="fake-policy", seed=14, **kw)
        return condition_manifest("mcts_prm", s, chain_graph(), data(), SPECS)

    plain = manifest()
    assert set(plain["definition"]["settings"]) == PAPER_KEYS          # the keys the paper's configs always had
    tries, widening = manifest(distinct_tries=2), manifest(pw_k=1.0)
    assert set(tries["definition"]["settings"]) - PAPER_KEYS == {"distinct_tries"}
    assert widening["definition"]["settings"].items() - plain["definition"]["settings"].items() == \
        {("pw_k", 1.0), ("pw_alpha", 0.5), ("pw_max_children", None)}
    assert len({plain["fingerprint"], tries["fingerprint"], widening["fingerprint"],
                manifest(pw_k=1.0, pw_alpha=0.7)["fingerprint"]}) == 4


def test_the_label_says_the_options_when_set():
    from masprm.eval.runner import label_of

    def label(**kw):
        return label_of("mcts_logprob", settings(**kw))

    assert label() == "MCTS + logprob (N=10, 3 children)"
    assert label(distinct_tries=2, pw_k=1.0, pw_max_children=6) == \
        "MCTS + logprob (N=10, 3 children, distinct tries 2, widening 1*N^0.5, at most 6)"


def test_both_spellings_parse():
    from masprm.stages.evaluate import build_parser

    args = build_parser().parse_args(["--distinct-tries", "2", "--pw-k", "1.5", "--pw_alpha", "0.7",
                                      "--pw-max-children", "5"])
    assert (args.distinct_tries, args.pw_k, args.pw_alpha, args.pw_max_children) == (2, 1.5, 0.7, 5)


@pytest.mark.parametrize("flags, message", [
    ({"distinct_tries": -1}, "distinct_tries must be >= 0"),
    ({"pw_k": 0.0}, "pw_k must be > 0"),
    ({"pw_k": 1.0, "pw_alpha": 1.5}, "pw_alpha must be in (0, 1]"),
    ({"pw_alpha": 0.7}, "`pw_alpha` needs `pw_k`"),
    ({"pw_max_children": 5}, "`pw_max_children` needs `pw_k`"),
    ({"pw_k": 1.0, "pw_max_children": 2}, "pw_max_children must be >= `max_children` (3), got 2"),
])
def test_bad_values_are_refused_naming_the_setting(flags, message):
    with pytest.raises(ConfigError) as err:
        MCTSSettings(**flags)
    assert message in str(err.value)


@pytest.mark.parametrize("argv, message", [
    (["--methods", "single_pass", "--distinct_tries", "2"], "--distinct_tries needs a method named mcts_* in --methods"),
    (["--methods", "single_pass", "--pw_k", "1"], "--pw_k needs a method named mcts_* in --methods"),
    (["--methods", "single_pass", "--pw_alpha", "0.7"], "--pw_alpha needs --pw_k"),
])
def test_the_cli_names_the_flag(argv, message):
    from masprm.cli import PARSED_FLAGS, error_line
    from test_eval_cli import _validate

    with pytest.raises(MasprmError) as err:
        _validate(argv)
    assert message in error_line(err.value, PARSED_FLAGS)


def test_the_options_are_mcts_settings_only():
    # SBS proposals keep every sample as a beam and stage 1 every sample as a child: nothing is merged there,
    # so they have no such option (docs/pipeline.md)
    for name in ("sbs_prm", "single_pass", "bon_prm", "voter_prm"):
        assert not hasattr(settings(distinct_tries=1).method_settings(name), "distinct_tries")
    assert METHODS["mcts_oracle_step"].settings_for(settings(pw_k=2.0).method_values).pw_k == 2.0


@pytest.mark.parametrize("argv, flag", [
    (["--pw_alpha", "0.5"], "--pw_alpha"),             # its default, given: it still cannot act without --pw_k
    (["--pw-alpha=0.9"], "--pw_alpha"),
    (["--pw_max_children", "4"], "--pw_max_children"),
])
def test_a_widening_flag_given_without_pw_k_is_refused_at_parse_time(argv, flag):
    from masprm.cli import PARSED_FLAGS, error_line
    from masprm.stages.evaluate import build_parser

    with pytest.raises(ConfigError) as err:
        build_parser().parse_args(["--methods", "mcts_prm", *argv])
    assert error_line(err.value, PARSED_FLAGS) == f"{flag} needs --pw_k (progressive widening is off without it)"
    parsed = build_parser().parse_args(["--methods", "mcts_prm", "--pw_k", "2", *argv])   # with it: accepted
    assert parsed.pw_k == 2.0
    assert build_parser().parse_args(["--methods", "mcts_prm"]).pw_alpha == 0.5   # not given: the default stands


def test_the_headroom_tool_refuses_the_same_flag_the_same_way(tmp_path, monkeypatch, capsys):
    from helpers_cli import run_module

    monkeypatch.chdir(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.instruments.headroom", ["--pw_alpha", "0.5"])
    assert code == 2 and lines == ["headroom.py: error: --pw_alpha needs --pw_k (progressive widening is off "
                                   "without it)"]
    assert not any(tmp_path.iterdir())
