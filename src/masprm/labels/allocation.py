"""How a fixed budget of rollouts is shared among a tree's nodes (the budgeted Monte Carlo label schemes).

Two rules, both exact (the shares sum to the budget whenever there is a node)
and deterministic:

- ``even_split``: every node the same share, the remainder one rollout each to
  the first nodes in their order (the uniform baseline);
- ``ranked_split``: the nodes ranked by a score, highest first, ties to the
  node met first; each takes up to ``per_node`` rollouts in rank order, and a
  budget larger than ``per_node`` times the nodes goes round again (ActPRM's
  active estimation, the score being the ensemble heads' spread).

Pure Python.
"""

from __future__ import annotations

import math
from typing import Sequence


def even_split(n: int, budget: int) -> list[int]:
    """``budget`` rollouts over ``n`` nodes: budget // n each, one more for the first budget % n."""
    if n == 0:
        return []
    share, extra = divmod(budget, n)
    return [share + (i < extra) for i in range(n)]


def rank(scores: Sequence[float]) -> list[int]:
    """Node indices, highest score first; equal scores keep their order (a NaN score ranks last)."""
    return sorted(range(len(scores)), key=lambda i: (math.isnan(scores[i]), -scores[i] if not math.isnan(scores[i])
                                                     else 0.0, i))


def ranked_split(scores: Sequence[float], budget: int, per_node: int) -> list[int]:
    """``budget`` rollouts, ``per_node`` at a time, to the nodes in rank order (``rank``): full rounds over every
    node first, then what is left to the highest-ranked nodes, ``per_node`` each, the last one the remainder."""
    n = len(scores)
    if n == 0:
        return []
    rounds, left = divmod(budget, per_node * n)
    shares = [rounds * per_node] * n
    for i in rank(scores):
        take = min(per_node, left)
        shares[i] += take
        left -= take
    return shares
