"""The LLM judge (pooled_judge, mcts_judge) with a scripted fake judge: credits, parse failures, usage,
the fingerprint; and both methods end to end on the tiny model."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import FakePolicy
from masprm.eval.logs import text_status
from masprm.search.judge import PROMPT_ID, parse_credits, parse_scores, pool_prompt
from helpers import REPO
from helpers_cli import FAST, run_eval, write_gsm8k
from helpers_eval_world import make_ctx, respond, run_method, scripted_solver


def pool_judge(rule):
    """A judge that credits each message of each attempt by rule(message text)."""
    def reply(messages, k, rng):
        attempts = re.split(r"\n\nATTEMPT \d+:\n", "\n\n" + messages[1]["content"].split("\n\nGive every")[0])[1:]
        rows = [[rule(line) for line in a.splitlines()] for a in attempts]
        return json.dumps({"credits": rows})
    return FakePolicy(reply)


def expansion_judge(rule):
    def reply(messages, k, rng):
        cands = re.findall(r"^\[\d+\] (.*)$", messages[1]["content"], re.M)
        return "Scores: " + json.dumps({"scores": [rule(c) for c in cands]})
    return FakePolicy(reply)


def likes_bad(line):
    return 1.0 if "bad" in line or "Answer: 5" in line else -1.0


def likes_good(line):
    return 0.9 if "good" in line or "Answer: 7" in line else -0.9


# --------------------------------------------------------------------------- replies


def test_parsers_read_json_clamp_and_refuse():
    assert parse_credits('ok {"credits": [[0.5, 2], [-3]]} done', 2) == [[0.5, 1.0], [-1.0]]
    assert parse_credits('{"credits": [[0.5], [1]]}', 3) is None          # one row per attempt
    assert parse_credits('{"credits": [[], [1]]}', 2) is None
    assert parse_credits('{"credits": [["x"], [1]]}', 2) is None
    assert parse_credits("no json here", 1) is None
    assert parse_scores('{"scores": [0.2, -0.4, 9]}', 3) == [0.2, -0.4, 1.0]
    assert parse_scores('{"scores": [0.2, -0.4]}', 3) is None
    assert parse_scores('{"scores": [true, 0, 0]}', 3) is None
    assert parse_scores('{broken {"scores": [0]}', 1) == [0.0]           # the first object that parses


def test_the_pool_prompt_numbers_messages_and_never_shows_the_gold():
    prompt = pool_prompt("What is 3 + 4?", [[("Solver", "bad"), ("Finisher", "Answer: 5")], [("Solver", "x")]])
    text = prompt[1]["content"]
    assert "ATTEMPT 1:\n(1) Solver: bad\n(2) Finisher: Answer: 5" in text and "ATTEMPT 2:\n(1) Solver: x" in text
    assert "the attempts have 2, 1 messages" in text and "7" not in text.replace("3 + 4", "")


# --------------------------------------------------------------------------- pooled_judge


def _pooled(judge):
    policy = FakePolicy(scripted_solver(["bad", "good plan 1", "good plan 2"]))
    ctx = make_ctx("pooled_judge", policy, voter_k=3)
    ctx.scorers["judge"] = judge
    return run_method("pooled_judge", ctx), ctx


def test_pooled_judge_weights_the_pool_by_mean_credit():
    # pool: bad -> 5, good -> 7, good -> 7. The judge credits "bad" and "Answer: 5" with 1, the rest -1:
    # weights (1 + 1) / 2 = 1 for the 5-run, (-1 + 1) / 2 = 0 (floored at 1e-6) for each 7-run, so 5 wins
    # where a plain majority picks 7.
    result, ctx = _pooled(pool_judge(likes_bad))
    assert result.prediction == "Answer: 5"
    u = ctx.usage
    assert (u.judge_calls, u.judge_parse_failures) == (1, 0)
    [call] = [c for c in ctx.judge.calls]
    assert call == ("sample", 1)            # one listwise call for the whole pool
    assert u.judge_tokens > 0 and u.scorer_tokens == u.judge_tokens
    assert "judge_calls" in u.as_dict()


def test_an_unreadable_reply_is_a_plain_majority_and_counted():
    result, ctx = _pooled(FakePolicy(lambda m, k, rng: "They all look fine to me."))
    assert result.prediction == "Answer: 7"
    assert (ctx.usage.judge_calls, ctx.usage.judge_parse_failures) == (1, 1)


def test_a_condition_without_a_judge_keeps_its_usage_keys():
    from masprm.interfaces import Usage
    assert set(Usage().as_dict()) == {"prompt_tokens", "generated_tokens", "scorer_tokens", "scorer_calls",
                                      "agent_runs"}


# --------------------------------------------------------------------------- mcts_judge


def test_mcts_judge_values_children_by_the_judge_and_leaves_by_that_value():
    policy = FakePolicy(respond)
    ctx = make_ctx("mcts_judge", policy, n_simulations=6, max_children=3)
    ctx.scorers["judge"] = expansion_judge(likes_good)
    result = run_method("mcts_judge", ctx)
    assert result.prediction == "Answer: 7"
    asked = [c for c in ctx.judge.calls]
    assert ctx.usage.judge_calls == len(asked) > 0 and ctx.usage.judge_parse_failures == 0
    # the opposite judge steers the same search to the other answer
    ctx2 = make_ctx("mcts_judge", FakePolicy(respond), n_simulations=6, max_children=3)
    ctx2.scorers["judge"] = expansion_judge(lambda text: -likes_good(text))
    assert run_method("mcts_judge", ctx2).prediction == "Answer: 5"


def test_mcts_judge_parse_failure_scores_zero_and_is_counted():
    from masprm.search.judge import expansion_scores
    from masprm.search.engine import drive
    from masprm.search.expand import Candidate

    ctx = make_ctx("mcts_judge", FakePolicy(respond))
    ctx.scorers["judge"] = FakePolicy(lambda m, k, rng: '{"scores": [1]}')   # one score for two candidates
    start = ctx.graph.start("What is 3 + 4?")
    cands = [Candidate(start, 0, t, start.decide(0, t), score=0.5) for t in ("bad", "good plan 1")]
    drive(expansion_scores(ctx, cands), ctx)
    assert [c.score for c in cands] == [0.0, 0.0] and ctx.usage.judge_parse_failures == 1


# --------------------------------------------------------------------------- fingerprint


def test_the_judge_its_prompts_and_settings_are_in_the_fingerprint():
    from masprm.eval.runner import ModelSpec, condition_manifest
    from helpers_eval_world import chain_graph, settings
    from test_eval_runner import SPECS, data

    def fp(judge="judge-a", **kw):
        s = settings(dataset="chain", split="test", gen_model_id="fake-policy", seed=14, judge_model_id=judge, **kw)
        specs = {**SPECS, "judge": ModelSpec("policy", judge, setting="judge_model_id")}
        return condition_manifest("pooled_judge", s, chain_graph(), data(), specs)

    base = fp()
    assert base["definition"]["settings"]["judge_prompts"] == PROMPT_ID
    assert base["definition"]["models"]["judge"]["id"] == "judge-a"
    assert len({base["fingerprint"], fp("judge-b")["fingerprint"], fp(judge_max_new_tokens=64)["fingerprint"],
                fp(judge_temperature=0.5)["fingerprint"]}) == 4


def test_judge_methods_need_the_judge_flag():
    from test_eval_cli import _validate
    from masprm.cli import UsageError

    with pytest.raises(UsageError, match="pooled_judge, mcts_judge need --judge_model_id"):
        _validate(["--methods", "pooled_judge", "mcts_judge"])


# --------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_both_judge_methods_run_on_the_tiny_model_and_aggregate(tiny_model_dir, prm_dir, tmp_path):
    data, logs = write_gsm8k(tmp_path / "gsm8k.jsonl"), tmp_path / "logs"
    done = run_eval("--dataset", "gsm8k", "--data_file", data, "--sample_n", 2, "--seed", "3",
                    "--gen_model_id", tiny_model_dir, "--judge_model_id", tiny_model_dir,
                    "--prm_dir", prm_dir, "--prm_base_model_id", tiny_model_dir,
                    "--mas_config", "configs/gsm8k.yaml", "--methods", "pooled_judge", "mcts_judge", "mcts_prm",
                    "--voter_k", "2", "--n_simulations", "2", "--max_children", "2",
                    "--judge_max_new_tokens", "8", "--logs_dir", logs, *FAST)
    assert done.returncode == 0, done.stderr[-3000:]
    for method in ("pooled_judge", "mcts_judge"):
        (log,) = logs.glob(f"gsm8k_{method}_*.txt")
        text = log.read_text()
        assert text_status(text) == "COMPLETED"
        for record in [json.loads(ln) for ln in log.with_suffix(".jsonl").read_text().splitlines()]:
            u = record["metrics"]
            assert record["error"] is None and u["judge_calls"] >= 1 and u["judge_tokens"] > 0
            # a random tiny model writes no JSON: every reply is a parse failure, and the run goes on
            assert u["judge_parse_failures"] == u["judge_calls"]
        assert "Judge parse-failure rate: 1.0000" in text
        assert ("Oracle Hit@k (k = 2): " in text) == (method == "pooled_judge")   # the pool metrics
    # mcts_judge against mcts_prm on the same two questions: lines before COMPLETED and a summary entry
    # (mcts_judge runs first: it is written once mcts_prm is done)
    (judged,) = logs.glob("gsm8k_mcts_judge_*.txt")
    assert judged.read_text().splitlines()[-2].startswith("Paired vs MASPRM (mcts_prm) McNemar exact: ")
    paired = json.loads(judged.with_suffix(".summary.json").read_text())["paired_vs_masprm"]
    assert paired["n_pairs"] == 2 and paired["reference"].startswith("gsm8k_mcts_prm_")
    assert "mcts_judge: Paired vs MASPRM (mcts_prm)" in done.stdout
    agg = subprocess.run([sys.executable, str(REPO / "aggregator.py"), "--logs_dir", logs,
                          "--out", tmp_path / "agg.csv"], capture_output=True, text=True, timeout=120)
    assert agg.returncode == 0, agg.stderr
    rows = (tmp_path / "agg.csv").read_text().splitlines()
    assert len(rows) == 4 and any("judge" in row.lower() for row in rows[1:])
    header = rows[0].split(",")
    assert "judge_parse_failure_rate_mean" in header and "oracle_hit_at_k_mean" in header
    rates = [row.split(",")[header.index("judge_parse_failure_rate_mean")] for row in rows[1:]]
    assert sorted(rates) == ["1.0000", "1.0000", "N/A"]   # mcts_prm asks no judge
