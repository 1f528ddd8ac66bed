"""`make demo`: the whole MASPRM pipeline on the toy world, on a laptop CPU, in minutes.

Runs the README's five stages as a user would, with ``--dataset toy`` (``--world toy_deep``,
`make demo WORLD=toy_deep`: the same stages on the deep toy world, its paths and settings from its
`masprm.worlds.runs` record; it stops before any work while that world's test split is empty):

  0. the toy world (shipped policy + data; cached in artifacts/toy)
  1. MAS-MCTS trees on the train split               (src/run_mcts.py)
  2. PRM samples and Bradley-Terry pairs             (src/train/preprocess_data.py)
  3. the MASPRM (ppm) and an ORM                     (src/train/trainer.py)
  4. the search conditions on the 240 test questions, seeds 14 / 24 / 42, each
     search method at several budgets               (src/experiments/compare_sbs_mcts.py)
     and the step-level benchmark                    (python -m masprm.instruments.stepbench)
  5. mean / std over seeds, table, budget curves, and the paper's claims as
     paired comparisons with bootstrap CIs           (aggregator.py, masprm.instruments.claims)
  6. the run's archive, archives/<world>_demo-v<N>    (python -m masprm.archive pack; --no_archive: none)
     and whether its numbers match the published ones (docs/toy_world.md's generated blocks)

Every command is printed before it runs (`masprm.running.commands`), under the same pinned numerics
(`PINNED_NUMERICS`: the AVX2 code paths of PyTorch and MKL, one thread per
job), so another AMD x86-64 CPU computes the same numbers (an Intel one takes
another MKL code path: docs/toy_world.md). The conditions that
need no scorer are evaluated while stages 1-3 run, on the other core; the
evaluation commands of stage 4 then find them COMPLETED and run only the
scorer conditions. Stages whose outputs exist are skipped and every stage
resumes by itself, so an interrupted demo continues where it stopped;
``make clean-demo`` starts over.
"""

import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from masprm.cli import ArgumentParser, check, run_cli
from masprm.checks import check_seeds
from masprm.config import add_config_args, arg, config_from_args, require_each
from masprm.errors import MasprmError
from masprm.eval.methods import flags_read_by
from masprm.io import read_json
from masprm.run_folder import run_folder_name
from masprm.scorer_meta import SCORER_META_FILE
from masprm.running.commands import (PROGRESS_EVERY_S, PY, ROOT, Background, Command, run_side_by_side, show, stage,
                                stage_command)
from masprm.running.run_archive import ArchiveFlags, archive_run, demo_paths
from masprm.train.config import MIN_TRAIN_QUESTIONS, TRAIN_QUESTIONS_RULE
from masprm.worlds.runs import DEFAULT_WORLD, WORLD_RUNS, WorldRun, make_command, require_world
from masprm.published.blocks import demo_verdict

# The demo's settings. Search settings follow the seed README; sizes fit a 2-core CPU. A world's paths,
# team and train-split size are its record's (`masprm.worlds.runs`); the toy world's, named here for readers:
TOY_RUN = WORLD_RUNS[DEFAULT_WORLD]
TOY, POLICY, CONFIG = TOY_RUN.artifacts, TOY_RUN.policy, TOY_RUN.config
PPM_DIR, ORM_DIR, LOGS = TOY_RUN.scorer_dir("ppm"), TOY_RUN.scorer_dir("orm"), TOY_RUN.demo_logs
N_TRAIN, TARGET_NODES = TOY_RUN.n_train, TOY_RUN.target_nodes   # 400: the whole train split; 5: question + 4 agents
SEEDS = (14, 24, 42)
ROLLOUTS, SEARCH_C, CANDIDATES, TEMPERATURE, TOP_P = 40, 4, 3, 0.7, 0.95
METHODS = ("single_pass", "sbs_logprob", "sbs_prm", "mcts_logprob", "mcts_prm", "mcts_orm")
NO_SCORER = ("single_pass", "sbs_logprob", "mcts_logprob")
# Budget curves: the README's evaluation command (main), then each search family at other budgets.
# (Two budgets per search family is what fits 15 minutes on two cores; voters are left to the README's commands.)
BUDGETS = (
    ("main", (), METHODS),
    ("mcts5", ("--n_simulations", "5"), ("mcts_logprob", "mcts_prm", "mcts_orm")),
    ("sbs2x3", ("--b1", "2", "--b2", "3"), ("sbs_logprob", "sbs_prm")),
    # the paper's headline configuration: the MASPRM guides MCTS, the ORM values its leaves (issue 34 item 9)
    ("ormleaf", ("--orm_leaf",), ("mcts_prm",)),
)
# --eval-steps 40: runs of 160-480 steps pick their best of several evaluations (the default of 200 would
# leave the MASPRM's run with its final weights only).
SCORER_TRAINING = ("--epochs", "3", "--eval-steps", "40", "--lr", "2e-3", "--train-batch-size", "16",
                   "--grad-accum", "1", "--lora-r", "16", "--lora-alpha", "32", "--lora-dropout", "0.05",
                   "--max-length", "256")
