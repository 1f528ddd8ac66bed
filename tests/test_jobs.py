"""The lab's and demo's command driver (`masprm.running.commands`): order, failures, and the times it reports."""

from __future__ import annotations

import re
import sys

import pytest

from masprm.cli import UsageError
from masprm.running import commands


def test_run_tasks_starts_each_command_after_what_it_needs(tmp_path):
    stamp = "import sys, time, pathlib; time.sleep({}); pathlib.Path(sys.argv[1]).open('a').write(sys.argv[2] + '\\n')"
    order = tmp_path / "order.txt"

    def task(name, delay, after=()):
        return commands.Task(name, [sys.executable, "-c", stamp.format(delay), str(order), name], after)

    # b waits for a slow a although a slot is free; c needs nothing and may go first; d waits for an absent task
    commands.run_tasks([task("a", 0.6), task("b", 0, ("a",)), task("c", 0.2), task("d", 0, ("gone",))], 2, tmp_path)
    finished = order.read_text().split()
    assert sorted(finished) == ["a", "b", "c", "d"] and finished.index("a") < finished.index("b")
    with pytest.raises(UsageError, match="bad.out"):   # a failing command stops the run, naming its output
        commands.run_tasks([commands.Task("bad", [sys.executable, "-c", "raise SystemExit(3)"])], 1, tmp_path)


def test_each_command_says_its_wall_time_and_the_driver_counts_its_commands_cpu(tmp_path, capsys):
    """The numbers a lab's time estimate is checked against: a command that sleeps 1.2 s reports 1 s of wall
    time (at least 1 s; a busy machine adds start-up); one that spins for 0.5 s of CPU adds at least that to the children's CPU seconds."""
    before = commands.children_cpu_seconds()
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    commands.run_tasks([commands.Task("nap", [sys.executable, "-c", "import time; time.sleep(1.2)"]),
                    commands.Task("spin", [sys.executable, "-c", spin])], 1, tmp_path)
    out = capsys.readouterr().out
    nap = re.search(r"  \[nap: exit 0 after (\d+) s\]", out)
    assert nap and int(nap.group(1)) >= 1 and "  [spin: exit 0 after " in out
    assert commands.children_cpu_seconds() - before >= 0.5


def test_a_quiet_jobs_progress_lines_show_while_it_runs_at_most_one_per_interval(tmp_path, capsys, monkeypatch):
    # a training writes "[progress] ..." lines into its output file; the driver shows the newest one, and only
    # whole lines (the third is still being written when the driver looks)
    script = ("import sys, time\nprint('[progress] train step 10/30 (33%), loss 0.7', flush=True)\n"
              "print('a note', flush=True)\nprint('[progress] train step 20/30 (67%), loss 0.6', flush=True)\n"
              "sys.stdout.write('[progress] train step 30'); sys.stdout.flush(); time.sleep(60)")
    job = commands.Command([sys.executable, "-c", script], log=tmp_path / "train_ppm.out")
    try:
        deadline = commands.time.monotonic() + 60
        while b"step 30" not in (tmp_path / "train_ppm.out").read_bytes() and commands.time.monotonic() < deadline:
            commands.time.sleep(0.05)
        job.show_progress()                       # within the first interval: nothing yet
        capsys.readouterr()
        monkeypatch.setattr(commands, "PROGRESS_EVERY_S", 0.0)
        job.show_progress()
        assert capsys.readouterr().out == "  [train_ppm] [progress] train step 20/30 (67%), loss 0.6\n"
        job.show_progress()                       # nothing new: nothing shown
        assert capsys.readouterr().out == ""
    finally:
        job.stop()
        job.proc.wait()


def test_run_tasks_shows_a_running_commands_progress_on_screen(tmp_path, capsys, monkeypatch):
    # the demo's trainings run through run_tasks: their progress lines reach the screen while they run
    monkeypatch.setattr(commands, "PROGRESS_EVERY_S", 0.0)
    script = "import time\nprint('[progress] train step 1/2 (50%), loss 0.7', flush=True)\ntime.sleep(1.5)"
    commands.run_tasks([commands.Task("train_orm", [sys.executable, "-c", script])], 1, tmp_path)
    out = capsys.readouterr().out
    assert "  [train_orm] [progress] train step 1/2 (50%), loss 0.7\n" in out
    assert out.index("[train_orm] [progress]") < out.index("[train_orm: exit 0")   # while it ran, not in its tail
