"""Search methods on the scripted world: scorers steer SBS, MCTS and voters; batching; selection rules."""

from __future__ import annotations

import math

import pytest

from conftest import FakePolicy
from masprm.search import beam, mcts, vote as V
from masprm.search.scorer_kinds import SCORER_KINDS
from masprm.search.expand import aggregate_logprob
from masprm.eval.methods import METHODS
from masprm.search.settings import ViewSettings
from masprm.graph import MASGraph
from masprm.interfaces import LogProb
from masprm.search.engine import drive
from masprm.search.node import Node
from helpers_eval_world import (FakeScorer, example, make_ctx, orm_prefers_seven, prefers_bad, prefers_good, respond,
                                run_method, scripted_solver)

# --------------------------------------------------------------------------- SBS


def test_sbs_prm_follows_a_scorer_that_prefers_correct_steps():
    prm = FakeScorer(prefers_good)
    policy = FakePolicy(respond)
    ctx = make_ctx("sbs_prm", policy, masprm=prm, b1=3, b2=5)
    result = run_method("sbs_prm", ctx)
    assert result.prediction == "Answer: 7"
    # The top beams are the good plans; all surviving beams answer 7.
    assert result.candidates == ["Answer: 7"] * 3
    # One policy call and one scorer forward per agent, covering every beam's candidates.
    assert policy.calls == [("sample", 1), ("sample", 3)]
    assert prm.batches == [5, 15]
    assert ctx.usage.agent_runs == 20 and ctx.usage.scorer_calls == 20
    assert ctx.usage.scorer_tokens == prm.tokens_seen
    # The scorer sees the routed transcript: question + step + SEP.
    assert prm.texts[0] == "What is 3 + 4?bad</step>"


def test_sbs_prm_fails_with_a_scorer_that_prefers_wrong_steps():
    ctx = make_ctx("sbs_prm", FakePolicy(respond), masprm=FakeScorer(prefers_bad), b1=3, b2=5)
    assert run_method("sbs_prm", ctx).prediction == "Answer: 5"


def test_sbs_logprob_prefers_the_likely_short_wrong_step():
    policy = FakePolicy(respond)
    ctx = make_ctx("sbs_logprob", policy, b1=2, b2=3)
    result = run_method("sbs_logprob", ctx)
    assert result.prediction == "Answer: 5"
    assert ("logprob", 3) in policy.calls


def test_sbs_local_view_scores_the_agents_inbox_and_output():
    prm = FakeScorer(prefers_good)
    ctx = make_ctx("sbs_prm", FakePolicy(respond), masprm=prm, b1=1, b2=2, view_mode="local")
    run_method("sbs_prm", ctx)
    assert prm.texts[:2] == ["What is 3 + 4?bad</step>", "What is 3 + 4?good plan 1</step>"]
    assert prm.texts[2] == "good plan 1Answer: 7</step>"   # Finisher's inbox + its output


def test_sbs_carries_forward_beams_whose_agent_is_skipped():
    # Agent 1 runs only when agent 0 says "go"; agent 2 always follows agent 0.
    graph = MASGraph.from_dict({
        "agents": [{"name": "a", "system_prompt": "a"}, {"name": "b", "system_prompt": "b"},
                   {"name": "c", "system_prompt": "c"}],
        "edges": [[-1, 0], [0, 1, "contains:go"], [0, 2]],
    })
    outputs = {"a": ["go", "stop"], "b": ["B"], "c": ["C"]}
    policy = FakePolicy(lambda m, k, rng: outputs[m[0]["content"]][k % len(outputs[m[0]["content"]])])
    prm = FakeScorer(lambda t: 0.5 if "stop" in t else 0.1)
    ctx = make_ctx("sbs_prm", policy, masprm=prm, b1=2, b2=2)
    ctx.graph = graph
    beams = drive(beam.beam_search(ctx, [beam.Beam(graph.start("q"))], width=3, branching=2, scorer="masprm",
                                temperature=1.0), ctx)
    # "stop" scored higher and skips agent b (carried forward); the "go" beam ran b. Both then ran c.
    assert [b.state.outputs for b in beams] == [{0: "stop", 2: "C"}, {0: "stop", 2: "C"},
                                                {0: "go", 1: "B", 2: "C"}]
    assert [b.score for b in beams] == [0.5, 0.5, 0.1]
    assert policy.calls == [("sample", 1), ("sample", 1), ("sample", 3)]   # a: 1 beam; b: the go beam; c: all 3


