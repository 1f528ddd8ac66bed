"""Headroom gates: half-restricted oracles on hand-built transcripts, the gate arithmetic by hand, and the
whole measurement on a tiny setting with a scripted team (the Reader misreads in one sample of three)."""

import re

import pytest

from masprm.graph import load_mas_config
from masprm.search.engine import LoadedModels
from masprm.instruments import headroom
from masprm.worlds.toy_deep.label import story_of
from masprm.worlds.toy_deep.task import op_text, planner_text, reader_text, verifier_text
from masprm.worlds.toy.task import apply_op
from masprm.worlds import WORLDS
from test_toy_deep import RIGHT, STORY


@pytest.fixture
def story_oracle(monkeypatch):
    """The deep world's step oracle, knowing the hand-made story too."""
    from masprm.worlds.toy_deep import label as deep_label
    real = deep_label.story_of
    monkeypatch.setattr(deep_label, "story_of", lambda q: STORY if q == STORY.question else real(q))


def test_a_half_restricted_oracle_sees_only_errors_that_start_in_its_half(story_oracle):
    first, second = (headroom.restricted_oracle("toy_deep", 8, half) for half in headroom.HALVES)
    misread = ["Read: 7 5 6 4 9", "Plan: 7 +5 *2 -6 /4 +9", "Now 7+5=12.", "Now 12*2=24.", "Now 24-6=18."]
    assert first(STORY.question, misread) == [False, True, True, True, True]
    assert second(STORY.question, misread) == [True] * 5   # the later errors follow the Reader's
    slip = RIGHT[:4] + ["Next 24-4=28.", "So 28/4=7."]   # Op3 (agent 4 of 8: second half) slips
    assert first(STORY.question, slip) == [True] * 6
    assert second(STORY.question, slip) == [True, True, True, True, False, True]
    assert first(STORY.question, RIGHT) == second(STORY.question, RIGHT) == [True] * 8


def test_the_gate_arithmetic_by_hand():
    d = headroom.difference([True, True, False, True], [False, True, False, False])
    # differences 1, 0, 0, 1: mean 0.5, sample sd sqrt(1/3) = 0.5774
    assert d["diff"] == 0.5 and abs(d["sd"] - 0.57735) < 1e-4
    shares = headroom.one_text_share([["Read: 1 2", "Read: 1 2", "Read: 1 2"], ["Read: 1 2", "Values: 1, 2", "Read: 1 2"],
                                      ["Read: 1 2", "Read: 3 2", "Read: 1 2"], ["a 5", "b 5", "c 6"]])
    assert shares == {"one_text": 0.25, "one_reading": 0.5}
    rows = lambda correct, runs, terms=None: [{"correct": c, "agent_runs": runs, "terminals": terms} for c in correct]
    runs = {"mcts_step": rows([1, 1, 1, 0], 24, 8), "mcts_outcome": rows([1, 0, 0, 0], 24, 5),
            "sbs_step": rows([1, 1, 0, 0], 40), "sbs_outcome": rows([1, 1, 0, 0], 40),
            "mcts_first_half": rows([1, 1, 1, 0], 24, 8), "mcts_second_half": rows([1, 1, 0, 0], 24, 6)}
    g = headroom.gates(runs, [["x", "y", "z"]] * 4, 8, 10)
    assert g["a_mcts"]["diff"] == 0.5 and g["a_sbs"]["diff"] == 0 and g["b"]["diff"] == 0.25
    assert g["c"] == 0.8 and g["d"]["one_text"] == 0
    assert g["passed"] == {"a_mcts": True, "a_sbs": False, "b": True, "c": True, "d": True}


class ScriptedTeam:
    """A faithful deep team: each agent does its job on what it was given; the Reader's first sample of
    every call takes one written number plus 1 (a misreading), its others read right. Phrasings by sample."""

    def __init__(self):
        from conftest import FakePolicy
        self.policy = FakePolicy(self.respond)

    @staticmethod
    def respond(messages, k, rng):
        system, user = messages[0]["content"], messages[1]["content"]
        role = system.split(":")[0]
        if role == "Reader":
            numbers = list(story_of(user).written)
            if k == 0:
                numbers[-1] += 1
            return reader_text(numbers, None).replace("Numbers:", ("Numbers:", "Read:", "Values:")[k % 3])
        if role == "Planner":
            story = story_of(user.split("\n\n")[0])
            read = [int(x) for x in re.findall(r"\d+", user.split("\n\n")[-1])]
            it = iter(read[1:])
            ops = [(op, n if kind in ("double", "triple", "half") else next(it, n))
                   for (op, n), kind in zip(story.ops, story.kinds)]
            return planner_text(read[0], ops, None) + " " * k
        if role == "Verifier":
            return verifier_text(int(re.findall(r"=(-?\d+)", user)[-1])) + "!" * k
        i = int(role[2:]) - 1
        plan = re.findall(r"([-+*/])(\d+)", user.split("\n\n")[0].split(" ", 2)[-1])
        total = int(re.findall(r"=(-?\d+)", user)[-1]) if "=" in user else int(user.split()[1])
        op, n = plan[i][0], int(plan[i][1])
        return op_text((total, op, n, apply_op(total, op, n)), None) + " " * k


