"""A lab job's record in stage 4's manifests, and the lab's cells placing conditions by the row keys it names.

Stage 4 runs in-process on the fakes of the evaluation tests (`helpers_eval_world`), reading the job's record as
it reads it from its environment (`masprm.eval.lab_jobs.lab_job_from_env`). The scorers' folder names are
swapped against the rows' on purpose: mc-prm's job evaluates a scorer in a folder named like masprm-prm's, so a
placement by folder name puts each condition in the other row, and one by key in its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from conftest import FakePolicy
from helpers import REPO
from helpers_eval_world import FakeScorer, chain_graph, prefers_good, respond, settings
from masprm.cli import UsageError
from masprm.data import Example, LoadedData
from masprm.eval import lab_jobs
from masprm.eval.runner import ModelSpec, run_conditions
from masprm.lab.cells import read_cells
from masprm.lab.job import Job
from masprm.lab.rows import LabScorer
from masprm.running.commands import run_tasks

MC, MASPRM = LabScorer("mc", "prm"), LabScorer("masprm", "prm")   # checkpoints/toy-lab-mc-prm, ...-masprm-prm
ROWS = [MC, MASPRM]
SWAPPED = {MC.key: "elsewhere/toy-lab-masprm-prm", MASPRM.key: "elsewhere/toy-lab-mc-prm"}
BUDGETS = {"sbs": {"b1": 3, "b2": 5}}
DATA = LoadedData([Example(i, f"What is 3 + 4? (#{i})", "7", {}) for i in range(3)], skipped=0)


def evaluate(folder, scorer: str, record: tuple | None, seed: int = 14):
    """One evaluation command of a lab job (`record`: lab, job, row; None: run by hand): SBS with `scorer` as
    the MASPRM, in `folder`; its condition."""
    env = {lab_jobs.LAB_JOB_ENV: lab_jobs.job_env(*record)} if record else {}
    models = {"fake-policy": FakePolicy(respond), scorer: FakeScorer(prefers_good)}
    specs = {"policy": ModelSpec("policy", "fake-policy"), "masprm": ModelSpec("scorer", scorer)}
    s = settings(dataset="chain", split="test", gen_model_id="fake-policy", prm_dir=scorer, seed=seed,
                 methods=["sbs_prm"])
    (cond,) = run_conditions(["sbs_prm"], s, chain_graph(), DATA, specs, logs_dir=folder,
                             loader=lambda spec: models[spec.model_id], announce=lambda line: None,
                             lab_job=lab_jobs.lab_job_from_env(env))
    return cond


def stored(cond) -> dict:
    return json.loads(cond.files.manifest.read_text())


def test_a_lab_job_hands_its_record_to_its_command_and_its_command_line_is_unchanged(tmp_path):
    out = tmp_path / "seen.txt"
    script = f"import os; open({str(out)!r}, 'w').write(os.environ.get({lab_jobs.LAB_JOB_ENV!r}, 'unset'))"
    job = Job("eval_mc-prm_search", "eval", lambda: [sys.executable, "-c", script], row=MC.key)
    task = job.task("toy_lab")
    assert task.cmd == job.argv() and job.task().env == ()   # the printed plan is what runs; no lab, no record
    run_tasks([task], 1, tmp_path)
    assert json.loads(out.read_text()) == {"lab": "toy_lab", "job": "eval_mc-prm_search", "row": "mc-prm"}
    # a pilot's command evaluates two rows' conditions: its record names none
    pilot = Job("pilot_s42", "pilot", lambda: ["true"], row="masprm-ppm").task("toy_deep_pilot")
    assert json.loads(dict(pilot.env)[lab_jobs.LAB_JOB_ENV])["row"] is None


def test_two_rows_conditions_in_one_folder_are_placed_by_their_keys(tmp_path):
    conds = {row.key: [evaluate(tmp_path, SWAPPED[row.key], ("toy_lab", f"eval_{row.key}_search", row.key), seed)
                       for seed in (14, 24)] for row in ROWS}
    for key, (first, _) in conds.items():
        (ask,) = stored(first)["lab_jobs"]
        assert {k: ask[k] for k in ("lab", "job", "row")} == {"lab": "toy_lab", "job": f"eval_{key}_search",
                                                               "row": key}
        assert "lab_jobs" not in stored(first)["definition"]
    cells = read_cells([tmp_path], ROWS, BUDGETS, "toy_lab")
    assert set(cells) == {("mc-prm", "SBS"), ("masprm-prm", "SBS")}
    for key, (first, _) in conds.items():
        cell = cells[(key, "SBS")]
        assert sorted(cell.seeds) == [14, 24] and cell.experiment in first.files.log.name
    # by folder name (another lab's report, or before the keys): each condition lands in the other row
    by_folder = read_cells([tmp_path], ROWS, BUDGETS, "another_lab")
    assert by_folder[("mc-prm", "SBS")].experiment == cells[("masprm-prm", "SBS")].experiment


def test_a_condition_two_rows_ask_for_is_run_once_and_placed_in_both(tmp_path):
    first = evaluate(tmp_path, "elsewhere/toy-lab-mc-prm", ("toy_lab", "eval_mc-prm_search", MC.key))
    kept = {path: path.read_bytes() for path in (first.files.log, first.files.records, first.files.summary)}
    again = evaluate(tmp_path, "elsewhere/toy-lab-mc-prm", ("toy_lab", "eval_masprm-prm_search", MASPRM.key))
    other = evaluate(tmp_path, "elsewhere/toy-lab-mc-prm", ("toy_lab_rows", "eval_mc-prm_search", MC.key))
    assert again.reused and other.reused
    assert {path: path.read_bytes() for path in kept} == kept   # a skipped condition's log stays what it is
    asks = stored(first)["lab_jobs"]
    assert [(a["lab"], a["row"]) for a in asks] == [("toy_lab", "mc-prm"), ("toy_lab", "masprm-prm"),
                                                     ("toy_lab_rows", "mc-prm")]
    assert [a["asked"] for a in asks] == sorted(a["asked"] for a in asks)   # oldest first
    assert set(read_cells([tmp_path], ROWS, BUDGETS, "toy_lab")) == {("mc-prm", "SBS"), ("masprm-prm", "SBS")}
    assert set(read_cells([tmp_path], ROWS, BUDGETS, "toy_lab_rows")) == {("mc-prm", "SBS")}


def test_of_two_experiments_of_one_place_the_one_the_lab_asked_for_last_is_taken(tmp_path):
    record = ("toy_lab", "eval_mc-prm_search", MC.key)
    old, new = (evaluate(tmp_path, f"{version}/toy-lab-mc-prm", record) for version in ("v1", "v2"))
    os.utime(old.files.log, (2e9, 2e9))   # the older experiment's log is the newest file: not what decides
    assert read_cells([tmp_path], ROWS, BUDGETS, "toy_lab")[(MC.key, "SBS")].experiment in new.files.log.name
    evaluate(tmp_path, "v1/toy-lab-mc-prm", record)   # the lab asks for the first one again: it is taken
    assert read_cells([tmp_path], ROWS, BUDGETS, "toy_lab")[(MC.key, "SBS")].experiment in old.files.log.name
    # for a reader of another lab neither was asked for: the newest log, as before the keys
    assert read_cells([tmp_path], ROWS, BUDGETS, "other")[(MC.key, "SBS")].experiment in old.files.log.name


def test_a_condition_run_by_hand_is_the_same_condition_and_is_placed_by_its_scorer_folder(tmp_path):
    hand = evaluate(tmp_path / "hand", "elsewhere/toy-lab-mc-prm", None)
    lab = evaluate(tmp_path / "lab", "elsewhere/toy-lab-mc-prm", ("toy_lab", "eval_masprm-prm_search", MASPRM.key))
    assert "lab_jobs" not in stored(hand)   # no record: the manifest is what it always was
    assert hand.manifest["fingerprint"] == lab.manifest["fingerprint"] and hand.manifest_hash == lab.manifest_hash
    assert hand.files.log.name == lab.files.log.name
    assert hand.files.log.read_text() == lab.files.log.read_text()   # START line (manifest hash) included
    assert {k: v for k, v in stored(lab).items() if k != "lab_jobs"} == stored(hand)
    assert set(read_cells([tmp_path / "hand"], ROWS, BUDGETS, "toy_lab")) == {("mc-prm", "SBS")}   # by folder
    assert set(read_cells([tmp_path / "lab"], ROWS, BUDGETS, "toy_lab")) == {("masprm-prm", "SBS")}   # by key
    # the lab reuses the hand-run condition, and records that it asked
    (tmp_path / "lab").rename(tmp_path / "lab_first")
    assert evaluate(tmp_path / "hand", "elsewhere/toy-lab-mc-prm", ("toy_lab", "eval_x", MASPRM.key)).reused
    assert [a["row"] for a in stored(hand)["lab_jobs"]] == [MASPRM.key]


def test_asks_at_once_all_land(tmp_path):
    path = tmp_path / "x.manifest.json"
    path.write_text(json.dumps({"condition": "sbs_prm", "definition": {}}))
    threads = [threading.Thread(target=lab_jobs.append_ask, args=(path, {"lab": "l", "job": f"j{i}", "row": None,
                                                                         "asked": lab_jobs.asked_now()}))
               for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(a["job"] for a in json.loads(path.read_text())["lab_jobs"]) == [f"j{i}" for i in range(8)]


@pytest.mark.parametrize("raw", ["{not json", "[1]", '{"lab": "toy_lab", "job": "x"}',
                                 '{"lab": "", "job": "x", "row": null}', '{"lab": "a", "job": "x", "row": 3}',
                                 '{"lab": "a", "job": "x", "row": null, "extra": 1}'])
def test_a_malformed_record_is_refused(raw):
    with pytest.raises(UsageError, match=r"\$MASPRM_LAB_JOB"):
        lab_jobs.lab_job_from_env({lab_jobs.LAB_JOB_ENV: raw})


def test_unset_or_empty_records_nothing():
    assert lab_jobs.lab_job_from_env({}) is None and lab_jobs.lab_job_from_env({lab_jobs.LAB_JOB_ENV: " "}) is None


def test_stage_4_with_a_malformed_record_says_one_line_and_exits_2(tmp_path):
    env = {**os.environ, lab_jobs.LAB_JOB_ENV: '{"lab": "toy_lab"'}
    done = subprocess.run([sys.executable, str(REPO / "src/experiments/compare_sbs_mcts.py"), "--methods",
                           "single_pass", "--logs_dir", str(tmp_path / "logs")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert "$MASPRM_LAB_JOB must be a JSON object" in line
    assert not (tmp_path / "logs").exists()   # refused before anything is written
