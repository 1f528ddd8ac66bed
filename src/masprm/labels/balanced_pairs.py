"""``--labels balanced_pairs``: the paper's pairs with a cap per agent, so every agent is represented.

The paper's miner stops at ``--ppm-max-pairs`` per tree, and the prefixes
where sibling values differ most fill it (on the toy trees, mostly the
Solver's step). Here each step index (one agent of the team) takes at most
``--per-agent-cap`` pairs per tree, and the miner goes on to the other
agents' prefixes instead. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from masprm.config import arg
from masprm.errors import ConfigError
from masprm.labels.pairs import PairRule
from masprm.labels.scheme import LabelContext, LabelScheme, mined_pairs
from masprm.tree_schema import Tree


@dataclass
class BalancedPairsSettings:
    per_agent_cap: int = arg(2, help="balanced_pairs: at most this many pairs per agent (step index) per tree "
                                     "(default 2: the demo's 8 pairs per tree over its 4 agents)")

    def __post_init__(self) -> None:
        if self.per_agent_cap < 1:
            raise ConfigError(f"per_agent_cap must be at least 1, got {self.per_agent_cap}", setting="per_agent_cap")


def balanced_pair_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    return mined_pairs(tree, ctx, PairRule(per_step_cap=ctx.settings.per_agent_cap))


SCHEME = LabelScheme(
    "balanced_pairs", "pairs", balanced_pair_records, settings=BalancedPairsSettings,
    source="the paper's pairs, capped per agent so early agents' messages reach the training signal")