# --------------------------------------------------------------------------- MCTS


def test_mcts_prm_answers_correctly_with_a_good_scorer_and_wrongly_with_a_bad_one():
    good = run_method("mcts_prm", make_ctx("mcts_prm", FakePolicy(respond), masprm=FakeScorer(prefers_good)))
    bad = run_method("mcts_prm", make_ctx("mcts_prm", FakePolicy(respond), masprm=FakeScorer(prefers_bad)))
    assert good.prediction == "Answer: 7"
    assert bad.prediction == "Answer: 5"
    assert good.candidates[0] == "Answer: 7"


def test_mcts_logprob_picks_the_likely_wrong_branch_and_mcts_orm_finds_the_right_one():
    assert run_method("mcts_logprob", make_ctx("mcts_logprob", FakePolicy(respond))).prediction == "Answer: 5"
    orm = FakeScorer(orm_prefers_seven)
    result = run_method("mcts_orm", make_ctx("mcts_orm", FakePolicy(respond), orm=orm, n_simulations=10))
    assert result.prediction == "Answer: 7"
    # ORM texts are full transcripts of finished trajectories only.
    assert all(t.endswith("</step>") and "Answer" in t for t in orm.texts)


def test_mcts_tree_statistics_and_batching():
    prm = FakeScorer(prefers_good)
    policy = FakePolicy(respond)
    ctx = make_ctx("mcts_prm", policy, masprm=prm, n_simulations=4, max_children=3, c_uct=0.0)
    root = drive(mcts.search_tree(ctx, "What is 3 + 4?", step_scorer="masprm", leaf_value="masprm"), ctx)
    assert root.init_visits == 1 and root.visits == 4
    bad, good1, good2 = root.children
    assert (bad.text, good1.text, good2.text) == ("bad", "good plan 1", "good plan 2")
    assert [c.init_value for c in root.children] == [-0.9, 0.9, 0.9]
    assert all(c.init_visits == 1 for c in root.children)
    # c = 0: greedy on q_mean; ties go to the first child, so every simulation takes good1.
    assert (bad.visits, good1.visits, good2.visits) == (0, 4, 0)
    assert good1.q_sum == pytest.approx(4 * 0.9)     # leaf value = the leaf's PRM score
    # Duplicate Finisher outputs were dropped: one terminal child.
    assert len(good1.children) == 1 and good1.children[0].is_terminal
    # Two expansions: one policy call and one scorer forward each.
    assert policy.calls == [("sample", 1), ("sample", 1)]
    assert prm.batches == [3, 1]    # duplicates are dropped before scoring


def test_orm_leaf_values_mcts_prm_leaves_with_the_orm():
    prm, orm = FakeScorer(lambda t: 0.0), FakeScorer(orm_prefers_seven)
    ctx = make_ctx("mcts_prm", FakePolicy(respond), masprm=prm, orm=orm, orm_leaf=True, n_simulations=6)
    root = drive(mcts.search_tree(ctx, "q", step_scorer="masprm", leaf_value="orm"), ctx)
    leaves = [n for n in root.walk() if n.is_terminal and n.visits]
    assert leaves and all(n.q_sum == pytest.approx(n.visits * orm_prefers_seven(n.text)) for n in leaves)
    assert run_method("mcts_prm", make_ctx("mcts_prm", FakePolicy(respond), masprm=FakeScorer(lambda t: 0.0), orm=FakeScorer(orm_prefers_seven),
                               orm_leaf=True)).prediction == "Answer: 7"


