"""``--labels margin_pairs``: rStar-Math's pair rule, a minimum value margin and a weight per pair.

The paper's miner, keeping a pair only when the chosen step's value exceeds
the rejected one's by at least ``--pair-margin``, and weighting each pair by
1 / (n_pos * n_neg) of its prefix (the sizes of the prefix's positive and
negative groups), so every prefix weighs at most 1 in the weighted
Bradley-Terry loss (``--mode ppm`` reads the ``weight`` field).

rStar-Math's two further filters are options, off by default so the records
stay as they were: ``--pair-require-outcome`` (the positive leads to a correct
final answer, the negative to a wrong one) and ``--pair-min-edit-distance N``
(the two messages at least N characters apart; rStar-Math's value is 20).
Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from masprm.config import arg
from masprm.errors import ConfigError
from masprm.labels.pairs import PairRule
from masprm.labels.scheme import LabelContext, LabelScheme, mined_pairs
from masprm.tree_schema import Tree


@dataclass
class MarginPairsSettings:
    pair_margin: float = arg(0.5, help="margin_pairs: keep a pair only when the chosen step's value exceeds the "
                                       "rejected one's by at least this (default 0.5, a quarter of the range)")

    pair_require_outcome: bool = arg(False, help="margin_pairs: rStar-Math's outcome filter, keep a pair only when a "
                                                 "correct terminal lies below the chosen step and a wrong one below "
                                                 "the rejected step (default off)")
    pair_min_edit_distance: int = arg(0, help="margin_pairs: rStar-Math's edit-distance filter, keep a pair only "
                                              "when the two messages are at least this many characters apart "
                                              "(Levenshtein; rStar-Math uses 20; default 0: off)")

    def __post_init__(self) -> None:
        if not 0.0 <= self.pair_margin <= 2.0:
            raise ConfigError(f"pair_margin must be in [0, 2], got {self.pair_margin}", setting="pair_margin")
        if self.pair_min_edit_distance < 0:
            raise ConfigError(f"pair_min_edit_distance must be at least 0, got {self.pair_min_edit_distance}",
                              setting="pair_min_edit_distance")


def margin_pair_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    s = ctx.settings
    return mined_pairs(tree, ctx, PairRule(min_gap=s.pair_margin, weighted=True, require_outcome=s.pair_require_outcome,
                                           min_edit_distance=s.pair_min_edit_distance))


SCHEME = LabelScheme(
    "margin_pairs", "pairs", margin_pair_records, settings=MarginPairsSettings,
    source="rStar-Math (Guan et al., 2025): pairs with a clear value margin, weighted 1/(n_pos n_neg) per prefix")
