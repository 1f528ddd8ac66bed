"""The lab's time estimate for `--dry_run`: each command's CPU seconds, replayed through the lab's scheduler.

The seconds are the ones measured alone on the demo's 2-core machine (docs/scorer_lab.md, "Time
budget"), one thread per command: a training, one seed of each search condition, the step benchmark;
each world's in its folder's costs.yaml (masprm/worlds/<name>/costs.yaml). A reference scorer (no model) is counted as its search with a scorer, an upper bound. Conditions asked
of the demo's logs folder count nothing: `make demo` left them COMPLETED. Replaying the measured
seconds through the scheduler overestimated the lab by about a fifth when it was last checked (52
minutes replayed, 42 measured), so the estimate is an upper bound, not a promise.
"""

from __future__ import annotations

from typing import Sequence

from masprm.objective_facts import OBJECTIVE_FACTS
from masprm.stages.jobs import Task
from masprm.lab.compute_match import sbs_samples
from masprm.worlds.runs import WORLD_RUNS


def world_seconds(world: str) -> dict[str, float] | None:
    """A world's measured CPU seconds per command kind (its folder's costs.yaml, `WorldRun.costs`): one command
    (training, labels, benchmarks) or one condition at one seed (searches); None: never timed there."""
    costs = WORLD_RUNS[world].costs() if world in WORLD_RUNS else None
    return None if costs is None else costs["seconds"]


# The toy world's: every function's default, and the rollout schemes' stage 2 for a world that has none of its own
SECONDS = world_seconds("toy") or {}
# The settings those searches were measured at; another setting (the compute-matched sweep's) is costed in
# proportion: SBS by its agent samples, MCTS by its simulations, best-of-N drawing its own N passes by N.
MEASURED_AT = {"sbs": (3, 5), "mcts": 10, "bon_n": 8}
# A rollout-based scheme's stage 2 on a seed's 400 trees, as the toy world measured it (`labels_<scheme>`)
ROLLOUT_LABELS = {kind.removeprefix("labels_"): s for kind, s in SECONDS.items() if kind.startswith("labels_")}


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
    """One seed of one condition of an evaluation command (`seconds`: the world's, `world_seconds`; `draws`:
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
