"""Training-time MAS-MCTS (SPEC §5) with scripted fake agents: exact counts, labels, files, resume."""

from __future__ import annotations

import json
import random

import pytest

from masprm.data import Example
from masprm.graph import MASGraph
from masprm.search.engine import LoadedModels, drive
from masprm.eval.tree_runner import run_trees
from masprm.search.train_mcts import STALE_LIMIT, EarlyStop, TreeSearchSettings, tree_search

from helpers_stage1_jobs import BRANCHY, EXAMPLES, ends_with_gold, make_job, random_team

CHAIN = MASGraph.from_dict({
    "agents": [{"name": "planner", "system_prompt": "plan"}, {"name": "solver", "system_prompt": "solve"}],
    "edges": [[-1, 0], [0, 1]],
})
SINGLE = MASGraph.from_dict({"agents": [{"name": "solo", "system_prompt": "solo"}], "edges": [[-1, 0]]})


class FirstChoice:
    """An rng stand-in that always continues into the first candidate."""

    def choice(self, seq):
        return seq[0]


def scripted(table: dict[tuple[str, str], list[str]], fake_policy):
    """Policy answering from (system prompt, user content) -> the n outputs."""
    def respond(messages, k, rng):
        return table[(messages[0]["content"], messages[1]["content"])][k]
    return fake_policy(respond)


def build_tree(graph, question, gold, policy, settings, rng, grade=None):
    """One example searched alone on `policy` (each request one model call): the root and the statistics."""
    return drive(tree_search(graph, question, gold, settings, rng, grade), LoadedModels(policy))


def run_job(job, policy, example):
    """One example's job as a worker runs it, its tree written as the driver does; its summary."""
    [(_, built, error)] = list(job.batch(policy, [example]))
    assert error is None, error
    return job.write(built)


def find(node, text):
    return next(n for n in node.walk() if n.text == text)


# --------------------------------------------------------------------------- the search itself


def test_exact_visits_and_values_after_three_rollouts(fake_policy):
    policy = scripted({
        ("plan", "Q"): ["p0", "p1"],
        ("solve", "p0"): ["Answer: 1", "Answer: 2"],
        ("solve", "p1"): ["Answer: 2", "Answer: 2"],
    }, fake_policy)
    settings = TreeSearchSettings(n_rollouts=3, c=4.0, n_candidates=2)
    root, stats = build_tree(CHAIN, "Q", "1", policy, settings, FirstChoice(), ends_with_gold)

    # Rollout 1 expands p0 and its two answers: "2" is graded on the spot (-1), "1" ends the path (+1).
    # Rollout 2: UCT prefers the unvisited p1 (0 + 4*sqrt(ln2/1) > 0 + 4*sqrt(ln2/2)); both answers -1.
    # Rollout 3: p0 (0 + 4*sqrt(ln4/2)) beats p1 (-1 + same); then "Answer: 1" (+1) beats "Answer: 2".
    p0, p1 = root.children
    expect = {
        root: (5, -1.0), p0: (3, 1.0), p1: (2, -2.0),
        p0.children[0]: (2, 2.0), p0.children[1]: (1, -1.0),
        p1.children[0]: (1, -1.0), p1.children[1]: (1, -1.0),
    }
    for node, (visits, q_sum) in expect.items():
        assert (node.visits, node.q_sum) == (visits, q_sum), node.action_text
    assert root.q_mean == pytest.approx(-0.2)
    assert [c.is_terminal for c in p0.children + p1.children] == [True] * 4
    assert p0.children[0].final_answer == "Answer: 1"
    assert stats["rollouts"] == 3 and not stats["early_stopped"]
    assert stats["policy_calls"] == 3 and stats["agent_runs"] == 6 and stats["nodes"] == 7
    assert policy.calls == [("sample", 1)] * 3  # one batched call per expansion


def test_every_terminal_child_is_graded_and_values_add_up(fake_policy):
    policy = random_team(fake_policy)
    policy.reseed(5)
    root, _ = build_tree(BRANCHY, "What is 1 + 2?", "3", policy,
                         TreeSearchSettings(n_rollouts=12, n_candidates=3), random.Random(5), ends_with_gold)
    lengths = set()
    for node in root.walk():
        if node.is_terminal:
            lengths.add(node.depth)
            assert node.visits >= 1, "a terminal child was left ungraded"
            reward = 1.0 if ends_with_gold(node.final_answer, "3") else -1.0
            assert node.q_sum == reward * node.visits
        elif node.children:  # every visit of an inner node went on into one of its children
            assert node.visits == sum(c.visits for c in node.children)
            assert node.q_sum == pytest.approx(sum(c.q_sum for c in node.children))
    assert lengths == {2, 3}  # the refiner ran on some paths only