def test_the_measurement_on_a_tiny_setting_with_a_scripted_team():
    world = WORLDS["toy_deep"]
    graph = load_mas_config(world.config)
    team = ScriptedTeam()
    examples = list(world.task.load("dev", n=3, seed=0))
    report = headroom.measure(LoadedModels(team.policy), graph, "toy_deep", examples, seeds=(0,), sims=4, b1=2, b2=3)
    # every misreading is visible to the process oracle at the Reader's step, and to the first-half oracle
    assert report["accuracy"]["mcts_step"] == report["accuracy"]["sbs_step"] == 1.0
    assert report["accuracy"]["mcts_first_half"] == 1.0
    assert report["d"] == {"one_text": 0.0, "one_reading": 0.0}   # three phrasings, one misreading per group
    assert 0 < report["c"] <= 1 and report["bon_n"] >= 1
    assert set(report["passed"]) == {"a_mcts", "a_sbs", "b", "c", "d"}
    assert any("(a) process - outcome oracle, MCTS 4 sims" in line for line in headroom.report_lines(report))


def test_an_out_ending_in_txt_is_refused_before_the_policy_loads(tmp_path, monkeypatch, capsys):
    """The text report goes beside the JSON as .txt: `--out r.txt` would have the text overwrite the JSON."""
    from helpers import snapshot
    from helpers_cli import run_module

    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.instruments.headroom",
                                ["--world", "toy", "--split", "train", "--out", "r.txt"])
    assert code == 2 and len(lines) == 1 and "--out r.txt" in lines[0] and ".json" in lines[0]
    assert snapshot(tmp_path) == before


def test_seeds_pool_per_question_before_the_gates():
    """A question's outcome over search seeds is its share of right answers; the paired sd is that of those means."""
    rows = [{"correct": True, "agent_runs": 10, "terminals": None}, {"correct": False, "agent_runs": 20, "terminals": None}]
    assert headroom._mean(rows) == {"correct": 0.5, "agent_runs": 15.0, "terminals": None}
    assert headroom._mean([[0.2, 0.4], [0.4, 0.0]]) == [0.30000000000000004, 0.2]
    # per question: (1 + 0)/2 - (0 + 0)/2 = 0.5 and (1 + 1)/2 - (1 + 0)/2 = 0.5: mean 0.5, sd 0
    d = headroom.difference([0.5, 1.0], [0.0, 0.5])
    assert d["diff"] == 0.5 and d["sd"] == 0.0


@pytest.mark.parametrize("module, argv", [
    ("masprm.instruments.headroom", ["--world", "toy", "--split", "train"]),
    ("masprm.instruments.synthetic_team", []),
])
@pytest.mark.parametrize("n", ["1", "0", "-3"])
def test_fewer_questions_than_a_standard_error_needs_are_refused_before_any_search(tmp_path, monkeypatch, capsys,
                                                                                  module, argv, n):
    """Both tools end in the gates' paired standard errors, which need two questions: --n 1 once searched for
    minutes and then failed in a traceback."""
    from helpers import snapshot
    from helpers_cli import run_module

    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, module, [*argv, "--n", n, "--out", "r.json"])
    assert code == 2 and lines == [f"{module.rsplit('.', 1)[-1]}.py: error: --n must be at least 2 (a standard "
                                   f"error over questions needs two), got {n}"]
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("out", ["policy/headroom.json", "policy/sub/headroom.json", "policy/config.json"])
def test_an_out_inside_the_policy_it_reads_is_refused_before_the_policy_loads(tmp_path, monkeypatch, capsys, out):
    """A report written into the policy folder would change the policy's files (and so its identity)."""
    from helpers import snapshot
    from helpers_cli import run_module

    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "config.json").write_text("{}")   # the tool's own check: a model folder's config
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.instruments.headroom",
                                ["--world", "toy", "--split", "train", "--policy", "policy", "--out", out])
    assert code == 2 and lines == [f"headroom.py: error: --out {out}: is inside the input folder policy (--policy); "
                                   "writing there would change what the run reads: choose an output outside it"]
    assert snapshot(tmp_path) == before
