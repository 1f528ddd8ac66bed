"""`make demo WORLD=...` / `make lab WORLD=...`: the world run records, the toy world's plans unchanged, toy_deep's
plan on its own paths, the refusals, the pre-registration's commit in the report, and the benchmarks' --world."""

from __future__ import annotations

import inspect
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import REPO, flag
from helpers_trees import root, write_trees
from masprm.graph import load_mas_config
from masprm.stages import demo
from masprm.lab import command as lab
from masprm.lab.rows import LAB_SCORERS
from masprm.worlds.runs import WORLD_RUNS, preregistration_commit

PLANS = REPO / "tests" / "fixtures" / "world_runs"
# The toy world's --dry_run output of main at 78b6800, before the world records (the plans a lab run started on
# that code reads back), with two changes since: training shows its progress (no --quiet) and stage 2 names
# the team --mas_config (issue 58), and an evaluation passes only the search settings its methods read (issue
# 61: stage 4 refuses the others), and the toy code's modules moved into masprm.worlds, masprm.instruments and
# masprm.lab (issue 60: the plans at 54fe6a8 with the module names mapped are these, byte for byte); the demo's
# and the lab's default plans in full, digests of other flags.
DIGESTS = {("demo.py", "--seed", "7", "--seeds", "14", "24"):
           "0f6c35a351d9da1ac9fab16f3004840356d79981dbc56f19c36856def7ad561c",
           ("lab.py", "--rollout_rows"): "433b574bab459da12c4e6be79e087da694befa18dc70337cfc01dc94007e18f7",
           ("lab.py", "--seed", "7", "--train_seeds", "7", "42", "--sbs_budget", "2", "3", "--sample_n", "5",
            "--jobs", "1", "--seeds", "14"): "a7e54a265daae452b08b0340af4966324f1ce300567fd856813d8fd474d5391c"}
# What a toy_deep command may never name: the toy world's inputs and outputs
TOY_PATHS = ("artifacts/toy/", "configs/toy.yaml", "checkpoints/toy-", "logs/toy_demo", "logs/toy_lab",
             "results/toy_lab", "results/toy_demo", "results/toy_stepbench", "results/train_seed_", "_toy_res_")


