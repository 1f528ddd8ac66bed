"""python -m masprm.instruments.labelbench: label values against the toy step labeller's truth, computed by hand."""

from __future__ import annotations

import json

import pytest

from masprm.errors import MasprmError
from masprm.instruments import labelbench
from masprm.worlds.toy.steplabel import label_transcript
from masprm.worlds.toy.task import generate_split

from helpers_trees import root, write_trees

PROBLEM = generate_split("train")[0]   # Mia: 12 shells, -4, *2, *2 = 32
RIGHT = ["12 4", "12 -4 *2 *2", "Answer: 32", "Answer: 32"]
WRONG = ["99", "1 +1", "Answer: 33", "Answer: 33"]


def test_the_messages_are_what_the_labeller_says():
    assert [s.correct for s in label_transcript(PROBLEM, RIGHT).steps] == [True] * 4
    assert [s.correct for s in label_transcript(PROBLEM, WRONG).steps] == [False] * 4


@pytest.fixture
def run(tmp_path):
    tree = {**root(0.0, question=PROBLEM.question), "meta": {"example_meta": {"split": "train", "source_index": 0}}}
    write_trees(tmp_path / "toy_res_x", [tree])
    return tmp_path


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def steps(completions, labels, scheme=None):
    rec = {"prompt": PROBLEM.question, "completions": completions, "labels": labels}
    return {**rec, "meta": {"label_scheme": scheme}} if scheme else rec


def test_soft_labels_get_an_auc_per_agent(run):
    records = [steps(RIGHT, [0.5, 0.5, 1.0, 1.0]),
               steps([RIGHT[0], *WRONG[1:]], [0.6, -0.5, -1.0, -1.0]),
               steps([WRONG[0], *RIGHT[1:]], [0.7, 0.2, 0.3, 1.0])]
    report = labelbench.label_report(run / "toy_res_x", write(run / "prm_samples_x.jsonl", records))
    assert report["scheme"] == "mc" and report["kind"] == "steps" and not report["hard_labels"]
    agents = report["agents"]
    # Reader: right 0.5, 0.6 vs wrong 0.7 -> 0; Planner, Solver, Verifier: every right above every wrong
    assert [agents[a]["auc"] for a in ("Reader", "Planner", "Solver", "Verifier")] == [0.0, 1.0, 1.0, 1.0]
    assert (agents["Reader"]["n"], agents["Reader"]["wrong"]) == (3, 1) and "accuracy" not in agents["Reader"]
    # all steps: 8 right, 4 wrong; wrong -0.5, -1, -1 are below all 8, wrong 0.7 below three 1.0s -> 27/32
    assert report["all"]["auc"] == 27 / 32
    # agreement, the label's sign against the verdict: Reader 0.5, 0.6 right (+), 0.7 wrong (+): 2 of 3;
    # all: right steps 0.5 0.5 1 1 0.6 0.2 0.3 1 all positive (8), wrong -0.5 -1 -1 negative (3), 0.7 not: 11 of 12
    assert agents["Reader"]["agreement"] == pytest.approx(2 / 3) and report["all"]["agreement"] == pytest.approx(11 / 12)


def test_hard_labels_get_accuracy_and_the_error_f1(run):
    records = [steps(RIGHT, [1, 1, 1, 1], "first_error"), steps([RIGHT[0], WRONG[1]], [1, -1], "first_error"),
               steps([WRONG[0]], [-1], "first_error"), steps(RIGHT[:2], [1, -1], "first_error")]
    report = labelbench.label_report(run / "toy_res_x", write(run / "labels_first_error_x.jsonl", records))
    assert report["scheme"] == "first_error" and report["hard_labels"]
    reader, planner, solver = (report["agents"][a] for a in ("Reader", "Planner", "Solver"))
    assert (reader["accuracy"], reader["error_f1"], reader["auc"]) == (1.0, 1.0, 1.0)
    # Planner: right +1, wrong -1, right -1 (a false alarm): 2 of 3 right; precision 1/2, recall 1 -> F1 2/3
    assert planner["accuracy"] == pytest.approx(2 / 3) and planner["error_f1"] == pytest.approx(2 / 3)
    assert planner["auc"] == 0.75                     # right {+1, -1} vs wrong {-1}: (1 + 1/2) / 2
    assert solver["auc"] is None and solver["error_f1"] == 0.0 and solver["n"] == 1


