"""The lab's time estimate for `--dry_run`: each command's CPU seconds, replayed through the lab's scheduler.

The seconds are the ones measured alone on the demo's 2-core machine (docs/scorer_lab.md, "Time
budget"), one thread per command: a training, one seed of each search condition, the step benchmark.
A reference scorer (no model) is counted as its search with a scorer, an upper bound. Conditions asked
of the demo's logs folder count nothing: `make demo` left them COMPLETED. Replaying the measured
seconds through the scheduler overestimated the lab by about a fifth when it was last checked (52
minutes replayed, 42 measured), so the estimate is an upper bound, not a promise.
"""

from __future__ import annotations

from typing import Sequence

from masprm.objective_facts import OBJECTIVE_FACTS
from masprm.stages.jobs import Task
from masprm.lab.compute_match import sbs_samples

# CPU seconds of one command (training, labels, benchmarks) or of one condition at one seed (searches).
SECONDS = {"train": 224.0, "labels": 1.0, "labelbench": 5.0, "stepbench": 39.0, "stepbench_scorer": 5.5,
           "single_pass": 8.0, "sbs_3x5": 64.0, "sbs_2x3": 34.0, "mcts": 47.0,
           "bon_draw": 71.0, "bon_min": 25.0, "bon_last": 14.0,
           # a replica seed's 400 trees: about 190 s on both cores in make demo (docs/toy_world.md), one thread
           # here; its stage 2 as the demo's (a second)
           "trees": 380.0, "stage2": 1.0}
# toy_deep's (8 agents, 423 test questions): the searches measured on 2026-12-05 (bench/deep_costs.sh 60) with
# the lab's settings and code (128 examples together, adapters merged), 60 dev questions, search seed 14, one
# thread: user CPU seconds
# less the 7.4 s start-up, scaled to 423 questions; a best-of-N ranking by the ORM (under its start-up) counted
# as one by a process scorer. Trainings: the mean of the confirmatory lab's nine (36-316 s); a replica seed's
# trees: its 400 at one thread (805 s). Not measured, scaled from the toy world's by 9 / 4 (above its 8 agents
# to the toy's 4) or set to an upper bound: labels, labelbench, stepbench, stage2.
# The generative and implicit rows, priced apart from the exploratory lab's run (2026-12-05), where they cost
# several times a scorer's: the gPRM's and gORM's trainings took 916 s and 547 s (`train_<objective>`, seconds),
# the implicit, gORM and gPRM searches (SBS and MCTS, one seed) 797-908 s against the 369 s of a scorer's, each
# priced at the middle of that range (`search_factor_<model kind>`, times a scorer's: the three are the
# objectives whose scorer is the base's LM head, `masprm.objective_facts`). Their best-of-N rankings,
# the implicit row's training and every other row came in at or under these seconds.
DEEP_SECONDS = {"train": 138.0, "labels": 30.0, "labelbench": 12.0, "stepbench": 88.0, "stepbench_scorer": 12.4,
                "single_pass": 7.0, "sbs_3x5": 96.0, "mcts": 273.0, "bon_draw": 77.0, "bon_min": 30.0,
                "bon_last": 30.0, "trees": 805.0, "stage2": 5.0, "train_gprm": 916.0, "train_gorm": 547.0,
                # the rollout schemes' stage 2 on a seed's 400 trees (`labels_<scheme>`), measured on 2026-12-05
                # as ROLLOUT_LABELS on the toy world: user CPU seconds on 40 trees of the seed-42 search (2 for
                # shapley), scaled by the trees in the root window, 69 of 400 against 8 of 40 (1 of 2), start-up
                # included (an upper bound by about a minute); mc_rollouts_active not measured (it needs the
                # ensemble row): priced as its uniform control at the same budget
                "labels_mc_rollouts": 865.0, "labels_first_error_search": 367.0,
                "labels_step_consistency": 622.0, "labels_shapley": 6842.0, "labels_mc_rollouts_uniform": 60.0,
                "labels_mc_rollouts_active": 60.0,
                "search_factor_causal_lm": 852.5 / 369.0}
# The worlds whose commands were timed: a world without an entry gets no estimate (`lab --dry_run` says so).
WORLD_SECONDS = {"toy": SECONDS, "toy_deep": DEEP_SECONDS}
# What checking each world's estimate against a whole lab's measured time found (a world never checked: none).
CHECKED = {"toy": "an upper bound",
           # the exploratory lab of 2026-12-05: 182 CPU minutes estimated, 225 taken; its generative and implicit
           # rows cost 2-7 times a scorer's seconds (docs/scorer_lab.md, "toy_deep: the exploratory results"),
           # priced apart since (DEEP_SECONDS): the family's dry run now says 229 CPU minutes (the run took 225)
           "toy_deep": "its generative and implicit rows priced apart since the one check"}
# The settings those searches were measured at; another setting (the compute-matched sweep's) is costed in
# proportion: SBS by its agent samples, MCTS by its simulations, best-of-N drawing its own N passes by N.
MEASURED_AT = {"sbs": (3, 5), "mcts": 10, "bon_n": 8}
# A rollout-based scheme's stage 2 on a seed's 400 trees (its default K or budget, `--rollout-policy` on one
# thread): 7 s of start-up plus its CPU seconds on 40 of the demo's trees (10 for shapley) beyond the start-up,
# scaled by the trees in the root window, 347 of 400 against 36 of 40 (9 of 10); docs/scorer_lab.md, "Time budget".
ROLLOUT_LABELS = {"mc_rollouts": 430.0, "first_error_search": 333.0, "step_consistency": 516.0, "shapley": 3477.0,
                  "mc_rollouts_uniform": 158.0, "mc_rollouts_active": 113.0}


