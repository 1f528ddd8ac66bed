"""``--labels masprm``: the paper's Bradley-Terry pairs (MASPRM; the rule of ``masprm.labels.pairs``).

At each prefix the best-valued children are preferred over the worst-valued
ones, strictly better only; the same records as ``--make-ppm`` writes
(ppm_pairs_<run>.jsonl), each with ``meta.label_scheme``. Pure Python.
"""

from __future__ import annotations

from masprm.labels.scheme import LabelScheme, mined_pairs

SCHEME = LabelScheme(
    "masprm", "pairs", mined_pairs,
    source="MASPRM (the paper): best vs worst sibling by Monte Carlo value, rStar-Math's pair construction")
