"""The synthetic deep team (each agent errs at a set rate) and the single-pass profile of the headroom report."""

import random

import pytest

from masprm.graph import load_mas_config
from masprm.search.engine import LoadedModels
from masprm.search.oracles import STEP_ORACLES
from masprm.instruments import headroom
from masprm.instruments.synthetic_team import ErrorRates, SyntheticDeepTeam
from masprm.worlds.toy.transcripts import rendered_turns
from masprm.worlds import WORLDS
from test_toy_deep import RIGHT, STORY

WORLD = WORLDS["toy_deep"]
GRAPH = load_mas_config(WORLD.config)


@pytest.fixture
def story(monkeypatch):
    """The deep world's story lookup, knowing the hand-made story too (synthetic team and step oracle)."""
    from masprm.worlds.toy_deep import label as deep_label
    from masprm.instruments import synthetic_team as deep_synthetic
    real = deep_label.story_of
    lookup = lambda q: STORY if q == STORY.question else real(q)
    monkeypatch.setattr(deep_label, "story_of", lookup)
    monkeypatch.setattr(deep_synthetic, "story_of", lookup)


def play(team: SyntheticDeepTeam, question: str, seed: int = 0) -> list[str]:
    """One pass of the team: each agent answers the prompt the graph renders from the messages so far."""
    rng, state = random.Random(seed), GRAPH.start(question)
    for agent in GRAPH.topo_order:
        state = state.decide(agent, team.respond(state.messages(agent), rng))
    return list(state.outputs.values())


def numbers(texts):
    return [[w.strip(".,") for w in t.split()[1:]] for t in texts]


def test_an_errorless_team_writes_the_reference_work(story):
    out = play(SyntheticDeepTeam(ErrorRates()), STORY.question)
    # phrasings are drawn, the work is the story's: the same words after each opener as the hand-written one
    assert numbers(out) == numbers(RIGHT)
    assert STEP_ORACLES["toy_deep"](STORY.question, out) == [True] * 8


def test_each_agent_errs_at_its_rate_and_the_rest_follow(story):
    oracle = STEP_ORACLES["toy_deep"]
    always = {"reader": 0, "planner": 1, "op": 2, "verifier": 7}   # the first wrong message when only it errs
    for name, first in always.items():
        team = SyntheticDeepTeam(ErrorRates(**{name: 1.0}))
        for seed in range(5):
            right = oracle(STORY.question, play(team, STORY.question, seed))
            assert right.index(False) == first, (name, seed)
    # an Op agent at rate 1 makes every equation false: each Op message is wrong
    out = play(SyntheticDeepTeam(ErrorRates(op=1.0)), STORY.question)
    assert oracle(STORY.question, out)[2:7] == [False] * 5
    # the Planner follows the Reader's (mis)reading: its numbers are the reading's
    out = play(SyntheticDeepTeam(ErrorRates(reader=1.0)), STORY.question, seed=3)
    read = [int(x) for x in out[0].replace(",", " ").split()[1:]]
    assert int(out[1].split()[1]) == read[0]


def test_samples_are_keyed_like_a_real_policy(story):
    team = SyntheticDeepTeam(ErrorRates(reader=0.5))
    prompt = next(rendered_turns(GRAPH, STORY.question, RIGHT))[1]
    a = team.sample([prompt], 6, keys=[(1, 2)])[0]
    b = team.sample([prompt, prompt], 6, keys=[(9, 9), (1, 2)])[1]
    assert [g.text for g in a] == [g.text for g in b]


def test_the_single_pass_profile_by_hand(story):
    """Every pass with the Reader always wrong: every first wrong message is the Reader's, no pass is right at
    every step; with no errors every pass is right and nothing is a chance hit."""
    examples = list(WORLD.task.load("dev", n=3, seed=0))
    bad = headroom.pass_profile(LoadedModels(SyntheticDeepTeam(ErrorRates(reader=1.0))), GRAPH, "toy_deep",
                                examples, seed=0, temperature=0.7, batch_size=4, n=4)
    assert bad["passes"] == 12 and bad["all_steps_right"] == 0.0 and bad["first_wrong"][0] == 1.0
    assert bad["chance_hits"] == bad["final_right"]                  # any right answer here followed a wrong step
    good = headroom.pass_profile(LoadedModels(SyntheticDeepTeam(ErrorRates())), GRAPH, "toy_deep", examples,
                                 seed=0, temperature=0.7, batch_size=4, n=4)
    assert good == {"passes": 12, "final_right": 1.0, "all_steps_right": 1.0, "chance_hits": 0.0,
                    "first_wrong": [0.0] * 8}


def test_the_command_on_a_tiny_setting_and_a_bad_rate(monkeypatch, capsys, tmp_path):
    from helpers_cli import run_module
    out = tmp_path / "s.json"
    code, _, stdout = run_module(monkeypatch, capsys, "masprm.instruments.synthetic_team",
                                 ["--reader", "0", "1", "--planner", "0", "--op", "0", "--verifier", "0", "--n", "2",
                                  "--simulations", "2", "--out", str(out), "-q"])
    assert code == 0 and sum(line.startswith("rates") for line in stdout.splitlines()) == 2
    import json
    reports = json.loads(out.read_text())
    assert [r["rates"]["reader"] for r in reports] == [0.0, 1.0]
    assert reports[0]["accuracy"]["mcts_step"] == 1.0 and reports[1]["passes"]["first_wrong"][0] == 1.0
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.instruments.synthetic_team", ["--op", "1.5"])
    assert code == 2 and len(lines) == 1 and "--op" in lines[0]


def test_each_agents_error_rate_after_a_right_prefix():
    """The synthetic team at set rates: an agent given the reference prefix errs at its own rate only, so a rate of 1
    shows as 100% at that agent and 0% elsewhere; an Op rate of 1 shows at every Op agent."""
    examples = list(WORLD.task.load("dev", n=2, seed=0))
    measured = lambda rates: headroom.agent_error_rates(LoadedModels(SyntheticDeepTeam(rates)), GRAPH, "toy_deep",
                                                        examples, seed=0, temperature=0.7, batch_size=2, n=3)
    assert measured(ErrorRates()) == [0.0] * 8
    assert measured(ErrorRates(planner=1.0)) == [0.0, 1.0] + [0.0] * 6
    assert measured(ErrorRates(op=1.0, verifier=1.0)) == [0.0, 0.0] + [1.0] * 6
