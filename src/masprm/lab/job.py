"""The lab's plan as records: one `Job` per command, its facts as fields, its argv made only when asked.

    Job("eval_mc-prm_search", "eval", build, row="mc-prm", objective="prm", seeds=(14, 24, 42),
        methods=("sbs_prm", "mcts_prm"), settings={"b1": 3, "b2": 5, "bon_n": 8, "step_agg": "min"},
        logs="logs/toy_lab", needs=("train_mc-prm",))

The plan (`masprm.lab.plan.plan`, `masprm.lab.pilot.pilot_plan`) is a list of these; the cost estimate
(`masprm.lab.estimate`) prices a job from its fields (its kind, its row's objective, its methods, seeds and
settings, the logs folder it writes to), never by reading a command line back; `argv()` builds the command
only where the job is printed (the dry run) or started (`task()`, what `masprm.running.commands.run_tasks` runs,
with the job's record beside the command line in $MASPRM_LAB_JOB: `masprm.eval.lab_jobs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping

from masprm.eval.lab_jobs import LAB_JOB_ENV, job_env
from masprm.running.commands import Task

KINDS = ("trees", "stage2", "labels", "train", "labelbench", "eval", "stepbench", "sweep", "pilot", "power")
# the kinds whose command evaluates several rows' conditions, so their record names no row: a pilot's command
# runs the MASPRM's and the ORM's together (its `row` is the MASPRM's, what its cost reads)
SEVERAL_ROWS = ("pilot",)


@dataclass(frozen=True)
class Job:
    """One command of the lab's plan, as the facts the plan chose; its command line is `argv()`."""

    name: str                         # unique in the plan: its output file (<folder>/<name>.out) and what others need
    kind: str                         # one of KINDS
    build: Callable[[], list[str]] = field(repr=False, compare=False)   # its command line, made when asked
    row: str | None = None            # the row key it trains or evaluates (`LabScorer.key`; None: no row's)
    objective: str | None = None      # that row's objective (what its searches cost, `objective_facts`)
    needs: tuple[str, ...] = ()       # the jobs it waits for, by name
    seeds: tuple[int, ...] = ()       # an evaluation's search seeds
    methods: tuple[str, ...] = ()     # an evaluation's conditions
    settings: Mapping[str, object] = field(default_factory=dict)   # an evaluation's budget settings (b1, b2,
                                      # bon_n, n_simulations, step_agg): the ones its command sets over the demo's
    logs: str | None = None           # the logs folder an evaluation writes to
    scheme: str | None = None         # a labels job's label scheme
    rollout: bool = False             # a labels job samples the policy afresh (--rollout-policy)
    scorers: int = 0                  # the step benchmark's scorers

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"job {self.name}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))   # frozen all the way

    def argv(self) -> list[str]:
        """The command line that runs it."""
        return list(self.build())

    def task(self, lab: str | None = None) -> Task:
        """The job as the scheduler runs it (`masprm.running.commands.run_tasks`); with `lab` (the lab's name,
        `<world>_<lab>`) its record goes with it in $MASPRM_LAB_JOB, which stage 4 writes into the manifest of each
        condition it runs or finds COMPLETED (`masprm.eval.lab_jobs`), so that the lab's cells find the row by its
        key. The command line stays what `argv()` prints."""
        row = None if self.kind in SEVERAL_ROWS else self.row
        return Task(self.name, self.argv(), self.needs, ((LAB_JOB_ENV, job_env(lab, self.name, row)),) if lab else ())

    @property
    def after(self) -> tuple[str, ...]:
        """What it waits for, under the scheduler's name (`Task.after`, `masprm.lab.estimate.schedule`)."""
        return self.needs

    @property
    def cmd(self) -> list[str]:
        """Its command line under `Task`'s name, for a reader that checks what the plan would run."""
        return self.argv()
