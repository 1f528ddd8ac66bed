"""Stage 3: scorer training (the pieces live in the submodules; this package only re-exports).

    config.py      TrainConfig: every flag of src/train/trainer.py, its default and help
    objectives.py  the registry of objectives (--mode): pairwise.py (ppm), stepwise.py (prm, orm)
    trainer.py     train_scorer(cfg): records -> examples -> LoRA scorer -> the output folder
"""

from masprm.scorer_meta import SCORER_META_FILE
from masprm.train.config import DEFAULT_BASE_MODEL, TrainConfig
from masprm.train.objectives import LOSSES, MODES, OBJECTIVES
from masprm.train.trainer import TrainResult, train_scorer

__all__ = ["DEFAULT_BASE_MODEL", "LOSSES", "MODES", "OBJECTIVES", "SCORER_META_FILE", "TrainConfig", "TrainResult",
           "train_scorer"]
