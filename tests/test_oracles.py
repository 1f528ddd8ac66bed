"""Reference scorers (oracle_step, oracle_outcome, true_value) on hand-built transcripts."""

from __future__ import annotations

import pytest

from conftest import FakePolicy
from helpers import REPO
from helpers_eval_world import QUESTION, example, make_ctx, respond, run_method, settings
from masprm.data import Example
from masprm.errors import ConfigError, DataError
from masprm.graph import load_mas_config
from masprm.search.context import SearchContext
from masprm.search.engine import drive
from masprm.search.oracles import STEP_ORACLES, outcome_value, step_value, true_values
from masprm.worlds.toy.oracle import story_of, toy_step_oracle
from masprm.worlds.toy.steplabel import label_transcript
from masprm.worlds.toy.task import Problem, generate_split
from masprm.worlds.toy.transcripts import planner_text, reader_text, solver_text, verifier_text

# 11 +5 *2 -3 = 29 ("doubles" writes no number): the story of tests/test_steplabel.py.
KEN = Problem("Ken starts with 11 stickers. A friend gives him 5 stickers. Then the number of stickers doubles. "
              "He loses 3 stickers. How many stickers does Ken have now?",
              11, (("+", 5), ("*", 2), ("-", 3)), 29, False, ("gift", "double", "lose"))
RIGHT = ["11 5 3", "11 +5 *2 -3", "Steps: 11+5=16, 16*2=32, then 32-3=29. Answer: 29",
         "Redo: 11+5=16, 16*2=32, 32-3=29. Answer: 29"]
# The Solver slips (16*2=30) and the Verifier repairs it: a right final answer after a wrong step.
REPAIRED = RIGHT[:2] + ["Steps: 11+5=16, 16*2=30, then 30-3=27. Answer: 27", RIGHT[3]]
KEN_EXAMPLE = Example(0, KEN.question, "29", {})


@pytest.fixture
def ken_oracle():
    """A step oracle that knows only Ken's story (the toy oracle looks stories up in the generated splits)."""
    STEP_ORACLES.register("ken", lambda question, messages: [s.correct for s in label_transcript(KEN, messages).steps])
    yield "ken"
    STEP_ORACLES.unregister("ken")


def toy_ctx(method: str, policy, **overrides) -> SearchContext:
    graph = load_mas_config(REPO / "src" / "masprm" / "configs" / "toy.yaml")
    return SearchContext(policy=policy, graph=graph, settings=settings(**overrides).method_settings(method),
                         example=KEN_EXAMPLE)


def replay(ctx: SearchContext, messages):
    return ctx.graph.replay(ctx.example.question, list(enumerate(messages)))


# --------------------------------------------------------------------------- the value rules


def test_oracle_step_is_plus_one_until_the_first_wrong_message(ken_oracle):
    ctx = toy_ctx("sbs_oracle_step", FakePolicy(respond), step_oracle=ken_oracle)
    assert step_value(ctx, replay(ctx, [])) == 1.0                       # nothing said yet
    assert [step_value(ctx, replay(ctx, RIGHT[:i])) for i in range(1, 5)] == [1.0, 1.0, 1.0, 1.0]
    misread = ["11 5 4"] + RIGHT[1:]                                      # the Reader's 4 is not in the story
    assert [step_value(ctx, replay(ctx, misread[:i])) for i in range(1, 5)] == [-1.0, -1.0, -1.0, -1.0]
    # the repaired transcript: right answer, wrong Solver step -> -1 from the Solver on
    assert [step_value(ctx, replay(ctx, REPAIRED[:i])) for i in range(1, 5)] == [1.0, 1.0, -1.0, -1.0]


def test_oracle_outcome_checks_finished_transcripts_only():
    ctx = toy_ctx("sbs_oracle_outcome", FakePolicy(respond))
    assert [outcome_value(ctx, replay(ctx, RIGHT[:i])) for i in range(4)] == [0.0, 0.0, 0.0, 0.0]
    assert outcome_value(ctx, replay(ctx, RIGHT)) == 1.0
    assert outcome_value(ctx, replay(ctx, REPAIRED)) == 1.0                # the outcome forgives the slip
    assert outcome_value(ctx, replay(ctx, RIGHT[:3] + ["Answer: 28"])) == -1.0
    finished = replay(ctx, RIGHT)
    ctx.example = None
    with pytest.raises(RuntimeError, match="needs the example"):
        outcome_value(ctx, finished)


def test_the_toy_oracle_finds_a_story_by_its_question():
    problem = generate_split("test")[0]
    right = [reader_text(problem), planner_text(problem), solver_text(problem, "worked"),
             verifier_text(problem, "worked")]
    assert story_of(" " + problem.question + "\n") == problem
    assert toy_step_oracle(problem.question, right) == [True, True, True, True]
    assert toy_step_oracle(problem.question, ["no numbers here"] + right[1:2]) == [False, True]
    with pytest.raises(DataError, match="knows no story"):
        toy_step_oracle("How many?", right)


def test_an_unknown_step_oracle_is_refused_with_the_valid_names():
    with pytest.raises(ConfigError, match="unknown step oracle 'nope'.*valid: toy"):
        settings(step_oracle="nope").method_settings("sbs_oracle_step")


# --------------------------------------------------------------------------- true_value