def test_selection_uses_the_training_uct(fake_policy):
    from masprm.search.node import Node
    from masprm.search.engine import drive
    from masprm.search.mcts import OutcomeGuide, simulate

    root = Node(SINGLE.start("Q"))
    weak, strong = root.add_child(0, "Answer: 2"), root.add_child(0, "Answer: 1")
    root.visits, (weak.visits, weak.q_sum), (strong.visits, strong.q_sum) = 10, (1, -1.0), (4, 4.0)
    guide = OutcomeGuide(SINGLE, TreeSearchSettings(c=4.0), "1", FirstChoice(), ends_with_gold)
    drive(simulate(root, guide), LoadedModels(fake_policy(lambda m, k, rng: "unused")))
    # -1 + 4*sqrt(ln 10 / 1) = 5.07 beats 1 + 4*sqrt(ln 10 / 4) = 4.03 (with N+1 below, the strong one would win)
    assert (weak.visits, weak.q_sum, strong.visits) == (2, -2.0, 4)
    assert (root.visits, root.q_sum) == (11, -1.0)


def test_terminal_children_are_preferred_when_an_expansion_mixes_them(fake_policy):
    policy = scripted({
        ("read", "Q"): ["facts", "other facts", "more facts"],
        ("solve", "Q\n\nfacts"): ["unsure, maybe 3", "Answer: 3", "Answer: 4"],
    }, fake_policy)
    root, _ = build_tree(BRANCHY, "Q", "3", policy, TreeSearchSettings(n_rollouts=1, n_candidates=3),
                         FirstChoice(), ends_with_gold)
    unsure, right, wrong = root.children[0].children
    assert not unsure.is_terminal and unsure.visits == 0 and not unsure.children
    assert (right.visits, right.q_sum, wrong.visits, wrong.q_sum) == (1, 1.0, 1, -1.0)
    assert root.visits == 2 and root.q_sum == 0.0


def test_dead_end_scores_minus_one(fake_policy):
    class Silent:
        def __init__(self):
            self.inner = scripted({("plan", "Q"): ["p0", "p1"]}, fake_policy)

        def reseed(self, seed):
            pass

        def sample(self, prompts, n, **kw):
            if prompts[0][0]["content"] == "solve":
                return [[]]  # the solver produced nothing
            return self.inner.sample(prompts, n, **kw)

    root, stats = build_tree(CHAIN, "Q", "1", Silent(), TreeSearchSettings(n_rollouts=1, n_candidates=2),
                             FirstChoice(), ends_with_gold)
    p0 = root.children[0]
    assert not p0.is_terminal and not p0.children
    assert (root.visits, root.q_sum, p0.visits, p0.q_sum) == (1, -1.0, 1, -1.0)
    assert root.children[1].visits == 0


def test_early_stop_after_24_stale_rollouts(fake_policy):
    always_right = fake_policy(lambda messages, k, rng: "Answer: 7")
    root, stats = build_tree(SINGLE, "Q", "7", always_right, TreeSearchSettings(n_rollouts=100, n_candidates=2),
                             random.Random(0), ends_with_gold)
    # The root value sits at +1 from the first rollout: settled values count as stale right away.
    assert stats["rollouts"] == STALE_LIMIT and stats["early_stopped"]
    assert root.q_mean == 1.0


def test_early_stop_rule():
    stop = EarlyStop()
    assert not stop.update(0.0)                    # first value is recorded
    assert not stop.update(0.3) and stop.stale == 0  # a real move resets the counter
    for _ in range(STALE_LIMIT - 1):
        assert not stop.update(0.305)              # moves of <= 0.01 are stale
    assert stop.update(0.3)
    stop = EarlyStop()
    assert not stop.update(-0.5)
    assert not stop.update(-0.97) and stop.stale == 1  # moved, but within 0.05 of -1: still stale


def test_default_grader_is_the_answer_checker(fake_policy):
    pytest.importorskip("masprm.answers")
    policy = fake_policy(lambda messages, k, rng: ["The answer is 12.", "Answer: 13"][k])
    root, _ = build_tree(SINGLE, "Q", "13", policy, TreeSearchSettings(n_rollouts=1, n_candidates=2),
                         FirstChoice())
    assert [c.q_mean for c in root.children] == [-1.0, 1.0]


# --------------------------------------------------------------------------- tree files