def rollout_label_seconds(scheme: str, seconds: dict[str, float] = SECONDS) -> float:
    """A rollout-based scheme's stage 2 on the demo's trees: the world's own (`labels_<scheme>` in its
    seconds) where measured, else the toy world's (an unmeasured scheme: the costliest measured)."""
    return seconds.get(f"labels_{scheme}", ROLLOUT_LABELS.get(scheme, max(ROLLOUT_LABELS.values())))


def last_value(cmd: Sequence[str], name: str) -> str | None:
    """The value of a flag as argparse reads it: its last occurrence wins."""
    at = [i for i, x in enumerate(cmd) if x == name]
    return cmd[at[-1] + 1] if at and at[-1] + 1 < len(cmd) else None


def flag_values(cmd: Sequence[str], name: str) -> list[str]:
    """Every value after ``name`` up to the next flag."""
    if name not in cmd:
        return []
    out = []
    for x in cmd[cmd.index(name) + 1:]:
        if x.startswith("--"):
            break
        out.append(x)
    return out


def condition_seconds(method: str, cmd: Sequence[str], seconds: dict[str, float] = SECONDS,
                      draws: bool = False) -> float:
    """One seed of one condition of an evaluation command (`seconds`: the world's, `WORLD_SECONDS`; `draws`:
    the command that draws the best-of-N passes every other one reads back)."""
    family = method.partition("_")[0]
    if family == "single":
        return seconds["single_pass"]
    if family == "sbs":
        b1, b2 = int(last_value(cmd, "--b1") or 3), int(last_value(cmd, "--b2") or 5)
        scaled = seconds["sbs_3x5"] * sbs_samples(b1, b2) / sbs_samples(*MEASURED_AT["sbs"])
        return seconds.get(f"sbs_{b1}x{b2}", scaled)
    if family == "mcts":
        return seconds["mcts"] * int(last_value(cmd, "--n_simulations") or MEASURED_AT["mcts"]) / MEASURED_AT["mcts"]
    n = int(last_value(cmd, "--bon_n") or MEASURED_AT["bon_n"])
    if n != MEASURED_AT["bon_n"]:   # no other condition draws these passes: it draws and scores its own
        return seconds["bon_draw"] * n / MEASURED_AT["bon_n"]
    if method == "bon_logprob" and draws:
        return seconds["bon_draw"]
    return seconds["bon_last"] if last_value(cmd, "--step_agg") == "last" else seconds["bon_min"]


def row_objective(task_name: str) -> str | None:
    """The objective of the row a lab task trains or evaluates: its name carries the row's key,
    `<scheme>-<objective>[-<agg>][_s<seed>]` after the task's kind (None: a task of no row)."""
    key = task_name.partition("_")[2]
    return key.split("-")[1].partition("_")[0] if "-" in key else None


def task_seconds(task: Task, demo_logs: str, seconds: dict[str, float] = SECONDS, draws: bool = False) -> float:
    kind, objective = task.name.partition("_")[0], row_objective(task.name)
    if kind == "labels" and "--rollout-policy" in task.cmd:
        return rollout_label_seconds(last_value(task.cmd, "--labels"), seconds)
    if kind == "train":
        return seconds.get(f"train_{objective}", seconds["train"])
    if kind in ("labels", "labelbench", "trees", "stage2"):
        return seconds[kind]
    if task.name == "stepbench":
        return seconds["stepbench"] + seconds["stepbench_scorer"] * task.cmd.count("--scorer")
    if last_value(task.cmd, "--logs_dir") == demo_logs:
        return 0.0
    seeds = len(flag_values(task.cmd, "--seeds")) or 1
    kind_of = OBJECTIVE_FACTS[objective].model_kind if objective in OBJECTIVE_FACTS else None
    factor = seconds.get(f"search_factor_{kind_of}", 1.0)   # on its SBS and MCTS conditions, not best-of-N
    return seeds * sum(condition_seconds(m, task.cmd, seconds, draws) * (factor if m.startswith(("sbs", "mcts"))
                                                                         else 1.0)
                       for m in flag_values(task.cmd, "--methods"))


def schedule(tasks: Sequence[Task], seconds: dict[str, float], jobs: int) -> float:
    """When the last task ends when up to `jobs` run at once, each as soon as a slot is free and what it
    waits for (among `tasks`) has ended, in list order among the ready ones (`masprm.stages.jobs.run_tasks`)."""
    names = {t.name for t in tasks}
    pending, running, ended, now = list(tasks), {}, set(), 0.0
    while pending or running:
        for task in list(pending):
            if len(running) < jobs and all(a in ended or a not in names for a in task.after):
                pending.remove(task)
                running[task.name] = now + seconds[task.name]
        if not running:
            raise ValueError("the tasks wait for each other in a cycle")
        name = min(running, key=lambda n: running[n])
        now = running.pop(name)
        ended.add(name)
    return now


def estimate(tasks: Sequence[Task], done: set[str], jobs: int, demo_logs: str,
             seconds: dict[str, float] = SECONDS) -> tuple[float, float]:
    """(CPU seconds of the commands still to run, wall-clock seconds with `jobs` at a time)."""
    todo = [t for t in tasks if t.name not in done]
    # the lab's first best-of-N command without a scorer draws the passes (`masprm.lab.command.plan`)
    draw = next((t.name for t in tasks if "bon_logprob" in flag_values(t.cmd, "--methods")), None)
    each = {t.name: task_seconds(t, demo_logs, seconds, draws=t.name == draw) for t in todo}
    return sum(each.values()), schedule(todo, each, jobs)
