"""The lab's time estimate for `--dry_run`: each command's CPU seconds, replayed through the lab's scheduler.

A job is priced from its record (`masprm.lab.job.Job`: its kind, its row's objective, its methods, seeds and
settings, its logs folder), never from its command line.

The seconds are the ones measured alone on the demo's 2-core machine (docs/scorer_lab.md, "Time
budget"), one thread per command: a training, one seed of each search condition, the step benchmark;
each world's in its folder's costs.yaml (masprm/worlds/<name>/costs.yaml). A reference scorer (no model) is counted as its search with a scorer, an upper bound. Conditions asked
of the demo's logs folder count nothing: `make demo` left them COMPLETED. Replaying the measured
seconds through the scheduler overestimated the lab by about a fifth when it was last checked (52
minutes replayed, 42 measured), so the estimate is an upper bound, not a promise.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from masprm.objective_facts import OBJECTIVE_FACTS
from masprm.running.commands import Task
from masprm.lab.job import Job
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


def condition_seconds(method: str, settings: Mapping[str, object], seconds: dict[str, float] = SECONDS,
                      draws: bool = False) -> float:
    """One seed of one condition of an evaluation job (`settings`: the budget it sets, the demo's where it sets
    none; `seconds`: the world's, `world_seconds`; `draws`: the job that draws the best-of-N passes every other
    one reads back)."""
    family = method.partition("_")[0]
    if family == "single":
        return seconds["single_pass"]
    if family == "sbs":
        b1, b2 = int(settings.get("b1", 3)), int(settings.get("b2", 5))
        scaled = seconds["sbs_3x5"] * sbs_samples(b1, b2) / sbs_samples(*MEASURED_AT["sbs"])
        return seconds.get(f"sbs_{b1}x{b2}", scaled)
    if family == "mcts":
        return seconds["mcts"] * int(settings.get("n_simulations", MEASURED_AT["mcts"])) / MEASURED_AT["mcts"]
    n = int(settings.get("bon_n", MEASURED_AT["bon_n"]))
    if n != MEASURED_AT["bon_n"]:   # no other condition draws these passes: it draws and scores its own
        return seconds["bon_draw"] * n / MEASURED_AT["bon_n"]
    if method == "bon_logprob" and draws:
        return seconds["bon_draw"]
    return seconds["bon_last"] if settings.get("step_agg") == "last" else seconds["bon_min"]


def job_seconds(job: Job, demo_logs: str, seconds: dict[str, float] = SECONDS, draws: bool = False) -> float:
    """A job's CPU seconds from its record: its kind, its row's objective, its methods, seeds and settings."""
    if job.kind == "labels" and job.rollout:
        return rollout_label_seconds(job.scheme, seconds)
    if job.kind == "train":
        return seconds.get(f"train_{job.objective}", seconds["train"])
    if job.kind in ("labels", "labelbench", "trees", "stage2"):
        return seconds[job.kind]
    if job.kind == "stepbench":
        return seconds["stepbench"] + seconds["stepbench_scorer"] * job.scorers
    if job.logs == demo_logs:   # asked of the demo's folder: `make demo` left them COMPLETED
        return 0.0
    seeds = len(job.seeds) or 1
    kind_of = OBJECTIVE_FACTS[job.objective].model_kind if job.objective in OBJECTIVE_FACTS else None
    factor = seconds.get(f"search_factor_{kind_of}", 1.0)   # on its SBS and MCTS conditions, not best-of-N
    return seeds * sum(condition_seconds(m, job.settings, seconds, draws) * (factor if m.startswith(("sbs", "mcts"))
                                                                             else 1.0)
                       for m in job.methods)


def schedule(tasks: Sequence[Task | Job], seconds: dict[str, float], jobs: int) -> float:
    """When the last task ends when up to `jobs` run at once, each as soon as a slot is free and what it
    waits for (among `tasks`) has ended, in list order among the ready ones (`masprm.running.commands.run_tasks`)."""
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


def estimate(tasks: Sequence[Job], done: set[str], jobs: int, demo_logs: str,
             seconds: dict[str, float] = SECONDS) -> tuple[float, float]:
    """(CPU seconds of the jobs still to run, wall-clock seconds with `jobs` at a time)."""
    todo = [t for t in tasks if t.name not in done]
    # the lab's first best-of-N command without a scorer draws the passes (`masprm.lab.plan.plan`)
    draw = next((t.name for t in tasks if "bon_logprob" in t.methods), None)
    each = {t.name: job_seconds(t, demo_logs, seconds, draws=t.name == draw) for t in todo}
    return sum(each.values()), schedule(todo, each, jobs)
