"""The lab's plan: a family's jobs on a world, in priority order (`plan`), and the settings they share.

For every row of the family (its recipe, `masprm.lab.recipe`) at each training seed: its labels, its training,
its label benchmark, its evaluations (`searches`: SBS, MCTS and best-of-N at the family's aggregations), then the
step benchmark and the compute-matched sweep (`masprm.lab.sweep_jobs`); a replica seed's own trees and stage 2
before what needs them. Each is a `masprm.lab.job.Job` record. The lab's command (`masprm.lab.command`) prints
or runs it; the dev pilot (`masprm.lab.pilot`) takes the trainings it needs from it, so both import this module
and neither imports the other.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from functools import partial
from pathlib import Path

from masprm.stages import demo
from masprm.running.commands import PY, ROOT, stage_command
from masprm.lab.job import Job
from masprm.lab.recipe import Recipe, lab_recipe, world_recipe
from masprm.lab.rows import (LabScorer, chosen_rows, ensemble_of, left_out, needs_rollouts, orm_of, replica_stage2,
                             replica_trees, role_flags, scheme_records_path, scorer_calibrated, seed_root,
                             seed_run_folder, stepbench_done, world_rows)
from masprm.lab.sweep_jobs import sweep_tasks
from masprm.train.config import CALIBRATED_MODES
from masprm.worlds.runs import DEFAULT_WORLD, WORLD_RUNS, WorldRun


# the toy world's lab files, named here for readers
LOGS, REPORT, CLAIMS, PLOT, STEPBENCH, LABELBENCH = WORLD_RUNS[DEFAULT_WORLD].lab_files.values()
BON_N = 8
BON_SUFFIX = {"min": "", "last": "_last"}   # a best-of-N command's task suffix by its step aggregation
N_SIMULATIONS, MAX_CHILDREN = 10, 3   # the README's MCTS budget (demo.evaluation_command)
SBS_BUDGET = (3, 5)   # B1 x B2: the README's SBS budget (measured to fit the lab's hour: docs/scorer_lab.md)
# The reference rows (issue 34): the step labeller and the gold outcome as scorers. true_value is left out of
# the default lab: K = 8 rollouts for every scored prefix is many times a search's own sampling on 2 cores.
SEARCH_ORACLES = ("sbs_oracle_step", "sbs_oracle_outcome", "mcts_oracle_step", "mcts_oracle_outcome")
BON_ORACLES = ("bon_oracle_step", "bon_oracle_outcome")
PAIR_CAPS = ("--ppm-max-pairs", "8", "--ppm-pos-topk", "4", "--ppm-neg-topk", "4")   # the demo's pair mining


def budgets(args) -> dict:
    """The settings of the lab's conditions per search family (what the report tabulates)."""
    return {"sbs": dict(zip(("b1", "b2"), args.sbs_budget)), "bon": {"bon_n": BON_N},
            "mcts": {"n_simulations": N_SIMULATIONS, "max_children": MAX_CHILDREN}}


def search_budget(args) -> tuple[str, ...]:
    """The budget flags of every evaluation command of the lab (and of its dev pilot)."""
    return ("--b1", str(args.sbs_budget[0]), "--b2", str(args.sbs_budget[1]), "--bon_n", str(BON_N),
            *(("--sample_n", str(args.sample_n)) if args.sample_n else ()))


def budget_settings(args, agg: str) -> dict[str, object]:
    """The settings `search_budget` and a step aggregation set, as a job records them (what its cost reads)."""
    return {"b1": args.sbs_budget[0], "b2": args.sbs_budget[1], "bon_n": BON_N, "step_agg": agg}


def labelbench_available() -> bool:
    return importlib.util.find_spec("masprm.instruments.labelbench") is not None


# --------------------------------------------------------------------------- the plan


DEMO_SBS_BUDGETS = {(3, 5), (2, 3)}   # the SBS budgets `make demo` evaluates (demo.BUDGETS)


