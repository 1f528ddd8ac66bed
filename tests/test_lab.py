"""`make lab`: the plan (every scheme, objective and method), the driver's order and skips, and the report."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import flag
from masprm.errors import ConfigError
from masprm.roles import ROLES
from masprm.stages import demo
from masprm.running import commands
from masprm.lab import command as lab, plan as lab_plan, rows as lab_rows
from masprm.lab.job import Job

ROOT = Path(__file__).resolve().parents[1]
SCHEMES = ("masprm", "mc", "first_error", "advantage", "margin_pairs", "balanced_pairs", "majority_outcome")
NEW_ROWS = (("first_error", "pqm"), ("mc", "implicit"), ("mc", "gorm"), ("first_error", "gprm"),
            ("mc", "ensemble"), ("mc", "biprm"))
METHODS = ("single_pass", "sbs_logprob", "mcts_logprob", "bon_logprob", "sbs_prm", "mcts_prm", "bon_prm",
           "mcts_orm", "bon_orm")


def test_dry_run_lists_every_scheme_and_method():
    proc = subprocess.run([sys.executable, "src/lab.py", "--dry_run"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # a scheme either has its commands or one line saying why its row is left out
    for scheme in SCHEMES:
        assert f"#   {scheme} + " in out or f"lab: {scheme}+" in out, scheme
    for agg in ("min", "softmin", "prod", "mean"):
        assert f"#   mc + traj ({agg})" in out or f"lab: mc+traj-{agg}" in out
    for scheme, objective in NEW_ROWS:   # issue 37's rows
        assert f"#   {scheme} + {objective}, training seed 42 -> " in out, (scheme, objective)
    # every row at the three training seeds fixed in docs/scorer_lab.md: the demo's (42) and two replicas with
    # their own trees, stage-2 files and scorer folders
    for scheme, objective in [("masprm", "ppm"), ("mc", "orm"), ("mc", "prm"), *NEW_ROWS]:
        for seed in (42, 7, 99):
            assert f"#   {scheme} + {objective}, training seed {seed} -> " in out, (scheme, objective, seed)
    assert f"training seed 7 -> checkpoints/toy-lab-masprm-ppm-s7   [MASPRM]" in out
    assert f"training seed 42 -> {demo.PPM_DIR}   [MASPRM]" in out
    for scheme in ("mc_rollouts", "first_error_search", "step_consistency", "shapley", "mc_rollouts_uniform",
                   "mc_rollouts_active"):   # listed, left out
        assert f"lab: {scheme}+prm: label scheme {scheme!r} needs fresh policy samples" in out, scheme
        assert "CPU minutes per training seed); row left out (add --rollout_rows)" in out
    assert "--rollout-policy" not in out and "fresh policy samples in stage 2" not in out
    # one labels command per seed, however many objectives train on it
    assert out.count("--labels first_error") == 3
    for seed in (7, 99):
        assert out.count(f"--seed {seed} ") == 1 + out.count(f"--seed {seed} --resume")   # its trees, its trainings
        assert f"--out_root results/train_seed_{seed}" in out
    lab_part, _, sweep_part = out.partition("# the compute-matched sweep")   # the sweep's commands come last
    commands = [line[2:].split() for line in lab_part.splitlines() if line.startswith("$ ")]
    evals = [c for c in commands if c[1].endswith("compare_sbs_mcts.py")]
    assert set(METHODS) <= {m for c in evals for m in flag(c, "--methods")}
    # --bon_n only where a best-of-N method reads it (stage 4 refuses a flag no method of the run reads)
    assert all(flag(c, "--seeds") == ["14", "24", "42"] for c in evals)
    assert all(("--bon_n" in c) == any(m.startswith("bon_") for m in flag(c, "--methods")) for c in evals)
    assert all(flag(c, "--bon_n") == ["8"] for c in evals if "--bon_n" in c)
    assert {flag(c, "--step_agg")[0] for c in evals if "bon_prm" in c} == {"min", "last"}
    assert "results/toy_lab.md" in out and "results/toy_lab_claims.txt" in out and "results/toy_lab.png" in out
    assert "# estimated time: " in out and " minutes with --jobs 2 (" in out
    # the sweep: a line per budget, then its evaluation commands in the lab's logs folder
    for budget in (4, 8, 12, 24):
        assert f"#   {budget} agent samples: bon + orm: N = {budget // 4}, " in sweep_part
    sweep = [line[2:].split() for line in sweep_part.splitlines() if line.startswith("$ ")]
    assert sweep and all(c[1].endswith("compare_sbs_mcts.py") and flag(c, "--logs_dir") == ["logs/toy_lab"]
                         for c in sweep)


def plan(monkeypatch, tmp_path, **args):
    """The plan with every scheme, objective and the label benchmark registered, in an empty folder."""
    monkeypatch.setattr(lab_rows, "missing", lambda scorer: None)
    monkeypatch.setattr(lab_plan, "labelbench_available", lambda: True)
    monkeypatch.setattr(lab_plan, "ROOT", tmp_path)
    monkeypatch.setattr(demo, "ROOT", tmp_path)
    settings = {"seeds": [14, 24, 42], "seed": 42, "sample_n": None, "sbs_budget": [2, 3], "train_seeds": [42],
                "n_train": demo.N_TRAIN, "rollout_rows": True, "world": "toy", "rows": None, **args}
    tasks, notes, rows, done = lab.plan(SimpleNamespace(**{"rollout_seeds": settings["train_seeds"], **settings}))
    return {t.name: t for t in tasks}, notes, rows, done


def test_every_scorer_is_trained_benchmarked_and_searched_after_what_it_needs(monkeypatch, tmp_path):
    tasks, notes, rows, done = plan(monkeypatch, tmp_path)
    assert not notes and not done and len(rows) == len(lab.LAB_SCORERS) >= 13
    run = Path(demo.run_folder()).name
    for scheme in SCHEMES[1:]:
        labels = tasks[f"labels_{scheme}"].cmd
        assert flag(labels, "--labels") == [scheme] and flag(labels, "--input") == [demo.run_folder()]
        assert tasks[f"labelbench_{scheme}"].after == (f"labels_{scheme}",)
    assert "labels_masprm" not in tasks and tasks["labelbench_masprm"].after == ()   # the demo's pairs
    # biprm re-ranks finished transcripts only: best-of-N with the last step's value, outside the step benchmark
    assert [n for n in tasks if n.startswith("eval_mc-biprm")] == ["eval_mc-biprm_last"]
    assert flag(tasks["eval_mc-biprm_last"].cmd, "--step_agg") == ["last"]
    assert "mc-biprm=checkpoints/toy-lab-mc-biprm" not in flag(tasks["stepbench"].cmd, "--scorer")
    pqm = tasks["train_first_error-pqm"]
    assert pqm.after == ("labels_first_error",) and flag(pqm.cmd, "--mode") == ["pqm"]
    train = tasks["train_first_error-prm"]
    assert train.after == ("labels_first_error",) and flag(train.cmd, "--mode") == ["prm"]
    assert flag(train.cmd, "--data_dir") == [f"results/labels_first_error_{run}.jsonl"]
    assert flag(train.cmd, "--output-dir") == ["checkpoints/toy-lab-first_error-prm"]
    for option, value in zip(demo.SCORER_TRAINING[::2], demo.SCORER_TRAINING[1::2]):
        if option != "--quiet":
            assert flag(train.cmd, option) == [value]   # the demo's scorer settings
    # the rows --calibrate is built for are calibrated (Platt scaling on held-out training questions), never
    # trained over a folder (--overwrite) that holds no finished scorer
    assert "--calibrate" in train.cmd and "--calibrate" in tasks["train_margin_pairs-ppm"].cmd
    assert not any("--overwrite" in t.cmd for n, t in tasks.items() if n.startswith("train_"))
    traj = tasks["train_mc-traj-softmin"]
    assert "--calibrate" not in traj.cmd   # not built for traj: its row stays uncalibrated
    assert traj.after == () and flag(traj.cmd, "--agg") == ["softmin"] and flag(traj.cmd, "--mode") == ["traj"]
    assert flag(traj.cmd, "--data_dir") == [f"results/prm_samples_{run}.jsonl"]
    assert "train_masprm-ppm" not in tasks and "train_mc-orm" not in tasks   # the demo trained them
    # searches: each scorer after its training; best-of-N also after the no-scorer run that draws the samples
    assert list(tasks)[0] == "eval_no_scorer" and flag(tasks["eval_no_scorer"].cmd, "--methods") == \
        ["bon_logprob", "bon_oracle_step", "bon_oracle_outcome"]
    # the reference scorers (no model) in the lab's own folder; the MASPRM with the ORM on its leaves
    assert flag(tasks["eval_no_scorer_oracles"].cmd, "--methods") == list(lab.SEARCH_ORACLES)
    leaf = tasks["eval_masprm-ppm_ormleaf"].cmd
    assert flag(leaf, "--methods") == ["mcts_prm"] and "--orm_leaf" in leaf
    assert flag(leaf, "--prm_dir") == [demo.PPM_DIR] and flag(leaf, "--orm_dir") == [demo.ORM_DIR]
    assert tasks["eval_mc-traj-min"].after == ("train_mc-traj-min", "eval_no_scorer")
    assert tasks["eval_mc-traj-min_search"].after == ("train_mc-traj-min",)
    assert flag(tasks["eval_mc-traj-min_search"].cmd, "--methods") == ["sbs_prm", "mcts_prm"]
    assert flag(tasks["eval_mc-traj-min_last"].cmd, "--step_agg") == ["last"]
    assert flag(tasks["eval_mc-traj-min"].cmd, "--prm_dir") == ["checkpoints/toy-lab-mc-traj-min"]
    assert tasks["eval_masprm-ppm"].after == ("eval_no_scorer",) and tasks["eval_no_scorer"].after == ()
    search = tasks["eval_mc-prm_search"].cmd   # the lab's SBS budget comes last: it wins over the README's 3 x 5
    assert [search[len(search) - search[::-1].index(f)] for f in ("--b1", "--b2")] == ["2", "3"]
    assert tasks["eval_no_scorer_last"].after == ("eval_no_scorer",)
    assert flag(tasks["eval_mc-orm"].cmd, "--methods") == ["bon_orm"]
    assert flag(tasks["eval_mc-orm_search"].cmd, "--methods") == ["mcts_orm"]
    assert flag(tasks["eval_mc-orm_sbs"].cmd, "--prm_dir") == [demo.ORM_DIR]   # the ORM valuing each prefix
    # the SBS and MCTS conditions `make demo` ran itself are asked of its logs folder (found COMPLETED there)
    in_demo = {n for n, t in tasks.items() if n.startswith("eval_") and flag(t.cmd, "--logs_dir") == [demo.LOGS]}
    assert in_demo == {"eval_no_scorer_search", "eval_masprm-ppm_search", "eval_mc-orm_search",
                       "eval_masprm-ppm_ormleaf"}   # the demo runs --orm_leaf too
    assert flag(tasks["eval_no_scorer_search"].cmd, "--methods") == ["single_pass", "sbs_logprob", "mcts_logprob"]
    assert all(flag(t.cmd, "--logs_dir") == [lab.LOGS] for n, t in tasks.items()
               if n.startswith("eval_") and n not in in_demo)
    bench = tasks["stepbench"]
    assert len(bench.after) == sum(not s.demo_folder and not s.finished_only for s in lab.LAB_SCORERS) and flag(bench.cmd, "--scorer")[:1] == [f"masprm-ppm={demo.PPM_DIR}"]
    assert [c for c in bench.cmd if "=" in c] == [f"{r.slug}={r.folder}" for r in rows if not r.finished_only]


ROLLOUT_SCHEMES = ("mc_rollouts", "first_error_search", "step_consistency", "shapley", "mc_rollouts_uniform",
                   "mc_rollouts_active")


def test_the_rollout_rows_are_planned_only_with_their_flag_and_change_no_other_command(monkeypatch, tmp_path):
    with_rows, notes, rows, _ = plan(monkeypatch, tmp_path, train_seeds=[42, 7])
    without, notes_without, rows_without, _ = plan(monkeypatch, tmp_path, train_seeds=[42, 7], rollout_rows=False)
    assert not notes and {r.scheme for r in rows} - {r.scheme for r in rows_without} == set(ROLLOUT_SCHEMES)
    assert [n.split(":")[0] for n in notes_without] == [f"{s}+prm" for s in ROLLOUT_SCHEMES]
    # every command of the plan without the flag is the same with it, but the step benchmark's list of scorers
    assert {n: t for n, t in without.items() if n != "stepbench"} == \
        {n: t for n, t in with_rows.items() if n in without and n != "stepbench"}
    per_seed = ("train_{}-prm", "eval_{}-prm", "eval_{}-prm_last", "eval_{}-prm_search", "labels_{}")
    added = {name.format(s) + seed if name.startswith("labels") else name.format(s).replace("-prm", f"-prm{seed}")
             for s in ROLLOUT_SCHEMES for seed in ("", "_s7") for name in per_seed}
    assert set(with_rows) - set(without) == added | {f"labelbench_{s}" for s in ROLLOUT_SCHEMES}
    for scheme in ROLLOUT_SCHEMES:   # the demo's policy, seeded by the row's training seed
        for seed, name in (("42", f"labels_{scheme}"), ("7", f"labels_{scheme}_s7")):
            cmd = with_rows[name].cmd
            assert flag(cmd, "--rollout-policy") == [demo.POLICY] and flag(cmd, "--seed") == [seed]
        assert with_rows[f"train_{scheme}-prm"].after == (f"labels_{scheme}",)
    # the active scheme ranks by the ensemble row of its seed, trained first
    for name, seed, after in (("labels_mc_rollouts_active", "", ()),
                              ("labels_mc_rollouts_active_s7", "-s7", ("trees_s7",))):
        assert flag(with_rows[name].cmd, "--rollout-ensemble") == [f"checkpoints/toy-lab-mc-ensemble{seed}"]
        assert with_rows[name].after == (*after, f"train_mc-ensemble{seed.replace('-', '_')}")
    assert "--rollout-ensemble" not in with_rows["labels_mc_rollouts_uniform"].cmd
    assert not any("--rollout-policy" in with_rows[n].cmd for n in ("labels_first_error", "labels_first_error_s7"))


def test_the_rollout_rows_can_stay_at_fewer_training_seeds_than_the_others(monkeypatch, tmp_path):
    every, _, _, _ = plan(monkeypatch, tmp_path, train_seeds=[42, 7])
    fewer, _, rows, _ = plan(monkeypatch, tmp_path, train_seeds=[42, 7], rollout_seeds=[42])
    # the same plan less the rollout rows' seed-7 labels, trainings and searches
    assert set(every) - set(fewer) == {n for n in every if n.endswith("_s7") or "_s7_" in n
                                       for s in ROLLOUT_SCHEMES if f"{s}-prm_s7" in n or n == f"labels_{s}_s7"}
    assert {t: every[t] for t in fewer} == fewer and "train_mc-prm_s7" in fewer and "train_shapley-prm" in fewer
    assert sorted(r.train_seed or 42 for r in rows if r.scheme == "shapley") == [42]
    assert sorted(r.train_seed or 42 for r in rows if (r.scheme, r.objective) == ("mc", "prm")) == [7, 42]


@pytest.mark.parametrize("seeds, message", [([7], "rollout_seeds must include --seed 42"),
                                            ([42, 99], "rollout_seeds must be some of --train_seeds [42, 7]")])
def test_rollout_seeds_outside_the_training_seeds_are_one_line(seeds, message):
    assert lab.LabArgs(train_seeds=[42, 7]).rollout_seeds == [42, 7]   # default: every training seed
    with pytest.raises(ConfigError, match=re.escape(message)):
        lab.LabArgs(train_seeds=[42, 7], rollout_seeds=seeds)


def test_a_replica_seed_grows_its_trees_and_trains_every_row_on_them(monkeypatch, tmp_path):
    tasks, _, rows, done = plan(monkeypatch, tmp_path, train_seeds=[42, 7])
    run = Path(demo.run_folder()).name
    assert len(rows) == 2 * len(lab.LAB_SCORERS) and not done
    trees = tasks["trees_s7"].cmd
    assert flag(trees, "--seed") == ["7"] and flag(trees, "--out_root") == ["results/train_seed_7"]
    stage2 = tasks["stage2_s7"]
    assert stage2.after == ("trees_s7",) and flag(stage2.cmd, "--input") == [f"results/train_seed_7/{run}"]
    labels = tasks["labels_first_error_s7"]
    assert labels.after == ("trees_s7",) and flag(labels.cmd, "--input") == [f"results/train_seed_7/{run}"]
    # the demo's two scorers too, at seed 7, on seed 7's pairs and samples, in folders of their own
    ppm = tasks["train_masprm-ppm_s7"]
    assert ppm.after == ("stage2_s7",) and flag(ppm.cmd, "--seed") == ["7"]
    assert flag(ppm.cmd, "--data_dir") == [f"results/train_seed_7/ppm_pairs_{run}.jsonl"]
    assert flag(ppm.cmd, "--output-dir") == ["checkpoints/toy-lab-masprm-ppm-s7"]
    assert flag(tasks["train_first_error-prm_s7"].cmd, "--data_dir") == \
        [f"results/train_seed_7/labels_first_error_{run}.jsonl"]
    assert tasks["train_first_error-prm_s7"].after == ("labels_first_error_s7",)
    # its searches in the lab's folder, never the demo's; the ORM leaf of its own seed
    assert all(flag(t.cmd, "--logs_dir") == [lab.LOGS] for n, t in tasks.items() if n.endswith("_s7") or "_s7_" in n
               if n.startswith("eval_"))
    leaf = tasks["eval_masprm-ppm_s7_ormleaf"]
    assert flag(leaf.cmd, "--orm_dir") == ["checkpoints/toy-lab-mc-orm-s7"]
    assert leaf.after == ("train_masprm-ppm_s7", "train_mc-orm_s7")
    assert flag(tasks["eval_mc-orm_s7_search"].cmd, "--methods") == ["mcts_orm"]
    # the step and label benchmarks stay on the demo's seed
    assert "masprm-ppm=checkpoints/toy-lab-masprm-ppm-s7" not in tasks["stepbench"].cmd
    assert not any(n.startswith("labelbench_") and n.endswith("_s7") for n in tasks)


def test_finished_outputs_are_skipped(monkeypatch, tmp_path):
    run = Path(demo.run_folder()).name
    (tmp_path / "results").mkdir()
    (tmp_path / f"results/labels_advantage_{run}.jsonl").write_text("{}\n")
    folder = tmp_path / "checkpoints/toy-lab-advantage-prm"
    folder.mkdir(parents=True)
    (folder / "masprm_scorer.json").write_text(json.dumps({"status": "completed"}))
    tasks, _, rows, done = plan(monkeypatch, tmp_path)
    # finished but not calibrated: trained again over itself, with --calibrate
    assert done == {"labels_advantage"}
    assert "--calibrate" in tasks["train_advantage-prm"].cmd and "--overwrite" in tasks["train_advantage-prm"].cmd
    (folder / "masprm_scorer.json").write_text(json.dumps({"status": "completed", "platt": {"a": 1.0, "b": 0.0}}))
    tasks, _, rows, done = plan(monkeypatch, tmp_path)
    assert done == {"labels_advantage", "train_advantage-prm"}
    (tmp_path / lab.STEPBENCH).write_text(json.dumps({"settings": {"scorers": {r.slug: r.folder for r in rows
                                                                               if not r.finished_only}}}))
    assert "stepbench" in plan(monkeypatch, tmp_path)[3]
    (tmp_path / lab.STEPBENCH).write_text(json.dumps({"settings": {"scorers": {"masprm-ppm": demo.PPM_DIR}}}))
    assert "stepbench" not in plan(monkeypatch, tmp_path)[3]   # a report on fewer scorers is run again


def test_a_missing_scheme_is_one_line_and_its_row_is_left_out(monkeypatch):
    monkeypatch.setattr(lab_plan, "labelbench_available", lambda: True)
    registered = {"mc", "advantage"}

    def missing(scorer):
        return None if scorer.scheme in registered or scorer.demo_folder or scorer.objective == "traj" else \
            f"{scorer.name}: label scheme {scorer.scheme!r} is not registered"

    monkeypatch.setattr(lab_rows, "missing", missing)
    tasks, notes, rows, _ = lab.plan(SimpleNamespace(seeds=[14], seed=42, sample_n=3, sbs_budget=[3, 5], train_seeds=[42],
                                                     rollout_rows=True, rollout_seeds=[42], world="toy", rows=None))
    assert len(notes) == sum(bool(missing(s)) for s in lab.LAB_SCORERS) >= 4
    assert all(n.count("\n") == 0 for n in notes)
    assert {r.scheme for r in rows} == {"masprm", "mc", "advantage"}
    assert not any("first_error" in " ".join(t.cmd) for t in tasks)
    evals = [t for t in tasks if t.name.startswith("eval_")]
    assert all(flag(t.cmd, "--sample_n") == ["3"] for t in evals)
    assert all(flag(t.cmd, "--logs_dir") == [lab.LOGS] for t in evals)   # a partial run stays out of the demo's logs
    for seeds, budget, reused in (([14, 24, 42], [3, 5], True), ([14, 7], [2, 3], False), ([42], [4, 4], False)):
        assert lab.reuse_demo(SimpleNamespace(seeds=seeds, sbs_budget=budget, sample_n=None)) is reused


def test_a_small_synthetic_run_prepares_runs_what_is_not_done_and_writes_the_report(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(commands, "ROOT", tmp_path)
    monkeypatch.setattr(lab, "ROOT", tmp_path)   # the commands' outputs: under tmp_path/logs/toy_lab
    noop = [sys.executable, "-c", "pass"]
    monkeypatch.setattr(demo, "commands", lambda args: SimpleNamespace(build=noop, trees=noop, pairs=noop, scorers=[],
                                                                       aggregate=noop, stepbench=noop, claims=noop))
    prepared = []
    monkeypatch.setattr(demo, "make_scorers", lambda c, args: prepared.append(args.n_train))
    touch = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran')"

    def plan(args):
        tasks = [Job(name, "labels", partial(list, [sys.executable, "-c", touch, name]), needs=after)
                 for name, after in (("first", ()), ("second", ("first",)), ("finished", ()))]
        return tasks, ["x+prm: label scheme 'x' is not registered"], list(lab.LAB_SCORERS[:2]), {"finished"}

    monkeypatch.setattr(lab, "plan", plan)
    assert lab.main(["--seeds", "14", "--n_train", "3"]) == 0
    assert prepared == [3] and (tmp_path / "first").is_file() and (tmp_path / "second").is_file()
    assert not (tmp_path / "finished").exists()                      # its output was there: skipped
    out = capsys.readouterr().out
    assert "lab: x+prm: label scheme 'x' is not registered" in out and "finished: output already there" in out
    report = (tmp_path / lab.REPORT).read_text()
    assert "| MASPRM | masprm | ppm |" in report and "- not run: x+prm" in report
    # 2 rows x 4 searches x 2 baselines, and the sweep's 11 comparisons (SBS with either scorer at each of the 4
    # budgets, the ORM's MCTS at 12 and 24, the MASPRM's at 24), none run here
    assert (tmp_path / lab.CLAIMS).read_text().count("not evaluated") == 2 * 4 * 2 + 11
    made_by = json.loads((tmp_path / "results/toy_lab.json").read_text())["made_by"]
    assert made_by == {"logs/toy_demo": "make demo", "logs/toy_lab": "make lab"}
    # its archive, in the checkout it ran in: the lab's report files and logs, each by `make lab`
    archived = {e["path"]: e.get("command") for e in
                json.loads((tmp_path / "archives/toy_lab-v1/manifest.json").read_text())["files"]}
    assert archived["results/toy_lab.md"] == "make lab" and "results/toy_lab_claims.json" in archived
    # the report again from that archive alone: the same files, nothing run
    report_files = ("results/toy_lab.md", "results/toy_lab.json", "results/toy_lab_claims.txt")
    first = {p: (tmp_path / p).read_bytes() for p in report_files}
    for p in (*report_files, "first", "second"):
        (tmp_path / p).unlink()
    assert lab.main(["--seeds", "14", "--n_train", "3", "--report_from", str(tmp_path / "archives/toy_lab-v1")]) == 0
    assert {p: (tmp_path / p).read_bytes() for p in report_files} == first
    assert not (tmp_path / "first").exists() and prepared == [3]   # no command ran, nothing was prepared
    # a run of some rows reports under its own names, each of its cells made by the command as typed
    assert lab.main(["--seeds", "14", "--n_train", "3", "--rows", "mc+prm"]) == 0
    made_by = json.loads((tmp_path / "results/toy_lab_rows.json").read_text())["made_by"]
    claims = (tmp_path / "results/toy_lab_rows_claims.txt").read_text()   # no sweep; no declared primary
    assert "compute-matched" not in claims and "primary" not in claims.lower().split("vs orm")[1]
    assert made_by == {"logs/toy_demo": "make demo", "logs/toy_lab_rows": "python src/lab.py --seeds 14 --n_train 3 "
                                                                          "--rows mc+prm"}


TINY_SWEEP = {   # a hand-made plan: at 4 samples no MCTS fits; at 24 each scorer's MCTS has its own count
    4: {("bon", "orm"): {"bon_n": 1, "step_agg": "last"}, ("sbs", "masprm"): {"b1": 1, "b2": 1},
        ("sbs", "orm"): {"b1": 1, "b2": 1}, ("mcts", "masprm"): None, ("mcts", "orm"): None},
    24: {("bon", "orm"): {"bon_n": 6, "step_agg": "last"}, ("sbs", "masprm"): {"b1": 1, "b2": 6},
         ("sbs", "orm"): None, ("mcts", "masprm"): {"n_simulations": 9, "max_children": 3},
         ("mcts", "orm"): {"n_simulations": 8, "max_children": 3}}}


def with_sweep(monkeypatch, sweep) -> None:
    """The toy world's lab recipe with another compute-matched sweep plan (a measured sweep by a name of its own)."""
    from dataclasses import replace
    from masprm.lab import compute_match, recipe
    monkeypatch.setitem(compute_match.SWEEPS, "test", sweep)
    found = recipe.recipes()   # the cached records: the test's change is undone after it
    monkeypatch.setitem(found, "toy", replace(found["toy"], sweep_name="test"))


