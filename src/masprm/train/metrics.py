"""Evaluation metrics of the scorer objectives. Pure numpy.

Names and values are the original trainer's, so scripts that read
trainer_state.json or TensorBoard keep working. The objectives hand over
fixed-width prediction rows (see objectives.py): ppm rows are
``[r_pos, r_neg, pos_has_sep, neg_has_sep]`` (raw logits); prm/orm rows are
tanh(logit) per labelled separator with ``PAD`` where there is none.

The pair rows also give tie and saturation figures (the original's newer branch):
tanh in float32 is exactly 1.0 from |z| >= 9.011 and takes only a handful of
values on [8, 9.011), so two different logits can become one value. ``tanh_pair_acc``
and ``tanh_tie_rate`` compare float32 tanh values (torch's kernel, the one a
float32 scorer applies), the ``raw_score_abs_*`` figures say how many logits are there.
"""

from __future__ import annotations

import numpy as np

PAD = -100.0  # the value transformers also uses to pad predictions across batches
TANH32_SATURATION = 9.011   # |logit| from which float32 tanh is exactly +-1.0


def _tanh32(x: np.ndarray) -> np.ndarray:
    import torch   # numpy's float32 tanh rounds differently; the scorer's values came from torch's

    return torch.tanh(torch.from_numpy(np.asarray(x, dtype=np.float32))).numpy()


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free


def pair_metrics(preds: np.ndarray) -> dict[str, float]:
    preds = np.asarray(preds, dtype=np.float64).reshape(-1, 4)
    r_pos, r_neg, pos_found, neg_found = preds.T
    margin = r_pos - r_neg
    out: dict[str, float] = {}
    if margin.size:
        out.update(pair_acc=float(np.mean(margin > 0)), avg_margin=float(np.mean(margin)),
                   median_margin=float(np.median(margin)), std_margin=float(np.std(margin)),
                   avg_bt_prob=float(np.mean(_sigmoid(margin))),
                   pos_mean=float(np.mean(r_pos)), neg_mean=float(np.mean(r_neg)),
                   # "fallback": no separator survived, so the score was read at the last token
                   fallback_rate_pos=float(np.mean(1.0 - pos_found)),
                   fallback_rate_neg=float(np.mean(1.0 - neg_found)),
                   fallback_rate_any=float(np.mean((pos_found < 0.5) | (neg_found < 0.5))))
        t_pos, t_neg = _tanh32(r_pos), _tanh32(r_neg)
        raw = np.abs(np.concatenate([r_pos, r_neg]))
        out.update(tanh_pair_acc=float(np.mean(t_pos > t_neg)), tanh_tie_rate=float(np.mean(t_pos == t_neg)),
                   raw_score_abs_p95=float(np.quantile(raw, 0.95)), raw_score_abs_max=float(raw.max()),
                   raw_score_abs_ge_9p011_rate=float(np.mean(raw >= TANH32_SATURATION)))
    out["num_pairs"] = int(margin.size)
    return out


def regression_metrics(preds: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    """Value predictions in [-1, 1] against labels; PAD entries are ignored."""
    preds = np.asarray(preds, dtype=np.float64).ravel()
    targets = np.asarray(targets, dtype=np.float64).ravel()
    keep = (targets != PAD) & (preds != PAD)
    p, y = preds[keep], targets[keep]
    if len(y) == 0:
        return dict.fromkeys(("rmse", "pearson", "r2", "explained_variance", "mae", "mse", "bias"), 0.0)
    err = p - y
    mse = float(np.mean(err ** 2))
    ss_res, ss_tot = float(np.sum(err ** 2)), float(np.sum((y - y.mean()) ** 2))
    if len(y) < 2:
        r2 = explained = 0.0
    elif ss_tot <= 1e-12:  # constant labels: perfect or nothing, as the original scores it
        r2 = explained = 1.0 if ss_res <= 1e-12 else 0.0
    else:
        r2 = 1.0 - ss_res / ss_tot
        explained = 1.0 - float(np.var(err)) / float(np.var(y))
    # An undefined correlation (constant predictions or labels) counts as 0, so
    # best-model selection by pearson never compares against NaN.
    pearson = float(np.corrcoef(p, y)[0, 1]) if np.std(p) > 0 and np.std(y) > 0 else 0.0
    return {"rmse": mse ** 0.5, "pearson": pearson, "r2": r2, "explained_variance": explained,
            "mae": float(np.mean(np.abs(err))), "mse": mse, "bias": float(np.mean(err))}