def dry_run(tmp_path: Path, script: str, *args: str) -> subprocess.CompletedProcess:
    """A driver's --dry_run in an empty checkout-like folder (the README's scripts there, no outputs)."""
    for name in ("src", "aggregator.py"):
        if not (tmp_path / name).exists():
            (tmp_path / name).symlink_to(REPO / name)
    return subprocess.run([sys.executable, f"src/{script}", "--dry_run", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)


def oracle_step(cmd: list[str]) -> bool:
    """The evaluation runs a method that reads --step_oracle (the only ones it may name it on)."""
    return any(m.endswith("_oracle_step") for m in flag(cmd, "--methods"))


def value(cmd: list[str], name: str) -> list[str]:
    """The first value of a flag, [] where the command has none."""
    return flag(cmd, name)[:1] if name in cmd else []


def commands(out: str) -> list[list[str]]:
    return [line[2:].split("   [")[0].split() for line in out.splitlines() if line.startswith("$ ")]


@pytest.mark.parametrize("script", ["demo.py", "lab.py"])
def test_the_toy_worlds_plans_are_mains_byte_for_byte(tmp_path, script):
    proc = dry_run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (PLANS / f"toy_{script[:-3]}_dry_run.txt").read_text()


@pytest.mark.parametrize("argv", sorted(DIGESTS), ids=" ".join)
def test_the_toy_worlds_plans_under_other_flags_are_mains(tmp_path, argv):
    import hashlib
    proc = dry_run(tmp_path, *argv)
    assert proc.returncode == 0, proc.stderr
    assert hashlib.sha256(proc.stdout.encode()).hexdigest() == DIGESTS[argv]


def test_the_toy_world_is_the_default_and_says_nothing_of_a_world(tmp_path):
    # --world toy is the default spelled out: the same plan
    assert dry_run(tmp_path, "lab.py", "--world", "toy").stdout == (PLANS / "toy_lab_dry_run.txt").read_text()


def deep_test_size() -> int:
    """The test split's size by the pre-registered rule from the dev pilot's numbers (hand-checked in
    docs/toy_world.md: N = 423 gives an MDE of 2.4996 points, 422 one of 2.501)."""
    from masprm.worlds.toy_deep.data import DEV_POWER, powered_size
    return powered_size(*DEV_POWER)


def test_the_records_match_their_worlds():
    from masprm.worlds.toy.task import generate_split
    from masprm.worlds import WORLDS
    for name, world in WORLD_RUNS.items():
        team = load_mas_config(REPO / world.config)
        assert world.target_nodes == 1 + len(team.agents), name          # the question and one node per agent
        assert world.n_train == len(generate_split("train", WORLDS[name].truth.task)) == 400, name
    toy = WORLD_RUNS["toy"]
    assert (toy.policy, toy.scorer_dir("ppm"), toy.demo_logs, toy.lab_files["report"], toy.seed_root(7)) == \
        ("artifacts/toy/policy", "checkpoints/toy-ppm", "logs/toy_demo", "results/toy_lab.md", "results/train_seed_7")
    assert toy.test_size() == 240 and WORLD_RUNS["toy_deep"].test_size() == deep_test_size() == 423


def test_toy_deeps_plan_is_its_family_on_its_own_paths(tmp_path):
    proc = dry_run(tmp_path, "lab.py", "--world", "toy_deep")
    assert proc.returncode == 0, proc.stderr
    out, cmds = proc.stdout, commands(proc.stdout)
    assert not [c for c in cmds for x in c if any(p in x for p in TOY_PATHS)]
    for c in cmds:
        for name in ("--dataset", "--mas_config", "--config"):
            assert value(c, name) in ([], ["toy_deep"], ["configs/toy_deep.yaml"]), c
        for name in ("--gen_model_id", "--model_id", "--model-id", "--policy", "--rollout-policy"):
            assert value(c, name) in ([], ["artifacts/toy_deep/policy"]), c
        written = [*value(c, "--out"), *value(c, "--output-dir"), *value(c, "--out_root"), *value(c, "--logs_dir")]
        assert all(w.startswith(("results/toy_deep_", "checkpoints/toy_deep-", "logs/toy_deep_", "artifacts/toy_deep"))
                   for w in written), c
    evals = [c for c in cmds if c[1].endswith("compare_sbs_mcts.py")]
    # every evaluation: the world's step labeller; its declared MCTS option (progressive widening, pw_k 3) on
    # those that run MCTS and on no other (stage 4 refuses an MCTS option a run would not use)
    mcts = [c for c in evals if any(m.startswith("mcts_") for m in flag(c, "--methods"))]
    assert mcts and all(flag(c, "--pw_k") == ["3"] for c in mcts)
    assert len(mcts) < len(evals) and all("--pw_k" not in c for c in evals if c not in mcts)
    assert evals and all(flag(c, "--split") == ["test"] and flag(c, "--seeds") == ["14", "24", "42"] for c in evals)
    assert all(value(c, "--step_oracle") == (["toy_deep"] if oracle_step(c) else []) for c in evals)
    assert all(flag(c, "--search_batch_size") == ["128"] for c in evals)    # its measured batch (the toy's: 32)
    methods = {m for c in evals for m in flag(c, "--methods")}
    assert methods == {"single_pass", "sbs_logprob", "mcts_logprob", "bon_logprob", "sbs_prm", "mcts_prm", "mcts_orm",
                       "bon_orm", "sbs_oracle_step", "sbs_oracle_outcome", "mcts_oracle_step", "mcts_oracle_outcome",
                       "bon_oracle_step", "bon_oracle_outcome"}                 # no best-of-N with a process scorer
    assert {flag(c, "--step_agg")[-1] for c in evals if "bon_orm" in c} == {"last"}
    assert sum("--orm_leaf" in c for c in evals) == 3                          # MASPRM + ORM leaf at each seed
    # the rows: the MASPRM, the ORM and mc+prm, each at training seeds 42 7 99, and nothing else trained
    rows = [line for line in out.splitlines() if line.startswith("#   ") and " -> " in line]
    assert [line.split(" -> ")[0].strip("# ") for line in rows] == \
        [f"{r}, training seed {s}" for s in (42, 7, 99) for r in ("masprm + ppm", "mc + orm", "mc + prm")]
    trained = [c for c in cmds if c[1].endswith("trainer.py")]
    assert sorted(flag(c, "--output-dir")[0] for c in trained) == sorted(
        ["checkpoints/toy_deep-ppm", "checkpoints/toy_deep-orm", "checkpoints/toy_deep-lab-mc-prm"]
        + [f"checkpoints/toy_deep-lab-{r}-s{s}" for s in (7, 99) for r in ("masprm-ppm", "mc-orm", "mc-prm")])
    for tool in ("masprm.instruments.stepbench", "masprm.instruments.labelbench", "masprm.worlds.build"):
        assert all(flag(c, "--world") == ["toy_deep"] for c in cmds if tool in c) and any(tool in c for c in cmds)
    assert not [c for c in cmds if "sweep" in " ".join(c)]
    assert "# the compute-matched sweep: not measured yet on this world" in out
    assert "# the test split of toy_deep:" not in out                         # sized by the dev pilot
    assert "# estimated time: unknown (" not in out   # its own measured seconds (masprm/worlds/toy_deep/costs.yaml)
    assert [line for line in out.splitlines() if line.startswith("# estimated time: ")][0].endswith(
        "CPU minutes; from the measured seconds per command in docs/scorer_lab.md, its generative and implicit rows "
        "priced apart since the one check; after make demo)")
    assert "# the report records the commit of docs/preregistration.md: none (now)" in out   # no git here


def test_toy_deeps_demo_plan_is_on_its_own_paths(tmp_path):
    proc = dry_run(tmp_path, "demo.py", "--world", "toy_deep")
    assert proc.returncode == 0, proc.stderr
    cmds = commands(proc.stdout)
    assert len(cmds) == len(commands((PLANS / "toy_demo_dry_run.txt").read_text()))   # the same stages
    assert not [c for c in cmds for x in c if any(p in x for p in TOY_PATHS)]
    assert flag(cmds[0], "--world") == ["toy_deep"] and flag(cmds[2], "--target-nodes") == ["9"]
    assert flag(cmds[-1], "--out") == ["results/toy_deep_demo_claims.txt"]


@pytest.mark.parametrize("script", ["demo.py", "lab.py"])
def test_an_unknown_world_is_one_line_naming_the_valid_ones(tmp_path, script):
    proc = dry_run(tmp_path, script, "--world", "toy_dep")
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and "unknown world 'toy_dep' (valid: toy, toy_deep" in proc.stderr


@pytest.mark.parametrize("module", [demo, lab])
def test_an_empty_test_split_stops_a_run_before_any_work(tmp_path, monkeypatch, capsys, module):
    from masprm.running import commands
    from masprm.worlds.toy_deep import data as deep_data
    from masprm.worlds.toy_deep.task import K, deep_world

    def started(*args, **kwargs):
        raise RuntimeError("a command started")

    for m in (demo, lab, commands):
        monkeypatch.setattr(m, "ROOT", tmp_path)
    monkeypatch.setattr(demo, "Command", started)   # the lab's first command too (demo.prepare_scorers)
    monkeypatch.setattr(deep_data, "TOY_DEEP", deep_world(K, 0))   # as before the dev pilot sized it
    monkeypatch.setattr(sys, "argv", [module.__name__, "--world", "toy_deep"])
    with pytest.raises(SystemExit) as stop:
        module.cli()
    captured = capsys.readouterr()
    assert stop.value.code == 2 and captured.out == "" and len(captured.err.splitlines()) == 1
    assert "--world toy_deep: its test split is empty (0 questions" in captured.err
    assert list(tmp_path.iterdir()) == []                                   # nothing written
    # with test questions the check lets the run through (to its first command, stopped here)
    monkeypatch.setattr(deep_data, "TOY_DEEP", deep_world(K, 3))
    with pytest.raises(RuntimeError, match="a command started"):
        module.main(["--world", "toy_deep"])


def test_the_preregistration_commit_is_the_files_last_commit(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("no git")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    monkeypatch.chdir(tmp_path)
    assert preregistration_commit("docs/preregistration.md") == "none"    # not a repository
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "preregistration.md").write_text("design\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "pre-register"], check=True)
    first = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    (tmp_path / "other.txt").write_text("later\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "later"], check=True)
    assert preregistration_commit("docs/preregistration.md") == first    # the file's commit, not HEAD
    assert preregistration_commit("docs/absent.md") == "none"


def test_the_lab_report_records_the_preregistration(tmp_path, monkeypatch):
    from masprm.worlds import runs as world_runs
    from masprm.lab.report import write_report
    monkeypatch.setattr(world_runs, "preregistration_commit", lambda path: "abc123")
    monkeypatch.setattr(world_runs, "code_commit", lambda: {"commit": "def456", "dirty": True})
    world = WORLD_RUNS["toy_deep"]
    record = world.report_record()
    assert record == {"name": "toy_deep", "test_questions": 423,
                      "preregistration": {"file": "docs/preregistration.md", "commit": "abc123"},
                      "code": {"commit": "def456", "dirty": True}}
    from masprm.lab.report import default_world
    assert WORLD_RUNS["toy"].report_record() == default_world() == {"name": "toy", "test_questions": 240}   # as before
    files = {k: tmp_path / Path(v).name for k, v in world.lab_files.items()}
    rows = [s.in_world(world) for s in LAB_SCORERS[:2]]
    write_report(rows, [tmp_path / "none"], files["stepbench"], files["labelbench"], files["report"],
                 files["claims"], files["plot"], budgets=lab.budgets(SimpleNamespace(sbs_budget=[3, 5])), world=record)
    facts = json.loads(files["report"].with_suffix(".json").read_text())
    assert facts["preregistration"] == {"file": "docs/preregistration.md", "commit": "abc123"}
    assert facts["code"] == {"commit": "def456", "dirty": True}
    text = files["report"].read_text()
    assert text.startswith("# The scorer lab (toy_deep world)") and "searches on the 423 test questions" in text
    assert ("- pre-registration: docs/preregistration.md at commit abc123 when the report was written "
            "(code at def456, with uncommitted changes).") in text


def test_the_code_commit_and_its_changes_in_a_git_checkout(tmp_path, monkeypatch):
    from masprm.worlds.runs import code_commit
    git = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], capture_output=True, text=True, check=True)
    git("init", "-q")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x")
    (tmp_path / "f").write_text("1")
    git("add", "f")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "f")
    monkeypatch.chdir(tmp_path)
    head = git("rev-parse", "HEAD").stdout.strip()
    assert code_commit() == {"commit": head, "dirty": False}
    (tmp_path / "f").write_text("2")
    assert code_commit() == {"commit": head, "dirty": True}
    (tmp_path / "f").write_text("1")
    (tmp_path / "new").write_text("untracked files do not count")
    assert code_commit() == {"commit": head, "dirty": False}


