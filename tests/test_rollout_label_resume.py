"""Stage 2's rollout-based label schemes resume: each scheme stopped after a tree and rerun writes the bytes of an
unbroken run (and its summary), a SIGKILL loses at most the tree in progress, a progress file of other settings
is ignored in one line, and the progress file goes once the output is in place.

The policy is a keyed random one (each prompt's sample from the stream its request key names, as HFPolicy's),
so the labels depend on the call count the progress file keeps; four trees: two questions in the root window,
the first question again (its prefixes from the cache) and one outside the window.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from masprm.stages import preprocess as preprocess_data
from conftest import FakePolicy
from helpers_trees import gsm8k_tree, preprocess_workdir, write_trees

RUN = "gsm8k_res_train_tiny_r2_c4_cand3_t0p7_p0p95"
TESTS = Path(__file__).resolve().parent
SCHEMES = {   # each scheme with small settings: a few policy calls per tree
    "mc_rollouts": ["--mc-rollouts", "2"],
    "first_error_search": ["--search-rollouts", "2"],
    "step_consistency": ["--consistency-rollouts", "2"],
    "shapley": [],
    "mc_rollouts_uniform": ["--rollout-budget", "5"],
    "mc_rollouts_active": ["--rollout-budget", "5", "--active-rollouts", "2", "--rollout-ensemble", "ens"],
}


def respond(messages, k, rng):
    """The Verifier answers 4 (the gold), 5 or 7 at random; every other agent writes one of a few texts."""
    if messages[0]["content"] == "You are the Verifier.":
        return rng.choice(["Answer: 4", "Answer: 5", "Answer: 7"])
    return rng.choice(["fresh reading", "plan X", "solve A", "solve B"])


def trees():
    other = gsm8k_tree(0.1)
    other["node_text"] = "What is 1 + 3?"
    return [gsm8k_tree(0.2), other, gsm8k_tree(0.3), gsm8k_tree(0.95)]


def tree_lines(partial: Path) -> int:
    """Finished trees in a progress file (its lines after the fingerprint)."""
    return max(0, len(partial.read_text(encoding="utf-8").splitlines()) - 1) if partial.is_file() else 0


class StoppingPolicy(FakePolicy):
    """Stops the run (as Ctrl-C does) at its first call once ``after`` trees are in the progress file."""

    def __init__(self, partial: Path, after: int):
        super().__init__(respond)
        self.partial, self.after = partial, after

    def sample(self, *args, **kwargs):
        if tree_lines(self.partial) >= self.after:
            raise KeyboardInterrupt
        return super().sample(*args, **kwargs)


class TextSpreads:
    """An ensemble's spread, scripted: a function of the prefix's last message."""

    def spreads(self, question, prefixes):
        return [len(p[-1][1]) / 10 for p in prefixes]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    preprocess_workdir(tmp_path, RUN)
    write_trees(tmp_path / "results" / RUN, trees())
    monkeypatch.setattr(preprocess_data, "ensemble_spreads", lambda folder: TextSpreads())
    # the scripted ensemble has no folder to check (its checks: test_preprocess_labels.py)
    monkeypatch.setattr(preprocess_data, "check_ensemble_folder", lambda folder: None)
    return tmp_path


def run(monkeypatch, name: str, policy, seed: int = 3) -> None:
    monkeypatch.setattr(preprocess_data, "rollout_policy", lambda *args, **kwargs: policy)
    preprocess_data.main(["--input", f"results/{RUN}", "--labels", name, "--rollout-policy", "policy",
                          "--seed", str(seed), *SCHEMES[name]])


def summary(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("[preprocess][labels") and "resuming" not in line]


@pytest.mark.parametrize("name", list(SCHEMES))
def test_a_stopped_run_resumes_to_the_bytes_of_an_unbroken_one(workdir, monkeypatch, capsys, name):
    output = workdir / "results" / f"labels_{name}_{RUN}.jsonl"
    partial = output.with_name(f"labels_{name}_{RUN}.partial.jsonl")
    whole = FakePolicy(respond)
    run(monkeypatch, name, whole)
    unbroken, told = output.read_bytes(), summary(capsys.readouterr().out)
    assert not partial.exists() and len(told) == 2   # the records' line and the policy cost's
    output.unlink()

    with pytest.raises(KeyboardInterrupt):   # stopped inside the second tree: the first one is kept
        run(monkeypatch, name, StoppingPolicy(partial, 1))
    assert tree_lines(partial) == 1 and not output.exists()
    with open(partial, "a", encoding="utf-8") as fh:   # and a line a kill cut short is dropped
        fh.write('{"tree": "1.json", "records": [{"prom')
    capsys.readouterr()
    rest = FakePolicy(respond)
    run(monkeypatch, name, rest)
    out = capsys.readouterr()
    assert output.read_bytes() == unbroken and summary(out.out) == told
    assert "resuming: 1/4 trees already done" in out.err
    # the first tree's samples were not drawn again, and nothing is left beside the output
    assert 0 < len(rest.calls) < len(whole.calls)
    assert sorted(p.name for p in output.parent.iterdir() if p.is_file()) == [output.name]


def test_a_progress_file_of_other_settings_is_ignored_in_one_line(workdir, monkeypatch, capsys):
    name = "mc_rollouts"
    output = workdir / "results" / f"labels_{name}_{RUN}.jsonl"
    partial = output.with_name(f"labels_{name}_{RUN}.partial.jsonl")
    run(monkeypatch, name, FakePolicy(respond), seed=4)
    seed4 = output.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        run(monkeypatch, name, StoppingPolicy(partial, 1), seed=3)
    capsys.readouterr()
    run(monkeypatch, name, FakePolicy(respond), seed=4)   # another seed: the seed-3 tree is not taken
    said = [line for line in capsys.readouterr().err.splitlines() if "partial.jsonl" in line]
    assert len(said) == 1 and "progress of a run with other settings" in said[0] and "ignored" in said[0]
    assert output.read_bytes() == seed4 and not partial.exists()


DRIVER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from masprm.stages import preprocess
from conftest import FakePolicy
from test_rollout_label_resume import respond, tree_lines

class Hang(FakePolicy):
    def sample(self, *args, **kwargs):   # once two trees are kept, wait to be killed
        while tree_lines(Path({partial!r})) >= 2:
            time.sleep(0.05)
        return super().sample(*args, **kwargs)

preprocess.rollout_policy = lambda *args, **kwargs: Hang(respond)
preprocess.main(["--input", "results/{run}", "--labels", "shapley", "--rollout-policy", "policy", "--seed", "3"])
"""


