"""The toy step-level benchmark: sampled team transcripts, every step's value under each scorer, the report."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from masprm.worlds.toy.steplabel import AGENTS

from masprm.search.context import SearchContext
from masprm.graph import load_mas_config
from masprm.interfaces import Generation, LogProb
from masprm.search.engine import CallStats, LoadedModels, RequestKeys, drive
from masprm.instruments import stepbench
from masprm.worlds.toy.task import generate_split
from masprm.worlds.toy.transcripts import planner_text, reader_text

ROOT = Path(__file__).resolve().parents[1]
GRAPH = load_mas_config(ROOT / "configs/toy.yaml")
PROBLEMS = generate_split("test")[:3]
SEP = "</step>"


def script(problem) -> list[dict[str, str]]:
    """Per sample number, each agent's text: sample 0 is right throughout, sample 1's Solver is off by one."""
    right, wrong = f"Answer: {problem.answer}", f"Answer: {problem.answer + 1}"
    shared = {"Reader": reader_text(problem), "Planner": planner_text(problem)}
    return [{**shared, "Solver": right, "Verifier": right}, {**shared, "Solver": wrong, "Verifier": wrong}]


class ScriptedPolicy:
    """Texts by (example, sample number) and agent: the request keys name both, the system prompt the agent."""

    def __init__(self, problems):
        self.scripts = [script(p) for p in problems]
        self.samples: list[dict] = []        # each sample call's settings and prompts
        self.logprob_requests: list = []

    def sample(self, prompts, n, *, temperature, top_p, max_new_tokens, keys=None):
        assert keys is not None and n == 1
        self.samples.append({"prompts": list(prompts), "temperature": temperature, "top_p": top_p,
                             "max_new_tokens": max_new_tokens})
        out = []
        for messages, (_seed, example, _request, sample_no) in zip(prompts, keys):
            agent = messages[0]["content"].split(":")[0]
            text = self.scripts[example][sample_no][agent]
            out.append([Generation(text, prompt_tokens=3, new_tokens=len(text.split()))])
        return out

    def logprob(self, requests):
        self.logprob_requests.extend(requests)
        # -1 per character of the completion over its words: the per-token mean is -len(text) / words
        return [LogProb(-float(len(text)), prompt_tokens=2, completion_tokens=len(text.split()))
                for _, text in requests]


class CountingScorer:
    """Values the number of completed steps (separators) in the text, times ``factor``."""

    separator = SEP

    def __init__(self, factor: float):
        self.factor = factor
        self.texts: list[str] = []
        self.last_tokens: list[int] = []
        self.calls = 0

    def count_tokens(self, text):
        return len(text.split())

    def score_batch(self, texts):
        self.calls += 1
        self.texts.extend(texts)
        self.last_tokens = [len(t.split()) for t in texts]
        return [self.factor * t.count(SEP) for t in texts]


def models(problems=PROBLEMS):
    return LoadedModels(ScriptedPolicy(problems), {"masprm": CountingScorer(1.0), "orm": CountingScorer(-0.5)})


SETTINGS = stepbench.transcript_settings(0.95)


def test_transcripts_then_every_scorer_values_every_step():
    problem, m = PROBLEMS[0], models()
    ctx = SearchContext(m.policy, GRAPH, SETTINGS, keys=RequestKeys(42, 0))
    stats = CallStats()
    found = drive(stepbench.transcripts(ctx, problem, 2, 0.7), m, stats)
    for name in ("masprm", "orm"):
        stepbench.score_steps(m.scorer(name), name, found)

    expected = [[s[a] for a in ("Reader", "Planner", "Solver", "Verifier")] for s in script(problem)]
    assert [t["outputs"] for t in found] == expected          # 4 messages each, in team order
    for t in found:
        assert t["values"]["masprm"] == [1.0, 2.0, 3.0, 4.0]   # the state after step k has k steps
        assert t["values"]["orm"] == [-0.5, -1.0, -1.5, -2.0]
        assert t["values"]["logprob"] == pytest.approx([-len(x) / len(x.split()) for x in t["outputs"]])
    # the scorers read the full transcript prefixes: question + each step + separator, all in one call each
    prefixes = [problem.question + "".join(o + SEP for o in outs[:k + 1]) for outs in expected for k in range(4)]
    assert m.scorer("masprm").texts == prefixes and m.scorer("orm").texts == prefixes
    assert m.scorer("masprm").calls == 1 and m.scorer("orm").calls == 1
    # one sampling call per agent (both transcripts together) at the agent's token cap, then one log-prob call
    assert [(len(c["prompts"]), c["temperature"], c["top_p"], c["max_new_tokens"]) for c in m.policy.samples] == \
        [(2, 0.7, 0.95, a.max_new_tokens) for a in GRAPH.agents]
    assert [c["prompts"][0][0]["content"] for c in m.policy.samples] == [a.system_prompt for a in GRAPH.agents]
    assert stats.by_kind == {"sample": 4, "logprob": 1}
    # each step's log-prob is of its own message given the prompt the agent was sampled with
    sampled = [(c["prompts"][j], found[j]["outputs"][k]) for j in range(2) for k, c in enumerate(m.policy.samples)]
    assert m.policy.logprob_requests == sampled
    assert ctx.usage.agent_runs == 8


@pytest.mark.parametrize("batch_size", [1, 2])
def test_sample_split_labels_the_transcripts_in_question_order(batch_size):
    args = stepbench.StepBenchArgs(top_p=0.95, seed=7, temperature=0.7, search_batch_size=batch_size)
    m = models()
    found = stepbench.sample_split(m, GRAPH, PROBLEMS, args, 2)
    assert [t["question"] for t in found] == [p.question for p in PROBLEMS for _ in range(2)]
    assert [t["first_error"] for t in found] == [None, 2] * 3      # sample 1's Solver is wrong
    assert [t["final_correct"] for t in found] == [True, False] * 3
    assert [[s["correct"] for s in t["steps"]] for t in found[:2]] == [[True] * 4, [True, True, False, False]]
    stepbench.score_steps(m.scorer("masprm"), "masprm", found)
    assert all(t["values"]["masprm"] == [1.0, 2.0, 3.0, 4.0] for t in found) and m.scorer("masprm").calls == 1


def item(values: list[float], first_error, step_correct: list[int]) -> dict:
    """A labelled transcript as sample_split leaves it; the orm values are a constant decoy."""
    return {"values": {"masprm": values, "orm": [0.5] * len(values)}, "first_error": first_error,
            "final_correct": first_error is None, "steps": [{"agent": agent, "correct": bool(c)} for agent, c in zip(AGENTS, step_correct)]}


def test_scorer_report_takes_the_threshold_from_calibration_and_scores_the_test_set():
    calibration = [
        item([0.9, 0.8, 0.2, 0.1], 2, [1, 1, 0, 0]),     # located for t in (0.2, 0.8]
        item([0.9, 0.7, 0.6, 0.5], None, [1] * 4),       # error-free for t <= 0.5
        item([0.3, 0.9, 0.9, 0.9], 0, [0, 1, 1, 1]),     # located for t > 0.3
        item([0.8, 0.4, 0.9, 0.9], None, [1] * 4),       # error-free for t <= 0.4
    ]
    # candidates below 0.3 miss the third transcript; 0.35 (between 0.3 and 0.4) gets all four: F1 = 1
    test = [
        item([0.9, 0.3, 0.1, 0.9], 1, [1, 0, 0, 1]),     # first value < 0.35 at step 1: located
        item([0.9, 0.9, 0.9, 0.2], 2, [1, 1, 0, 0]),     # flagged at step 3, the error is at 2: missed
        item([0.9, 0.8, 0.7, 0.6], None, [1] * 4),       # nothing below 0.35: right
        item([0.9, 0.34, 0.9, 0.9], None, [1] * 4),      # a dip to 0.34: wrongly flagged
    ]
    report = stepbench.scorer_report(calibration, test, "masprm")
    assert report["threshold"] == pytest.approx(0.35)
    assert (report["acc_erroneous"], report["acc_correct"], report["f1"]) == (0.5, 0.5, 0.5)
    assert (report["n_erroneous"], report["n_correct"]) == (2, 2)
    # AUC: 12 right steps, 4 wrong (0.3, 0.1, 0.9, 0.2); every right step beats 0.3, 0.1 and 0.2, and the
    # eight right 0.9s tie the wrong 0.9: (3 * 12 + 8 / 2) / (12 * 4) = 40 / 48
    assert report["auc"] == pytest.approx(40 / 48)
    # Within one agent's steps: the Reader's are all right (no AUC); the Planner's and the Verifier's one
    # wrong step is below every right one; the Solver's right {0.7, 0.9} against wrong {0.1, 0.9}:
    # (1 + 0 + 1 + 0.5) / 4
    assert report["auc_by_agent"] == {"Reader": None, "Planner": 1.0, "Solver": pytest.approx(0.625),
                                      "Verifier": 1.0}
    decoy = stepbench.scorer_report(calibration, test, "orm")     # constant values: no ranking at all
    assert decoy["auc"] == 0.5 and decoy["threshold"] != report["threshold"]


def run_stepbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "masprm.instruments.stepbench", *args], cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True)


def test_cli_missing_policy_folder_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "results" / "stepbench.json"
    proc = run_stepbench("--policy", str(tmp_path / "no_policy"), "--prm_dir", str(tmp_path),
                         "--orm_dir", str(tmp_path), "--out", str(out))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--policy" in proc.stderr and "no_policy" in proc.stderr
    assert not out.exists() and not out.parent.exists()
    proc = run_stepbench("--policy", str(tmp_path), "--prm_dir", str(tmp_path), "--orm_dir", str(tmp_path),
                         "--samples", "0", "--out", str(out))
    assert proc.returncode == 2 and "--samples" in proc.stderr and proc.stderr.strip().count("\n") == 0
    assert not out.exists()


# --------------------------------------------------------------------------- any number of scorers

LOG = math.log
# Three transcripts of two steps (Reader, Planner): error-free, wrong from the Reader on, wrong at the Planner.
LABELS = [(None, [1, 1]), (0, [0, 0]), (1, [1, 0])]
VALUES = {   # per scorer, each transcript's step values
    "up": [[0.5, 0.5], [-0.5, 0.0], [0.5, -0.5]],
    "flat": [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]],
    "logprob": [[LOG(0.5), LOG(0.5)], [LOG(0.5), LOG(0.5)], [LOG(0.5), LOG(0.25)]],
}


def three_scorers() -> list[dict]:
    return [{"values": {name: values[i] for name, values in VALUES.items()}, "first_error": first_error,
             "final_correct": first_error is None,
             "steps": [{"agent": agent, "correct": bool(c)} for agent, c in zip(AGENTS, correct)]}
            for i, (first_error, correct) in enumerate(LABELS)]


def test_three_scorers_get_hand_computed_f1_auc_per_agent_auc_and_ece():
    ts = three_scorers()   # calibration = test, so each threshold is the best one on these three
    up, flat, lp = (stepbench.scorer_report(ts, ts, name) for name in ("up", "flat", "logprob"))
    # up: candidates -1.5, -0.25, 0.25, 1.5; from -0.25 on every transcript is located (the smaller wins the tie)
    assert up["threshold"] == -0.25 and (up["acc_erroneous"], up["acc_correct"], up["f1"]) == (1.0, 1.0, 1.0)
    assert up["auc"] == 1.0 and up["auc_by_agent"] == {"Reader": 1.0, "Planner": 1.0}
    # as probabilities (v + 1) / 2: bin 7 holds 0.75 x 3 (all right): |2.25 - 3|; bin 2 holds 0.25 x 2 (wrong):
    # |0.5 - 0|; bin 5 holds one 0.5 (wrong): |0.5 - 0|; over 6 steps
    assert up["ece"] == pytest.approx((0.75 + 0.5 + 0.5) / 6)
    # flat: nothing below -1 ("no error" everywhere) or everything flagged at step 0 above +1: F1 0 both ways
    assert flat["threshold"] == -1.0 and (flat["acc_erroneous"], flat["acc_correct"], flat["f1"]) == (0.0, 1.0, 0.0)
    assert flat["auc"] == 0.5 and flat["auc_by_agent"] == {"Reader": 0.5, "Planner": 0.5}
    assert flat["ece"] == 0.0   # every value 0.5, half of the steps right: calibrated, and useless
    # logprob: between log 0.25 and log 0.5 only the Planner's error is found: acc 1/2 and 1, F1 2/3
    assert lp["threshold"] == pytest.approx((LOG(0.25) + LOG(0.5)) / 2)
    assert (lp["acc_erroneous"], lp["acc_correct"]) == (0.5, 1.0) and lp["f1"] == pytest.approx(2 / 3)
    # 3 right steps at log 0.5 against wrong ones at log 0.5, log 0.5 (ties: 1/2) and log 0.25: (3 + 3) / 9
    assert lp["auc"] == pytest.approx(2 / 3)
    assert lp["auc_by_agent"] == {"Reader": 0.5, "Planner": 0.75}
    # exp(log p) = p: bin 5 holds 0.5 x 5 with 3 right: |2.5 - 3|; bin 2 holds 0.25 (wrong): |0.25 - 0|
    assert lp["ece"] == pytest.approx((0.5 + 0.25) / 6)
    # CIs over transcripts (a resample without one of the classes is left out): "up" locates every
    # transcript and ranks every agent's steps on any resample
    assert up["f1_ci"] == (1.0, 1.0) and up["auc_by_agent_ci"] == {"Reader": (1.0, 1.0), "Planner": (1.0, 1.0)}
    # "flat" never ranks: AUC 0.5 and F1 0 on every resample that has both classes
    assert flat["f1_ci"] == (0.0, 0.0) and flat["auc_by_agent_ci"]["Reader"] == (0.5, 0.5)
    # logprob finds the third transcript's error only. Of the 27 resamples of 3, 18 hold the correct one and an
    # erroneous one; 6 of those lack the third transcript (F1 0), some hold only it besides the correct
    # one (F1 1): a third of the mass at 0, so the interval is [0, 1]
    assert lp["f1_ci"] == (0.0, 1.0)
    # per-agent thresholds can only help on the transcripts they were chosen on (calibration = test here)
    assert up["f1_by_agent_thresholds"] == 1.0 and lp["f1_by_agent_thresholds"] >= lp["f1"]
    assert list(up["thresholds_by_agent"]) == ["Reader", "Planner"]
    # the last step's value against final correctness: only the error-free transcript is right; "up" gives
    # it 0.5 against 0.0 and -0.5: AUC 1; "flat" ties everything: 0.5
    assert up["outcome_auc"] == 1.0 and flat["outcome_auc"] == 0.5


def test_expected_calibration_error_bins():
    from masprm.step_metrics import expected_calibration_error
    assert expected_calibration_error([1.0, 0.95, 0.0], [1, 0, 0]) == pytest.approx((0.95 + 1.0 - 1) / 3)
    assert expected_calibration_error([0.05, 0.15], [0, 1], bins=1) == pytest.approx(abs(0.2 - 1) / 2)
    assert expected_calibration_error([], []) is None
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        expected_calibration_error([1.5], [1])


def test_cli_loads_each_scorer_once_and_reports_every_one(tmp_path, monkeypatch, capsys):
    loads: list[str] = []
    scorers: dict[str, CountingScorer] = {}

    def load_scorer_folder(folder, policy, setting):
        loads.append(folder)
        return scorers.setdefault(folder, CountingScorer(0.0625 * len(loads)))   # values stay in [-1, 1]

    monkeypatch.setattr(stepbench, "generate_split", lambda split, task: PROBLEMS)
    monkeypatch.setattr(stepbench, "load_policy", lambda args: LoadedModels(ScriptedPolicy(PROBLEMS)))
    monkeypatch.setattr(stepbench, "load_scorer_folder", load_scorer_folder)
    folders = {name: tmp_path / name for name in ("ppm", "first", "second", "policy")}
    for folder in folders.values():
        folder.mkdir()
    out = tmp_path / "bench.json"   # beside the folders the benchmark reads, never inside one
    monkeypatch.setattr(sys, "argv", ["stepbench", "--policy", str(folders["policy"]), "--prm_dir", str(folders["ppm"]),
                                      "--scorer", f"first={folders['first']}", "--scorer",
                                      f"second={folders['second']}", "--out", str(out)])
    assert stepbench.main() == 0
    report = json.loads(out.read_text())
    assert list(report["scorers"]) == ["masprm", "first", "second", "logprob"]   # no orm: --scorer was given
    assert loads == [str(folders[n]) for n in ("ppm", "first", "second")]       # each folder loaded once
    assert all(s.calls == 2 for s in scorers.values())                          # one call per split
    assert report["transcripts"][0]["values"]["second"] == [0.1875, 0.375, 0.5625, 0.75]   # the third folder
    assert report["calibration"]["bins"] == 10 and "states" not in report["transcripts"][0]
    assert capsys.readouterr().out.splitlines()[0].split()[:6] == ["scorer", "acc_erroneous", "acc_correct", "F1",
                                                                   "AUC", "ECE"]


def test_cli_scorer_names_are_checked_before_anything_loads(tmp_path):
    out = tmp_path / "bench.json"
    for spec, words in ((f"{tmp_path}", "NAME=FOLDER"), (f"logprob={tmp_path}", "log-prob"),
                        (f"oracle_step={tmp_path}", "reference scorer"),
                        (f"x={tmp_path / 'missing'}", "no such folder")):
        proc = run_stepbench("--policy", str(tmp_path), "--scorer", spec, "--out", str(out))
        assert proc.returncode == 2 and words in proc.stderr and proc.stderr.strip().count("\n") == 0
    proc = run_stepbench("--policy", str(tmp_path), "--scorer", f"a={tmp_path}", "--scorer", f"a={tmp_path}",
                         "--out", str(out))
    assert proc.returncode == 2 and "twice" in proc.stderr
    assert not out.exists()


# --------------------------------------------------------------------------- --split and the world's own defaults


def test_defaults_follow_the_world_and_the_split():
    toy = stepbench.StepBenchArgs()
    assert (toy.policy, toy.mas_config, toy.out) == ("artifacts/toy/policy", "configs/toy.yaml",
                                                     "results/toy_stepbench.json")   # as before the option
    deep = stepbench.StepBenchArgs(world="toy_deep", split="dev")
    assert (deep.policy, deep.mas_config, deep.out) == ("artifacts/toy_deep/policy", "configs/toy_deep.yaml",
                                                        "results/toy_deep_stepbench_dev.json")
    assert stepbench.bench_splits(deep) == {"calibration": ("train", "calibration_samples"),
                                            "dev": ("dev", "samples")}   # no test split anywhere
    assert stepbench.bench_splits(toy) == {"calibration": ("train", "calibration_samples"),
                                           "test": ("test", "samples")}


def test_a_dev_run_samples_the_train_and_dev_splits_only(tmp_path, monkeypatch):
    asked: list[str] = []

    class Stop(Exception):
        pass

    def scorer_loaded(folder, policy, setting):
        raise Stop   # every transcript set is drawn before the first scorer loads

    monkeypatch.setattr(stepbench, "generate_split", lambda split, task: asked.append(split) or PROBLEMS)
    monkeypatch.setattr(stepbench, "load_policy", lambda args: None)
    monkeypatch.setattr(stepbench, "sample_split", lambda models, graph, problems, args, samples: [])
    monkeypatch.setattr(stepbench, "load_scorer_folder", scorer_loaded)
    (tmp_path / "policy").mkdir()
    (tmp_path / "s").mkdir()
    monkeypatch.setattr(sys, "argv", ["stepbench", "--world", "toy_deep", "--split", "dev", "--policy",
                                      str(tmp_path / "policy"), "--scorer", f"s={tmp_path / 's'}", "--mas_config",
                                      str(ROOT / "configs/toy_deep.yaml"), "--out", str(tmp_path / "bench.json")])
    with pytest.raises(Stop):
        stepbench.main()
    assert asked == ["train", "dev"]


def run_elsewhere(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "masprm.instruments.stepbench", *args], cwd=cwd,
                          env={"PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True)


def test_toy_deep_never_falls_back_to_the_toy_worlds_scorers(tmp_path):
    # the toy world's demo folders are there, toy_deep's are not: one line naming toy_deep's, nothing written
    for name in ("toy-ppm", "toy-orm"):
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
    (tmp_path / "policy").mkdir()
    proc = run_elsewhere(tmp_path, "--world", "toy_deep", "--policy", "policy")
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "checkpoints/toy_deep-ppm is not there" in proc.stderr and "--prm_dir" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints", "policy"]


def test_a_split_the_world_lacks_is_one_line(tmp_path):
    (tmp_path / "policy").mkdir()
    proc = run_elsewhere(tmp_path, "--split", "dev", "--policy", "policy", "--scorer", "a=policy")
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "--split" in proc.stderr and "the toy world has no dev split (its splits: train, test)" in proc.stderr