CPU = ("--no_compile", "--device_map", "cpu")
# Trees searched together, their model calls batched (results do not depend on it): the fastest size measured
# on the demo's 2-core CPU. An evaluation's is its world's (`WorldRun.eval_batch`).
TREE_BATCH = 64


def output_folder(world: WorldRun) -> Path:
    """Each quiet command's output."""
    return ROOT / world.demo_logs / "demo_output"


def run_folder(world: WorldRun = TOY_RUN) -> str:
    # the policy is a local folder, tagged by its last path component (it may not be built yet)
    return "results/" + run_folder_name(world.name, "train", Path(world.policy).name, ROLLOUTS, SEARCH_C,
                                        CANDIDATES, TEMPERATURE, TOP_P, world.config)


def trees_done(n_train: int, seed: int, folder: str | None = None, world: WorldRun = TOY_RUN) -> bool:
    """Stage 1 has its trees in `folder` (default: the demo's), made with this seed (run_mcts.py itself refuses
    to mix two seeds)."""
    trees = sorted((ROOT / (folder or run_folder(world))).glob("*.json"))
    if len(trees) < n_train:
        return False
    try:
        return read_json(trees[0])["meta"]["seed"] == seed
    except (MasprmError, OSError, KeyError, TypeError):
        return False  # unreadable: let stage 1 look at the folder and say what is wrong


def scorer_completed(folder: Path) -> bool:
    """The trainer marks its folder "training" when it starts and "completed" when the scorer is saved."""
    try:
        return read_json(folder / SCORER_META_FILE).get("status") == "completed"
    except (MasprmError, OSError, AttributeError):  # missing or unreadable: not completed
        return False


@dataclass(frozen=True)
class ScorerJob:
    """One stage-3 training of the demo: its records and its folder as data, beside the command made of them."""

    name: str        # its output name (train_ppm, train_orm)
    data: str        # the stage-2 records it trains on
    out: str         # its scorer folder
    cmd: list[str]


@dataclass
class Commands:
    """Every command of the demo, in the order a user would type them."""

    build: list[str]
    trees: list[str]
    pairs: list[str]
    scorers: list[ScorerJob]
    early_evals: dict[str, list[str]]   # output name -> command: the conditions that need no scorer
    evals: dict[str, list[str]]         # per budget and seed: the README's evaluation command with that budget
    stepbench: list[str]
    aggregate: list[str]
    claims: list[str]


def evaluation_command(seeds, methods, scorers=(), budget=(), logs_dir: str | None = None,
                       world: WorldRun = TOY_RUN, split: str = "test") -> list[str]:
    """The README's evaluation command on a world's split (the test split; toy_deep's dev pilot: dev) with the
    demo's settings; `scorers` are the scorer flags (--prm_dir ...), `budget` flags that override a setting;
    `logs_dir` default: the demo's."""
    # each search family's settings go only where one of the methods reads them (stage 4 refuses a flag no
    # method of the run reads); a budget flag overrides the same setting, coming later
    def read(*pairs: str) -> list[str]:
        return flags_read_by(methods, pairs)

    # every seed in one process (--seeds): the same logs as one command per seed, one model load
    return [*stage_command("evaluate"), "--dataset", world.name, "--split", split, "--seeds", *map(str, seeds),
            *scorers, "--gen_model_id", world.policy, "--mas_config", world.config, "--methods", *methods,
            *read("--b1", "3", "--b2", "5", "--n_simulations", "10", "--max_children", "3",
                  "--c_uct", "2", "--sbs_temperature", "0.7", "--mcts_temperature", "0.7",
                  "--top_p", "0.95"), "--logs_dir", logs_dir or world.demo_logs, "--workers", "1",
            "--search_batch_size", str(world.eval_batch), *CPU, *read(*world.eval_flags, *world.mcts_flags, *budget)]


def train_command(mode: str, data: str, out: str, seed: int, extra=(), world: WorldRun = TOY_RUN) -> list[str]:
    """A scorer trained on a world with the demo's settings (SCORER_TRAINING), resuming when interrupted."""
    return [*stage_command("train"), "--mode", mode, "--data_dir", data, "--model-id", world.policy,
            "--output-dir", out, "--seed", str(seed), "--resume", *extra, *SCORER_TRAINING]


