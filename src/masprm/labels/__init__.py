"""Stage 2: training labels from the stage-1 trees (outcome-only, but for the toy worlds' supervised row,
``step_truth``, whose labels are the world's step truth: the ceiling the others are measured against).

    mining.py   the paper's records: PRM samples (every step's Monte Carlo value) and the preprocessor
    pairs.py    the paper's Bradley-Terry pair miner (best vs worst siblings) and the PairRule variants change
    scheme.py   LabelScheme, the LABEL_SCHEMES registry and the runner of ``--labels NAME``

The label schemes, one module each, registered here and nowhere else:
"""

from masprm.labels.scheme import LABEL_SCHEMES, LabelScheme

LABEL_SCHEMES.register_lazy("masprm", "masprm.labels.paper_pairs:SCHEME")
LABEL_SCHEMES.register_lazy("mc", "masprm.labels.mc:SCHEME")
LABEL_SCHEMES.register_lazy("first_error", "masprm.labels.first_error:SCHEME")
LABEL_SCHEMES.register_lazy("advantage", "masprm.labels.advantage:SCHEME")
LABEL_SCHEMES.register_lazy("margin_pairs", "masprm.labels.margin_pairs:SCHEME")
LABEL_SCHEMES.register_lazy("balanced_pairs", "masprm.labels.balanced_pairs:SCHEME")
LABEL_SCHEMES.register_lazy("majority_outcome", "masprm.labels.majority_outcome:SCHEME")
LABEL_SCHEMES.register_lazy("self_consistency", "masprm.labels.majority_outcome:OLD_NAME")   # the old name
LABEL_SCHEMES.register_lazy("shapley", "masprm.labels.shapley:SCHEME")
LABEL_SCHEMES.register_lazy("mc_rollouts", "masprm.labels.mc_rollouts:SCHEME")
LABEL_SCHEMES.register_lazy("first_error_search", "masprm.labels.first_error_search:SCHEME")
LABEL_SCHEMES.register_lazy("step_consistency", "masprm.labels.step_consistency:SCHEME")
LABEL_SCHEMES.register_lazy("mc_rollouts_uniform", "masprm.labels.mc_budget:UNIFORM")
LABEL_SCHEMES.register_lazy("mc_rollouts_active", "masprm.labels.mc_budget:ACTIVE")
# the supervised row: the toy worlds' step truth (it lives with them; refused for any other trees)
LABEL_SCHEMES.register_lazy("step_truth", "masprm.worlds.step_truth:SCHEME")

__all__ = ["LABEL_SCHEMES", "LabelScheme"]
