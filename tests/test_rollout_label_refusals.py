"""Stage 2's rollout-based label schemes check what they are given before any policy loads: a rollout policy that
is a LoRA scorer folder (refused as stage 4's judge refuses it), a budget of 0, a temperature <= 0, a team other
than the trees', and trees graded by a checker that cannot run here: one line, exit 2, nothing written. Trees
graded with math_verify are rolled out and graded by math_verify."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from masprm.identity import file_identity
from masprm.stages import preprocess as preprocess_data
from conftest import FakePolicy
from helpers import snapshot
from helpers_bad_inputs import invoke
from helpers_trees import gsm8k_tree, preprocess_workdir, write_trees

RUN = "gsm8k_res_train_tiny_r2_c4_cand3_t0p7_p0p95"
ROLLOUTS = ["--input", f"results/{RUN}", "--labels", "mc_rollouts", "--mc-rollouts", "2"]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    preprocess_workdir(tmp_path, RUN)
    # a LoRA scorer folder as stage 3 leaves one: an adapter and its record, no config.json of a full model
    scorer = tmp_path / "scorers" / "lora"
    scorer.mkdir(parents=True)
    (scorer / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "base_model_name_or_path": "base",
                                                            "r": 8, "lora_alpha": 16}))
    (scorer / "masprm_scorer.json").write_text(json.dumps({"objective": "ppm"}))
    return tmp_path


def record_team(workdir, config: str) -> None:
    """The trees record the team that built them, as stage 1 writes it (path and content identity)."""
    trees = [gsm8k_tree(), gsm8k_tree(0.1)]
    for tree in trees:
        tree["meta"].update(config=config, config_identity=file_identity(workdir / config))
    write_trees(workdir / "results" / RUN, trees)


def refused(monkeypatch, capsys, workdir, argv) -> str:
    before = snapshot(workdir)
    code, lines = invoke(monkeypatch, capsys, "preprocess", argv)
    assert code == 2 and len(lines) == 1, lines
    assert snapshot(workdir) == before
    assert lines[0].startswith("preprocess_data.py: error: ")
    return lines[0].removeprefix("preprocess_data.py: error: ")


def test_a_lora_scorer_as_the_rollout_policy_is_refused_as_the_judge_refuses_it(workdir, monkeypatch, capsys):
    line = refused(monkeypatch, capsys, workdir, [*ROLLOUTS, "--rollout-policy", "scorers/lora"])
    # the words of check_local_model, which stage 4 runs on --judge_model_id
    assert line == ("--rollout-policy scorers/lora: is a PEFT adapter (adapter_config.json, no config.json), not a "
                    "full model; pass its base model (base) here")


@pytest.mark.parametrize("argv, line", [
    (["--labels", "mc_rollouts_uniform", "--rollout-budget", "0"],
     "--rollout-budget must be at least 1, got 0 (a budget of 0 samples nothing: --labels mc writes those records)"),
    (["--labels", "mc_rollouts", "--rollout-temperature", "-0.5"], "--rollout-temperature must be > 0, got -0.5"),
    (["--labels", "shapley", "--rollout-temperature", "0"], "--rollout-temperature must be > 0, got 0.0"),
])
def test_a_budget_of_zero_and_a_temperature_at_or_below_zero_are_refused(workdir, monkeypatch, capsys, argv, line):
    got = refused(monkeypatch, capsys, workdir, ["--input", f"results/{RUN}", "--rollout-policy", "scorers/lora",
                                                 *argv])
    assert got == line


def test_another_team_than_the_trees_is_refused_unless_forced(workdir, monkeypatch, capsys):
    record_team(workdir, "configs/gsm8k.yaml")
    line = refused(monkeypatch, capsys, workdir, [*ROLLOUTS, "--rollout-policy", "scorers/lora",
                                                  "--config", "configs/gsm8k_dylan.yaml"])
    # the flag's spelling is stage 1's and 4's --mas_config (--config, the old one, still read)
    assert re.fullmatch(re.escape("--") + "(mas_)?" + re.escape(
        f"config configs/gsm8k_dylan.yaml is not the MAS config the trees were built with (configs/gsm8k.yaml, "
        f"recorded in results/{RUN}/0.json); the rollouts would sample another team. Pass that config, or --force "
        "to use this one anyway"), line), line
    # --force goes past it, to the next check (the policy folder)
    line = refused(monkeypatch, capsys, workdir, [*ROLLOUTS, "--rollout-policy", "scorers/lora",
                                                  "--config", "configs/gsm8k_dylan.yaml", "--force"])
    assert line.startswith("--rollout-policy scorers/lora: is a PEFT adapter")


def test_trees_graded_by_math_verify_are_refused_without_its_package(workdir, monkeypatch, capsys):
    settings = workdir / "results" / RUN / ".run_settings"
    settings.write_text(json.dumps({"seed": 42, "answer_checker": "math_verify"}))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "math_verify" else real(name, *a))
    line = refused(monkeypatch, capsys, workdir, [*ROLLOUTS, "--rollout-policy", "scorers/lora"])
    assert line == (f"--input results/{RUN}: its trees were graded with --answer_checker math_verify (recorded in "
                    f"results/{RUN}/.run_settings), the rule the rollouts are graded by, and answer_checker "
                    "math_verify needs the math-verify package: pip install 'masprm[math]' "
                    "(or pip install math-verify)")


def test_trees_graded_by_math_verify_have_their_rollouts_graded_by_it(workdir, monkeypatch):
    # gold 2\sqrt{2}; every fresh Verifier answers \boxed{\sqrt{8}}: the same number to math-verify, another text
    # to the original rule. So every completion succeeds under math_verify: each open prefix's label is 2 * 1 - 1
    tree = gsm8k_tree()
    tree["meta"]["gold"] = "2\\sqrt{2}"
    for old in (workdir / "results" / RUN).glob("*.json"):   # this tree alone: its question's gold is its own
        old.unlink()
    write_trees(workdir / "results" / RUN, [tree])
    (workdir / "results" / RUN / ".run_settings").write_text(json.dumps({"answer_checker": "math_verify"}))

    def respond(messages, k, rng):
        return "\\boxed{\\sqrt{8}}" if messages[0]["content"] == "You are the Verifier." else "a step"

    monkeypatch.setattr(preprocess_data, "rollout_policy", lambda *args, **kwargs: FakePolicy(respond))
    preprocess_data.main([*ROLLOUTS, "--rollout-policy", "policy"])
    out = workdir / "results" / f"labels_mc_rollouts_{RUN}.jsonl"
    labels = [json.loads(line)["labels"] for line in out.read_text().splitlines()]
    # the three paths (answers 4, 5, 7): every open prefix 2 * 1 - 1 = +1; the last step the path's own outcome
    assert labels == [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, -1.0], [1.0, 1.0, 1.0, -1.0]]


@pytest.mark.parametrize("record, line", [
    ({"answer_checker": "sympy_magic"},
     "--input results/{run}: its trees were graded with --answer_checker sympy_magic (recorded in "
     "results/{run}/.run_settings), a checker this version does not have (math_verify, original); the rollouts "
     "would be graded by another rule"),
    ({"answer_checker": ["math_verify"]},   # not a name at all
     "--input results/{run}: its trees were graded with --answer_checker ['math_verify'] (recorded in "
     "results/{run}/.run_settings), a checker this version does not have (math_verify, original); the rollouts "
     "would be graded by another rule"),
    ("{not json", "results/{run}/.run_settings is corrupt (not JSON); it records what made the trees in "
                  "results/{run}: fix it or move the folder"),
])
def test_an_unknown_or_unreadable_checker_record_is_refused(workdir, monkeypatch, capsys, record, line):
    text = record if isinstance(record, str) else json.dumps(record)
    (workdir / "results" / RUN / ".run_settings").write_text(text)
    got = refused(monkeypatch, capsys, workdir, [*ROLLOUTS, "--rollout-policy", "scorers/lora"])
    assert got == line.format(run=RUN)


def test_a_folder_where_the_progress_file_goes_is_refused_before_any_work(workdir, monkeypatch, capsys):
    (workdir / "results" / f"labels_mc_rollouts_{RUN}.partial.jsonl").mkdir()
    line = refused(monkeypatch, capsys, workdir, [*ROLLOUTS, "--rollout-policy", "scorers/lora"])
    assert line.startswith(f"--input results/{RUN}: output ") and \
        line.endswith(f"results/labels_mc_rollouts_{RUN}.partial.jsonl: is a folder, not a file")