def test_toy_deep_tests_only_its_comparisons_against_the_orm():
    """The pre-registered family: Holm over the comparisons against the ORM; those against the MASPRM are shown."""
    from masprm.lab import report as lab_report
    from masprm.lab.recipe import world_recipe
    assert world_recipe("toy_deep").masprm_tested is False and world_recipe("toy").masprm_tested
    assert "masprm_tested" in inspect.signature(lab_report.comparisons).parameters


def deep_transcripts():
    """A deep toy problem of the train split, its right transcript and one whose Op2 adds wrong (the later Op
    agents carry the wrong total on, the Verifier repeats it)."""
    from masprm.worlds.toy_deep.data import TOY_DEEP
    from masprm.worlds.toy_deep.task import reference_outputs
    from masprm.worlds.toy.task import apply_op, generate_split
    from masprm.worlds.toy.transcripts import worked_steps
    problem = generate_split("train", TOY_DEEP)[0]
    right = list(reference_outputs(problem, random.Random(0)).values())
    steps = worked_steps(problem)   # (total, op, operand, new total) per Op agent
    a, op, n, b = steps[1]
    wrong, total = [*right[:3], f"{a}{op}{n}={b + 1}"], b + 1   # Op2: the right input, a result one too high
    for _, op, n, _ in steps[2:]:
        new = apply_op(total, op, n)
        wrong.append(f"{total}{op}{n}={new}")
        total = new
    return problem, right, [*wrong, f"Answer: {total}"]