def test_mcts_records_whether_a_simulation_reached_the_predicted_transcript():
    # mcts_orm, one simulation: the three Solver children start at the ORM's step value 0 with one
    # virtual visit. The simulation ties to the first child ("bad"), whose leaf "Answer: 5" gets
    # -0.9, so bad's q_mean becomes (-0.9 + 0) / 2. The final argmax then takes "good plan 1" (q 0),
    # never simulated: its terminal is expanded after the search and wins with no backed-up visit.
    once = run_method("mcts_orm", make_ctx("mcts_orm", FakePolicy(respond), orm=FakeScorer(orm_prefers_seven),
                                           n_simulations=1))
    assert once.prediction == "Answer: 7" and once.extra["prediction_visited"] is False
    many = run_method("mcts_orm", make_ctx("mcts_orm", FakePolicy(respond), orm=FakeScorer(orm_prefers_seven),
                                           n_simulations=10))
    assert many.prediction == "Answer: 7" and many.extra["prediction_visited"] is True


def _hand_tree(priors):
    graph = MASGraph.from_dict({"agents": [{"name": "a", "system_prompt": "a"}], "edges": [[-1, 0]]})
    root = Node(graph.start("q"), init_visits=1)
    root.visits = 10
    spec = [("A", 5, 2.5, 0.0), ("B", 1, 0.2, 0.1), ("C", 0, 0.0, 0.0)]
    for (text, visits, q_sum, init), prior in zip(spec, priors):
        child = root.add_child(0, text, init_value=init, init_visits=1, info={"prior": prior})
        child.visits, child.q_sum = visits, q_sum
    return root


def test_uct_selection_on_a_hand_built_tree():
    root = _hand_tree([1 / 3] * 3)
    q = {"A": 2.5 / 6, "B": 0.3 / 2, "C": 0.0}
    n = {"A": 5, "B": 1, "C": 0}
    for c in (0.0, 0.2, 2.0):
        by_hand = {k: q[k] + c * math.sqrt(math.log(10 + 1) / (n[k] + 1)) for k in q}
        assert mcts.select_child(root, "uct", c).text == max(by_hand, key=by_hand.get)
    assert mcts.select_child(root, "uct", 0.0).text == "A"      # exploitation only
    assert mcts.select_child(root, "uct", 2.0).text == "C"      # the unvisited child


def test_puct_selection_follows_the_priors():
    q = {"A": 2.5 / 6, "B": 0.15, "C": 0.0}
    n = {"A": 5, "B": 1, "C": 0}
    for priors, expected in (([0.7, 0.2, 0.1], "A"), ([0.1, 0.1, 0.8], "C"), ([0.05, 0.9, 0.05], "B")):
        root = _hand_tree(priors)
        by_hand = {k: q[k] + 1.0 * p * math.sqrt(10) / (1 + n[k]) for k, p in zip("ABC", priors)}
        assert max(by_hand, key=by_hand.get) == expected
        assert mcts.select_child(root, "puct", 1.0).text == expected


def test_puct_priors_are_the_softmax_of_per_token_logprobs():
    policy = FakePolicy(respond, score=lambda m, c: -2.0 * len(c.split()))
    ctx = make_ctx("mcts_prm", policy, masprm=FakeScorer(prefers_good), uct_type="puct", n_simulations=1)
    root = drive(mcts.search_tree(ctx, "q", step_scorer="masprm", leaf_value="masprm"), ctx)
    priors = [c.info["prior"] for c in root.children]
    assert priors == pytest.approx([1 / 3] * 3)        # equal per-token log-probs -> uniform
    assert sum(priors) == pytest.approx(1.0)


def test_logprob_aggregation():
    steps = [LogProb(-4.0, 0, 2), LogProb(-2.0, 0, 6)]
    assert aggregate_logprob(steps, "sum") == -6.0
    assert aggregate_logprob(steps, "avg_token") == pytest.approx(-6.0 / 8)
    assert aggregate_logprob(steps, "avg_step") == pytest.approx(-3.0)


# --------------------------------------------------------------------------- voters


