"""The archive `make demo` and the lab write when they finish (`masprm.archive`, docs/sharing.md).

    archive_run(flags, "toy_demo", demo_paths(world, commands), command="make demo", seeds=..., world=world)

Paths are relative to the checkout the command runs in (`commands.ROOT`, read when called).
`ArchiveFlags` is the one home of the three flags both commands take (`--archive DIR`, `--no_archive`,
`--archive_level`); `demo_paths` and `lab_paths` name what each run made, by path, with the command that made
each where one command did (the stage-4 logs are named by their conditions' fingerprints instead).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from masprm.archive.cli import report_packed
from masprm.archive.format import LEVELS
from masprm.archive.pack import Packed, pack
from masprm.checks import check_output_dir
from masprm.config import arg
from masprm.paths import PathText
from masprm.provenance import code_commit, preregistration_commit
from masprm.running import commands
from masprm.running.commands import show
from masprm.worlds.runs import WorldRun


@dataclass(frozen=True)
class ArchiveFlags:
    """Where a finished run's archive goes (a base of the demo's and the lab's settings)."""

    archive: PathText = arg("archives", flags=("--archive",),
                            help="folder the run's archive is written into, as <run>-v<N> (default archives; "
                                 "docs/sharing.md)")
    no_archive: bool = arg(False, flags=("--no_archive",), help="write no archive at the end")
    archive_level: str = arg("tables", flags=("--archive_level",), choices=LEVELS,
                             help="tables: logs, tables and benchmark outputs (default); full: also trees, "
                                  "stage-2 records and scorers")

    def check_archive(self) -> None:
        """The archive folder can be written: checked before any work."""
        if not self.no_archive:
            check_output_dir(commands.ROOT / self.archive, "archive")


def demo_paths(world: WorldRun, commands, trees: str) -> dict[str, str | None]:
    """What `make demo` made on `world` (`commands`: its `demo.Commands`; `trees`: its stage-1 folder), path ->
    the command that made it (None: several, the stage-4 logs)."""
    files = world.demo_files
    table = Path(files["table"])
    found: dict[str, str | None] = {
        world.demo_logs: None,
        files["table"]: show(commands.aggregate), str(table.with_suffix(".png")): show(commands.aggregate),
        files["stepbench"]: show(commands.stepbench),
        files["claims"]: show(commands.claims), str(Path(files["claims"]).with_suffix(".json")): show(commands.claims),
        trees: show(commands.trees)}
    for job in commands.scorers:
        found |= {job.data: show(commands.pairs), job.out: show(job.cmd)}
    return found


def lab_paths(world: WorldRun, command: str) -> dict[str, str | None]:
    """What a lab on `world` (its record for the run: `lab_world`) made: its logs, report files and benchmarks,
    its scorers and stage-2 records, each by the lab's command."""
    files = world.lab_files
    report, claims = Path(files["report"]), Path(files["claims"])
    paths = [files["logs"], str(report), str(report.with_suffix(".json")), str(claims),
             str(claims.with_suffix(".json")), files["plot"], files["stepbench"], files["labelbench"]]
    # level full: its scorers and its rows' stage-2 records on the demo's trees (replica seeds' trees stay out)
    root = commands.ROOT
    full = [*root.glob(f"{world.lab_checkpoints}*"), *root.glob(f"results/labels_*_{world.name}_res_*.jsonl")]
    return {p: command for p in paths + sorted(str(p.relative_to(root)) for p in full)}


def pack_command(flags: ArchiveFlags, run: str, paths) -> str:
    """The command that packs `paths` as `run` (what the demo prints, and --dry_run lists)."""
    if flags.no_archive:
        return "(no archive: --no_archive)"
    return (f"python -m masprm.archive pack {run} {shlex.join(paths)} --out {flags.archive} "
            f"--level {flags.archive_level}")


def archive_run(flags: ArchiveFlags, run: str, paths: Mapping[str, str | None], *, command: str, seeds,
                train_seed: int, world: WorldRun) -> Packed | None:
    """Pack what exists of `paths` (relative to the checkout) as `run`'s next archive version, printing the
    equivalent command first as every step of the demo does; None with --no_archive."""
    if flags.no_archive:
        print("archive: --no_archive: none written")
        return None
    there = [p for p in paths if (commands.ROOT / p).exists()]
    meta = {"command": command, "code": code_commit(), "seeds": list(seeds), "train_seed": train_seed,
            "world": world.name}
    if world.preregistration:
        meta["preregistration"] = {"file": world.preregistration,
                                   "commit": preregistration_commit(world.preregistration)}
    print(f"$ {pack_command(flags, run, there)}")
    done = pack(run, there, root=commands.ROOT, out=commands.ROOT / flags.archive, level=flags.archive_level, meta=meta,
                commands={p: c for p, c in paths.items() if c})
    report_packed(done)
    return done