def test_a_sigkilled_shapley_run_loses_at_most_the_tree_in_progress(workdir, monkeypatch):
    output = workdir / "results" / f"labels_shapley_{RUN}.jsonl"
    partial = output.with_name(f"labels_shapley_{RUN}.partial.jsonl")
    run(monkeypatch, "shapley", FakePolicy(respond))
    unbroken = output.read_bytes()
    output.unlink()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent / "src"), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", DRIVER.format(tests=str(TESTS), partial=str(partial), run=RUN)],
                             cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while tree_lines(partial) < 2 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tree_lines(partial) == 2, child.stderr.read().decode() if child.poll() is not None else "timed out"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert not output.exists() and json.loads(partial.read_text().splitlines()[2])["tree"] == "1.json"
    rest = FakePolicy(respond)
    run(monkeypatch, "shapley", rest)
    assert output.read_bytes() == unbroken and not partial.exists()
    # the killed writer's temporary file is gone too (the next writer of the output removes it)
    assert sorted(p.name for p in output.parent.iterdir() if p.is_file()) == [output.name]


class Steps:
    """A part whose state is how many trees it has seen; it records what it is given back."""

    def __init__(self):
        self.seen, self.given = 0, []

    def progress_state(self):
        self.seen += 1
        return {"seen": self.seen}

    def resume_state(self, state):
        self.given.append(state["seen"])


def test_the_trees_before_a_damaged_or_foreign_line_are_taken_and_the_rest_dropped(tmp_path):
    from masprm.labels.progress import TreeProgress

    output = tmp_path / "labels_x_run.jsonl"
    first = TreeProgress(output, "abc", {"part": Steps()})
    for name in ("0.json", "1.json", "2.json", "3.json"):
        first.add(name, [{"prompt": name}])
    lines = first.path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 5 and json.loads(lines[0]) == {"fingerprint": "abc"}
    # the third tree's line gets a byte that is not UTF-8: trees 0 and 1 are taken, 2 and 3 dropped
    first.path.write_bytes(b"".join(lines[:3]) + b"\xff" + lines[3] + lines[4])
    part, said = Steps(), []
    again = TreeProgress(output, "abc", {"part": part}, say=said.append)
    assert again.resume(["0.json", "1.json", "2.json", "3.json"]) == [[{"prompt": "0.json"}], [{"prompt": "1.json"}]]
    assert part.given == [1, 2] and said == [f"resuming: 2/4 trees already done ({again.path.name})"]
    assert first.path.read_bytes() == b"".join(lines[:3])   # what did not fit is gone before anything is appended
    # a line naming another tree than the one in its place (the input changed under the same fingerprint) stops
    # the taking there
    part = Steps()
    assert TreeProgress(output, "abc", {"part": part}, say=said.append).resume(["0.json", "5.json"]) == \
        [[{"prompt": "0.json"}]] and part.given == [1]
    again.finish()
    assert not again.path.exists()
