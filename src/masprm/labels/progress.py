"""Per-tree progress of a label run that samples the policy, so that a stopped run resumes where it stopped.

The rollout-based label schemes (``LabelScheme.needs_rollouts``) spend stage 2's
time on fresh policy samples, tree after tree, while their output is written
once, atomically, when every tree is done. Beside that output,
``<output stem>.partial.jsonl`` (stage 4's name for the same thing) receives one
line per finished tree, as it finishes:

    {"fingerprint": "<hash of everything that defines the output>"}        the first line
    {"tree": "<file name>", "records": [...], "runner": {...}, "source": {...}}   one per tree, in order

``records`` are the tree's records as the output holds them; ``runner`` is
the label runner's counts and notes after the tree and the dedupe keys the
tree added (``LabelRunner.progress_state``); ``source`` is the rollout
source's call count and usage after the tree and the prefix completions the
tree added to its cache (``RolloutSource.progress_state``). Each tree's random
streams are keyed by the call count, so a run that takes the first k trees
from this file and labels the rest writes the same bytes as an unbroken run.
A kill loses at most the tree in progress; a line cut short by it, and
anything after a line that does not fit, is dropped. A file written with
other settings (another fingerprint) is ignored with one line and replaced
once a tree finishes; the file goes when the output is in place.
Pure Python.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Protocol

from masprm.io import append_open, atomic_write_jsonl

PARTIAL_SUFFIX = ".partial.jsonl"


class Resumable(Protocol):
    def progress_state(self) -> dict:
        """What the next tree depends on, taken once a tree is done (growing state: what the tree added)."""

    def resume_state(self, state: dict) -> None:
        """Put back what ``progress_state`` gave, one finished tree after the other."""


def partial_path(output: Path) -> Path:
    """labels_<NAME>_<run>.jsonl -> labels_<NAME>_<run>.partial.jsonl, beside it."""
    return output.with_name(output.name.removesuffix(".jsonl") + PARTIAL_SUFFIX)


def _read_lines(path: Path) -> list[Any]:
    """The JSON values of the file's lines up to the first that does not parse (a kill cuts the last one)."""
    found: list[Any] = []
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                try:
                    found.append(json.loads(raw.decode("utf-8")))
                except ValueError:   # JSONDecodeError, or bytes that are not UTF-8
                    break
    except OSError:
        return []
    return found


class TreeProgress:
    """The progress file of one output: which trees are done, with their records and the state after them."""

    def __init__(self, output: Path, fingerprint: str, parts: dict[str, Resumable],
                 say: Callable[[str], None] = print):
        self.path = partial_path(output)
        self.fingerprint = fingerprint
        self.parts = parts          # name in the line -> the object whose state it holds
        self.say = say              # where the one line about a resume goes
        self._started = False       # whether this run has (re)written the file yet

    def resume(self, names: list[str]) -> list[list[dict]]:
        """The records of the first trees of ``names`` an earlier run of the same settings finished, their
        state put back in order; [] when there is nothing to take (no file, or one of other settings)."""
        lines = _read_lines(self.path) if self.path.is_file() else []
        if not lines:
            return []
        head = lines[0] if isinstance(lines[0], dict) else {}
        if head.get("fingerprint") != self.fingerprint:
            self.say(f"{self.path}: progress of a run with other settings (fingerprint {head.get('fingerprint')}, "
                     f"this run's {self.fingerprint}); ignored, and replaced once a tree is done")
            return []
        done = []
        for name, entry in zip(names, lines[1:]):
            if not (isinstance(entry, dict) and entry.get("tree") == name and isinstance(entry.get("records"), list)
                    and all(isinstance(entry.get(part), dict) for part in self.parts)):
                break
            done.append(entry)
        for entry in done:
            for part, obj in self.parts.items():
                obj.resume_state(entry[part])
        # what did not fit goes now, so the lines appended next follow the trees taken
        atomic_write_jsonl(self.path, [lines[0], *done])
        self._started = True
        if done:
            self.say(f"resuming: {len(done)}/{len(names)} trees already done ({self.path.name})")
        return [entry["records"] for entry in done]

    def add(self, name: str, records: list[dict]) -> None:
        """A finished tree: its records and the state after it, on a line of its own (flushed)."""
        entry = {"tree": name, "records": records,
                 **{part: obj.progress_state() for part, obj in self.parts.items()}}
        if not self._started:   # the first tree of a fresh run: a new file replaces any other settings'
            atomic_write_jsonl(self.path, [{"fingerprint": self.fingerprint}, entry])
            self._started = True
            return
        with append_open(self.path) as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
            fh.flush()

    def finish(self) -> None:
        """The output is in place: the progress has served."""
        self.path.unlink(missing_ok=True)