def alternating_solver():
    """The chain world's Solver says "good plan" on even calls and "bad" on odd ones (one sample per prompt)."""
    calls = iter(range(10**6))

    def fn(messages, k, rng):
        if messages[0]["content"] == "solve":
            return "good plan" if next(calls) % 2 == 0 else "bad"
        return respond(messages, k, rng)
    return fn


def test_true_value_rolls_out_each_prefix_once_and_counts_it_as_scorer_work():
    policy = FakePolicy(alternating_solver())
    ctx = make_ctx("sbs_true_value", policy, true_value_rollouts=4)
    ctx.example = example()
    root = ctx.graph.start(QUESTION)
    good = root.decide(0, "good plan 9")
    done = good.decide(1, "Answer: 7")
    # root: 4 rollouts, Solver good/bad/good/bad -> finisher 7/5/7/5 -> p = 2/4 -> 2 * 0.5 - 1 = 0.
    # "good plan 9": every rollout's finisher answers 7 -> p = 1 -> +1. A finished one: its gold check.
    values = drive(true_values(ctx, [root, good, done, root]), ctx)
    assert values == [0.0, 1.0, 1.0, 0.0]
    # one batched pass of 8 rollouts: a Solver call for the root's 4, then one finisher call for all 8
    assert policy.calls == [("sample", 4), ("sample", 8)]
    assert ctx.usage.agent_runs == 0 and ctx.usage.generated_tokens == 0 and ctx.usage.scorer_calls == 8
    assert ctx.usage.scorer_tokens > 0 and ctx.finished == []
    assert drive(true_values(ctx, [good, root]), ctx) == [1.0, 0.0] and len(policy.calls) == 2   # cached


# --------------------------------------------------------------------------- in the searches


def toy_team(messages, k, rng):
    """Reader: a misreading first (k = 0), the right reading second; the rest follows what it is given."""
    role, given = messages[0]["content"], messages[-1]["content"]
    if role.startswith("Reader"):
        return ["11 5 4", "11 5 3"][k % 2]
    if role.startswith("Planner"):
        return "11 +5 *2 -3" if "11 5 3" in given else "11 +5 *2 -4"
    if role.startswith("Solver"):
        return "Answer: 29" if "-3" in given else "Answer: 28"
    return "Answer: 29" if "Answer: 29" in given else "Answer: 28"


def test_a_process_oracle_keeps_the_right_reading_where_the_outcome_oracle_cannot_tell(ken_oracle):
    # SBS 1 x 2. oracle_step: the Reader's two samples score -1 ("11 5 4") and +1 ("11 5 3"): the right
    # one is kept, and everything after it is right -> 29. oracle_outcome: both readings score 0, the
    # stable sort keeps the first (the misreading), so every later candidate is wrong -> 28.
    step = run_method("sbs_oracle_step", toy_ctx("sbs_oracle_step", FakePolicy(toy_team), b1=1, b2=2,
                                                 step_oracle=ken_oracle), KEN_EXAMPLE)
    outcome = run_method("sbs_oracle_outcome", toy_ctx("sbs_oracle_outcome", FakePolicy(toy_team), b1=1, b2=2),
                         KEN_EXAMPLE)
    assert step.prediction == "Answer: 29" and outcome.prediction == "Answer: 28"


def test_oracles_rank_best_of_n_and_value_mcts_leaves():
    # best-of-N 2 on the chain world: pass 1 "good plan" -> 7 (right, +1), pass 2 "bad" -> 5 (wrong, -1);
    # ranked by the last step's oracle value. MCTS: the leaves' gold checks find the right branch.
    ctx = make_ctx("bon_oracle_outcome", FakePolicy(alternating_solver()), bon_n=2, step_agg="last")
    ctx.example = example()
    result = run_method("bon_oracle_outcome", ctx)
    assert result.candidates == ["Answer: 7", "Answer: 5"] and result.extra["bon_scores"] == [1.0, -1.0]
    mcts = make_ctx("mcts_oracle_outcome", FakePolicy(respond), n_simulations=10)
    mcts.example = example()
    assert run_method("mcts_oracle_outcome", mcts).prediction == "Answer: 7"


def test_the_step_benchmark_values_steps_by_the_oracles_rules():
    from masprm.instruments import stepbench
    from masprm.worlds import WORLDS
    problem = generate_split("test")[0]
    graph = load_mas_config(REPO / "src" / "masprm" / "configs" / "toy.yaml")
    right = [reader_text(problem), planner_text(problem), solver_text(problem, "worked"),
             verifier_text(problem, "worked")]
    misread = ["no numbers here"] + right[1:]
    transcripts = []
    for messages in (right, misread):
        states = [graph.replay(problem.question, list(enumerate(messages[:i]))) for i in range(1, 5)]
        transcripts.append({"question": problem.question, "states": states, "values": {}})
    stepbench.score_oracles(transcripts, WORLDS["toy"].truth)
    # the right transcript: every prefix right (+1), the outcome 0 until the Verifier's right answer (+1)
    assert transcripts[0]["values"] == {"oracle_step": [1.0] * 4, "oracle_outcome": [0.0, 0.0, 0.0, 1.0]}
    # a misreading from the start: -1 from the Reader on; the Verifier still gives the true answer (the later
    # messages are the right ones), so the outcome oracle forgives it
    assert transcripts[1]["values"] == {"oracle_step": [-1.0] * 4, "oracle_outcome": [0.0, 0.0, 0.0, 1.0]}