def lab_world(args) -> WorldRun:
    """The world's record the lab runs, under its recipe's lab name (logs/<world>_<lab>, results/<world>_<lab>*);
    with --rows under names of their own (logs/<world>_<lab>_rows, results/<world>_<lab>_rows*), so that a run
    of some rows never replaces the whole family's report, step benchmark or logs. A family other than the world's
    own lab records no pre-registration (the pre-registration fixes that one) and has no pilot. Its scorers share
    the lab's folders (checkpoints/<world>-lab-*: a row two families run is trained once)."""
    world, lab = WORLD_RUNS[args.world], lab_recipe(args).lab
    if lab != "lab":
        world = replace(world, lab=lab, preregistration=None, pilot=False)
    return replace(world, lab=f"{world.lab}_rows") if getattr(args, "rows", None) else world


def lab_name(world: WorldRun) -> str:
    """The lab's name as its logs folder and archive carry it (toy_lab, toy_deep_explore, toy_lab_rows): what its
    jobs record in the manifests they make (`masprm.lab.job.Job.task`) and its cells look for (`masprm.lab.cells`)."""
    return f"{world.name}_{world.lab}"


def reuse_demo(args) -> bool:
    """Ask the demo's logs folder for the conditions the demo runs itself: only where they are the demo's own
    (all questions, its seeds, its SBS budgets), so that nothing the demo did not run is written there. Never
    for an exploratory lab: all of its conditions stay in its own folder, so that the newest experiment the
    world's own report reads in the demo's folder is never one of the exploratory lab's."""
    return (not getattr(args, "explore", False) and not args.sample_n and set(args.seeds) <= set(demo.SEEDS)
            and tuple(args.sbs_budget) in DEMO_SBS_BUDGETS)


def searches(scorer: LabScorer | None, reuse_demo: bool, world: WorldRun = demo.TOY_RUN,
             family: Recipe | None = None) -> list[tuple[str, list[str], tuple[str, ...], str, str]]:
    """(suffix, methods, scorer flags, step_agg, logs folder) of each evaluation command of a row (None: the
    conditions without a scorer) in a world's lab family (`family`, default: the world's lab recipe): best-of-N
    at its aggregations, by the rows it names.

    A scorer runs as the MASPRM role (sbs_prm, mcts_prm, bon_prm); the ORM runs as itself (mcts_orm: the
    ORM valuing the leaves; bon_orm) and, under SBS, as a step scorer valuing each prefix (sbs_prm). The
    SBS and MCTS conditions `make demo` runs itself (no scorer, the MASPRM's, the ORM's) are asked of the
    demo's logs folder, where the demo's evaluation left them COMPLETED (`reuse_demo`).
    """
    own, family = world.lab_logs, family or world_recipe(world.name)
    if scorer is None:   # with the reference scorers, which load no model (masprm.search.oracles)
        flags, sbs_mcts, bon = (), ["single_pass", "sbs_logprob", "mcts_logprob"], ["bon_logprob", *BON_ORACLES]
    elif scorer.objective == "orm":
        flags, sbs_mcts, bon = role_flags("orm", scorer.folder, world), ["mcts_orm"], ["bon_orm"]
    else:
        flags, sbs_mcts, bon = role_flags("prm", scorer.folder, world), ["sbs_prm", "mcts_prm"], ["bon_prm"]
    logs = world.demo_logs if reuse_demo and (scorer is None or scorer.demo_folder) else own
    if scorer is not None and scorer.finished_only:   # it refuses partial transcripts: no SBS, MCTS or min
        return [("_last", bon, flags, "last", own)]
    ranks = scorer is None or family.ranks_passes(scorer.objective)
    found = [(BON_SUFFIX[agg], bon, flags, agg, own) for agg in family.bon_aggs if ranks]
    found.append(("_search", sbs_mcts, flags, "min", logs))
    if scorer is None:   # never in the demo's folder: the demo does not run them
        found.append(("_oracles", list(SEARCH_ORACLES), (), "min", own))
    if scorer is not None and scorer.objective == "orm":   # the ORM in the MASPRM's role, on purpose
        found.append(("_sbs", ["sbs_prm"], (*role_flags("prm", scorer.folder, world), "--allow_scorer_kind_mismatch"),
                      "min", own))
    if scorer is not None and (scorer.scheme, scorer.objective) == ("masprm", "ppm"):
        # the paper's headline configuration: the MASPRM guides MCTS, the ORM of its seed values the leaves
        found.append(("_ormleaf", ["mcts_prm"], (*flags, *role_flags("orm", orm_of(scorer).folder, world),
                                                 "--orm_leaf"), "min", logs))
    return found


