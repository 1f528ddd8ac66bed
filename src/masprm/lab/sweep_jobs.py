"""The lab's compute-matched sweep as commands: ordinary evaluation commands at the settings fixed in advance.

`compute_match.SWEEP` (docs/scorer_lab.md, "Compute-matched sweep") gives, per budget of agent samples per
question, each condition's setting; `make lab` (`masprm.lab.command`) runs these commands after its others,
and its report reads their logs (`masprm.lab.sweep_report`). A COMPLETED condition is skipped by the command
itself, so the sweep resumes like the rest of the lab.
"""

from __future__ import annotations

from functools import partial

from masprm.stages import demo
from masprm.lab.job import Job
from masprm.lab.rows import LAB_SCORERS, orm_of, role_flags
from masprm.worlds.runs import WorldRun
from masprm.lab.compute_match import Setting


def sweep_tasks(args, logs: str, sweep: dict[int, dict[tuple[str, str], Setting | None]],
                world: WorldRun = demo.TOY_RUN) -> list[Job]:
    """The compute-matched sweep (`sweep`: `compute_match.SWEEP`, docs/scorer_lab.md): per budget, one evaluation
    command per scorer with its conditions at their matched settings (none where no setting fits), in the lab's
    logs folder (`logs`): the MASPRM's SBS and MCTS; the ORM's MCTS and best-of-N + ORM; the ORM valuing SBS's
    prefixes. `args`: the lab's flags (its --seeds and --sample_n); `world`: whose scorers and test split."""
    masprm = next(s for s in LAB_SCORERS if (s.scheme, s.objective) == ("masprm", "ppm")).in_world(world)
    orm = orm_of(masprm)
    sample = ("--sample_n", str(args.sample_n)) if args.sample_n else ()
    found = []
    for budget, plan in sweep.items():
        commands = {masprm.slug: (masprm, role_flags("prm", masprm.folder, world),
                                  [("sbs", "masprm"), ("mcts", "masprm")]),
                    orm.slug: (orm, role_flags("orm", orm.folder, world), [("mcts", "orm"), ("bon", "orm")]),
                    f"{orm.slug}_sbs": (orm, (*role_flags("prm", orm.folder, world), "--allow_scorer_kind_mismatch"),
                                        [("sbs", "orm")])}
        for name, (scorer, flags, conditions) in commands.items():
            methods, settings, chosen = [], [], {}
            for family, row in conditions:
                setting = plan[(family, row)]
                if setting is not None:   # the ORM runs as itself, except under SBS (prefixes, the MASPRM's role)
                    kind = "orm" if row == "orm" and family != "sbs" else "prm"
                    methods.append(f"{family}_{kind}")
                    settings += [x for k, v in setting.items() for x in (f"--{k}", str(v))]
                    chosen.update(setting)
            if methods:
                found.append(Job(f"sweep_{budget}_{name}", "sweep", partial(
                    demo.evaluation_command, args.seeds, methods, flags, (*settings, *sample), logs_dir=logs,
                    world=world), row=scorer.key, objective=scorer.objective, seeds=tuple(args.seeds),
                    methods=tuple(methods), settings=chosen, logs=logs))
    return found