def test_the_compute_matched_sweep_is_planned_as_evaluation_commands(monkeypatch, tmp_path):
    def last_value(cmd, name):   # as argparse reads a flag given twice: the last one wins
        at = [i for i, x in enumerate(cmd) if x == name]
        return cmd[at[-1] + 1] if at else None

    with_sweep(monkeypatch, {})
    without, *_ = plan(monkeypatch, tmp_path, sample_n=5)
    with_sweep(monkeypatch, TINY_SWEEP)
    tasks, *_ = plan(monkeypatch, tmp_path, sample_n=5)
    # the sweep adds tasks and changes none of the others
    assert {n: (t.cmd, t.after) for n, t in tasks.items() if not n.startswith("sweep_")} == \
        {n: (t.cmd, t.after) for n, t in without.items()}
    assert list(tasks)[-5:] == ["sweep_4_masprm-ppm", "sweep_4_mc-orm", "sweep_4_mc-orm_sbs", "sweep_24_masprm-ppm",
                                "sweep_24_mc-orm"]   # last in the plan; 24 has no SBS with the ORM
    sweep = {n: t.cmd for n, t in tasks.items() if n.startswith("sweep_")}
    assert all(not tasks[n].after and flag(c, "--logs_dir") == [lab.LOGS] and flag(c, "--sample_n") == ["5"]
               and flag(c, "--seeds") == ["14", "24", "42"] and flag(c, "--split") == ["test"] for n, c in sweep.items())

    def settings(cmd):
        return {f: last_value(cmd, f) for f in ("--b1", "--b2", "--n_simulations", "--max_children", "--bon_n",
                                                "--step_agg")}
    masprm4, orm4, orm_sbs4 = sweep["sweep_4_masprm-ppm"], sweep["sweep_4_mc-orm"], sweep["sweep_4_mc-orm_sbs"]
    assert flag(masprm4, "--methods") == ["sbs_prm"] and flag(masprm4, "--prm_dir") == [demo.PPM_DIR]
    assert (settings(masprm4)["--b1"], settings(masprm4)["--b2"]) == ("1", "1")
    assert flag(orm4, "--methods") == ["bon_orm"] and flag(orm4, "--orm_dir") == [demo.ORM_DIR]
    assert (settings(orm4)["--bon_n"], settings(orm4)["--step_agg"]) == ("1", "last")
    assert flag(orm_sbs4, "--methods") == ["sbs_prm"] and flag(orm_sbs4, "--prm_dir") == [demo.ORM_DIR]
    assert "--allow_scorer_kind_mismatch" in orm_sbs4
    masprm24, orm24 = sweep["sweep_24_masprm-ppm"], sweep["sweep_24_mc-orm"]
    assert flag(masprm24, "--methods") == ["sbs_prm", "mcts_prm"]
    assert settings(masprm24) == {"--b1": "1", "--b2": "6", "--n_simulations": "9", "--max_children": "3",
                                  "--bon_n": None, "--step_agg": None}
    assert flag(orm24, "--methods") == ["mcts_orm", "bon_orm"]
    assert (settings(orm24)["--n_simulations"], settings(orm24)["--bon_n"]) == ("8", "6")
    # each job's record holds what its command sets: the estimate prices the record, the command runs
    for name, cmd in sweep.items():
        assert {k: str(v) for k, v in tasks[name].settings.items()} == \
            {k: settings(cmd)[f"--{k}"] for k in tasks[name].settings}


