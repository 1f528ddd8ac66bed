"""The dataset ``toy_deep`` (``--dataset toy_deep``): the deep toy world's splits, the test split sized by power.

Splits (`masprm.worlds.toy_deep.task.deep_world`, by a hash of each question): ``sft`` (the policy's training
transcripts, 24,000), ``dev`` (design, thresholds, calibration: 300), ``train`` (search trees: 400) and
``test`` (the confirmatory split, never looked at before the pre-registration). The test split holds
as many questions N as the primary comparison (the MASPRM against the ORM under MCTS, each trained at
``LAB_SEEDS`` training seeds) needs for its minimum detectable effect at 80% power to be at most
``TARGET_MDE`` (two-sided, level 0.05), by the rule of `powered_size`, from the two variance
components the dev pilot measures (``DEV_POWER``: `make lab-pilot WORLD=toy_deep`, then
`python -m masprm.lab.power`; docs/scorer_lab.md, "The lab on toy_deep").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

from masprm.data import LoadedData, register_dataset
from masprm.paired_stats import mde
from masprm.worlds.toy_deep.task import K, deep_world

TARGET_MDE = 0.025
LAB_SEEDS = 3                   # training seeds of the confirmatory lab (masprm.lab.rows.TRAIN_SEEDS)
FLOOR, CAP = 300, 3_000         # the test split's least and most questions
# (sd_q, tau2) measured by the dev pilot (`make lab-pilot WORLD=toy_deep`, then `masprm.lab.power`:
# 300 dev questions, training seeds 7 42 99; docs/toy_world.md); the test split was empty until then.
DEV_POWER: tuple[float, float] | None = (0.12416283101159703, 0.00012946722270393767)


@dataclass(frozen=True)
class PowerPlan:
    n: int               # test questions
    mde: float           # the primary comparison's MDE at n questions and LAB_SEEDS training seeds
    reached: bool        # mde <= the target (False: the cap, and the MDE the cap achieves)


def two_level_se(sd_q: float, tau2: float, n: int, n_seeds: int = LAB_SEEDS) -> float:
    """The standard error of the mean difference over n questions and n_seeds training seeds:
    sqrt(sd_q^2 / n + tau2 / n_seeds) (the questions' spread, and the training seeds' beyond it)."""
    return math.sqrt(sd_q ** 2 / n + tau2 / n_seeds)


def power_plan(sd_q: float, tau2: float = 0.0, n_seeds: int = LAB_SEEDS, target: float = TARGET_MDE, *,
               alpha: float = 0.05, power: float = 0.80) -> PowerPlan:
    """The test split's size by the pre-registered rule: SE* = target / (z_{1-alpha/2} + z_power); where
    SE*^2 > tau2 / n_seeds, N = ceil(sd_q^2 / (SE*^2 - tau2 / n_seeds)) within [FLOOR, CAP]; otherwise no N
    reaches the target and N = CAP. The MDE is (z_{1-alpha/2} + z_power) x `two_level_se` at N."""
    nd = NormalDist()
    se_target = target / (nd.inv_cdf(1 - alpha / 2) + nd.inv_cdf(power))
    room = se_target ** 2 - tau2 / n_seeds
    n = CAP if room <= 0 else min(CAP, max(FLOOR, math.ceil(sd_q ** 2 / room)))
    at = mde(two_level_se(sd_q, tau2, n, n_seeds), alpha=alpha, power=power)
    return PowerPlan(n, at, at <= target + 1e-12)


def powered_size(sd_q: float, tau2: float = 0.0, n_seeds: int = LAB_SEEDS, target: float = TARGET_MDE) -> int:
    """The test questions of `power_plan`."""
    return power_plan(sd_q, tau2, n_seeds, target).n


TOY_DEEP = deep_world(K, 0 if DEV_POWER is None else powered_size(*DEV_POWER))


@register_dataset("toy_deep")
def load_toy_deep(split: str, *, n: int | None = None, seed: int = 42,
                  data_file: str | Path | None = None) -> LoadedData:
    """``--dataset toy_deep``: the generated split (or a local file in GSM8K's schema), in seeded order."""
    return TOY_DEEP.load(split, n=n, seed=seed, data_file=data_file)
