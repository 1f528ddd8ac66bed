"""`make demo` drives the five stages with the README's commands on --dataset toy."""

import subprocess
import sys
from pathlib import Path

from helpers import flag

ROOT = Path(__file__).resolve().parents[1]


def dry_run(*flags: str) -> list[list[str]]:
    proc = subprocess.run([sys.executable, "src/demo.py", "--dry_run", *flags], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [line[2:].split() for line in proc.stdout.splitlines() if line.startswith("$ ")]


def without(cmd: list[str], *names: str) -> list[str]:
    out, skipping = [], False
    for x in cmd:
        if x.startswith("--"):
            skipping = x in names
        if not skipping:
            out.append(x)
    return out


def test_demo_runs_every_stage_with_the_readme_flags():
    cmds = dry_run()
    scripts = [c[1] if c[1] != "-m" else c[2] for c in cmds]
    assert scripts == ["masprm.worlds.build", "src/run_mcts.py", "src/train/preprocess_data.py",
                       "src/train/trainer.py", "src/train/trainer.py"] + \
        ["src/experiments/compare_sbs_mcts.py"] * 7 + ["masprm.instruments.stepbench", "aggregator.py", "masprm.instruments.claims"]
    trees, pairs, ppm, orm, *evals = cmds[1:-3]
    stepbench, agg, claims = cmds[-3:]
    early, evals = evals[:3], evals[3:]
    assert flag(trees, "--dataset") == ["toy"] and flag(trees, "--split") == ["train"]
    assert flag(trees, "--model_id") == ["artifacts/toy/policy"]
    for name in ("--n_rollouts", "--search_c", "--n_candidates", "--temperature", "--top_p", "--mas_config"):
        assert flag(trees, name)
    run = flag(pairs, "--input")[0]
    assert run == "results/toy_res_train_policy_r40_c4_cand3_t0p7_p0p95"
    assert "--make-ppm" in pairs and flag(pairs, "--view") == ["full"] and flag(pairs, "--target-nodes") == ["5"]
    assert flag(ppm, "--mode") == ["ppm"] and flag(ppm, "--data_dir") == [f"results/ppm_pairs_{Path(run).name}.jsonl"]
    assert flag(orm, "--mode") == ["orm"] and flag(orm, "--data_dir") == [f"results/prm_samples_{Path(run).name}.jsonl"]

    def budget(cmd):   # the last value of a repeated flag wins, as in argparse
        return {name: cmd[len(cmd) - 1 - cmd[::-1].index(name) + 1]
                for name in ("--b1", "--b2", "--n_simulations") if name in cmd}

    # each family's budget only where one of its methods runs (stage 4 refuses a flag no method reads)
    plan = {(tuple(flag(e, "--methods")), tuple(sorted(budget(e).items())), tuple(flag(e, "--seeds")))
            for e in evals if "--orm_leaf" not in e}
    expected = {(methods, tuple(sorted(given.items())), ("14", "24", "42"))
                for methods, given in [
                    (("single_pass", "sbs_logprob", "sbs_prm", "mcts_logprob", "mcts_prm", "mcts_orm"),
                     {"--b1": "3", "--b2": "5", "--n_simulations": "10"}),
                    (("mcts_logprob", "mcts_prm", "mcts_orm"), {"--n_simulations": "5"}),
                    (("sbs_logprob", "sbs_prm"), {"--b1": "2", "--b2": "3"})]}
    assert plan == expected   # the README's command, then MCTS and SBS at a second budget, three seeds each
    # and the paper's headline configuration at the README's budget: mcts_prm with the ORM on the leaves
    [leaf] = [e for e in evals if "--orm_leaf" in e]
    assert flag(leaf, "--methods") == ["mcts_prm"] and budget(leaf) == {"--n_simulations": "10"}
    for e in evals:
        assert flag(e, "--dataset") == ["toy"] and flag(e, "--split") == ["test"]
        assert flag(e, "--prm_dir") == flag(ppm, "--output-dir") and flag(e, "--orm_dir") == flag(orm, "--output-dir")
        assert flag(e, "--prm_base_model_id") == flag(e, "--gen_model_id") == ["artifacts/toy/policy"]
        assert flag(e, "--logs_dir") == flag(agg, "--logs_dir") == flag(claims, "--logs_dir")
    scorer_flags = ("--prm_dir", "--prm_base_model_id", "--orm_dir", "--orm_base_model_id")
    for e in early:   # the no-scorer conditions of each evaluation command run first, alongside stages 1-3
        assert "--prm_dir" not in e
        full = next(f for f in evals if budget(f) == budget(e) and flag(f, "--seeds") == flag(e, "--seeds"))
        assert flag(e, "--methods") == [m for m in flag(full, "--methods") if m in ("single_pass", "sbs_logprob",
                                                                                    "mcts_logprob")]
        assert without(e, "--methods") == without(full, "--methods", *scorer_flags)
    assert flag(stepbench, "--prm_dir") == flag(ppm, "--output-dir") and flag(stepbench, "--orm_dir") == \
        flag(orm, "--output-dir") and flag(stepbench, "--policy") == ["artifacts/toy/policy"]


def test_demo_flags_change_the_plan_and_bad_ones_fail_cleanly():
    cmds = dry_run("--seeds", "7", "--n_train", "5", "--jobs", "1")
    trees = next(c for c in cmds if c[1] == "src/run_mcts.py")
    assert flag(trees, "--n") == ["5"]
    assert all(flag(c, "--seeds") == ["7"] for c in cmds if c[1].endswith("compare_sbs_mcts.py"))
    proc = subprocess.run([sys.executable, "src/demo.py", "--n_train", "0"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--n_train" in proc.stderr


def test_pipeline_seed_reaches_trees_and_scorers_and_decides_what_is_reused(tmp_path, monkeypatch):
    import json

    cmds = dry_run("--seed", "3")
    seeded = [c for c in cmds if c[1] in ("src/run_mcts.py", "src/train/trainer.py") or "masprm.instruments.stepbench" in c]
    assert len(seeded) == 4 and all(flag(c, "--seed") == ["3"] for c in seeded)
    assert all(flag(c, "--seeds") == ["14", "24", "42"] for c in cmds if c[1].endswith("compare_sbs_mcts.py"))

    from masprm.stages import demo
    monkeypatch.setattr(demo, "ROOT", tmp_path)
    run = tmp_path / demo.run_folder()
    run.mkdir(parents=True)
    (run / "0.json").write_text(json.dumps({"meta": {"seed": 3}}))
    assert not demo.trees_done(2, 3)                      # one tree missing: stage 1 runs (and resumes)
    (run / "1.json").write_text(json.dumps({"meta": {"seed": 3}}))
    assert demo.trees_done(2, 3)
    assert not demo.trees_done(2, 4)                      # another seed's trees are not reused
    (run / "0.json").write_text("{")
    assert not demo.trees_done(2, 3)                      # unreadable: stage 1 runs and names the file

    scorer = tmp_path / "scorer"
    assert not demo.scorer_completed(scorer)
    scorer.mkdir()
    (scorer / "masprm_scorer.json").write_text(json.dumps({"status": "training"}))
    assert not demo.scorer_completed(scorer)              # interrupted: stage 3 runs it again, with --resume
    (scorer / "masprm_scorer.json").write_text(json.dumps({"status": "completed"}))
    assert demo.scorer_completed(scorer)
    assert all("--resume" in c for c in cmds if c[1] == "src/train/trainer.py")
    # not --quiet: the trainings write progress lines, which the demo shows on screen (masprm.running.commands)
    assert not any("--quiet" in c for c in cmds if c[1] == "src/train/trainer.py")