@pytest.mark.parametrize("world", sorted(lab.WORLD_RUNS))
def test_every_jobs_record_says_what_its_command_runs(monkeypatch, tmp_path, world):
    jobs_, *_ = plan(monkeypatch, tmp_path, world=world, train_seeds=[42, 7, 99], sbs_budget=[2, 3])
    for job in jobs_.values():
        cmd = job.argv()
        assert job.cmd == cmd and job.after == job.needs and job.task().cmd == cmd
        if job.kind in ("eval", "sweep"):
            assert (flag(cmd, "--methods"), flag(cmd, "--seeds")) == (list(job.methods), list(map(str, job.seeds)))
            at = [i for i, x in enumerate(cmd) if x == "--logs_dir"]
            assert cmd[at[-1] + 1] == job.logs
            reads = {"b1": "sbs", "b2": "sbs", "n_simulations": "mcts", "max_children": "mcts", "bon_n": "bon"}
            for key, value in job.settings.items():   # the last occurrence wins, as argparse reads it
                at = [i for i, x in enumerate(cmd) if x == f"--{key}"]
                if at:
                    assert cmd[at[-1] + 1] == str(value), (job.name, key)
                else:   # left out of the command where none of its methods reads it (stage 4 would refuse it)
                    assert key not in reads or not any(m.startswith(reads[key]) for m in job.methods), (job.name, key)
        if job.kind in ("train", "eval", "sweep") and job.row:   # the row's key in its name, its objective in its key
            assert job.row in job.name and job.row.split("-")[1].startswith(job.objective)
        if job.kind == "labels":
            assert flag(cmd, "--labels") == [job.scheme] and job.rollout == ("--rollout-policy" in cmd)