def test_pairs_count_chosen_as_plus_one_and_report_pair_accuracy(run):
    def pair(chosen, rejected):
        return {"prompt": PROBLEM.question, "chosen_actions": chosen, "rejected_actions": rejected, "weight": 0.5}

    records = [pair(RIGHT[:2], [RIGHT[0], WRONG[1]]),                  # right over wrong (Planner)
               pair([RIGHT[0], WRONG[1], WRONG[2]], [RIGHT[0], WRONG[1], RIGHT[2]]),   # wrong over right (Solver)
               pair([WRONG[0]], ["98"])]                                # both wrong (Reader)
    report = labelbench.label_report(run / "toy_res_x", write(run / "ppm_pairs_x.jsonl", records))
    assert report["scheme"] == "masprm" and report["kind"] == "pairs" and report["hard_labels"]
    assert {k: report["pairs"][k] for k in ("pairs", "informative", "pair_accuracy")} == \
        {"pairs": 3, "informative": 2, "pair_accuracy": 0.5}
    by_agent = report["pairs"]["agents"]
    assert (by_agent["Planner"]["pair_accuracy"], by_agent["Solver"]["pair_accuracy"]) == (1.0, 0.0)
    assert by_agent["Reader"] == {"pairs": 1, "informative": 0, "pair_accuracy": None, "agreement": 0.0,
                                  "same_verdict": 1.0}
    # of the 3 pairs, 1 agrees with the truth (right over wrong) and 1 compares two wrong steps
    assert (report["pairs"]["agreement"], report["pairs"]["same_verdict"]) == (pytest.approx(1 / 3), pytest.approx(1 / 3))
    agents = report["agents"]
    assert (agents["Planner"]["auc"], agents["Solver"]["auc"], agents["Reader"]["auc"]) == (1.0, 0.0, None)
    assert report["all"]["auc"] == 0.5 and report["all"]["accuracy"] == 0.5


def test_cli_writes_the_report_and_prints_the_table(run, capsys):
    labels = write(run / "labels_mc_x.jsonl", [steps(RIGHT, [0.5, 0.5, 1.0, 1.0], "mc"),
                                               steps(WRONG, [0.1, -0.5, -1.0, -1.0], "mc")])
    out = run / "report.json"
    assert labelbench.main(["--trees", str(run / "toy_res_x"), "--labels", str(labels), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["agents"]["Reader"]["auc"] == 1.0
    printed = capsys.readouterr().out
    assert "labels mc (steps, soft labels): 2 records, 8 labelled steps" in printed
    assert "Reader         2      1  1.000" in printed


def test_records_of_other_questions_and_foreign_trees_are_errors(run):
    other = write(run / "labels_mc_y.jsonl", [{"prompt": "What is 2 + 2?", "completions": ["4"], "labels": [1.0]}])
    with pytest.raises(MasprmError, match="no record's prompt is a question of the trees"):
        labelbench.label_report(run / "toy_res_x", other)
    write_trees(run / "toy_res_bad", [{**root(0.0, question="What is 2 + 2?"),
                                      "meta": {"example_meta": {"split": "train", "source_index": 0}}}])
    with pytest.raises(MasprmError, match="its question is not toy train #0"):
        labelbench.label_report(run / "toy_res_bad", other)


def test_every_registered_scheme_is_listed_and_a_shapley_file_is_read(run, capsys):
    from masprm.labels import LABEL_SCHEMES

    with pytest.raises(SystemExit):
        labelbench.main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for name in ("shapley", "mc_rollouts", "first_error_search", "step_consistency", "majority_outcome"):
        assert name in LABEL_SCHEMES and name in shown
    # a shapley record keeps its credits in meta; its labels (credits halved) are read as any steps labels
    records = [{**steps(RIGHT, [0.0, 0.0, 0.5, 0.5]),
                "meta": {"label_scheme": "shapley", "shapley_credits": [0.0, 0.0, 1.0, 1.0], "baseline": -1.0}},
               {**steps([RIGHT[0], *WRONG[1:]], [0.0, -0.5, -0.5, 0.0]), "meta": {"label_scheme": "shapley"}}]
    report = labelbench.label_report(run / "toy_res_x", write(run / "labels_shapley_x.jsonl", records))
    assert report["scheme"] == "shapley" and report["kind"] == "steps"
    # Planner: right 0 above wrong -0.5; Reader: both right, no AUC
    assert report["agents"]["Planner"]["auc"] == 1.0 and report["agents"]["Reader"]["auc"] is None
