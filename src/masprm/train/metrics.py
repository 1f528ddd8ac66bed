"""Evaluation metrics of the scorer objectives (SPEC §7). Pure numpy.

The objectives hand over fixed-width prediction rows (see objectives.py):
ppm rows are ``[r_pos, r_neg, pos_has_sep, neg_has_sep]`` (logits); prm/orm
rows are tanh(logit) per labelled separator with ``PAD`` where there is none.
"""

from __future__ import annotations

import numpy as np

PAD = -100.0  # the value transformers also uses to pad predictions across batches


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free


def pair_metrics(preds: np.ndarray) -> dict[str, float]:
    preds = np.asarray(preds, dtype=np.float64).reshape(-1, 4)
    r_pos, r_neg, pos_sep, neg_sep = preds.T
    margin = r_pos - r_neg
    return {
        "pair_accuracy": float(np.mean(margin > 0)),
        "margin_mean": float(np.mean(margin)),
        "margin_median": float(np.median(margin)),
        "margin_std": float(np.std(margin)),
        "sigmoid_margin_mean": float(np.mean(_sigmoid(margin))),
        "pos_score_mean": float(np.mean(np.tanh(r_pos))),
        "neg_score_mean": float(np.mean(np.tanh(r_neg))),
        "no_separator_rate": float(np.mean(np.concatenate([pos_sep, neg_sep]) < 0.5)),
        "pair_count": float(len(margin)),
    }


def regression_metrics(preds: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    """Value predictions in [-1, 1] against labels; PAD entries are ignored."""
    preds = np.asarray(preds, dtype=np.float64).ravel()
    targets = np.asarray(targets, dtype=np.float64).ravel()
    keep = (targets != PAD) & (preds != PAD)
    p, y = preds[keep], targets[keep]
    if len(y) == 0:
        return {"count": 0.0}
    err = p - y
    mse = float(np.mean(err ** 2))
    var_y = float(np.var(y))
    # Undefined correlations (constant predictions or labels) count as 0, so
    # best-model selection by pearson never compares against NaN.
    pearson = float(np.corrcoef(p, y)[0, 1]) if np.std(p) > 0 and np.std(y) > 0 else 0.0
    return {
        "rmse": mse ** 0.5,
        "pearson": pearson,
        "r2": 1.0 - mse / var_y if var_y > 0 else 0.0,
        "explained_variance": 1.0 - float(np.var(err)) / var_y if var_y > 0 else 0.0,
        "mae": float(np.mean(np.abs(err))),
        "mse": mse,
        "bias": float(np.mean(err)),
        "count": float(len(y)),
    }