def test_vote_majority_and_tie_rules():
    # Grouped by numeric equality; the shortest member represents the group.
    winner, groups = V.vote(["Answer: 3", "so the answer is 5", "Answer: 5"], [0.0] * 3)
    assert winner == 2 and groups == [[0], [1, 2]]
    # Equal group sizes: the shorter representative wins.
    assert V.vote(["the final answer is 12", "Answer: 3"], [0.0, 0.0])[0] == 1
    # Equal sizes and lengths: the earlier group wins.
    assert V.vote(["Answer: 4", "Answer: 3"], [0.0, 0.0])[0] == 0


def test_vote_weights_beat_the_majority_and_ties_fall_back_to_size():
    answers = ["Answer: 5", "Answer: 5", "Answer: 7"]
    assert V.vote(answers, [math.log(0.1), math.log(0.1), math.log(0.9)])[0] == 2
    assert V.vote(answers, [math.log(0.5), math.log(0.4), math.log(0.8)])[0] == 0   # 0.9 > 0.8
    # Equal total weight: the larger group wins.
    assert V.vote(answers, [math.log(0.25), math.log(0.25), math.log(0.5)])[0] == 0


PATTERN = ["bad", "good plan", "bad", "bad", "good plan"]   # 3 runs answer 5, 2 answer 7


def test_voters_on_the_scripted_world():
    plain = run_method("voter_plain", make_ctx("voter_plain", FakePolicy(scripted_solver(PATTERN)), voter_k=5))
    assert plain.prediction == "Answer: 5" and len(plain.candidates) == 5
    prm = FakeScorer(prefers_good)
    policy = FakePolicy(scripted_solver(PATTERN))
    weighted = run_method("voter_prm", make_ctx("voter_prm", policy, masprm=prm, voter_k=5))
    assert weighted.prediction == "Answer: 7"
    assert prm.batches == [10]                              # every step of every run in one forward
    assert policy.calls == [("sample", 5), ("sample", 5)]   # the 5 runs advance together
    logprob = run_method("voter_logprob", make_ctx("voter_logprob", FakePolicy(scripted_solver(PATTERN)), voter_k=5))
    assert logprob.prediction == "Answer: 5"
    orm = run_method("voter_orm", make_ctx("voter_orm", FakePolicy(scripted_solver(PATTERN)), orm=FakeScorer(orm_prefers_seven),
                                              voter_k=5))
    assert orm.prediction == "Answer: 7"   # 2 x sigmoid(0.9) = 1.42 > 3 x sigmoid(-0.9) = 0.87


def test_voter_prm_weight_is_the_product_of_rescaled_step_values():
    prm = FakeScorer(lambda t: {"bad": -0.5}.get(t.split("</step>")[-2][-3:], 0.2))
    ctx = make_ctx("voter_prm", FakePolicy(scripted_solver(["bad"])), masprm=prm, voter_k=1)
    runs = drive(beam.beam_search(ctx, [beam.Beam(ctx.graph.start("q"))], width=1, branching=1, scorer=None,
                               temperature=1.0), ctx)
    (log_w,) = drive(SCORER_KINDS["masprm"].weight(ctx, runs), ctx)
    assert math.exp(log_w) == pytest.approx(((-0.5 + 1) / 2) * ((0.2 + 1) / 2))
    floor = FakeScorer(lambda t: -1.0)
    ctx.scorers["masprm"] = floor
    assert math.exp(drive(SCORER_KINDS["masprm"].weight(ctx, runs), ctx)[0]) == pytest.approx(1e-12)   # max(1e-6, 0) per step


# --------------------------------------------------------------------------- the original's rules, by hand
# The scripted world: the Solver's prompt is "solve" + "What is 3 + 4?" = 6 words (FakePolicy counts
# words as tokens); its samples are "bad" (1), "good plan 1" (3), "good plan 2" (3). The Finisher's
# prompt is "finish" + the Solver's output; it answers "Answer: 5" / "Answer: 7" (2 words).