def commands(args: "DemoArgs") -> Commands:
    world = WORLD_RUNS[args.world]
    run = run_folder(world)
    name, policy, config, files = Path(run).name, world.policy, world.config, world.demo_files
    ppm_dir, orm_dir = world.scorer_dir("ppm"), world.scorer_dir("orm")
    scorer_flags = ("--prm_dir", ppm_dir, "--prm_base_model_id", policy, "--orm_dir", orm_dir,
                    "--orm_base_model_id", policy)

    def evaluation(methods, scorers: bool, budget=()) -> list[str]:
        return evaluation_command(args.seeds, methods, scorer_flags if scorers else (), budget, world=world)

    def scorer(mode: str, data: str, out: str) -> ScorerJob:
        return ScorerJob(f"train_{mode}", data, out, train_command(mode, data, out, args.seed,
                                                                   extra=world.demo_scorer_flags, world=world))

    return Commands(
        build=[PY, "-m", "masprm.worlds.build", *world.world_flags, "--out", world.artifacts, "--mas_config", config],
        trees=[*stage_command("trees"), "--dataset", world.name, "--split", "train", "--n", str(args.n_train),
               "--seed", str(args.seed), "--n_rollouts", str(ROLLOUTS), "--search_c", str(SEARCH_C),
               "--n_candidates", str(CANDIDATES), "--temperature", str(TEMPERATURE), "--top_p", str(TOP_P),
               "--mas_config", config, "--model_id", policy, "--search_batch_size", str(TREE_BATCH),
               "--no_plot", *CPU],
        pairs=[*stage_command("preprocess"), "--input", run, "--target-nodes", str(world.target_nodes),
               "--make-ppm", "--ppm-max-pairs", "8", "--ppm-pos-topk", "4", "--ppm-neg-topk", "4",
               "--view", "full", "--mas_config", config],
        scorers=[scorer("ppm", f"results/ppm_pairs_{name}.jsonl", ppm_dir),
                 scorer("orm", f"results/prm_samples_{name}.jsonl", orm_dir)],
        early_evals={f"eval_no_scorer_{name}":
                     evaluation([m for m in methods if m in NO_SCORER], scorers=False, budget=budget)
                     for name, budget, methods in BUDGETS if set(methods) & set(NO_SCORER)},
        evals={f"eval_{name}": evaluation(methods, scorers=True, budget=budget) for name, budget, methods in BUDGETS},
        stepbench=[PY, "-m", "masprm.instruments.stepbench", *world.world_flags, "--policy", policy, "--prm_dir", ppm_dir,
                   "--orm_dir", orm_dir, "--mas_config", config, "--out", files["stepbench"], "--seed", str(args.seed)],
        aggregate=[*stage_command("aggregate"), "--logs_dir", world.demo_logs, "--out", files["table"]],
        claims=[PY, "-m", "masprm.instruments.claims", "--logs_dir", world.demo_logs, "--out", files["claims"],
                "--seed", str(args.seed)],
    )


# --------------------------------------------------------------------------- running


def make_scorers(c: Commands, args) -> None:
    """Stages 1-3 (trees, pairs, the MASPRM and the ORM); a stage is skipped only when its outputs exist and
    nothing before it ran again, and an interrupted stage resumes."""
    world = WORLD_RUNS[args.world]
    fresh = not trees_done(args.n_train, args.seed, world=world)
    if fresh:
        Command(c.trees).wait()
    else:
        print(f"stage 1: {run_folder(world)} has its trees: skipped")
    fresh = fresh or not all((ROOT / job.data).is_file() for job in c.scorers)
    if fresh:
        Command(c.pairs).wait()
    else:
        print("stage 2: pairs already there: skipped")
    stale = [job.out for job in c.scorers if fresh and (ROOT / job.out).exists()]
    check(not stale, f"{stale[0] if stale else ''} holds a scorer trained on earlier "
                     f"pairs; run `{make_command('clean-demo', world)}` to start over")
    todo = [job for job in c.scorers if not scorer_completed(ROOT / job.out)]  # an interrupted one resumes (--resume)
    if todo:
        print(f"stage 3: training {' and '.join(job.out for job in todo)} side by side; their progress every "
              f"{PROGRESS_EVERY_S:.0f} s:", flush=True)
        run_side_by_side([job.cmd for job in todo], [job.name for job in todo], jobs=2, folder=output_folder(world))
    else:
        print("stage 3: scorers already there: skipped")


def prepare_scorers(c: Commands, args) -> None:
    """Stages 0-3 ahead of the lab (and of its dev pilot): the world built (cached), then `make_scorers`."""
    stage("the demo's trees, pairs and scorers (skipped where they exist)")
    Command(c.build, threads=None, env={"PYTHONPATH": "src"}).wait()
    make_scorers(c, args)


