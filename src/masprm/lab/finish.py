"""The lab's report, from the logs and benchmarks it just made or from an archive of a lab run.

    write_lab_report(args, world, rows, notes, made, lab_budgets)                    # after the lab's commands
    write_lab_report(args, world, rows, notes, made, lab_budgets, archive=path)      # `lab --report_from PATH`

From an archive (`masprm.archive`, checked whole) the report reads a temporary copy of the archived run's files
at their run paths, so the report's facts name the run's folders (logs/toy_lab), never the copy's; it writes
the checkout's report files, as the lab itself would. Nothing runs.
"""

from __future__ import annotations

import contextlib

from masprm.archive.read import opened, read_manifest
from masprm.lab.plan import lab_name
from masprm.lab.recipe import lab_recipe
from masprm.running import commands
from masprm.worlds.runs import WorldRun, make_command


def write_lab_report(args, world: WorldRun, rows, notes, made: str, lab_budgets: dict,
                     archive: str | None = None) -> None:
    """The lab's table, claims and plot (`masprm.lab.report.write_report`) for `world`'s family; `made`: the
    command that made the lab's own logs (the demo's are `make demo`'s; from an archive: the one it records)."""
    from masprm.lab.report import write_report
    family = lab_recipe(args)
    files = {name: str(commands.ROOT / path) for name, path in world.lab_files.items()}   # written in the checkout
    # an exploratory lab reads its own folder only (`reuse_demo`)
    logs = [world.lab_files["logs"]] if family.exploratory else [world.demo_logs, world.lab_files["logs"]]
    record = world.report_record()   # in the checkout: the pre-registration's commit is the checkout's
    if archive:   # the archived run's cells were made by its own command
        made = read_manifest(archive).meta.get("command") or made
    inputs = opened(archive) if archive else contextlib.nullcontext(commands.ROOT)
    with inputs as root, contextlib.chdir(root):
        write_report(rows, logs, world.lab_files["stepbench"], world.lab_files["labelbench"], files["report"],
                     files["claims"], files["plot"], budgets=lab_budgets, seed=args.seed, notes=notes,
                     made_by={folder: make_command("demo", world) if folder == world.demo_logs else made
                              for folder in logs},
                     # a run of some rows has no sweep, and repeats the primary comparison without declaring it
                     sweep=None if args.rows else family.sweep, world=record,
                     masprm_tested=family.masprm_tested, primary=not family.exploratory and not args.rows,
                     lab=lab_name(world))