def test_sbs_logprob_usage_counts_scored_tokens_as_the_original():
    # Original: agent_runs += B2 per beam and agent; each scored candidate adds its prompt + completion
    # tokens to the scorer tokens; log-prob scoring is no PRM call.
    ctx = make_ctx("sbs_logprob", FakePolicy(respond), b1=2, b2=3)
    run_method("sbs_logprob", ctx)
    solver = 3 * 6 + (1 + 3 + 3)                 # three candidates of the Solver
    finisher = 3 * (2 + 2) + 3 * (4 + 2)         # beams "bad" and "good plan 1", three answers each
    assert ctx.usage.scorer_tokens == solver + finisher == 55
    assert ctx.usage.agent_runs == 3 + 2 * 3 and ctx.usage.scorer_calls == 0


def test_mcts_logprob_usage_is_counted_per_expansion():
    # One simulation, c = 2, all children unvisited: the likeliest ("bad", -3) is expanded; its three
    # Finisher samples are one text after de-duplication. Original: agent_runs += max_children per
    # expansion; scorer tokens per scored (de-duplicated) candidate.
    ctx = make_ctx("mcts_logprob", FakePolicy(respond), n_simulations=1, max_children=3)
    result = run_method("mcts_logprob", ctx)
    assert result.prediction == "Answer: 5"
    assert ctx.usage.agent_runs == 3 + 3 and ctx.usage.scorer_calls == 0
    # The leaf's path log-prob reuses the two step log-probs (the original rescored them: +11 tokens).
    assert ctx.usage.scorer_tokens == (3 * 6 + 7) + (2 + 2) == 29
    # Generated tokens include the two Finisher samples dropped as duplicates (README: the original
    # counted the kept candidates only, 7 + 2).
    assert ctx.usage.generated_tokens == 7 + 3 * 2


def test_voter_usage_matches_the_original():
    # k = 5 single passes: one agent run per agent per pass.
    ctx = make_ctx("voter_logprob", FakePolicy(scripted_solver(PATTERN)), voter_k=5)
    run_method("voter_logprob", ctx)
    solver = 5 * 6 + (1 + 2 + 1 + 1 + 2)          # "bad" / "good plan" per PATTERN
    finisher = 3 * (2 + 2) + 2 * (3 + 2)
    assert ctx.usage.agent_runs == 10 and ctx.usage.scorer_tokens == solver + finisher == 59
    prm_ctx = make_ctx("voter_prm", FakePolicy(scripted_solver(PATTERN)), masprm=FakeScorer(prefers_good), voter_k=5)
    run_method("voter_prm", prm_ctx)
    assert prm_ctx.usage.scorer_calls == 10 and prm_ctx.usage.agent_runs == 10   # one PRM call per step


def test_orm_scoring_follows_view_mode():
    texts = {}
    for view in ("full", "local"):
        voter_orm, tree_orm = FakeScorer(orm_prefers_seven), FakeScorer(orm_prefers_seven)
        run_method("voter_orm", make_ctx("voter_orm", FakePolicy(scripted_solver(["bad", "good plan"])), orm=voter_orm,
                                          voter_k=2, view_mode=view))
        run_method("mcts_orm", make_ctx("mcts_orm", FakePolicy(respond), orm=tree_orm, view_mode=view, n_simulations=1))
        texts[view] = (voter_orm.texts, tree_orm.texts)
    assert texts["full"][0] == ["What is 3 + 4?bad</step>Answer: 5</step>",
                                "What is 3 + 4?good plan</step>Answer: 7</step>"]
    # local: what the last agent received plus what it said (the original's render_state_text)
    assert texts["local"][0] == ["badAnswer: 5</step>", "good planAnswer: 7</step>"]
    assert texts["local"][1] == ["badAnswer: 5</step>"]
    for method in ("voter_orm", "mcts_orm", "voter_prm", "sbs_prm", "mcts_prm"):
        assert ViewSettings in METHODS[method].settings   # so view_mode enters the log fingerprint


def test_voter_ties_go_to_the_shorter_first_member():
    # Two groups of two with equal weight: the original compares the groups' first members
    # (22 vs 9 characters), not their shortest ones ("5" would win that).
    answers = ["the answer is 5 indeed", "5", "Answer: 3", "Answer: 3"]
    winner, groups = V.vote(answers, [0.0] * 4)
    assert groups == [[0, 1], [2, 3]] and winner == 2