def test_tree_json_schema(tmp_path, fake_policy):
    job = make_job(tmp_path, n_candidates=10, plot=True, verbose=True)
    summary = run_job(job, random_team(fake_policy), EXAMPLES[1])
    tree = json.loads((tmp_path / "1.json").read_text())
    assert (tmp_path / "1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keys = {"steps", "action_text", "is_terminal", "final_answer", "visits", "q_sum", "q_mean",
            "node_text", "children"}

    def check(node, depth):
        assert keys <= set(node)
        assert len(node["steps"]) == depth and len(node["children"]) <= 8
        assert isinstance(node["visits"], int) and isinstance(node["q_sum"], float)
        assert node["q_mean"] == pytest.approx(node["q_sum"] / node["visits"] if node["visits"] else 0.0)
        if depth:
            assert node["action_text"].startswith("[agent ") and node["action_text"].endswith(node["node_text"])
            assert node["steps"][-1] == node["node_text"]
        assert (node["final_answer"] is not None) == node["is_terminal"]
        for child in node["children"]:
            check(child, depth + 1)

    check(tree, 0)
    assert tree["action_text"] is None and tree["node_text"] == "What is 1 + 2?"
    assert len(tree["children"]) == 8  # 10 candidates sampled, 8 kept in the JSON
    meta = tree["meta"]
    assert meta["gold"] == "3" and meta["index"] == 1 and meta["seed"] == 42 and meta["example_seed"] == 43
    assert meta["dataset"] == "toy" and meta["search"]["n_candidates"] == 10
    assert meta["stats"]["rollouts"] <= 6 and meta["example_meta"] == {"source": "test"}
    assert "meta" not in tree["children"][0]
    assert summary["idx"] == 1 and "rollout 1" in summary["report"] and "reward:" in summary["report"]


def test_same_seed_same_tree(tmp_path, fake_policy):
    for name, seed in (("a", 42), ("b", 42), ("c", 43)):
        run_job(make_job(tmp_path / name, seed=seed, plot=False), random_team(fake_policy), EXAMPLES[2])
    a, b, c = ((tmp_path / n / "2.json").read_text() for n in "abc")
    assert a == b
    assert a != c


def test_killed_run_resumes_without_corrupt_or_duplicate_trees(tmp_path, fake_policy):
    class Killed(BaseException):
        """Stands in for the process being killed: not an Exception, so nothing catches it."""

    calls = {"n": 0}

    def dying_setup():
        policy = random_team(fake_policy)
        sample = policy.sample

        def sample_then_die(*args, **kw):
            calls["n"] += 1
            if calls["n"] == 12:  # somewhere inside a later example
                raise Killed
            return sample(*args, **kw)
        policy.sample = sample_then_die
        return policy

    run_dir, fresh_dir = tmp_path / "run", tmp_path / "fresh"
    job = make_job(run_dir, plot=False)
    with pytest.raises(Killed):
        run_trees(job, dying_setup, EXAMPLES, log=lambda s: None)
    done_before = sorted(p.name for p in run_dir.glob("*.json"))
    assert 0 < len(done_before) < len(EXAMPLES)
    stamps = {name: (run_dir / name).stat().st_mtime_ns for name in done_before}
    (run_dir / ".3.json.x1y2.tmp").write_text('{"steps": [')  # what a hard kill mid-write leaves

    written, failed = run_trees(job, lambda: random_team(fake_policy), EXAMPLES, log=lambda s: None)
    assert written == len(EXAMPLES) - len(done_before) and failed == []
    assert sorted(p.name for p in run_dir.glob("*.json")) == [f"{i}.json" for i in range(4)]
    assert all((run_dir / n).stat().st_mtime_ns == t for n, t in stamps.items())  # finished trees untouched

    run_trees(make_job(fresh_dir, plot=False), lambda: random_team(fake_policy), EXAMPLES, log=lambda s: None)
    for i in range(4):  # every tree valid and equal to an uninterrupted run's
        assert json.loads((run_dir / f"{i}.json").read_text()) == json.loads((fresh_dir / f"{i}.json").read_text())
    assert run_trees(job, lambda: random_team(fake_policy), EXAMPLES, log=lambda s: None) == (0, [])


def test_a_folder_of_another_selection_is_refused(tmp_path, fake_policy):
    from masprm.errors import ConfigError

    job = make_job(tmp_path, plot=False)
    run_trees(job, lambda: random_team(fake_policy), EXAMPLES[:2], log=lambda s: None)
    reshuffled = [Example(i, ex.question, ex.gold) for i, ex in enumerate(reversed(EXAMPLES))]
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    with pytest.raises(ConfigError, match="another question than example 0"):
        run_trees(job, lambda: random_team(fake_policy), reshuffled, log=lambda s: None)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before
    # More examples of the same selection (a larger --n) just add trees.
    assert run_trees(job, lambda: random_team(fake_policy), EXAMPLES, log=lambda s: None) == (2, [])


def test_failing_example_is_reported_and_others_written(tmp_path, fake_policy):
    def respond(messages, k, rng):
        if "What is 2 + 2?" in messages[1]["content"]:
            raise ValueError("model crashed")
        return "Answer: 0"

    logs = []
    written, failed = run_trees(make_job(tmp_path, plot=False), lambda: fake_policy(respond), EXAMPLES,
                                log=logs.append)
    assert written == 3 and [idx for idx, _ in failed] == [2]
    assert "ValueError: model crashed" in failed[0][1]
    assert any("example 2 failed" in line for line in logs)
    assert not (tmp_path / "2.json").exists()
