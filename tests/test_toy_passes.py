"""masprm.instruments.passes: fresh single passes labelled by the world's step truth as steps records (the supervised
row's data), and a scorer's train-fit on them, on scripted passes whose labels were worked out by hand."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from masprm.interfaces import Generation, LogProb
from masprm.search.engine import LoadedModels
from masprm.instruments import passes, stepbench
from masprm.worlds.toy_deep.data import TOY_DEEP
from masprm.worlds.toy_deep.task import team, transcript
from masprm.worlds.toy.task import generate_split

from helpers import REPO

PROBLEMS = generate_split("train", TOY_DEEP)[:2]
AGENTS = team(5)


class DeepScript:
    """Sample 0 of each question: its reference transcript (all right); sample 1: the Reader misreads its last
    number as one more (wrong) and the rest is the reference (right: the Planner reads the question)."""

    def sample(self, prompts, n, *, temperature, top_p, max_new_tokens, keys=None):
        out = []
        for messages, (_seed, example, _request, sample_no) in zip(prompts, keys):
            agent = AGENTS.index(messages[0]["content"].split(":")[0])
            texts = transcript(PROBLEMS[example])
            if sample_no == 1 and agent == 0:
                numbers = texts[0].split()
                texts[0] = " ".join(numbers[:-1] + [str(int(numbers[-1]) + 1)])
            out.append([Generation(texts[agent], prompt_tokens=3, new_tokens=2)])
        return out

    def logprob(self, requests):
        return [LogProb(-1.0, prompt_tokens=1, completion_tokens=1) for _ in requests]


def test_records_of_scripted_passes_by_hand(tmp_path, monkeypatch):
    monkeypatch.setattr(stepbench, "load_policy", lambda args: LoadedModels(DeepScript()))
    (tmp_path / "policy").mkdir()
    out = tmp_path / "passes.jsonl"
    monkeypatch.setattr(sys, "argv", ["passes", "--n", "2", "--policy", str(tmp_path / "policy"), "--mas_config",
                                      str(REPO / "configs/toy_deep.yaml"), "--out", str(out)])
    assert passes.main() == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # question order, then pass order: the reference (8 right) and the misread (Reader wrong, 7 right)
    assert [r["labels"] for r in rows] == [[1.0] * 8, [-1.0] + [1.0] * 7] * 2
    assert [(r["prompt"], r["meta"]["pass"]) for r in rows] == [(p.question, k) for p in PROBLEMS for k in (0, 1)]
    assert rows[0]["completions"] == transcript(PROBLEMS[0])
    assert rows[0]["meta"]["agents"] == list(AGENTS) and rows[0]["meta"]["label_scheme"] == "step_truth"
    assert rows[0]["meta"]["question"] == PROBLEMS[0].question   # stage 3's eval split groups by it


def test_more_questions_go_on_past_the_train_split_and_never_into_dev_or_test():
    from masprm.worlds.toy.task import generate_split
    from masprm.worlds.toy_deep.data import TOY_DEEP

    train, dev = generate_split("train", TOY_DEEP), set(p.question for p in generate_split("dev", TOY_DEEP))
    more = passes.first_questions(TOY_DEEP, 450)
    assert more[:400] == train and passes.first_questions(TOY_DEEP, 7) == train[:7]   # each size the smaller's prefix
    assert len({p.question for p in more}) == 450 and not {p.question for p in more} & dev
    assert {TOY_DEEP.split_of(p.question) for p in more} == {"train"}   # hashed into the train buckets


def test_agent_aucs_by_hand():
    records = [{"labels": [1.0, -1.0], "meta": {"agents": ["Reader", "Planner"]}},
               {"labels": [-1.0, 1.0], "meta": {"agents": ["Reader", "Planner"]}},
               {"labels": [1.0, 1.0], "meta": {"agents": ["Reader", "Planner"]}}]
    values = [[0.9, 0.1], [0.2, 0.5], [0.8, 0.5]]
    # Reader: right 0.9, 0.8 above the wrong 0.2: 1.0; Planner: right 0.5, 0.5 against wrong 0.1: 1.0, and the
    # values flipped rank backwards
    assert passes.agent_aucs(records, values) == {"Reader": 1.0, "Planner": 1.0}
    assert passes.agent_aucs(records, [[-v for v in vs] for vs in values]) == {"Reader": 0.0, "Planner": 0.0}


def test_read_records_takes_the_first_questions(tmp_path):
    rows = [{"prompt": q, "completions": ["a"], "labels": [1.0], "meta": {"question": q, "agents": ["Reader"]}}
            for q in ("q1", "q1", "q2", "q3")]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [r["prompt"] for r in passes.read_records(str(path), 2)] == ["q1", "q1", "q2"]


@pytest.mark.parametrize("argv, words", [
    (["--n", "25601", "--out", "x.jsonl"], "at most 25600 train questions"),
    (["--fit", "s"], "--fit and --records go together"),
    ([], "give --out FILE"),
    (["--world", "toy", "--n", "0", "--out", "x.jsonl"], "--n must be at least 1"),
])
def test_bad_flags_are_one_line(tmp_path, argv, words):
    proc = subprocess.run([sys.executable, "-m", "masprm.instruments.passes", *argv], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert words in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_fit_reports_the_scorers_auc_per_agent_on_its_records(tmp_path, tiny_model_dir, monkeypatch):
    import random

    from helpers_training import step_record, train_tiny, write_jsonl
    from masprm.models.options import ModelOptions
    from masprm.models.scorer import load_scorer
    from masprm.state_text import join_steps
    from masprm.step_metrics import auc

    train_tiny(tmp_path, tiny_model_dir, "prm", seed=3)
    rng = random.Random(5)
    rows = [{**r, "meta": {"question": r["prompt"], "agents": ["Echo", "Verdict"]}}
            for r in (step_record(rng) for _ in range(8))]
    data = write_jsonl(tmp_path / "r.jsonl", rows)
    out = tmp_path / "fit.json"
    monkeypatch.setattr(sys, "argv", ["passes", "--fit", str(tmp_path / "out_prm"), "--records", str(data),
                                      "--n", "3", "--policy", str(tiny_model_dir), "--out", str(out)])
    assert passes.main() == 0
    report = json.loads(out.read_text())
    kept = passes.read_records(str(data), 3)   # the records of the first 3 questions
    assert report["steps"] == 2 * len(kept) and report["questions"] == 3
    # the same numbers as scoring every step's text directly
    scorer = load_scorer(tmp_path / "out_prm", options=ModelOptions(device_map="cpu"))
    verdicts = scorer.score_batch([join_steps(r["prompt"], r["completions"], scorer.separator) for r in kept])
    assert report["auc_by_agent"]["Verdict"] == pytest.approx(auc(verdicts, [int(r["labels"][1] > 0) for r in kept]))
    assert set(report["auc_by_agent"]) == {"Echo", "Verdict"}