def test_mcts_candidates_with_equal_values_keep_the_originals_order():
    graph = MASGraph.from_dict({"agents": [{"name": "a", "system_prompt": "a"}], "edges": [[-1, 0]]})
    root = Node(graph.start("q"), init_visits=1)
    for text, q_sum in (("A", 0.5), ("B", 0.5), ("C", 0.9), ("D", 0.0)):
        child = root.add_child(0, text, init_value=0.0, init_visits=1)
        child.visits, child.q_sum = (1, q_sum) if text != "D" else (0, 0.0)
    # q_mean: A = B = 0.25, C = 0.45; D unvisited. The original's stack visits B before A.
    assert [n.text for n in mcts.ranked_terminals(root)] == ["C", "B", "A"]


def test_voters_group_option_letters_and_weigh_in_log_space():
    # Kept from the project (README differences): the original's numeric grouping never grouped A-D,
    # so this vote went to the shortest answer ("Final Answer: C" is not shorter; the first wins).
    letters = ["Final Answer: C", "I pick B. Final Answer: B", "Final Answer: B"]
    winner, groups = V.vote(letters, [0.0] * 3)
    assert groups == [[0], [1, 2]] and winner == 2
    # Path log-probs far below -700: the original's exp() made every weight 0 and fell back to the
    # majority (answer 5); in log space the single likelier path (-750) wins.
    answers = ["Answer: 5", "Answer: 5", "Answer: 7"]
    assert V.vote(answers, [-800.0, -800.0, -750.0])[0] == 2


def test_voters_drop_empty_steps_before_weighting_as_the_original():
    # Run 0's Solver says nothing, so its Finisher answers 5 from an empty inbox; run 1 is "good plan" -> 7.
    # The original weighs a run by its non-empty steps only, handing them in order to whichever agent runs
    # next from the question: run 0's "Answer: 5" is scored as the Solver's step.
    prm = FakeScorer(lambda t: 0.2)
    ctx = make_ctx("voter_prm", FakePolicy(scripted_solver(["", "good plan"])), masprm=prm, voter_k=2)
    run_method("voter_prm", ctx)
    assert prm.texts == ["What is 3 + 4?Answer: 5</step>",
                         "What is 3 + 4?good plan</step>", "What is 3 + 4?good plan</step>Answer: 7</step>"]
    runs = drive(beam.beam_search(ctx, [beam.Beam(ctx.graph.start(example().question))] * 2, width=2,
                                  branching=1, scorer=None, temperature=1.0), ctx)
    assert [c.text for c in runs[0].trail] == ["", "Answer: 5"]
    assert drive(SCORER_KINDS["masprm"].weight(ctx, runs), ctx) == pytest.approx([math.log(0.6), 2 * math.log(0.6)])

    seen = []
    policy = FakePolicy(scripted_solver(["", "good plan"]),
                        score=lambda m, c: seen.append((m[0]["content"], m[1]["content"], c)) or -float(len(c)))
    ctx = make_ctx("voter_logprob", policy, voter_k=2, logprob_agg="avg_step")
    runs = drive(beam.beam_search(ctx, [beam.Beam(ctx.graph.start(example().question))] * 2, width=2,
                                  branching=1, scorer=None, temperature=1.0), ctx)
    weights = drive(SCORER_KINDS["logprob"].weight(ctx, runs), ctx)
    assert seen == [("solve", "What is 3 + 4?", "Answer: 5"),                   # under the Solver's prompt
                    ("solve", "What is 3 + 4?", "good plan"), ("finish", "good plan", "Answer: 7")]
    assert weights == [-9 / 1, -(9 + 9) / 2]                                     # avg over the kept steps

    # The ORM reads the run without its empty step, each text with its own agent.
    for view, text in (("full", "What is 3 + 4?Answer: 5</step>"), ("local", "Answer: 5</step>")):
        orm = FakeScorer(orm_prefers_seven)
        run_method("voter_orm", make_ctx("voter_orm", FakePolicy(scripted_solver(["", "good plan"])), orm=orm,
                                         voter_k=2, view_mode=view))
        assert orm.texts[0] == text
