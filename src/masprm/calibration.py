"""Platt scaling of a scorer's read-out (``--calibrate``, docs/scorer_lab.md "Read-out and calibration").

A served value v in [-1, 1] is read as the probability p = (v + 1) / 2 that the step is right; its logit
z = logit(p) = 2 atanh(v) is the head's logit for a BCE-trained scorer (served tanh(z / 2)). Platt scaling
fits p' = sigmoid(a z + b) on a calibration split by Newton's method on the mean log loss plus
(L2 / 2)(a^2 + b^2), from (a, b) = (1, 0), the identity; the calibrated value is 2 p' - 1 = tanh((a z + b) / 2).
Fitting every scorer so makes its values probabilities of one kind, so one c_uct weighs exploration
against the same value scale whichever scorer guides the search. Pure Python: no torch import.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

PLATT_L2 = 1e-6          # fixed in docs/scorer_lab.md; keeps (a, b) finite on a split the scorer separates
Z_LIMIT = 2 * math.atanh(1 - 1e-7)   # a float32 value of exactly +-1 is read as this logit (about +-16.1)


def value_logit(value: float) -> float:
    """z = 2 atanh(v), the logit of (v + 1) / 2, clipped where v is +-1 (a saturated float32 value)."""
    if abs(value) >= 1:
        return math.copysign(Z_LIMIT, value)
    return max(-Z_LIMIT, min(Z_LIMIT, 2 * math.atanh(value)))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


def platt_loss(z: Sequence[float], t: Sequence[float], a: float, b: float, l2: float = PLATT_L2) -> float:
    """Mean log loss of sigmoid(a z + b) against targets t in [0, 1], plus (l2 / 2)(a^2 + b^2)."""
    total = 0.0
    for zi, ti in zip(z, t):
        s = a * zi + b   # -log sigmoid(s) = softplus(-s), written without overflow
        total += ti * _softplus(-s) + (1 - ti) * _softplus(s)
    return total / len(z) + l2 / 2 * (a * a + b * b)


def _softplus(x: float) -> float:
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


def newton_step(z: Sequence[float], t: Sequence[float], a: float, b: float,
                l2: float = PLATT_L2) -> tuple[float, float]:
    """One full Newton step on platt_loss: (a, b) - H^-1 g, the gradient and Hessian of the mean loss."""
    n = len(z)
    ga = gb = haa = hab = hbb = 0.0
    for zi, ti in zip(z, t):
        p = _sigmoid(a * zi + b)
        w = p * (1 - p)
        ga += (p - ti) * zi
        gb += p - ti
        haa += w * zi * zi
        hab += w * zi
        hbb += w
    ga, gb = ga / n + l2 * a, gb / n + l2 * b
    haa, hab, hbb = haa / n + l2, hab / n, hbb / n + l2
    det = haa * hbb - hab * hab
    return a - (hbb * ga - hab * gb) / det, b - (haa * gb - hab * ga) / det


def fit_platt(z: Sequence[float], t: Sequence[float], l2: float = PLATT_L2, max_steps: int = 100,
              tol: float = 1e-12) -> tuple[float, float]:
    """(a, b) minimising platt_loss, by Newton steps halved while they do not lower the loss."""
    z, t = list(map(float, z)), list(map(float, t))
    if len(z) != len(t) or not z:
        raise ValueError(f"Platt scaling needs matching, non-empty logits and targets, got {len(z)} and {len(t)}")
    a, b = 1.0, 0.0
    loss = platt_loss(z, t, a, b, l2)
    for _ in range(max_steps):
        na, nb = newton_step(z, t, a, b, l2)
        step = 1.0
        while True:
            ca, cb = a + step * (na - a), b + step * (nb - b)
            new = platt_loss(z, t, ca, cb, l2)
            if new <= loss or step < 1e-10:
                break
            step /= 2
        done = loss - new <= tol
        a, b, loss = ca, cb, min(loss, new)
        if done:
            break
    return a, b


def calibrated_value(value: float, a: float, b: float) -> float:
    """The served value after Platt scaling: tanh((a z + b) / 2), z = value_logit(value)."""
    return math.tanh((a * value_logit(value) + b) / 2)


def unfittable(targets: Sequence[float]) -> str | None:
    """Why no Platt scaling can be fitted on these targets (None: it can): a split whose targets are all one
    value (every held-out step right, or every one wrong) leaves the slope unidentified, and the fit would
    send every value towards that one label."""
    if not targets:
        return "the held-out split has no labelled step"
    if len(set(targets)) == 1:
        label = {1.0: "right", 0.0: "wrong"}.get(float(targets[0]), f"at {targets[0]:g}")
        return f"the held-out split's {len(targets)} labels are all one class (every one {label})"
    return None


def fit_from_values(values: Iterable[float], targets: Iterable[float]) -> dict[str, float]:
    """The ``platt`` record of masprm_scorer.json from served values and their [0, 1] targets."""
    values, targets = list(values), list(targets)
    a, b = fit_platt([value_logit(v) for v in values], targets)
    return {"a": a, "b": b, "n": len(values), "l2": PLATT_L2}
