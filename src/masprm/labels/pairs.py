"""Bradley-Terry (PPM) pairs from one tree: the paper's miner and the rule its variants change.

At each prefix node the best-valued children are preferred over the worst-valued
ones (rStar-Math style), so a pair differs in one step. ``PairRule`` holds what
a pair scheme may change (``masprm.labels``): a minimum value margin, a weight
per pair, a cap per step index; its defaults are the paper's rule, whose output
is byte-for-byte today's ``ppm_pairs_<run>.jsonl``.

Pure Python: importing this module must not import torch.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from masprm.state_text import DEFAULT_SEPARATOR, join_steps
from masprm.tree_schema import TreeStep, Tree

MIN_MARGIN = 1e-9               # a pair needs pos_value > neg_value + MIN_MARGIN (strictly better)


def meta_target(target_nodes: int) -> int | None:
    """``meta.target_nodes``: null in variable-depth mode (N <= 0), as the original wrote it."""
    return target_nodes if target_nodes > 0 else None


def dedupe_key(obj: Any) -> bytes:
    """A 16-byte hash of a JSON-able key: dedupe sets hold these, not the texts."""
    blob = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.blake2b(blob, digest_size=16).digest()


def split_sizes(n: int, pos_topk: int, neg_topk: int) -> tuple[int, int]:
    """(k_pos, k_neg) for n unique candidates: disjoint top and bottom groups when n allows."""
    k_neg = min(neg_topk, max(1, n // 2))
    k_pos = min(pos_topk, max(1, n - k_neg))
    if k_neg + k_pos > n:
        k_pos = max(1, n - k_neg)
    return k_pos, k_neg


def unique_candidates(children: Sequence[TreeStep]) -> list[TreeStep]:
    """Children with text and a value, one per whitespace-normalised text (the highest value
    wins; the first stored wins a tie), sorted by value ascending (stable)."""
    best: dict[str, TreeStep] = {}
    for c in children:
        if not c.text or c.value is None:
            continue
        key = " ".join(c.text.split())
        if key not in best or c.value > best[key].value:
            best[key] = c
    return sorted(best.values(), key=lambda s: s.value)


@dataclass(frozen=True)
class PairRule:
    """What a pair scheme changes in the miner; the defaults are the paper's rule.

    ``min_gap``: a pair is kept only when pos_value - neg_value >= min_gap (0: any strictly better
    positive). ``weighted``: each pair gets ``weight`` = 1 / (k_pos * k_neg), k_pos and k_neg being
    the sizes of its prefix's positive and negative groups, so every prefix weighs at most 1 in all.
    ``per_step_cap``: at most this many pairs per step index (one agent) in a tree (None: no cap).
    ``require_outcome``: rStar-Math's first filter, the positive must lead to a correct final answer and the
    negative to a wrong one: a terminal graded +1 at or below the positive, one graded -1 at or below the
    negative, among the written nodes. ``min_edit_distance``: rStar-Math's second, the two messages' texts
    at least this many characters apart (Levenshtein; 0: off).
    """

    min_gap: float = 0.0
    weighted: bool = False
    per_step_cap: int | None = None
    require_outcome: bool = False
    min_edit_distance: int = 0

    def full(self, taken: int) -> bool:
        return self.per_step_cap is not None and taken >= self.per_step_cap

    def keeps(self, pos: TreeStep, neg: TreeStep) -> bool:
        """The rStar-Math filters (both off in the paper's rule)."""
        if self.require_outcome and not (reaches(pos, correct=True) and reaches(neg, correct=False)):
            return False
        return edit_distance_at_least(pos.text, neg.text, self.min_edit_distance)


PAPER_RULE = PairRule()


def reaches(node: TreeStep, correct: bool) -> bool:
    """Whether a written terminal at or below ``node`` is graded correct (value > 0) or wrong (value < 0)."""
    if node.is_terminal:
        return node.value is not None and (node.value > 0 if correct else node.value < 0)
    return any(reaches(child, correct) for child in node.children)


def edit_distance_at_least(a: str, b: str, k: int) -> bool:
    """Levenshtein distance(a, b) >= k, by the row-by-row dynamic programme, stopped as soon as it is decided."""
    if k <= 0 or abs(len(a) - len(b)) >= k:   # the length difference is a lower bound
        return True
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
        if min(row) >= k:   # a row's minimum never decreases further down
            return True
    return row[-1] >= k


def ppm_pairs(tree: Tree, *, target_nodes: int, view: str, pos_topk: int, neg_topk: int,
              max_pairs: int, rule: PairRule = PAPER_RULE) -> list[dict]:
    """Preference pairs of one tree, at most ``max_pairs`` (root-window filter applied by the caller).

    Prefixes are visited depth-first in stored order. In fixed-depth mode only
    prefixes at depth < N-1 are used and depth N-2 is the final step; in
    variable-depth mode a prefix whose children are all terminal is a final
    step. At a final step only terminal children compete.
    """
    fixed = target_nodes > 0
    out: list[dict] = []
    seen: set[bytes] = set()  # the same pair can recur under siblings with equal texts
    per_step: Counter[int] = Counter()
    stack: list[tuple[TreeStep, list[TreeStep]]] = [(tree.root, [])]
    while stack and len(out) < max_pairs:
        node, prefix = stack.pop()
        depth = len(prefix)
        if fixed and depth >= target_nodes - 1:
            continue
        for child in reversed(node.children):
            stack.append((child, prefix + [child]))
        if not node.children:
            continue
        final = depth == target_nodes - 2 if fixed else all(c.is_terminal for c in node.children)
        children = [c for c in node.children if c.is_terminal] if final else node.children
        cands = unique_candidates(children)
        if len(cands) < 2 or not all(s.text for s in prefix):
            continue
        k_pos, k_neg = split_sizes(len(cands), pos_topk, neg_topk)
        negatives, positives = cands[:k_neg], cands[::-1][:k_pos]
        for pos in positives:
            for neg in negatives:
                if len(out) >= max_pairs or rule.full(per_step[depth]):
                    break
                if (pos.value <= neg.value + MIN_MARGIN or pos.value - neg.value < rule.min_gap
                        or pos.text == neg.text or not rule.keeps(pos, neg)):
                    continue
                rec = _pair_record(tree, node, prefix, pos, neg, depth, target_nodes, final, view)
                key = dedupe_key([rec["prompt"], rec["chosen_actions"], rec["rejected_actions"]])
                if key in seen:
                    continue
                seen.add(key)
                if rule.weighted:
                    rec["weight"] = 1.0 / (k_pos * k_neg)
                out.append(rec)
                per_step[depth] += 1
    return out


def _pair_record(tree: Tree, node: TreeStep, prefix: list[TreeStep], pos: TreeStep, neg: TreeStep, depth: int,
                 target_nodes: int, final: bool, view: str) -> dict:
    meta = {"step_index": depth, "shared_prefix_len": depth, "target_nodes": meta_target(target_nodes),
            "parent_visits": node.visits, "pos_q": pos.value, "neg_q": neg.value,
            "q_gap": pos.value - neg.value, "final_step_only_terminal": final}
    if view == "full":
        steps = [s.text for s in prefix]
        return {"prompt": tree.question, "chosen_actions": steps + [pos.text],
                "rejected_actions": steps + [neg.text], "meta": meta}
    # Local: every child of a node is the same agent's output, so they share one inbox.
    return {"prompt": pos.inbox, "chosen_actions": [pos.text], "rejected_actions": [neg.text],
            "meta": {"agent_idx": pos.agent, **meta, "view": "local"}}


def ppm_texts(record: dict, sep: str = DEFAULT_SEPARATOR) -> tuple[str, str]:
    """The two texts a scorer compares for one PPM record: (pos_text, neg_text).

    The pair differs at the last index where chosen and rejected differ; both
    texts share the steps before it, so training sees the same layout as
    inference (``prompt + step + SEP + ...``).
    """
    chosen, rejected = record["chosen_actions"], record["rejected_actions"]
    if len(chosen) != len(rejected):
        raise ValueError(f"chosen_actions has {len(chosen)} steps but rejected_actions has {len(rejected)}")
    differ = [i for i, (c, r) in enumerate(zip(chosen, rejected)) if c != r]
    if not differ:
        raise ValueError("chosen_actions and rejected_actions are identical")
    i = differ[-1]
    prefix = list(chosen[:i])
    return (join_steps(record["prompt"], prefix + [chosen[i]], sep),
            join_steps(record["prompt"], prefix + [rejected[i]], sep))