@pytest.mark.parametrize("world", sorted(lab.WORLD_RUNS))
def test_every_planned_scorer_is_one_its_role_takes(world):
    # The lab reads each row in a role (--prm_dir: the MASPRM's, --orm_dir: the ORM's); stage 4 refuses a
    # scorer trained with an objective the role does not take, so a row planned in the wrong role fails
    # only hours into a run. Only a command that says so on purpose may mix them.
    run, family = lab.WORLD_RUNS[world], lab.world_recipe(world)
    checked = set()
    for row in lab.world_rows(run, family):
        for _suffix, _methods, flags, _agg, _logs in lab.searches(row, False, run):
            if "--allow_scorer_kind_mismatch" in flags:
                assert row.objective == "orm", row.slug   # the ORM under SBS, the one mismatch on purpose
                continue
            for flag_name, role in (("--prm_dir", "masprm"), ("--orm_dir", "orm")):
                if flag_name in flags and flags[flags.index(flag_name) + 1] == row.folder:
                    assert row.objective in ROLES[role].modes, (row.slug, role)
                    checked.add(row.objective)
    assert checked == {row.objective for row in lab.world_rows(run, family)}


@pytest.mark.parametrize("world", sorted(lab.WORLD_RUNS))
def test_every_planned_evaluation_passes_stage_4s_checks(monkeypatch, tmp_path, world):
    # Stage 4 checks its flags against its methods before any model loads (an MCTS option without an MCTS
    # method, --orm_leaf without mcts_prm, a method without its scorer folder); a plan that breaks one
    # would stop the lab hours in. Each planned command is parsed and checked as stage 4 does.
    from masprm.stages import evaluate
    tasks, _notes, _rows, _done = plan(monkeypatch, tmp_path, world=world, train_seeds=[42, 7, 99],
                                       sbs_budget=[3, 5])
    demo_cmds = demo.commands(demo.DemoArgs(world=world))   # `make demo WORLD=...`'s own evaluations
    evals = [t.cmd for t in tasks.values() if t.cmd[1].endswith("compare_sbs_mcts.py")]
    evals += [*demo_cmds.early_evals.values(), *demo_cmds.evals.values()]
    assert len(evals) >= 10
    monkeypatch.chdir(tmp_path)
    for cmd in evals:
        for name in ("--prm_dir", "--orm_dir"):
            if name in cmd:
                (tmp_path / flag(cmd, name)[0]).mkdir(parents=True, exist_ok=True)
        run, settings = evaluate.parse_command(cmd[2:])
        evaluate.validate(run, settings)
