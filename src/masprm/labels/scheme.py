"""Label schemes (stage 2, ``--labels NAME``): one registry of the ways to turn stage-1 trees into records.

A ``LabelScheme`` names the record kind it writes (``"steps"``: prompt /
completions / labels in [-1, 1]; ``"pairs"``: prompt / chosen_actions /
rejected_actions, with an optional ``weight``), the function that makes one
tree's records, the dataclass of its own flags (``masprm.config.arg``) and an
optional ``prepare`` that relabels a tree before its root value is compared
with the window. Every scheme lives in its own module and is registered in one
place (``masprm/labels/__init__.py``); adding one is one more registration:

    LABEL_SCHEMES.register("mine", LabelScheme("mine", "steps", my_records, source="..."))

``LabelRunner`` reads tree files one at a time with the paper's preprocessor
(windows, dedupe across trees, counts) and stamps ``meta.label_scheme`` on
every record. Pure Python: no torch import.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from masprm.errors import ConfigError
from masprm.graph import MASGraph
from masprm.labels.mining import (Counts, Options, OutputCounts, PathLabeller, Preprocessor, _ppm_key,
                                  _prm_key, prm_records)
from masprm.labels.pairs import PAPER_RULE, PairRule, dedupe_key, ppm_pairs
from masprm.registry import Registry
from masprm.tree_schema import TreeStep, Tree

RECORD_KINDS = ("steps", "pairs")


@dataclass
class LabelContext:
    """What a scheme's functions get besides the tree: the run's settings, counts and notes."""

    options: Options                  # the mining flags shared by every scheme (view, depth, pair caps, window)
    settings: Any = None              # the scheme's own settings dataclass (None when it has none)
    counts: Counts = field(default_factory=Counts)
    notes: Counter = field(default_factory=Counter)   # scheme-specific numbers for the summary line
    rollouts: Any = None              # fresh policy samples for the schemes that need them (masprm.labels.shapley)
    spreads: Any = None               # an ensemble scorer's spread per prefix (masprm.labels.mc_budget)


@dataclass(frozen=True)
class LabelScheme:
    name: str
    kind: str                                             # one of RECORD_KINDS
    records: Callable[[Tree, LabelContext], list[dict]]   # one tree's records (root window already passed)
    settings: type | None = None                          # a dataclass of the scheme's flags
    prepare: Callable[[Tree, LabelContext], None] | None = None   # relabel the tree in place first
    source: str = ""                                      # what it is and where it comes from (one line)
    report: Callable[[Counter], str] | None = None        # the notes as the summary shows them
    needs_rollouts: bool = False                          # needs fresh policy samples (LabelContext.rollouts)
    needs_spreads: bool = False                           # needs an ensemble scorer (LabelContext.spreads)
    # (tree files, --input) -> what the scheme reads from its input before any output opens (LabelContext.settings
    # then), or a UsageError: a scheme that can label only some trees refuses the others in one line first
    check_input: Callable[[Sequence[Path], Path], Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in RECORD_KINDS:
            raise ConfigError(f"label scheme {self.name!r}: kind must be one of {', '.join(RECORD_KINDS)}, "
                              f"got {self.kind!r}")


LABEL_SCHEMES: Registry[LabelScheme] = Registry("label scheme")


# --------------------------------------------------------------------------- the two record makers schemes share


def step_records(tree: Tree, ctx: LabelContext, label_path: PathLabeller) -> list[dict]:
    """Steps records: every graded path of the tree, labelled by ``label_path`` (the PRM samples' paths)."""
    o = ctx.options
    return prm_records(tree, o.target_nodes, o.view, ctx.counts, label_path)


def mined_pairs(tree: Tree, ctx: LabelContext, rule: PairRule = PAPER_RULE) -> list[dict]:
    """Pairs records: the paper's miner under ``rule``, with the run's --ppm-* caps."""
    o = ctx.options
    return ppm_pairs(tree, target_nodes=o.target_nodes, view=o.view, pos_topk=o.ppm_pos_topk,
                     neg_topk=o.ppm_neg_topk, max_pairs=o.ppm_max_pairs, rule=rule)


def walk(node: TreeStep):
    """The node and its descendants, depth-first in stored order."""
    yield node
    for child in node.children:
        yield from walk(child)


# --------------------------------------------------------------------------- one pass over many trees


def put_back(target: Any, data: dict) -> None:
    """Set a dataclass's fields from its ``asdict`` form, nested dataclasses in place."""
    for f in fields(target):
        if is_dataclass(getattr(target, f.name)):
            put_back(getattr(target, f.name), data[f.name])
        else:
            setattr(target, f.name, data[f.name])


def _default_report(notes: Counter) -> str:
    return " ".join(f"{k}={v}" for k, v in notes.items())


class LabelRunner(Preprocessor):
    """One scheme's records of tree files, one file at a time: read, prepare, window, dedupe, count."""

    def __init__(self, scheme: LabelScheme, options: Options, settings: Any = None, graph: MASGraph | None = None):
        super().__init__(options, graph)
        self.scheme = scheme
        self.ctx = LabelContext(options, settings, self.counts)
        self.output = OutputCounts()
        self.per_step: Counter[int] = Counter()   # kept pairs per step index
        self._seen: set[bytes] = set()
        self._added: list[bytes] = []             # dedupe keys added since the last progress_state

    @property
    def window(self) -> tuple[float, float]:
        """Steps schemes use the PRM samples' root window (--prm-root-window), pair schemes the --ppm-root-window."""
        return self.options.prm_root_window if self.scheme.kind == "steps" else self.options.ppm_root_window

    def label_file(self, path: str | Path, name: str | None = None) -> list[dict]:
        """The records of one tree file, after dedupe; [] for a bad tree."""
        tree = self.read(path, name)
        if tree is None:
            return []
        if self.scheme.prepare is not None:
            self.scheme.prepare(tree, self.ctx)
        key = _prm_key if self.scheme.kind == "steps" else _ppm_key
        records = self._take(tree.root.value, self.window, lambda: self.scheme.records(tree, self.ctx),
                             self.output, self._seen, key)
        if self.options.dedupe:
            self._added.extend(dedupe_key(key(rec)) for rec in records)
        for rec in records:
            rec.setdefault("meta", {})["label_scheme"] = self.scheme.name
            if self.scheme.kind == "pairs":
                self.per_step[rec["meta"].get("step_index")] += 1
        return records

    # -- a stopped run resumes (masprm.labels.progress): what the next tree's records and the summary depend on

    def progress_state(self) -> dict:
        """The counts and notes so far and the dedupe keys added since the last call, as JSON (the notes and
        the pairs per step as [key, count] lists: their order and their keys' types are the summary's)."""
        added = [k.hex() for k in self._added]
        self._added.clear()
        return {"counts": asdict(self.counts), "output": asdict(self.output), "notes": list(self.ctx.notes.items()),
                "per_step": list(self.per_step.items()), "seen": added}

    def resume_state(self, state: dict) -> None:
        """Back to where ``progress_state`` was taken, its dedupe keys added to the seen ones."""
        put_back(self.counts, state["counts"])   # in place: the context holds the same Counts
        put_back(self.output, state["output"])
        self.ctx.notes.clear()
        self.ctx.notes.update(dict(state["notes"]))
        self.per_step.clear()
        self.per_step.update({step: n for step, n in state["per_step"]})
        self._seen.update(bytes.fromhex(k) for k in state["seen"])

    def summary(self, out_path: Path) -> str:
        c, o = self.counts, self.output
        notes = (self.scheme.report or _default_report)(self.ctx.notes)
        per_step = " ".join(f"{k}:{v}" for k, v in sorted(self.per_step.items(), key=lambda kv: str(kv[0])))
        return (f"[preprocess][labels {self.scheme.name}] files={c.files} trees={c.trees} malformed={c.malformed} "
                f"outside_root_window={o.outside_window} | records={o.made} duplicates={o.duplicates} "
                f"| kept={o.kept}" + (f" | pairs per step {per_step}" if per_step else "")
                + (f" | {notes}" if notes else "") + f" | wrote -> {out_path}")

    def why_none(self) -> str | None:
        c, o = self.counts, self.output
        if o.kept:
            return None
        if not c.trees:
            return "no records: no tree could be read"
        lo, hi = self.window
        if o.outside_window == c.trees:
            return f"no records: every tree's root value is outside [{lo:g}, {hi:g}]"
        return f"no records: label scheme {self.scheme.name!r} made none from the trees in [{lo:g}, {hi:g}]"
