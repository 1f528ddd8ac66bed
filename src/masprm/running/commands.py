"""Running stage commands from a driver (`make demo`, `make lab`): each printed, then run under pinned numerics.

A `Command` is one command in a subprocess, under `PINNED_NUMERICS` (the AVX2 code
paths of PyTorch and MKL) and one thread unless told otherwise, so another
AMD x86-64 CPU computes the same numbers (an Intel one takes another MKL code
path: docs/toy_world.md); a quiet command writes its output to a
file, shows the progress lines it writes there (stage 3's training:
``masprm.progress.PROGRESS_MARK``) at most every ``PROGRESS_EVERY_S`` seconds
while `run_tasks` waits on it, and prints its tail when it ends. `run_tasks` keeps up to ``jobs``
commands running, each starting once the commands it needs have finished;
`Background` runs commands one after another beside the main track.
"""

import os
import resource
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from masprm.cli import UsageError
from masprm.progress import PROGRESS_MARK
from masprm.worlds.build import PINNED_NUMERICS

ROOT = Path.cwd()   # every output lands in the folder the command is started from
PY = sys.executable
# stage -> (the checkout's script, the package module): a checkout runs the README's scripts, an installed
# package (no src/ here) the same code as modules.
STAGES = {
    "trees": ("src/run_mcts.py", "masprm.stages.trees"),
    "preprocess": ("src/train/preprocess_data.py", "masprm.stages.preprocess"),
    "train": ("src/train/trainer.py", "masprm.stages.train"),
    "evaluate": ("src/experiments/compare_sbs_mcts.py", "masprm.stages.evaluate"),
    "aggregate": ("aggregator.py", "masprm.stages.aggregate"),
}


# A quiet job's newest progress line is shown at most this often: two trainings side by side (or a lab's many)
# stay readable on screen, and the file keeps every line.
PROGRESS_EVERY_S = 30.0


def stage_command(name: str) -> list[str]:
    """The command that runs one stage: the README's script in a checkout, else ``python -m``."""
    script, module = STAGES[name]
    return [PY, script] if (ROOT / script).is_file() else [PY, "-m", module]


def show(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c if c != PY else "python") for c in cmd)


class Command:
    """One command in a subprocess; a quiet one writes its output to a file and prints its tail at the end."""

    def __init__(self, cmd: list[str], *, threads: int | None = 1, log: Path | None = None,
                 env: dict[str, str] | None = None):
        self.cmd, self.log = cmd, log
        full_env = {**PINNED_NUMERICS, **os.environ, **(env or {})}
        if threads:  # tiny models decode fastest on one thread; side-by-side jobs share the cores
            full_env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        where = log.relative_to(ROOT) if log and log.is_relative_to(ROOT) else log
        print(f"$ {show(cmd)}" + (f"   [output: {where}]" if log else ""), flush=True)
        self.started = time.monotonic()
        self.read_to, self.shown_at = 0, self.started   # the log's bytes looked at; when progress was last shown
        if log is None:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env)
        else:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("w") as out:
                self.proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=out, stderr=subprocess.STDOUT)

    def wait(self) -> None:
        code = self.proc.wait()
        if self.log is not None:
            lines = [ln for ln in self.log.read_text(errors="replace").replace("\r", "\n").splitlines()
                     if ln.strip() and "it/s]" not in ln and "s/it]" not in ln]
            # its wall time: what a lab's time estimate is checked against (docs/scorer_lab.md, "Time budget")
            print("\n".join(f"  | {line}" for line in lines[-10:])
                  + f"\n  [{self.log.stem}: exit {code} after {time.monotonic() - self.started:.0f} s]", flush=True)
        if code != 0:
            raise UsageError(f"command failed (exit {code}): {show(self.cmd)}"
                             + (f"; its output is in {self.log}" if self.log else ""))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()

    def show_progress(self) -> None:
        """Print the newest progress line its log has gained, at most once every PROGRESS_EVERY_S seconds."""
        if self.log is None or time.monotonic() - self.shown_at < PROGRESS_EVERY_S:
            return
        try:
            with self.log.open("rb") as out:
                out.seek(self.read_to)
                new = out.read()
        except OSError:   # not created yet, or gone: nothing to show
            return
        whole = new.rfind(b"\n") + 1   # complete lines only: one being written is read when it ends
        self.read_to += whole
        lines = [line for line in new[:whole].decode(errors="replace").splitlines() if line.startswith(PROGRESS_MARK)]
        if lines:
            self.shown_at = time.monotonic()
            print(f"  [{self.log.stem}] {lines[-1]}", flush=True)


@dataclass(frozen=True)
class Task:
    """A command that may start once the tasks named in `after` have finished."""

    name: str                     # also its output file: <folder>/<name>.out
    cmd: list[str]
    after: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()   # variables set for it alone (a lab job's record: masprm.lab.job)


def children_cpu_seconds() -> float:
    """User + system CPU seconds of every command this process has run and waited for (they are its
    children): a driver's cost on a shared machine, where wall time also counts the others' work."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_tasks(tasks: list[Task], jobs: int, folder: Path) -> None:
    """Up to `jobs` tasks at a time, each as soon as a slot is free and its `after` tasks are done, in list
    order among the ready ones; the first failure stops all. A task after one not in the list waits for nothing."""
    names = {t.name for t in tasks}
    pending, running, done = list(tasks), {}, set()
    try:
        while pending or running:
            ready = [t for t in pending if all(a in done or a not in names for a in t.after)]
            while ready and len(running) < jobs:
                task = ready.pop(0)
                pending.remove(task)
                running[task.name] = Command(task.cmd, log=folder / f"{task.name}.out", env=dict(task.env))
            finished = next((name for name, job in running.items() if job.proc.poll() is not None), None)
            if finished is None:
                if not running:   # nothing runs and nothing can start: a cycle (a bug in the plan)
                    raise RuntimeError(f"tasks wait on each other: {', '.join(t.name for t in pending)}")
                for job in running.values():
                    job.show_progress()
                time.sleep(0.2)
                continue
            running.pop(finished).wait()
            done.add(finished)
    finally:
        for job in running.values():
            job.stop()


def run_side_by_side(cmds: list[list[str]], names: list[str], jobs: int, folder: Path) -> None:
    """Up to `jobs` commands at a time; the next starts as soon as one ends (the first failure stops all)."""
    run_tasks([Task(name, cmd) for cmd, name in zip(cmds, names)], jobs, folder)


class Background:
    """Commands run one after another by a helper thread, alongside the main track."""

    def __init__(self, cmds: list[list[str]], names: list[str], folder: Path):
        self.error: BaseException | None = None
        self.current: Command | None = None
        self.stopped = False

        def target():
            try:
                for cmd, name in zip(cmds, names):
                    if self.stopped:
                        return
                    self.current = Command(cmd, log=folder / f"{name}.out")
                    self.current.wait()
            except BaseException as err:  # noqa: BLE001 - re-raised by join()
                self.error = err

        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def join(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self.stopped = True
        if self.current is not None:
            self.current.stop()


def stage(title: str) -> float:
    print(f"\n=== {title} ===", flush=True)
    return time.time()
