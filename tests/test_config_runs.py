"""The original's three teams this project adds (gsm8k2, gsm8k3, math_refine) and a config in the original's
own shape run stage 1 and stage 4 on the tiny model, as a user would run them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from masprm.graph import load_mas_config
from masprm.tree_schema import agent_of_action

from helpers import REPO
from helpers_cli import call_main, write_gsm8k

pytestmark = pytest.mark.slow

MATH_DATA = REPO / "tests" / "fixtures" / "datasets" / "competition_math.jsonl"
CPU = ["--device_map", "cpu", "--no_compile", "--max_new_tokens", "4"]   # the random tiny model never stops

# The original's gsm8k_refine file, written as it is: one-line prompts, padded brackets, comments and
# a double-quoted gate.
ORIGINAL_SHAPE = """agents:
  - name: Reader
    system_prompt: "You are the Reader. Extract key facts and restate the question."
    max_new_tokens: 512
  - name: Planner
    system_prompt: "You are the Planner. Propose a concise plan to solve the task."
    max_new_tokens: 512
  - name: Solver
    system_prompt: "You are the Solver. Carry out the plan and compute results."
    max_new_tokens: 1024
  - name: Verifier
    system_prompt: "You are the Verifier. Reply VERDICT: CORRECT or VERDICT: INCORRECT."
    max_new_tokens: 512
  - name: Refiner
    system_prompt: "You are the Refiner. Fix the solution."
    max_new_tokens: 1024

edges:
  - [-1, 0]            # Q -> Reader
  - [-1, 1]            # Q -> Planner
  - [ 0, 1]            # Reader -> Planner
  - [ 1, 2]            # Planner -> Solver
  - [-1, 3]            # Q -> Verifier
  - [ 2, 3]            # Solver -> Verifier
  - [-1, 4]            # Q -> Refiner
  - [ 2, 4]            # Solver -> Refiner
  - [ 3, 4, "regex:(?i)verdict:\\\\s*incorrect"]  # Verifier -> Refiner (only when INCORRECT)
"""


def first_path_agents(tree: dict) -> list[int]:
    """The agents along the first path to a leaf, which must be a finished trajectory."""
    agents, node = [], tree
    while node.get("children"):
        node = node["children"][0]
        agents.append(agent_of_action(node["action_text"]))
    assert node["is_terminal"]
    return agents


@pytest.mark.parametrize("config,dataset", [("gsm8k2", "gsm8k"), ("gsm8k3", "gsm8k"),
                                            ("math_refine", "competition_math"), ("original_shape", "gsm8k")])
def test_team_runs_stage1_and_stage4(config, dataset, tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    if config == "original_shape":
        (tmp_path / "original_shape.yaml").write_text(ORIGINAL_SHAPE)
        config = str(tmp_path / "original_shape.yaml")
    data = str(MATH_DATA) if dataset == "competition_math" else str(write_gsm8k(tmp_path / "gsm8k.jsonl"))
    graph = load_mas_config(config)

    # competition_math's train split is what follows its 2000 test rows: the small file is all test
    split = "test" if dataset == "competition_math" else "train"
    code, _, err = call_main(monkeypatch, capsys, [
        "--dataset", dataset, "--split", split, "--n", "1", "--seed", "3", "--n_rollouts", "6",
        "--n_candidates", "1", "--mas_config", config, "--model_id", str(tiny_model_dir), "--data_file", data,
        "--no_plot", *CPU])
    assert code == 0, err
    (folder,) = (tmp_path / "results").iterdir()
    tree = json.loads((folder / "0.json").read_text())
    assert tree["meta"]["config"].endswith(f"{Path(config).stem}.yaml")
    agents = first_path_agents(tree)
    # Random text never says "verdict: incorrect": the gated Refiner is skipped, every other agent runs once.
    gated = {e.dst for e in graph.edges if e.condition.kind != "always"}
    assert agents == [a for a in graph.topo_order if a not in gated]

    code, out, err = call_main(monkeypatch, capsys, [
        "--dataset", dataset, "--split", "test", "--sample_n", "1", "--seed", "14", "--data_file", data,
        "--gen_model_id", str(tiny_model_dir), "--mas_config", config, "--methods", "single_pass", "sbs_logprob",
        "--b1", "1", "--b2", "2", "--workers", "1", "--logs_dir", str(tmp_path / "logs"), *CPU],
        script="compare_sbs_mcts")
    assert code == 0, err
    for method in ("single_pass", "sbs_logprob"):
        (log,) = (tmp_path / "logs").glob(f"{dataset}_{method}_*.txt")
        assert log.read_text().rstrip().endswith("COMPLETED")
        (record,) = [json.loads(line) for line in log.with_suffix(".jsonl").read_text().splitlines()]
        runs = len(agents) * (1 if method == "single_pass" else 2)   # B2 = 2 samples per agent
        assert not record["error"] and record["metrics"]["agent_runs"] == runs