def test_labelbench_judges_a_deep_world_tree_by_its_truth(tmp_path):
    from masprm.instruments import labelbench
    problem, right, wrong = deep_transcripts()
    team = ("Reader", "Planner", "Op1", "Op2", "Op3", "Op4", "Op5", "Verifier")
    tree = {**root(0.0, question=problem.question), "meta": {"example_meta": {"split": "train", "source_index": 0}}}
    write_trees(tmp_path / "toy_deep_res_x", [tree])
    labels = tmp_path / "labels_first_error_x.jsonl"
    marks = [1, 1, 1, -1, -1, -1, -1, -1]     # by hand: Reader, Planner, Op1 right; Op2 on wrong
    labels.write_text("".join(json.dumps({"prompt": problem.question, "completions": c, "labels": v}) + "\n"
                              for c, v in ((right, [1] * 8), (wrong, marks))))
    report = labelbench.label_report(tmp_path / "toy_deep_res_x", labels, world="toy_deep")
    assert list(report["agents"]) == list(team) and report["hard_labels"]
    assert report["all"]["accuracy"] == 1.0 and report["all"]["wrong"] == 5 and report["all"]["n"] == 16
    assert report["agents"]["Op2"]["auc"] == 1.0 and report["agents"]["Reader"]["auc"] is None   # one class only
    with pytest.raises(Exception, match="not a toy tree|its question is not toy"):   # a deep tree is no toy tree
        labelbench.label_report(tmp_path / "toy_deep_res_x", labels)


