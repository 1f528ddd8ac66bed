"""Handoff conditions through the stage-4 runner: Hit@T with crashed examples, the text log's
original lines, and the handoff scorer's token limit."""

from __future__ import annotations

import re

import pytest

from conftest import FakePolicy
from masprm.data import Example, LoadedData
from masprm.errors import ConfigError
from masprm.eval.logs import log_status
from masprm.eval.runner import ModelSpec, run_conditions
from masprm.graph import MASGraph
from helpers_cli import stage_module
from helpers_eval_world import settings

ROLES = ["Analyst", "Solver", "Finalizer"]
GRAPH = MASGraph.from_dict({"agents": [{"name": r, "system_prompt": f"You are the {r}."} for r in ROLES],
                            "handoff": {"initial_role": "Analyst"}}, source="team.yaml")
SPECS = {"policy": ModelSpec("policy", "fake-policy")}


def respond(messages, k, rng):
    """The Analyst hands to the Solver, who ends the run with the question's number doubled."""
    content = messages[-1]["content"]
    if "(#1)" in content:
        raise ValueError("model broke")
    speaker = re.search(r"^ACTIVE SPEAKER: (.*)$", content, re.M).group(1)
    n = int(re.search(r"\(#(\d+)\)", content).group(1))
    to = "Solver" if speaker == "Analyst" else "FINAL"
    return f"SPEAKER: {speaker}\nRECIPIENT: {to}\nMESSAGE: step {k}\nCURRENT_ANSWER: {2 * n}"


def test_a_crashed_example_is_a_miss_in_hit_at_t_and_the_log_has_the_original_lines(tmp_path):
    # examples 0, 2, 3 answer 2n with gold 0, 4 and 99: right, right, wrong; example 1 crashes
    data = LoadedData([Example(i, f"Double it. (#{i})", str(g), {}) for i, g in enumerate([0, 0, 4, 99])],
                      skipped=0)
    s = settings(dataset="toy", split="test", gen_model_id="fake-policy", seed=1, min_turns=2, max_turns=4,
                 handoff_candidates=2)
    policy = FakePolicy(respond)
    (cond,) = run_conditions(["handoff_policy"], s, GRAPH, data, SPECS, logs_dir=tmp_path,
                             loader=lambda spec: policy, announce=lambda m: None)
    extra = cond.summary["extra"]
    # Hit@T over all four examples: the crashed one counts as a miss (2 / 4, not 2 / 3)
    assert (extra["hit_at_4"], extra["hit_at_8"], extra["hit_at_12"]) == (0.5, 0.5, 0.5)
    assert extra["handoff_examples"] == 3 and extra["realized_depth_mean"] == 2.0
    # two turns of two proposals: two agent runs, four proposals per finished example
    assert cond.summary["agent_runs_mean"] == 2.0 and extra["agent_proposals_mean"] == 4.0
    lines = cond.files.log.read_text().splitlines()
    at = lines.index("Mean Agent runs per example: 2.00")
    assert lines[at + 1:at + 12] == [
        "Hit@1 at 4 messages: 0.5000", "Hit@1 at 8 messages: 0.5000", "Hit@1 at 12 messages: 0.5000",
        "Realized depth (mean/median): 2.00/2.00", "Unique agents / directed edges (mean): 2.00/1.00",
        "Role revisit rate (mean): 0.0000", "Route entropy H(recipient|speaker), bits: 0.0000",
        "PRM context tokens (median/p95): 0.0/0.0", "PRM truncation rate: 0.0000",
        "Action parse-failure rate: 0.0000", "Batched policy calls / proposals per example: 2.00/4.00"]
    assert lines[-1].startswith("FAILED")
    # the original's paired lines after the status line leave it readable
    cond.files.log.write_text(cond.files.log.read_text() + "T=8 McNemar exact: policy-only=0, prm-only=1, p=1.0\n")
    assert log_status(cond.files.log) == "FAILED"


def test_the_handoff_scorer_is_loaded_with_the_context_length_flag(tiny_model_dir, tiny_scorer_dir, monkeypatch):
    tiny_model_dir, scorer_dir = str(tiny_model_dir), str(tiny_scorer_dir)
    cli = stage_module("compare_sbs_mcts")
    # The scorer folder check is tested elsewhere; here only the context length each scorer is given.
    monkeypatch.setattr(cli, "check_scorer_folder", lambda *a, **k: None)
    from masprm.eval.runner import MODEL_LOADERS
    from masprm.models.loading import ModelOptions

    def specs(*argv):
        run, s = cli.parse_command(["--gen_model_id", tiny_model_dir, *argv])
        return cli.model_specs(s, run)

    found = specs("--methods", "handoff_prm", "--handoff_prm_dir", scorer_dir, "--prm_dir", scorer_dir,
                  "--prm_context_length", "5000")
    # the original: max_length = --prm_context_length for the handoff scorer; static scorers keep theirs
    assert found["handoff_masprm"].max_length == 5000 and "masprm" not in found   # no static method: not loaded
    assert specs("--methods", "mcts_prm", "--prm_dir", scorer_dir)["masprm"].max_length is None
    with pytest.raises(ConfigError, match="`prm_context_length` needs handoff_prm in `methods`"):
        specs("--methods", "mcts_prm", "--prm_dir", scorer_dir, "--prm_context_length", "5000")   # it cannot act
    assert specs("--methods", "handoff_prm",
                 "--handoff_prm_dir", scorer_dir)["handoff_masprm"].max_length == 16384
    spec = ModelSpec("scorer", scorer_dir, None, ModelOptions(device_map="cpu"), 5000)
    assert MODEL_LOADERS["scorer"](spec).encoder.max_length == 5000
