"""--step_oracle left open follows the dataset: a toy_deep run's oracle_step is judged by toy_deep's step
labeller (the toy world's knows none of its stories and failed every example), a toy run's by the toy world's
as before (the same fingerprint), and a named one is kept."""

from __future__ import annotations

import pytest

from masprm.data import Example
from masprm.eval.methods import METHODS
from masprm.graph import load_mas_config
from masprm.search.context import SearchContext
from masprm.search.oracles import default_step_oracle, step_value
from masprm.stages.evaluate import parse_command, resolve_defaults
from masprm.worlds.toy_deep.data import TOY_DEEP
from masprm.worlds.toy_deep.task import transcript
from masprm.worlds.toy.task import generate_split

from helpers import REPO


def oracle_of(*argv: str) -> tuple[str, dict]:
    run, settings = parse_command(["--methods", "mcts_oracle_step", *argv])
    resolved = resolve_defaults(settings, run.routing)
    return (resolved.method_settings("mcts_oracle_step").step_oracle,
            METHODS["mcts_oracle_step"].recorded_settings(resolved.method_values))


def test_the_step_oracle_follows_the_dataset_unless_named():
    assert oracle_of("--dataset", "toy_deep")[0] == "toy_deep"
    assert oracle_of("--dataset", "toy")[0] == "toy"
    assert oracle_of("--dataset", "gsm8k")[0] == "toy"   # no labeller of its own: the old default
    assert oracle_of("--dataset", "toy_deep", "--step_oracle", "toy")[0] == "toy"   # named: kept


def test_a_toy_runs_fingerprint_settings_are_as_before():
    # before the option followed the dataset the default was "toy": a toy run records exactly that
    left_open, named = oracle_of("--dataset", "toy")[1], oracle_of("--dataset", "toy", "--step_oracle", "toy")[1]
    assert left_open == named and left_open["step_oracle"] == "toy"
    assert oracle_of("--dataset", "toy_deep")[1] == oracle_of("--dataset", "toy_deep", "--step_oracle",
                                                              "toy_deep")[1]


def test_default_step_oracle():
    assert [default_step_oracle(d) for d in ("toy", "toy_deep", "gsm8k", None)] == ["toy", "toy_deep", "toy", "toy"]


def test_a_context_left_open_is_judged_by_its_examples_dataset():
    # toy_deep's first dev question, its reference transcript: every prefix right (+1), a misread Reader -1.
    # The toy world's labeller does not know the story and would raise.
    problem = generate_split("dev", TOY_DEEP)[0]
    graph = load_mas_config(REPO / "src" / "masprm" / "configs" / "toy_deep.yaml")
    example = Example(0, problem.question, str(problem.answer), {"dataset": "toy_deep"})
    _, settings = parse_command(["--methods", "mcts_oracle_step", "--dataset", "toy_deep"])
    ctx = SearchContext(policy=None, graph=graph, settings=settings.method_settings("mcts_oracle_step"),
                        example=example)
    assert ctx.settings.step_oracle is None   # not resolved by stage 4 here
    right = transcript(problem)
    replay = lambda messages: graph.replay(problem.question, list(enumerate(messages)))  # noqa: E731
    assert [step_value(ctx, replay(right[:i])) for i in (1, 4, 8)] == [1.0, 1.0, 1.0]
    wrong_reader = ["Numbers: 999"] + right[1:]
    assert step_value(ctx, replay(wrong_reader[:2])) == -1.0
    with pytest.raises(Exception, match="toy step oracle knows no story"):
        step_value(SearchContext(policy=None, graph=graph, settings=ctx.settings,
                                 example=Example(0, problem.question, "1", {"dataset": "toy"})), replay(right[:1]))