def test_stepbench_takes_a_world_and_refuses_an_empty_split(tmp_path, monkeypatch, capsys):
    from masprm.instruments import stepbench
    from masprm.worlds.toy.steplabel import summarize
    from masprm.worlds import WORLDS
    truth = WORLDS["toy_deep"].truth
    problem, right, wrong = deep_transcripts()
    counts = summarize([truth.label(problem, right), truth.label(problem, wrong)], truth.error_kinds)
    assert counts["first_error"]["Op2"] == 1 and counts["error_kinds"]["Op2"]["arithmetic"] == 1
    assert counts["error_kinds"]["Op3"]["wrong_input"] == 1 and counts["error_kinds"]["Verifier"]["missed"] == 1
    policy = tmp_path / "policy"
    policy.mkdir()
    from dataclasses import replace
    from masprm.registry import Registry
    from masprm.worlds.toy_deep.task import K, deep_world
    unsized = replace(WORLDS["toy_deep"], truth=replace(truth, task=deep_world(K, 0)))   # as before the dev pilot
    worlds = Registry(WORLDS.kind)
    for name in WORLDS:
        worlds.register(name, unsized if name == "toy_deep" else WORLDS[name])
    monkeypatch.setattr(stepbench, "WORLDS", worlds)
    monkeypatch.setattr(stepbench, "load_policy", lambda args: pytest.fail("the policy was loaded"))
    monkeypatch.setattr(sys, "argv", ["stepbench", "--world", "toy_deep", "--policy", str(policy), "--scorer",
                                      f"x={policy}", "--mas_config", str(REPO / "configs" / "toy_deep.yaml"),
                                      "--out", str(tmp_path / "bench.json")])
    with pytest.raises(SystemExit) as stop:
        from masprm.cli import run_cli
        run_cli(stepbench.main)
    assert stop.value.code == 2 and "--world toy_deep: its test split is empty" in capsys.readouterr().err
    assert not (tmp_path / "bench.json").exists()
