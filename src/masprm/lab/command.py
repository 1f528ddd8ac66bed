"""`make lab`: every label scheme and objective of the scorer lab, judged side by side on the toy world.

On the demo's trees (its stages 0-3 run first, skipped where their outputs exist), for every scorer of `LAB_SCORERS`:

  labels     the scheme's training records           (src/train/preprocess_data.py --labels NAME)
  training   the scorer, with the demo's settings     (src/train/trainer.py, demo.SCORER_TRAINING)
  labels'    quality against the world's step truth  (python -m masprm.instruments.labelbench), once per scheme
  steps      error localisation, one run for all      (python -m masprm.instruments.stepbench --scorer ...)
  search     on the 240 test questions, seeds 14 24 42: SBS (3x5), MCTS (10 simulations) and best-of-N
             (N = 8, --step_agg min and last)         (src/experiments/compare_sbs_mcts.py)
  sweep      the compute-matched sweep: per budget of agent samples (4 8 12 24), best-of-N + ORM and SBS / MCTS
             with the demo's MASPRM and ORM at the settings matched on the train questions (compute_match.SWEEP)

Every row is trained at each seed of `--train_seeds` (42 7 99, `masprm.lab.rows.TRAIN_SEEDS`): at the demo's seed on its
trees, at the others on trees grown at that seed (their own stages 1 and 2); the claims pair rows seed by seed.
Then the report (`masprm.lab.report`): results/toy_lab.md (the table; its facts in results/toy_lab.json),
results/toy_lab_claims.txt (every scorer against the ORM and against the paper's MASPRM, paired bootstrap CIs) and
results/toy_lab.png. The conditions without a scorer (single pass, log-prob SBS / MCTS / best-of-N) run once; the
best-of-N samples are drawn once per seed and read back by every scorer (logs/toy_lab/sampled_passes). Commands run
`--jobs` at a time, each as soon as what it needs is there (`masprm.running.commands.run_tasks`), under the demo's
pinned numerics. Outputs that exist are skipped (label files, finished scorers, benchmark reports); evaluation
commands skip their COMPLETED conditions themselves; an interrupted lab continues where it stopped. A scheme or
objective that is not registered is reported in one line and its row left out, and so is a row whose labels sample
the policy afresh (`needs_rollouts`) unless `--rollout_rows` asks for it (`--dry_run` prints that cost), trained
then at each of `--rollout_seeds` (default: every training seed).

``--world toy_deep``: the deep world's family (its recipe, masprm/lab/recipes/toy_deep.yaml) under
logs/toy_deep_lab, results/toy_deep_lab*, checkpoints/toy_deep-lab-*, its report recording the pre-registration's
commit; `--pilot` only the dev pilot that sizes its test split (`masprm.lab.pilot`); `--explore` its exploratory
family (toy_deep_explore.yaml, logs/toy_deep_explore), once the lab's report exists; `--recipe NAME` any family
of masprm/lab/recipes/ (`masprm.lab.recipe`). `--rows NAME ...`: some rows of a family (`rows.chosen_rows`) under
names of their own.

Sub-commands (`SUBCOMMANDS`): `plan` (= --dry_run), `run` (the default), `pilot` (= --pilot), `report ARCHIVE`
(= --report_from ARCHIVE); `python -m masprm.lab` is the same command.
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from masprm.cli import ArgumentParser, check, run_cli
from masprm.checks import check_output_dir, check_output_file, check_seeds
from masprm.config import add_config_args, arg, config_from_args, require, require_each
from masprm.paths import PathText
from masprm.paired_stats import MIN_QUESTIONS, QUESTIONS_RULE
from masprm.stages import demo
from masprm.running.commands import ROOT, children_cpu_seconds, run_tasks, stage
from masprm.lab.rows import LAB_SCORERS, TRAIN_SEEDS, left_out, world_rows
from masprm.lab.finish import write_lab_report
from masprm.lab.pilot import run_pilot
from masprm.lab.recipe import lab_recipe, recipe_named, recipe_names, world_recipe
from masprm.running.run_archive import ArchiveFlags, archive_run, demo_paths, lab_paths
from masprm.worlds.runs import DEFAULT_WORLD, WORLD_RUNS, WorldRun, make_command, require_world
from masprm.train.config import MIN_TRAIN_QUESTIONS, TRAIN_QUESTIONS_RULE
# the plan (`masprm.lab.plan`) and its settings, also named here for the lab's readers and tests
from masprm.lab.plan import (BON_N, BON_ORACLES, BON_SUFFIX, CLAIMS, DEMO_SBS_BUDGETS, LABELBENCH, LOGS, MAX_CHILDREN,
                             N_SIMULATIONS, PAIR_CAPS, PLOT, REPORT, SBS_BUDGET, SEARCH_ORACLES, STEPBENCH,
                             budget_settings, budgets, lab_name, lab_world, labelbench_available, labels_task, plan,
                             reuse_demo, rollout_inputs, search_budget, searches)

__all__ = ["LAB_SCORERS", "BON_N", "BON_ORACLES", "BON_SUFFIX", "CLAIMS", "DEMO_SBS_BUDGETS", "LABELBENCH", "LOGS",
           "MAX_CHILDREN", "N_SIMULATIONS", "PAIR_CAPS", "PLOT", "REPORT", "SBS_BUDGET", "SEARCH_ORACLES", "STEPBENCH",
           "budget_settings", "budgets", "lab_name", "lab_world", "labelbench_available", "labels_task", "plan",
           "reuse_demo", "rollout_inputs", "search_budget", "searches", "LabArgs", "main", "cli", "parse", "parser",
           "check_explore_order", "lab_recipe", "world_recipe", "world_rows", "WORLD_RUNS"]


def check_explore_order(world: WorldRun, root: Path) -> None:
    """An exploratory run starts only after the world's own lab wrote its report (`world`: the world's record;
    `root`: the folder the lab writes under), read from that report's results file (results/<world>_lab.json):
    the exploratory family repeats some of the lab's comparisons at fewer seeds, and those are not to be seen
    before the pre-registered ones."""
    report = Path(world.lab_files["report"]).with_suffix(".json")
    check((root / report).is_file(), f"--explore: {report} is not there: the exploratory family runs after the "
                                     f"{world.name} lab's own report ({make_command('lab', world)})")


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class LabArgs(ArchiveFlags):
    """The lab's flags (every other setting is the demo's or one of the constants above; its archive's:
    `ArchiveFlags`)."""

    seeds: list[int] | None = arg(None, flags=("--seeds",), nargs="+",
                                  help=f"evaluation seeds (default: {' '.join(map(str, demo.SEEDS))}, the demo's; "
                                       "with --explore the exploratory family's)")
    jobs: int = arg(2, flags=("--jobs",), help="commands run side by side, one thread each (default 2)")
    dry_run: bool = arg(False, flags=("--dry_run",), help="print the plan without running it")
    seed: int = arg(42, flags=("--seed",), help="seed of the scorers' training and the step benchmark")
    train_seeds: list[int] | None = arg(None, flags=("--train_seeds",), nargs="+",
                                        help="tree and training seeds every row is trained at (default 42 7 99, "
                                             "fixed in docs/scorer_lab.md; with --explore the exploratory family's); "
                                             "--seed is the demo's, the others get their own trees")
    n_train: int | None = arg(None, flags=("--n_train",),
                              help="train questions of the demo's trees, at least 2 (default: the world's train split, "
                                   "400)")
    sbs_budget: list[int] = arg(flags=("--sbs_budget",), nargs=2, metavar=("B1", "B2"),
                                default_factory=lambda: list(SBS_BUDGET),
                                help=f"SBS beam width and candidates per beam (default {SBS_BUDGET[0]} "
                                     f"{SBS_BUDGET[1]}, the README's; 2 3, the demo's second budget, is a few "
                                     "minutes shorter)")
    sample_n: int | None = arg(None, flags=("--sample_n",),
                               help="evaluate the first N test questions only, at least 2 (a quick look; default: "
                                    "all 240)")
    rollout_rows: bool = arg(False, flags=("--rollout_rows",),
                             help="also the rows whose labels sample the policy afresh (mc_rollouts, "
                                  "first_error_search, step_consistency, shapley; --dry_run prints their cost)")
    rollout_seeds: list[int] | None = arg(None, flags=("--rollout_seeds",), nargs="+",
                                          help="the training seeds of the rollout rows, some of --train_seeds "
                                               "(default: all of them)")
    world: str = arg(DEFAULT_WORLD, flags=("--world",),
                     help=f"the toy world ({', '.join(WORLD_RUNS.names())}; default {DEFAULT_WORLD}): its lab family")
    pilot: bool = arg(False, flags=("--pilot",), help="only the dev pilot that sizes toy_deep's test split (lab_pilot)")
    explore: bool = arg(False, flags=("--explore",),
                        help="the world's exploratory family instead of its lab's (toy_deep: every row at one training "
                             "and one search seed, after its lab's report; docs/scorer_lab.md)")
    recipe: str | None = arg(None, flags=("--recipe",),
                             help="the family of masprm/lab/recipes/ to run, by file name (" + ", ".join(recipe_names()) +
                                  "; default: the --world's lab, with --explore its exploratory family); its world "
                                  "is --world")
    rows: list[str] | None = arg(None, flags=("--rows",), nargs="+", help="only these rows (mc_rollouts+prm or "
                                 "mc_rollouts-prm), with the MASPRM and the ORM, no compute-matched sweep (default: all)")
    report_from: PathText | None = arg(None, flags=("--report_from",), help="write the report of an archived lab "
                                       "run (masprm-archive: its logs and benchmarks, checked) and run nothing")

    def __post_init__(self) -> None:
        require_world(self)
        require(not (self.explore and self.pilot), "explore", "explore: --explore and --pilot are two different runs; "
                                                               "ask for one")
        require(not (self.rows and self.pilot), "rows", "rows: the pilot runs its primary comparison only; --rows "
                                                        "selects the rows of a lab or of --explore")
        require(not (self.recipe and (self.explore or self.pilot)), "recipe",
                "recipe: --recipe names the family itself; --explore and --pilot are the world's own")
        if self.recipe:
            recipe = recipe_named(self.recipe)
            require(recipe.world == self.world, "recipe", f"recipe: {self.recipe} runs on the {recipe.world} world; "
                                                          f"add --world {recipe.world}")
        elif self.explore:
            require(world_recipe(self.world, "explore") is not None, "explore",
                    f"explore: the {self.world} world has no exploratory family (its lab runs every row)")
        else:
            require(world_recipe(self.world) is not None, "world", f"world: the {self.world} world has no lab recipe "
                                                                   "(masprm/lab/recipes/)")
        family = lab_recipe(self)
        defaults = {"n_train": WORLD_RUNS[self.world].n_train, "seeds": list(family.search_seeds or demo.SEEDS),
                    "train_seeds": list(family.train_seeds or TRAIN_SEEDS)}
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        if self.rollout_seeds is None:
            object.__setattr__(self, "rollout_seeds", self.train_seeds)
        require_each(self, ("jobs",), lambda v: v >= 1, "must be at least 1")
        require_each(self, ("n_train",), lambda v: v >= MIN_TRAIN_QUESTIONS, TRAIN_QUESTIONS_RULE)
        require_each(self, ("sample_n",), lambda v: v >= MIN_QUESTIONS, QUESTIONS_RULE)   # the report's paired CIs
        check_seeds(self, ("seed", "seeds", "train_seeds", "rollout_seeds"))
        for name in ("train_seeds", "rollout_seeds"):
            require(self.seed in getattr(self, name), name, f"{name} must include --seed {self.seed} (the demo's "
                                                            f"trees and scorers), got {getattr(self, name)}")
        require(set(self.rollout_seeds) <= set(self.train_seeds), "rollout_seeds",
                f"rollout_seeds must be some of --train_seeds {self.train_seeds}, got {self.rollout_seeds}")
        require(min(self.sbs_budget) >= 1, "sbs_budget",
                f"sbs_budget must be two numbers >= 1, got {self.sbs_budget}")
        require(not self.pilot or WORLD_RUNS[self.world].pilot, "pilot",
                f"pilot: the {self.world} world has no pilot (its test split is not sized by one)")
        family = {name: s for s in world_rows(lab_world(self), lab_recipe(self)) for name in (s.name, s.slug)}
        for name in self.rows or ():
            require(name in family, "rows", f"rows: no row {name!r} in the {self.world} world's "
                                            f"{'exploratory ' * self.explore}family; valid: {', '.join(family)}")
            require(not left_out(family[name], self.rollout_rows), "rows", f"rows: {left_out(family[name], False)}")


# The lab's sub-commands: what each does, and the flags it leaves out (the modes it is, and what it never reads).
# Today's flag forms stay: no sub-command is `run`, `--dry_run` is `plan`, `--pilot` is `pilot` (with --dry_run its
# plan), `--report_from PATH` is `report PATH`; the Makefile's targets use them.
ARCHIVE_FLAGS = ("archive", "no_archive", "archive_level")   # the run's archive (`ArchiveFlags`): `run` only
SUBCOMMANDS = {
    "plan": ("print the family's plan, the commands it would run and its estimated time; run nothing "
             "(= --dry_run)", ("dry_run", "pilot", "report_from", *ARCHIVE_FLAGS)),
    "run": ("run the family: the demo's stages where missing, every command not done, the report and its archive "
            "(the default)", ("dry_run", "pilot", "report_from")),
    "pilot": ("the dev pilot that sizes a world's test split (toy_deep); with --dry_run its plan (= --pilot)",
              ("pilot", "explore", "rows", "recipe", "report_from", *ARCHIVE_FLAGS)),
    "report": ("write the report of an archived lab run (masprm-archive: its logs and benchmarks, checked); run "
               "nothing (= --report_from ARCHIVE)", ("dry_run", "pilot", "report_from", *ARCHIVE_FLAGS)),
}


def parser() -> ArgumentParser:
    """The lab's parser: its sub-commands, each with the flags it reads, and today's flags without one."""
    p = ArgumentParser(description="The scorer lab: every label scheme and objective trained, benchmarked and "
                                   "searched with on a toy world, side by side (after `make demo`). Sub-commands "
                                   "plan, run, pilot, report (flags after the sub-command); without one, the flags "
                                   "as before: --dry_run plans, --pilot pilots, --report_from reports, else it runs.")
    subs = p.add_subparsers(dest="subcommand", metavar="{" + ",".join(SUBCOMMANDS) + "}",
                            help="what to do (default: run)")
    for name, (what, skip) in SUBCOMMANDS.items():
        sub = subs.add_parser(name, help=what, description=f"The scorer lab, {name}: {what}.")
        if name == "report":
            sub.add_argument("archived", metavar="ARCHIVE", type=PathText,
                             help="the archived lab run (a masprm-archive file) whose report to write")
        add_config_args(sub, LabArgs, skip=skip)
    add_config_args(p, LabArgs)
    return p


def parse(argv: list[str] | None = None) -> LabArgs:
    """The lab's settings from a command line, either form (a sub-command sets the mode it stands for)."""
    found = parser().parse_args(argv)
    mode = {"plan": {"dry_run": True}, "pilot": {"pilot": True},
            "report": {"report_from": getattr(found, "archived", None)}}.get(found.subcommand, {})
    return config_from_args(LabArgs, found, **mode)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    world = lab_world(args)
    files = world.lab_files
    if args.pilot:   # the dev pilot: what sizes the test split, nothing on it
        return run_pilot(args)
    if not args.dry_run:
        world.check_test_split()   # its searches evaluate the test split: nothing starts without one
        if lab_recipe(args).exploratory:
            check_explore_order(WORLD_RUNS[args.world], ROOT)
    demo_args = demo.DemoArgs(seeds=args.seeds, seed=args.seed, n_train=args.n_train, world=args.world)
    prepare = demo.commands(demo_args)
    tasks, notes, rows, done = plan(args)
    print("\n".join(f"lab: {line}" for line in notes))
    if args.dry_run:
        from masprm.lab.dry_run import print_plan
        print_plan(args, world, prepare, tasks, rows, done)
        return 0

    # what made each folder's cells: the Makefile's target, or a run of some rows as it was typed
    made = "python src/lab.py " + shlex.join(sys.argv[1:] if argv is None else argv) if args.rows else \
        make_command("lab-explore" if args.explore else "lab", world)
    report_files = (files["report"], Path(files["report"]).with_suffix(".json"), files["claims"],
                    Path(files["claims"]).with_suffix(".json"), files["plot"])
    for path in report_files:   # every file the report writes: a folder in its place fails now, not in an hour
        check_output_file(path, "report", label="the lab's report")
    if args.report_from:   # an archived lab run's report from its files: nothing runs, no archive is packed
        write_lab_report(args, world, rows, notes, made, budgets(args), archive=args.report_from)
        print(f"lab: the report of {args.report_from}\ntable: {files['report']}\nclaims: {files['claims']}")
        return 0
    check_output_dir(ROOT / files["logs"], "logs")   # its commands' logs and outputs: never written through a link
    args.check_archive()
    started = time.time()
    demo.prepare_scorers(prepare, demo_args)
    stage(f"the lab: {len(rows)} scorers, {len(tasks) - len(done)} commands, {args.jobs} at a time")
    for name in sorted(done):
        print(f"{name}: output already there: skipped")
    run_tasks([job.task(lab_name(world)) for job in tasks if job.name not in done], args.jobs,
              ROOT / files["logs"] / "lab_output")
    stage("the report")
    write_lab_report(args, world, rows, notes, made, budgets(args))
    own = WORLD_RUNS[args.world]   # the demo's trees and scorers are the lab's too: its archive holds them
    archive_run(args, lab_name(world), {**demo_paths(own, prepare, demo.run_folder(own)), **lab_paths(world, made)},
                command=made, seeds=args.seeds, train_seed=args.seed, world=world)
    print(f"\nlab finished in {time.time() - started:.0f} s ({children_cpu_seconds():.0f} CPU seconds of its commands)"
          f"\ntable: {files['report']}\nclaims: {files['claims']}\n"
          f"plot: {files['plot']}")
    return 0


def cli() -> None:
    """The console script (pyproject.toml) and the checkout's script: one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
