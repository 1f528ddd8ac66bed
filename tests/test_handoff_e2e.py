"""A handoff evaluation end to end on the tiny model, through the stage-4 CLI."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow   # runs the handoff conditions end to end on a model

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "src" / "experiments" / "compare_sbs_mcts.py"
ROLES = ["Analyst", "Solver", "Finalizer"]


@pytest.fixture
def handoff_setup(tmp_path):
    config = tmp_path / "handoff3.yaml"
    config.write_text(yaml.safe_dump({
        "agents": [{"name": r, "system_prompt": f"You are the {r}.", "max_new_tokens": 6} for r in ROLES],
        "edges": [],
        "handoff": {"initial_role": "Analyst", "fixed_schedule": ["Analyst", "Solver", "Analyst", "Finalizer"]},
    }))
    rows = [{"problem": f"What is {i} + {i}?", "solution": f"It is $\\boxed{{{2 * i}}}$.",
             "level": "Level 5", "type": t} for i, t in enumerate(["Algebra", "Geometry", "Algebra"], start=1)]
    data = tmp_path / "math.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return config, data


def run_cli(*argv, cwd):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, argv)], cwd=cwd, capture_output=True,
                          text=True, timeout=240)


ORIGINAL_LINES = [r"Hit@1 at 4 messages: \d\.\d{4}", r"Hit@1 at 8 messages: \d\.\d{4}",
                  r"Hit@1 at 12 messages: \d\.\d{4}", r"Realized depth \(mean/median\): \d\.\d\d/\d\.\d\d",
                  r"Unique agents / directed edges \(mean\): \d\.\d\d/\d\.\d\d",
                  r"Role revisit rate \(mean\): \d\.\d{4}", r"Route entropy H\(recipient\|speaker\), bits: \d\.\d{4}",
                  r"PRM context tokens \(median/p95\): \d+\.\d/\d+\.\d", r"PRM truncation rate: \d\.\d{4}",
                  r"Action parse-failure rate: \d\.\d{4}",
                  r"Batched policy calls / proposals per example: \d\.\d\d/\d\.\d\d"]


def test_handoff_conditions_on_the_tiny_model_write_the_originals_log(tiny_model_dir, tiny_scorer_dir, handoff_setup,
                                                                     tmp_path):
    import re

    config, data = handoff_setup
    argv = ["--methods", "handoff_fixed", "handoff_policy", "handoff_prm", "--gen_model_id", tiny_model_dir,
            "--handoff_prm_dir", tiny_scorer_dir, "--allow_scorer_kind_mismatch",   # an untrained scorer
            "--mas_config", config, "--data_file", data,
            "--sample_n", 2, "--seed", 3, "--min_turns", 2, "--max_turns", 3, "--handoff_candidates", 2,
            "--max_new_tokens", 6, "--device_map", "cpu", "--no_compile", "--workers", 1,
            "--logs_dir", tmp_path / "logs"]
    done = run_cli(*argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    logs = {p.name.split("_")[3]: p for p in (tmp_path / "logs").glob("*.txt")}   # competition_math_handoff_<m>_...
    assert set(logs) == {"fixed", "policy", "prm"}
    for mode, log in logs.items():
        lines = log.read_text().splitlines()
        end = lines.index("COMPLETED")
        assert lines[end + 1:] == []   # a log is final once it says COMPLETED
        # handoff_prm's log carries the paired comparison last before COMPLETED (the original's follows it)
        paired = lines[end - 4:end] if mode == "prm" else []
        assert [ln.split(" ", 2)[:2] for ln in paired] == ([["T=8", "paired"], ["T=8", "McNemar"],
                                                            ["T=12", "paired"], ["T=12", "McNemar"]] if paired else [])
        end -= len(paired)
        # the original's handoff lines, in its order, before them
        body = lines[end - len(ORIGINAL_LINES) - sum(ln.startswith("[extra]") for ln in lines):end]
        assert [ln for ln in body if not ln.startswith("[extra]")] and all(
            re.fullmatch(pat, ln) for pat, ln in zip(ORIGINAL_LINES, [b for b in body if not b.startswith("[extra]")]))
        records = [json.loads(line) for line in log.with_suffix(".jsonl").read_text().splitlines()]
        assert [r["index"] for r in records] == [0, 1] and not any(r["error"] for r in records)
        for r in records:
            entry = r["extra"]["handoff"]
            # each turn is one batched call of 2 proposals: one agent run (and one PRM call) per turn
            assert entry["agent_proposals"] == 2 * entry["depth"] == 2 * r["metrics"]["agent_runs"]
            assert r["metrics"]["scorer_calls"] == (entry["depth"] if mode == "prm" else 0)
            assert entry["prm_evaluations"] == (entry["agent_proposals"] - entry["parse_failures"]
                                                + entry["fallback_turns"] if mode == "prm" else 0)
            assert set(entry["prefix_answers"]) == {"4", "8", "12"}
            assert r["prediction"] == entry["turns"][-1]["current_answer"]
            assert all("raw" in t for t in entry["turns"])
            if mode == "fixed":
                assert [t["speaker"] for t in entry["turns"]] == ["Analyst", "Solver", "Analyst"]
                assert [t["recipient"] for t in entry["turns"]] == ["Solver", "Analyst", "FINAL"]
            else:
                assert entry["turns"][0]["speaker"] == "Analyst" and 2 <= entry["depth"] <= 3
        summary = json.loads(log.with_suffix(".summary.json").read_text())
        extra = summary["extra"]
        assert extra["handoff_examples"] == 2 and 0.0 <= extra["hit_at_8"] <= 1.0
        assert extra["agent_proposals_mean"] == pytest.approx(2 * extra["realized_depth_mean"])
    table = done.stdout.split("Dynamic-handoff prefix results\n", 1)[1].splitlines()
    assert re.fullmatch(r"Condition +Hit@4 +Hit@8 +Hit@12 +Depth", table[0])
    assert all(re.fullmatch(r".*\S +\d\.\d{3} +\d\.\d{3} +\d\.\d{3} +\d\.\d\d", row) for row in table[1:4])
    assert re.search(r"^T=12 dynamic MASPRM \u2212 policy: \u0394=-?\d\.\d{3}, 95% CI \[", done.stdout, re.M)
    # a second run finds every condition COMPLETED and writes none of them again
    again = run_cli(*argv, cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.count("already COMPLETED") == 3, again.stderr[-2000:]
    assert logs["prm"].read_text().count("T=12 McNemar exact") == 1
    # the aggregator reads all three, handoff_prm's log with its paired lines too
    agg = subprocess.run([sys.executable, str(ROOT / "aggregator.py"), "--logs_dir", tmp_path / "logs",
                          "--out", tmp_path / "agg.csv", "--no_plot"], capture_output=True, text=True, timeout=120)
    assert agg.returncode == 0 and "skipped" not in agg.stdout, agg.stdout + agg.stderr
    rows = {r["Experiment"]: r for r in __import__("csv").DictReader((tmp_path / "agg.csv").open())}
    assert len(rows) == 3 and all(r["Seeds"] == "1" for r in rows.values())
    prm_row = next(r for name, r in rows.items() if "_handoff_prm_" in name)
    prm_summary = json.loads(logs["prm"].with_suffix(".summary.json").read_text())
    assert prm_row["prm_calls_mean"] == f"{round(prm_summary['prm_calls_mean'], 2):.4f}"
    assert prm_row["agent_runs_mean"] == f"{round(prm_summary['agent_runs_mean'], 2):.4f}"


def test_handoff_flag_errors_are_one_line(tiny_model_dir, handoff_setup, tmp_path):
    config, data = handoff_setup
    done = run_cli("--methods", "handoff_policy", "--gen_model_id", tiny_model_dir, "--mas_config", config,
                   "--data_file", data, "--min_turns", 5, "--max_turns", 3, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "compare_sbs_mcts.py: error: --max_turns (3) must be at least --min_turns (5)"]


def test_prm_truncation_with_a_real_scorer_tokenizer(tiny_model_dir):
    """handoff_prm's selector on an HF scorer (the tiny model with an untrained head): the cut
    transcripts fit the budget in the scorer's own tokens and keep the question start and newest end."""
    import random
    from types import SimpleNamespace

    from masprm.search.context import SearchContext
    from masprm.graph import MASGraph
    from masprm.search.engine import drive
    from masprm.handoff.protocol import RoutedTurn
    from masprm.handoff.scoring import prm_selector
    from masprm.handoff.team import HandoffRun, Proposal
    from masprm.models.loading import ModelOptions
    from masprm.models.scorer import load_scorer

    scorer = load_scorer(tiny_model_dir, options=ModelOptions(device_map="cpu"))
    seen = []
    score_batch = scorer.score_batch
    scorer.score_batch = lambda texts: seen.extend(texts) or score_batch(texts)
    count = scorer.count_tokens
    graph = MASGraph.from_dict({"agents": [{"name": r} for r in ROLES], "handoff": {"initial_role": "Analyst"}})
    ctx = SearchContext(policy=None, graph=graph, settings=SimpleNamespace(), scorers={"handoff_masprm": scorer},
                      rng=random.Random(0))
    question = "Compute the number of ordered pairs of integers (a, b) with a + b = 10 and 0 <= a, b."
    run = HandoffRun(question, turns=[RoutedTurn(ROLES[i % 3], ROLES[(i + 1) % 3], f"work {i} " * 15, str(i))
                                      for i in range(6)])
    proposals = [Proposal(RoutedTurn("Analyst", "Solver", f"candidate {k} " * 30, "11"), "", []) for k in range(2)]
    pieces = [t.render() + scorer.separator for t in [*run.turns, proposals[0].turn]]
    # no cut; drop the four oldest turns; keep only the question start and the newest turn's end (twice)
    limits = (10_000, count(question + "".join(pieces[4:])), count(question + pieces[-1]) // 2, 60)
    for limit in limits:
        scores = drive(prm_selector(ctx, limit)(run, proposals), ctx)
        assert len(scores) == 2 and all(-1.0 <= s <= 1.0 for s in scores)
    assert [s["truncated"] for s in run.scored] == [False, False] + [True] * 6
    for k, (text, limit) in enumerate(zip(seen, [x for x in limits for _ in range(2)])):
        assert count(text) == run.scored[k]["tokens"] <= limit
        assert text.startswith("Compute the") and text.endswith("CURRENT_ANSWER: 11" + scorer.separator)
    assert seen[0] == question + "".join(pieces)
    assert "work 3" not in seen[2] and "work 4" in seen[2] and "work 5" in seen[2]   # oldest dropped first
    assert "work 5" not in seen[4] and "work" not in seen[6]
    assert ctx.usage.scorer_calls == 4 and ctx.usage.scorer_tokens == scorer.tokens_seen > 0   # one per batch
