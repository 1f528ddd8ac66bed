"""The dataset ``toy_deep`` (``--dataset toy_deep``): the deep toy world's splits, the test split sized by power.

Splits (`masprm.toy.deep_task.deep_world`, by a hash of each question): ``sft`` (the policy's training
transcripts, 24,000), ``dev`` (design, thresholds, calibration: 300), ``train`` (search trees: 400) and
``test`` (the confirmatory split, never looked at before the pre-registration). The test split holds
as many questions as the primary comparison needs for its minimum detectable effect at 80% power to
be at most ``TARGET_MDE`` under MCTS (two-sided, level 0.05), given the standard deviation of the
per-question paired differences measured on the dev split (``DEV_PAIRED_SD``; how it was measured:
docs/toy_world.md, "toy_deep").
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist

from masprm.data import LoadedData, register_dataset
from masprm.toy.deep_task import K, deep_world

TARGET_MDE = 0.025
# The standard deviation of per-question paired differences on dev: None until it is measured there,
# and the test split is empty until then (nothing is ever run on it before the pre-registration).
DEV_PAIRED_SD: float | None = None


def powered_size(paired_sd: float, mde: float = TARGET_MDE, *, alpha: float = 0.05, power: float = 0.80) -> int:
    """Questions needed for a paired comparison's MDE (at `power`, two-sided `alpha`) to be at most `mde`.

    MDE = (z_{1-alpha/2} + z_power) x sd / sqrt(n)  (`masprm.paired_stats.mde`), so
    n = ceil(((z_{1-alpha/2} + z_power) x sd / mde)^2).
    """
    nd = NormalDist()
    z = nd.inv_cdf(1 - alpha / 2) + nd.inv_cdf(power)
    return math.ceil((z * paired_sd / mde) ** 2)


TOY_DEEP = deep_world(K, 0 if DEV_PAIRED_SD is None else powered_size(DEV_PAIRED_SD))


@register_dataset("toy_deep")
def load_toy_deep(split: str, *, n: int | None = None, seed: int = 42,
                  data_file: str | Path | None = None) -> LoadedData:
    """``--dataset toy_deep``: the generated split (or a local file in GSM8K's schema), in seeded order."""
    return TOY_DEEP.load(split, n=n, seed=seed, data_file=data_file)