def plan(args) -> tuple[list[Job], list[str], list[LabScorer], set[str]]:
    """The lab's jobs in priority order, the lines about rows left out, the rows, and the finished jobs
    (on the world of `args.world`, its family's rows and conditions; with --explore its exploratory family's).
    Each job is a record (`masprm.lab.job.Job`); its command line is made when it is printed or started."""
    world, family = lab_world(args), lab_recipe(args)
    files, run = world.lab_files, Path(demo.run_folder(world)).name
    notes = [line for line in (left_out(s, args.rollout_rows) for s in world_rows(world, family)) if line]
    notes += family.notes
    rows = chosen_rows([s for s in world_rows(world, family) if not left_out(s, args.rollout_rows)], args.rows)
    if args.rows:   # the sweep measures the MASPRM and the ORM, not the rows named
        notes.append(f"the family's other rows and the compute-matched sweep: --rows ran {len(rows)} rows (those it "
                     "names, the MASPRM, the ORM and the rows they need)")
    replicas = [s.replica(seed) for seed in args.train_seeds if seed != args.seed for s in rows
                if seed in (args.rollout_seeds if needs_rollouts(s.scheme) else args.train_seeds)]
    bench = labelbench_available() and family.benchmarks
    if not labelbench_available():
        notes.append("label quality: masprm.instruments.labelbench is not there; the label AUC column is left empty")
    budget = search_budget(args)
    tasks, done = [], set()

    def add(job: Job, finished: bool = False) -> None:
        tasks.append(job)
        if finished:
            done.add(job.name)

    draw = f"eval_no_scorer{BON_SUFFIX[family.bon_aggs[0]]}"   # the first no-scorer best-of-N command

    def evaluations(scorer: LabScorer | None) -> list[Job]:
        key = scorer.key if scorer else "no_scorer"
        trained = (f"train_{scorer.key}",) if scorer and not scorer.demo_folder else ()
        found = []
        for suffix, methods, flags, agg, logs in searches(scorer, reuse_demo(args), world, family):
            if suffix == "_ormleaf" and not orm_of(scorer).demo_folder:
                trained += (f"train_{orm_of(scorer).key}",)
            # best-of-N reads back the passes the first no-scorer command (bon_logprob) draws
            name = f"eval_{key}{suffix}"
            drawn = (draw,) if methods[0].startswith("bon_") and name != draw else ()
            found.append(Job(name, "eval", partial(demo.evaluation_command, args.seeds, methods, flags,
                                                   (*budget, "--step_agg", agg), logs_dir=logs, world=world),
                             row=scorer.key if scorer else None, objective=scorer.objective if scorer else None,
                             needs=trained + drawn, seeds=tuple(args.seeds), methods=tuple(methods),
                             settings=budget_settings(args, agg), logs=logs))
        return found

    first, *later = [t for s in [None, *rows, *replicas] for t in evaluations(s)]
    add(first)   # first: it draws the best-of-N samples every scorer reads back
    for seed in dict.fromkeys(s.train_seed for s in replicas):   # a replica seed's own trees and stage 2
        add(*replica_trees(args, seed))
        add(*replica_stage2(seed, world))
    label_objective: dict[tuple[str, int | None], str] = {}   # one labels command per scheme and seed
    for s in [*rows, *replicas]:
        if s.own_labels:
            label_objective.setdefault((s.scheme, s.train_seed), s.objective)
    for (scheme, seed), objective in label_objective.items():
        flags = PAIR_CAPS if objective == "ppm" else ()   # pairs are mined under the demo's caps
        rollout, waits = rollout_inputs(scheme, seed, args)
        out = scheme_records_path(scheme, run, "results" if seed is None else seed_root(seed, world))
        argv = [*stage_command("preprocess"), "--input", seed_run_folder(seed, world), "--labels", scheme,
                "--target-nodes", str(world.target_nodes), *flags, *rollout, "--view", "full", "--mas_config",
                world.config]
        add(Job(labels_task(scheme, seed), "labels", partial(list, argv),
                needs=(() if seed is None else (f"trees_s{seed}",)) + waits, scheme=scheme, rollout=bool(rollout)),
            (ROOT / out).is_file())
    for s in [*rows, *replicas]:
        if not s.demo_folder:
            after = (labels_task(s.scheme, s.train_seed),) if s.own_labels else \
                () if s.train_seed is None else (f"stage2_s{s.train_seed}",)
            extra = ("--agg", s.agg) if s.agg else ()
            completed, calibrate = demo.scorer_completed(ROOT / s.folder), s.objective in CALIBRATED_MODES
            finished = completed and (not calibrate or scorer_calibrated(ROOT / s.folder))
            # every row the trainer can calibrate is (docs/scorer_lab.md); a finished uncalibrated one is
            # trained again over itself (same seed, same weights) so that it records its Platt scaling
            extra += ("--calibrate",) * calibrate + ("--overwrite",) * (completed and not finished)
            seed = args.seed if s.train_seed is None else s.train_seed
            add(Job(f"train_{s.key}", "train", partial(demo.train_command, s.objective, s.data(run), s.folder, seed,
                                                       extra, world), row=s.key, objective=s.objective, needs=after),
                finished)
    if bench:
        for s in {s.data(run): s for s in rows if not s.outcome_only}.values():
            out = f"{files['labelbench']}/{s.scheme}.json"
            argv = [PY, "-m", "masprm.instruments.labelbench", *world.world_flags, "--trees", demo.run_folder(world),
                    "--labels", s.data(run), "--out", out]
            add(Job(f"labelbench_{s.scheme}", "labelbench", partial(list, argv),
                    needs=(f"labels_{s.scheme}",) if s.own_labels else (), scheme=s.scheme), (ROOT / out).is_file())
    for task in later:
        add(task)
    stepwise = [s for s in rows if not s.finished_only]   # the step benchmark reads every prefix (seed --seed)
    scorers = {s.slug: s.folder for s in stepwise}
    if family.benchmarks:
        argv = [PY, "-m", "masprm.instruments.stepbench", *world.world_flags, "--policy", world.policy,
                *(x for slug, folder in scorers.items() for x in ("--scorer", f"{slug}={folder}")),
                "--mas_config", world.config, "--out", files["stepbench"], "--seed", str(args.seed), "--oracles"]
        add(Job("stepbench", "stepbench", partial(list, argv),
                needs=tuple(f"train_{s.slug}" for s in stepwise if not s.demo_folder), scorers=len(scorers)),
            stepbench_done(ROOT / files["stepbench"], scorers))
    # last: the compute-matched sweep (evaluation commands skip what is COMPLETED); none where it is not measured
    for task in sweep_tasks(args, files["logs"], family.sweep, world) if family.sweep and not args.rows else ():
        add(task)
    return tasks, notes, [*rows, *replicas], done


def rollout_inputs(scheme: str, seed: int | None, args) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The stage-2 flags of a scheme that samples the policy, and the tasks they wait for: the demo's policy
    seeded by the row's training seed; for the active scheme also the ensemble row of that seed, trained first."""
    if not needs_rollouts(scheme):
        return (), ()
    flags = ("--rollout-policy", WORLD_RUNS[args.world].policy, "--seed", str(args.seed if seed is None else seed))
    from masprm.labels import LABEL_SCHEMES
    if not getattr(LABEL_SCHEMES[scheme], "needs_spreads", False):
        return flags, ()
    ensemble = ensemble_of(seed, args.world)
    return (*flags, "--rollout-ensemble", ensemble.folder), (f"train_{ensemble.key}",)


def labels_task(scheme: str, seed: int | None) -> str:
    return f"labels_{scheme}" + (f"_s{seed}" if seed is not None else "")