@dataclass(frozen=True)
class DemoArgs(ArchiveFlags):
    """The demo's flags (every other setting is one of the constants above; the archive's: `ArchiveFlags`)."""

    seeds: list[int] = arg(flags=("--seeds",), nargs="+", default_factory=lambda: list(SEEDS),
                           help="evaluation seeds")
    n_train: int | None = arg(None, flags=("--n_train",),
                              help="train questions searched in stage 1, at least 2 (default: the world's train "
                                   "split, 400)")
    jobs: int = arg(2, flags=("--jobs",),
                    help="evaluation commands run side by side, one thread each (default 2, one per core)")
    dry_run: bool = arg(False, flags=("--dry_run",), help="print the commands without running them")
    seed: int = arg(42, flags=("--seed",),
                    help="seed of the trees (stage 1) and the scorers' training (stage 3); default 42")
    world: str = arg(DEFAULT_WORLD, flags=("--world",),
                     help=f"the toy world ({', '.join(WORLD_RUNS.names())}; default {DEFAULT_WORLD})")

    def __post_init__(self) -> None:
        require_world(self)
        if self.n_train is None:
            object.__setattr__(self, "n_train", WORLD_RUNS[self.world].n_train)
        require_each(self, ("jobs",), lambda v: v >= 1, "must be at least 1")
        require_each(self, ("n_train",), lambda v: v >= MIN_TRAIN_QUESTIONS, TRAIN_QUESTIONS_RULE)
        check_seeds(self, ("seed", "seeds"))


def run_command(given: list[str], world: WorldRun) -> str:
    """How the demo was started, as its archive records it: the Makefile's target when it passed no other flag."""
    plain = given in ([], ["--world", world.name], [f"--world={world.name}"])
    return make_command("demo", world) if plain else "python src/demo.py " + shlex.join(given)


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description="Run the MASPRM pipeline end to end on the toy world (CPU, minutes).")
    add_config_args(p, DemoArgs)
    args = config_from_args(DemoArgs, p.parse_args(argv))
    c, world = commands(args), WORLD_RUNS[args.world]
    if args.dry_run:
        for cmd in [c.build, c.trees, c.pairs, *(job.cmd for job in c.scorers), *c.early_evals.values(),
                    *c.evals.values(), c.stepbench, c.aggregate, c.claims]:
            print(f"$ {show(cmd)}")
        return 0
    world.check_test_split()   # stage 4 evaluates the test split: nothing starts without one
    args.check_archive()
    started, timings, output, files = time.time(), [], output_folder(world), world.demo_files

    t = stage("0 build the toy world (cached)")
    Command(c.build, threads=None, env={"PYTHONPATH": "src"}).wait()
    timings.append(("0 build", time.time() - t))

    t = stage("1-3 trees, pairs and scorers (no-scorer conditions evaluated alongside)")
    background = Background(list(c.early_evals.values()), list(c.early_evals), output)
    try:
        make_scorers(c, args)
    except BaseException:
        background.stop()
        raise
    background.join()
    timings.append(("1-3 trees+pairs+scorers", time.time() - t))

    t = stage("4 evaluation, seeds " + " ".join(map(str, args.seeds)) + ", and the step-level benchmark")
    todo = dict(c.evals)
    if (ROOT / files["stepbench"]).is_file():
        print(f"step-level benchmark: {files['stepbench']} already there: skipped")
    else:
        todo = {"stepbench": c.stepbench, **todo}
    run_side_by_side(list(todo.values()), list(todo), jobs=args.jobs, folder=output)
    timings.append(("4 evaluation", time.time() - t))

    t = stage("5 aggregate, budget curves and the paper's claims")
    Command(c.aggregate).wait()
    Command(c.claims).wait()
    timings.append(("5 aggregate", time.time() - t))

    t = stage("6 the run's archive")
    archive_run(args, f"{world.name}_demo", demo_paths(world, c, run_folder(world)),
                command=run_command(sys.argv[1:] if argv is None else argv, world),
                seeds=args.seeds, train_seed=args.seed, world=world)
    timings.append(("6 archive", time.time() - t))

    print("\n=== demo finished ===")
    for name, seconds in timings:
        print(f"{name:<26} {seconds:7.1f} s")
    print(f"{'total':<26} {time.time() - started:7.1f} s")
    print(f"table:  {files['table']}\nplot:   {Path(files['table']).with_suffix('.png')}\nclaims: {files['claims']}\n"
          f"step-level benchmark: {files['stepbench']}")
    if world.name == DEFAULT_WORLD:   # the toy world's demo is the one docs/toy_world.md publishes
        print(f"numbers: {demo_verdict(ROOT / 'docs', ROOT / 'results', ROOT / world.demo_logs)}")
    return 0


def cli() -> None:
    """The console script (pyproject.toml) and the checkout's script: one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
