"""Stage 2 core: search trees -> PRM samples and Bradley-Terry (PPM) pairs.

A stage-1 tree (the format of ``masprm.tree_schema``) is read into light ``TreeStep`` nodes, one tree at a
time, and turned into two kinds of training records:

- PRM samples: root-to-node paths whose last node is a graded terminal
  (value ±1), labelled with every step's value (``q_mean``).
- PPM pairs (rStar-Math style): at each prefix node, the best-valued children
  are preferred over the worst-valued ones, so a pair differs in one step.

Both come in two views. ``full`` shows the scorer the routed transcript
(question + every step so far); ``local`` shows one agent's inbox (the user
content it actually saw, recovered by routing the path through the MAS graph)
plus its output. Dedupe across trees keeps only key hashes, so memory does not
grow with the number of trees.

Pure Python: importing this module must not import torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from masprm.config import arg
from masprm.graph import MASGraph
from masprm.labels.pairs import (MIN_MARGIN, PairRule, dedupe_key, meta_target, ppm_pairs, ppm_texts,  # noqa: F401
                                 split_sizes, unique_candidates)   # (re-exported: the pair miner lives there)
from masprm.state_text import VIEWS
from masprm.tree_schema import TreeStep, Tree, TreeError, parse_tree, read_tree  # noqa: F401  (re-exported)

PRM_ROOT_WINDOW = (-0.7, 0.7)   # PRM samples come only from trees whose root is undecided
PM1_TOLERANCE = 1e-6            # a graded leaf has value ±1 within this
MAX_NAMED_FAILURES = 20         # malformed trees named in the summary; the rest are only counted

def in_window(value: float | None, window: tuple[float, float]) -> bool:
    return value is not None and window[0] <= value <= window[1]


# --------------------------------------------------------------------------- PRM samples


def candidate_paths(root: TreeStep, target_nodes: int) -> Iterator[list[TreeStep]]:
    """Steps (root excluded) of each candidate path, depth-first in stored order.

    ``target_nodes > 0``: every root-to-node path of exactly that many nodes
    (root included). Otherwise every root-to-leaf path.
    """
    fixed = target_nodes > 0
    if target_nodes == 1:
        raise ValueError("target_nodes = 1 is the root alone: use N >= 2, or N <= 0 for variable depth")
    stack: list[tuple[TreeStep, list[TreeStep]]] = [(root, [])]
    while stack:
        node, path = stack.pop()
        if fixed and len(path) + 1 == target_nodes:
            yield path
            continue
        if not fixed and not node.children and path:
            yield path
            continue
        for child in reversed(node.children):
            stack.append((child, path + [child]))


def is_graded(path: list[TreeStep]) -> bool:
    """A usable PRM path: a terminal last node with value ±1, every step with text and a value."""
    last = path[-1]
    if not (last.is_terminal and last.value is not None
            and math.isclose(abs(last.value), 1.0, rel_tol=0.0, abs_tol=PM1_TOLERANCE)):
        return False
    return all(s.text and s.value is not None for s in path)


def clamp(x: float) -> float:
    return max(-1.0, min(1.0, x))


PathLabeller = Callable[[TreeStep, list[TreeStep]], list[float]]   # (root, a graded path) -> labels of its first steps


def mc_labels(root: TreeStep, path: list[TreeStep]) -> list[float]:
    """The paper's PRM labels: every step's Monte Carlo value (its node's q_mean)."""
    return [clamp(s.value) for s in path]


def prm_records(tree: Tree, target_nodes: int, view: str, counts: "Counts",
                label_path: PathLabeller = mc_labels) -> list[dict]:
    """PRM samples of one tree (root-window filter applied by the caller).

    ``label_path`` labels each graded path; when it labels only the first k
    steps, the records stop after step k (first-error labels leave the rest out).
    """
    out: list[dict] = []
    for path in candidate_paths(tree.root, target_nodes):
        counts.candidate_paths += 1
        if not is_graded(path):
            continue
        if path[-1].value > 0:
            counts.r_pos += 1
        else:
            counts.r_neg += 1
        labels = label_path(tree.root, path)
        path = path[:len(labels)]
        if view == "full":
            out.append({"prompt": tree.question, "completions": [s.text for s in path], "labels": labels})
            continue
        for i, (s, y) in enumerate(zip(path, labels)):
            out.append({"prompt": s.inbox, "completions": [s.text], "labels": [y],
                        "meta": {"agent_idx": s.agent, "step_index": i, "target_nodes": meta_target(target_nodes),
                                 "view": "local"}})
    return out


# --------------------------------------------------------------------------- one pass over many trees


@dataclass
class Options:
    """Stage 2's settings: the home of src/train/preprocess_data.py's mining flags, defaults and help."""

    target_nodes: int = arg(5, help="path length in nodes, root included (default 5); <= 0 means variable depth "
                                    "(every root-to-terminal-leaf path)")
    dedupe: bool = arg(True, help="drop exact duplicate samples and pairs across trees (default on)")
    make_ppm: bool = arg(False, help="also write PPM preference pairs")
    ppm_max_pairs: int = arg(8, help="at most this many pairs per tree (default 8)")
    ppm_pos_topk: int = arg(4, help="at most this many positives per prefix (default 4)")
    ppm_neg_topk: int = arg(4, help="at most this many negatives per prefix (default 4)")
    ppm_root_window: tuple[float, float] = arg((-0.7, 0.7), nargs=2, metavar=("LO", "HI"),
                                               help="mine pairs only from trees whose root value is in [LO, HI] "
                                                    "(default -0.7 0.7)")
    prm_root_window: tuple[float, float] = arg(PRM_ROOT_WINDOW, nargs=2, metavar=("LO", "HI"),
                                               help="write PRM samples (and a steps label scheme's records) only "
                                                    "from trees whose root value is in [LO, HI], both ends "
                                                    "included (default -0.7 0.7, the original's); another "
                                                    "window is written into the output's name "
                                                    "(prm_samples_window<LO>_<HI>_<run>.jsonl)")
    view: str = arg("full", choices=VIEWS, help="full: the routed transcript; local: one agent's inbox + its "
                                                "output (default full)")

    def __post_init__(self) -> None:
        self.ppm_root_window = tuple(self.ppm_root_window)
        self.prm_root_window = tuple(self.prm_root_window)

    @property
    def window_tag(self) -> str:
        """The PRM window in the outputs' names when it is not the original's ('' for the default, so that
        default runs keep their names): stage 2 has no fingerprint of its own, its files' names are its identity."""
        return window_tag(self.prm_root_window)


def window_tag(window: tuple[float, float]) -> str:
    """'_window<LO>_<HI>' for a PRM root window other than PRM_ROOT_WINDOW, else ''."""
    lo, hi = window
    return "" if (lo, hi) == PRM_ROOT_WINDOW else f"_window{lo:g}_{hi:g}"


@dataclass
class OutputCounts:
    """What became of one output (PRM samples or PPM pairs) over the trees."""

    outside_window: int = 0              # trees whose root value is outside this output's window
    made: int = 0                        # records or pairs before dedupe across trees
    duplicates: int = 0
    kept: int = 0


@dataclass
class Counts:
    files: int = 0
    trees: int = 0                       # trees read without error
    malformed: int = 0
    malformed_named: list[str] = field(default_factory=list)  # the first MAX_NAMED_FAILURES reasons
    off_config: int = 0                  # local view: subtrees left out because they do not follow --config
    off_config_named: list[str] = field(default_factory=list)
    candidate_paths: int = 0
    r_pos: int = 0
    r_neg: int = 0
    prm: OutputCounts = field(default_factory=OutputCounts)
    ppm: OutputCounts = field(default_factory=OutputCounts)


class Preprocessor:
    """Turns tree files into records one at a time, counting and deduping as it goes."""

    def __init__(self, options: Options, graph: MASGraph | None = None):
        if options.view == "local" and graph is None:
            raise ValueError("the local view needs the MAS graph")
        self.options = options
        self.graph = graph if options.view == "local" else None
        self.counts = Counts()
        self._seen_prm: set[bytes] = set()
        self._seen_ppm: set[bytes] = set()

    def process_file(self, path: str | Path, name: str | None = None) -> tuple[list[dict], list[dict]]:
        """(PRM records, PPM records) of one tree file, after dedupe; ([], []) for a bad tree."""
        c, o = self.counts, self.options
        tree = self.read(path, name)
        if tree is None:
            return [], []
        root_value = tree.root.value
        prm = self._take(root_value, o.prm_root_window, lambda: prm_records(tree, o.target_nodes, o.view, c),
                         c.prm, self._seen_prm, _prm_key)
        ppm = [] if not o.make_ppm else self._take(
            root_value, o.ppm_root_window,
            lambda: ppm_pairs(tree, target_nodes=o.target_nodes, view=o.view, pos_topk=o.ppm_pos_topk,
                              neg_topk=o.ppm_neg_topk, max_pairs=o.ppm_max_pairs),
            c.ppm, self._seen_ppm, _ppm_key)
        return prm, ppm

    def read(self, path: str | Path, name: str | None = None) -> Tree | None:
        """One tree file, counted; None (counted and named) when it cannot be read."""
        c = self.counts
        c.files += 1
        try:
            tree = read_tree(path, name, self.graph)
        except TreeError as err:
            c.malformed += 1
            if len(c.malformed_named) < MAX_NAMED_FAILURES:
                c.malformed_named.append(str(err))
            return None
        c.trees += 1
        c.off_config += len(tree.off_config)
        c.off_config_named.extend(tree.off_config[:MAX_NAMED_FAILURES - len(c.off_config_named)])
        return tree

    def _take(self, root_value: float, window: tuple[float, float], make: Callable[[], list[dict]],
              counts: OutputCounts, seen: set[bytes], key_of) -> list[dict]:
        """One output of a tree whose root value is in `window`: made, deduped across trees, counted."""
        if not in_window(root_value, window):
            counts.outside_window += 1
            return []
        made = make()
        kept = self._dedupe(made, seen, key_of)
        counts.made += len(made)
        counts.duplicates += len(made) - len(kept)
        counts.kept += len(kept)
        return kept

    def _dedupe(self, records: list[dict], seen: set[bytes], key_of) -> list[dict]:
        if not self.options.dedupe:
            return records
        kept = []
        for r in records:
            k = dedupe_key(key_of(r))
            if k not in seen:
                seen.add(k)
                kept.append(r)
        return kept

    # -- what to tell the user
    def prm_summary(self, out_path: Path) -> str:
        c = self.counts
        return (f"[preprocess][PRM] files={c.files} trees={c.trees} malformed={c.malformed} "
                f"outside_root_window={c.prm.outside_window} | candidate_paths={c.candidate_paths} "
                f"| R+1={c.r_pos} | R-1={c.r_neg} | records={c.prm.made} duplicates={c.prm.duplicates} "
                f"| kept={c.prm.kept} | wrote -> {out_path}")

    def ppm_summary(self, out_path: Path) -> str:
        c = self.counts
        return (f"[preprocess][PPM] files={c.files} trees={c.trees} malformed={c.malformed} "
                f"outside_root_window={c.ppm.outside_window} | pairs={c.ppm.made} "
                f"duplicates={c.ppm.duplicates} | kept={c.ppm.kept} | wrote -> {out_path}")

    def malformed_summary(self) -> str | None:
        c = self.counts
        return _named_count(f"skipped {c.malformed} unreadable tree(s): ", c.malformed, c.malformed_named)

    def off_config_summary(self) -> str | None:
        c = self.counts
        return _named_count(f"left out {c.off_config} subtree(s) that do not follow the config "
                            "(their paths only): ", c.off_config, c.off_config_named)

    def why_no_prm(self) -> str | None:
        c, o = self.counts, self.options
        if c.prm.kept:
            return None
        if not c.trees:
            return "no PRM samples: no tree could be read"
        lo, hi = o.prm_root_window
        if c.prm.outside_window == c.trees:
            return f"no PRM samples: every tree's root value is outside [{lo:g}, {hi:g}] (--prm-root-window)"
        shape = (f"of exactly {o.target_nodes} nodes" if o.target_nodes > 0 else "from the root to a leaf")
        if not c.candidate_paths:
            return f"no PRM samples: no tree (with its root in [{lo:g}, {hi:g}]) has a path {shape}"
        return (f"no PRM samples: none of the {c.candidate_paths} paths {shape} ends in a terminal node "
                f"with value ±1 and has text and a value at every step")

    def why_no_ppm(self) -> str | None:
        c, o = self.counts, self.options
        if not o.make_ppm or c.ppm.kept:
            return None
        if not c.trees:
            return "no PPM pairs: no tree could be read"
        lo, hi = o.ppm_root_window
        if c.ppm.outside_window == c.trees:
            return f"no PPM pairs: every tree's root value is outside the window [{lo:g}, {hi:g}] (--ppm-root-window)"
        return ("no PPM pairs: no prefix node has two children with different texts and strictly "
                "different values")


def _named_count(head: str, count: int, named: list[str]) -> str | None:
    """``head`` + the named reasons (the first MAX_NAMED_FAILURES) + how many more; None when count is 0."""
    if not count:
        return None
    more = count - len(named)
    return head + "; ".join(named) + (f"; and {more} more" if more else "")


def _prm_key(r: dict) -> list:
    return [r["prompt"], r["completions"], [round(float(x), 4) for x in r["labels"]]]


def _ppm_key(r: dict) -> list:
    return [r["prompt"], r["chosen_actions"], r["rejected_actions"]]
