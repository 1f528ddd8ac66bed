"""`make lab-pilot WORLD=toy_deep` (`python src/lab.py --world toy_deep --pilot`): the dev pilot sizing the test split.

The pre-registration fixes a rule, not a number: the test split's size comes from the variance of the
primary comparison (the paper's MASPRM against the ORM under MCTS) measured on the dev split with the
family's own scorers. After its commit, this runs only what that comparison needs:

  the demo's stages 0-3       the world, stage-1 trees, stage 2, the demo's MASPRM and ORM (training seed --seed)
  the replica rows            masprm-ppm and mc-orm at the other training seeds: their trees, stage 2 and
                              training, the full lab's own commands (`lab.plan`), so the lab reuses them
  one search per seed         src/experiments/compare_sbs_mcts.py --split dev --methods mcts_prm mcts_orm,
                              that seed's MASPRM as --prm_dir and ORM as --orm_dir, every other setting the
                              lab's test evaluations' (the world's eval_flags and MCTS options, the demo's MCTS budget),
                              --logs_dir logs/<world>_pilot
  the power computation       python -m masprm.lab.power -> results/<world>_power.json (sd_q, tau2, N, MDE)

Nothing here reads or evaluates the test split, so it runs while that split is empty; it starts only once
the pre-registration has a commit.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from masprm.checks import check_output_dir, check_output_file
from masprm.cli import check
from masprm.stages import demo
from masprm.lab import plan as lab
from masprm.running.commands import PY, ROOT, run_tasks, stage
from masprm.lab.job import Job
from masprm.lab.dry_run import print_demo_stages, task_line
from masprm.lab.rows import orm_of, role_flags, row_at
from masprm.worlds.runs import WORLD_RUNS, preregistration_commit

METHODS = ["mcts_prm", "mcts_orm"]   # the primary comparison: the MASPRM and the ORM under MCTS


def power_file(world) -> str:
    return world.results("power.json")


def pilot_plan(args) -> tuple[list[Job], set[str]]:
    """The pilot's tasks in order (the replica seeds' trees, stage 2 and training as `lab.plan` makes them, then
    one dev evaluation per training seed, then the power computation) and the finished ones."""
    world = WORLD_RUNS[args.world]
    pairs = {seed: row_at("ppm", None if seed == args.seed else seed, world.name) for seed in args.train_seeds}
    pairs = {seed: (prm, orm_of(prm)) for seed, prm in pairs.items()}
    lab_tasks, _, _, done = lab.plan(args)
    wanted = {f"{kind}_s{seed}" for seed in args.train_seeds if seed != args.seed for kind in ("trees", "stage2")}
    wanted |= {f"train_{row.key}" for rows in pairs.values() for row in rows if not row.demo_folder}
    tasks = [task for task in lab_tasks if task.name in wanted]
    for seed, (prm, orm) in pairs.items():
        scorers = (*role_flags("prm", prm.folder, world), *role_flags("orm", orm.folder, world))
        cmd = partial(demo.evaluation_command, args.seeds, METHODS, scorers,
                      (*lab.search_budget(args), "--step_agg", "min"), logs_dir=world.pilot_logs, world=world,
                      split="dev")
        tasks.append(Job(f"pilot_s{seed}", "pilot", cmd, row=prm.key, objective=prm.objective,
                         needs=tuple(f"train_{r.key}" for r in (prm, orm) if not r.demo_folder),
                         seeds=tuple(args.seeds), methods=tuple(METHODS), settings=lab.budget_settings(args, "min"),
                         logs=world.pilot_logs))
    tasks.append(Job("power", "power", partial(list, [PY, "-m", "masprm.lab.power", "--logs_dir", world.pilot_logs,
                                                      "--out", power_file(world)]),
                     needs=tuple(f"pilot_s{seed}" for seed in pairs)))
    return tasks, done & {task.name for task in tasks}


def run_pilot(args) -> int:
    """The pilot's plan (--dry_run) or its run: the demo's stages 0-3, then its tasks `--jobs` at a time."""
    world = WORLD_RUNS[args.world]
    demo_args = demo.DemoArgs(seeds=args.seeds, seed=args.seed, n_train=args.n_train, world=args.world)
    prepare = demo.commands(demo_args)
    tasks, done = pilot_plan(args)
    if args.dry_run:
        print_demo_stages(prepare)
        print(f"# the dev pilot of {world.name}: the primary comparison (MASPRM vs ORM under MCTS) on the dev split at "
              f"training seeds {' '.join(map(str, args.train_seeds))}; 'after' names what a command waits for")
        print("\n".join(task_line(task, done) for task in tasks))
        print(f"# the test split: never read here; its size from {power_file(world)} (DEV_POWER in "
              "masprm/worlds/toy_deep/data.py)")
        return 0
    # no learned scorer is trained or evaluated on the world before its pre-registration is committed
    check(preregistration_commit(world.preregistration) != "none", f"--pilot: {world.preregistration} has no "
          "commit yet; the pilot trains and evaluates scorers on the world only after the pre-registration's commit")
    check_output_file(power_file(world), "pilot", label="the pilot's power record")
    check_output_dir(ROOT / world.pilot_logs, "logs")
    demo.prepare_scorers(prepare, demo_args)
    stage(f"the dev pilot: {len(tasks) - len(done)} commands, {args.jobs} at a time")
    # its jobs' records name the pilot by its logs folder (<world>_pilot), never the lab its report is
    run_tasks([job.task(Path(world.pilot_logs).name) for job in tasks if job.name not in done], args.jobs,
              ROOT / world.pilot_logs / "pilot_output")
    print(f"\npilot finished\npower: {power_file(world)}")
    return 0
