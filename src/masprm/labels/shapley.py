"""``--labels shapley``: each agent's Shapley credit for its transcript's outcome, split to its messages.

After the Shapley-credit view of multi-agent PRMs ("system evaluation to agent
credit to response-level signals": signed, credit-conserving per-message
rewards). The game of one graded transcript: the players are the agents that
spoke in it; a coalition S is worth v(S), the outcome of the transcript
replayed with the messages of the agents in S kept and every other agent's
message replaced by a fresh sample from the same state (its turn in the
replay; ``masprm.search.rollouts``), averaged over ``--shapley-samples``
replays. v(all) is the transcript's own graded outcome (nothing is
replaced), v(none) the baseline, a fresh run of the team. An agent's credit is
its Shapley value, exact over all 2^n coalitions for n <= 6 agents
(``EXACT_MAX_AGENTS``) and estimated from ``--shapley-permutations`` random
orders beyond; either way the table of coalition values is computed once,
so the credits sum exactly to v(all) - v(none) (efficiency holds for the
exact formula and for every sampled order, whose marginal contributions
telescope). An agent with several messages shares its credit equally among
them. The label of a message is its credit halved (an outcome lies in
[-1, 1], so a credit lies in [-2, 2]); the record's meta keeps the credits,
v(all) and the baseline.

The fresh samples come from a policy (``LabelContext.rollouts``, anything
with the ``Replayer`` method below; stage 2 builds one from ``--rollout-policy``); without one the scheme
stops in one line.
Pure Python.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from masprm.config import arg, require_each
from masprm.labels.rollouts import source
from masprm.labels.scheme import LabelContext, LabelScheme, step_records
from masprm.tree_schema import TreeStep, Tree

EXACT_MAX_AGENTS = 6


class Replayer(Protocol):
    def replay(self, question: str, messages: Sequence[tuple[int, str]],
               keeps: Sequence[frozenset[int]]) -> list[float]:
        """The outcome of the transcript replayed once per entry of ``keeps`` (kept agents' messages kept)."""


@dataclass
class ShapleySettings:
    shapley_samples: int = arg(1, help="shapley: replays averaged per coalition (default 1)")
    shapley_permutations: int = arg(64, help="shapley: random agent orders for teams of more than "
                                             f"{EXACT_MAX_AGENTS} agents (default 64; exact below)")
    shapley_seed: int = arg(0, help="shapley: seed of the sampled agent orders (default 0)")

    def __post_init__(self) -> None:
        require_each(self, ("shapley_samples", "shapley_permutations"), lambda v: v >= 1, "must be at least 1")


def coalitions(players: Sequence[int], orders: Sequence[Sequence[int]] | None) -> list[frozenset[int]]:
    """The coalitions whose values the credits need: all subsets, or every prefix of the sampled orders."""
    if orders is None:
        return [frozenset(c) for r in range(len(players) + 1) for c in itertools.combinations(players, r)]
    found = {frozenset()}
    for order in orders:
        found.update(frozenset(order[:i]) for i in range(1, len(order) + 1))
    return sorted(found, key=lambda c: (len(c), sorted(c)))


def sample_orders(players: Sequence[int], n: int, rng: random.Random) -> list[list[int]]:
    orders = []
    for _ in range(n):
        order = list(players)
        rng.shuffle(order)
        orders.append(order)
    return orders


def shapley_values(players: Sequence[int], value: Callable[[frozenset[int]], float],
                   orders: Sequence[Sequence[int]] | None = None) -> dict[int, float]:
    """Each player's Shapley value: exact (orders None), or the mean marginal contribution over ``orders``."""
    n = len(players)
    credit = dict.fromkeys(players, 0.0)
    if orders is None:
        for i in players:
            others = [p for p in players if p != i]
            for r in range(n):
                weight = math.factorial(r) * math.factorial(n - r - 1) / math.factorial(n)
                for c in itertools.combinations(others, r):
                    s = frozenset(c)
                    credit[i] += weight * (value(s | {i}) - value(s))
        return credit
    for order in orders:
        before: frozenset[int] = frozenset()
        for i in order:
            credit[i] += (value(before | {i}) - value(before)) / len(orders)
            before = before | {i}
    return credit


def message_credits(agents: Sequence[int], credit: dict[int, float]) -> list[float]:
    """Each message's share: its agent's credit split equally among the agent's messages."""
    count = Counter(agents)
    return [credit[a] / count[a] for a in agents]


def transcript_credits(replayer: Replayer, question: str, messages: Sequence[tuple[int, str]], outcome: float,
                       settings: ShapleySettings, rng: random.Random) -> tuple[list[float], float]:
    """(the credit of every message, the baseline v(none)) of one graded transcript."""
    players = sorted({a for a, _ in messages})
    orders = None if len(players) <= EXACT_MAX_AGENTS else sample_orders(players, settings.shapley_permutations,
                                                                         rng)
    full = frozenset(players)
    needed = [c for c in coalitions(players, orders) if c != full]
    outcomes = replayer.replay(question, messages, [c for c in needed for _ in range(settings.shapley_samples)])
    k = settings.shapley_samples
    table = {c: sum(outcomes[j * k:(j + 1) * k]) / k for j, c in enumerate(needed)}
    table[full] = outcome
    credit = shapley_values(players, table.__getitem__, orders)
    return message_credits([a for a, _ in messages], credit), table[frozenset()]


def shapley_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    replayer = source(ctx, "shapley", "replays of its transcripts")
    rng = random.Random(f"{ctx.settings.shapley_seed}:{tree.name}")
    found: list[dict] = []

    def label(root: TreeStep, path: list[TreeStep]) -> list[float]:
        messages = [(s.agent, s.text) for s in path]
        credits, baseline = transcript_credits(replayer, tree.question, messages, path[-1].value, ctx.settings,
                                               rng)
        ctx.notes["transcripts"] += 1
        found.append({"shapley_credits": credits, "baseline": baseline, "outcome": path[-1].value})
        return [c / 2 for c in credits]

    records = step_records(tree, ctx, label)
    if ctx.options.view == "full":   # one record per transcript: it carries the credits it was labelled with
        for rec, meta in zip(records, found):
            rec["meta"] = meta
    return records


SCHEME = LabelScheme(
    "shapley", "steps", shapley_records, settings=ShapleySettings, needs_rollouts=True,
    source="Shapley credit over agents (signed, credit-conserving), messages replaced by fresh policy samples")
