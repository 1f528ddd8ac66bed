"""`make lab --dry_run`: the lab's plan as the commands it would run, and its estimated time.

The demo's stages 0-3 first (skipped where their outputs exist), the rows, every command with what it
waits for, the compute-matched sweep's settings, the report's files and the time estimate
(`masprm.lab.estimate`: the seconds measured per command on the world, its folder's costs.yaml). A world
whose commands were never timed (no costs.yaml) gets no estimate, and one whose test split is empty says
so: a run without --dry_run stops there before any work.
"""

from __future__ import annotations

from typing import Sequence

from masprm.running.commands import show
from masprm.lab.estimate import estimate, job_seconds, world_seconds
from masprm.lab.job import Job
from masprm.lab.recipe import lab_recipe
from masprm.worlds.runs import WorldRun, make_command, preregistration_commit
from masprm.lab.compute_match import plan_lines


def print_demo_stages(prepare) -> None:
    """The demo's commands that run before the lab (and before its dev pilot)."""
    print("# the demo's stages 0-3 (skipped where their outputs exist)")
    for cmd in (prepare.build, prepare.trees, prepare.pairs, *(job.cmd for job in prepare.scorers)):
        print(f"$ {show(cmd)}")


def task_line(job: Job, done: set[str]) -> str:
    """A planned job's command, what it waits for, and whether its output is already there."""
    waits = f"   [after {', '.join(job.needs)}]" if job.needs else ""
    return f"$ {show(job.argv())}{waits}{'   [done: skipped]' if job.name in done else ''}"


def print_plan(args, world: WorldRun, prepare, tasks: Sequence[Job], rows: Sequence, done: set[str]) -> None:
    """Print the plan of `masprm.lab.plan.plan` (`prepare`: the demo's commands of the same world)."""
    files, sweep = world.lab_files, lab_recipe(args).sweep
    print_demo_stages(prepare)
    print(f"# the lab: {len(rows)} scorers (label scheme + objective -> folder); 'after' names what a "
          "command waits for")
    for s in rows:
        seed = args.seed if s.train_seed is None else s.train_seed
        print(f"#   {s.scheme} + {s.objective}{f' ({s.agg})' if s.agg else ''}, training seed {seed} -> "
              f"{s.folder}   [{s.name}]")
    first_sweep = next((task.name for task in tasks if task.kind == "sweep"), None)
    for task in tasks:
        if task.name == first_sweep:
            print("# the compute-matched sweep (docs/scorer_lab.md), settings matched on the train questions:")
            print("\n".join(f"#   {line}" for line in plan_lines(sweep)))
        print(task_line(task, done))
    if sweep is None:
        print("# the compute-matched sweep: not measured yet on this world (no settings; no commands)")
    print(f"# then the report: {files['report']}, {files['claims']}, {files['plot']}")
    if world.preregistration:
        print(f"# the report records the commit of {world.preregistration}: "
              f"{preregistration_commit(world.preregistration)} (now)")
    questions = world.test_size()
    if not questions:
        print(f"# the test split of {world.name}: 0 questions (sized by the dev pilot's power computation, DEV_POWER "
              f"in masprm/worlds/toy_deep/data.py, not measured yet: {make_command('lab-pilot', world)}): a run without "
              "--dry_run stops before any work")
    seconds = world_seconds(world.name)
    if seconds is None:
        print(f"# estimated time: unknown ({len(tasks) - len(done)} commands; no command has been timed on "
              f"{world.name}, and the toy world's seconds per command are for its 4-agent team on 240 test "
              f"questions, {world.name}'s test split has {questions})")
        return
    cpu, wall = estimate(tasks, done, args.jobs, world.demo_logs, seconds)
    bound = world.costs()["checked"] or "not yet checked against a whole run"
    print(f"# estimated time: {wall / 60:.0f} minutes with --jobs {args.jobs} ({cpu / 60:.0f} CPU minutes; "
          f"from the measured seconds per command in docs/scorer_lab.md, {bound}; after make demo)")
    fresh = [t for t in tasks if t.name not in done and t.kind == "labels" and t.rollout]
    if fresh:   # the policy cost the tree-derived schemes do not pay (their stage 2: about a second)
        print(f"# of which the rollout rows' fresh policy samples in stage 2: "
              f"{sum(job_seconds(t, world.demo_logs, seconds) for t in fresh) / 60:.0f} CPU minutes ("
              + ", ".join(f"{t.name} {job_seconds(t, world.demo_logs, seconds) / 60:.0f}" for t in fresh)
              + f"; a tree-derived scheme's: {seconds['labels']:.0f} s)")
