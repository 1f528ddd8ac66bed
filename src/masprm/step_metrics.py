"""Error-localisation metrics in the manner of ProcessBench, for any dataset whose steps carry scores.

A transcript is a list of steps; its label is the index of its first wrong
step, or None when every step is right. A scorer gives each step a value
(higher = better). ProcessBench turns a scorer into an error locator with a
threshold: the first step whose value falls below it is the predicted first
error, and a transcript with no step below it is predicted error-free.

Two accuracies follow, one per kind of transcript, because a locator that
always says "no error" (or always blames step 0) must not look good:

- accuracy on erroneous transcripts: the predicted index equals the label;
- accuracy on correct transcripts: the prediction is "no error";

and the score is their harmonic mean (F1). The threshold is chosen where F1
is highest on a calibration set, then applied unchanged to the test set.

Separately, the AUC of step values against step correctness says how well
the values rank right steps above wrong ones, whatever the threshold, and
the expected calibration error says how far values read as probabilities
(after mapping them to [0, 1]) are from the share of right steps.

Pure Python: no torch import.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Sequence

Item = tuple[Sequence[float], int | None]   # (step values, first-error label)


def _check_values(values: Sequence[float]) -> None:
    if any(isinstance(v, float) and math.isnan(v) for v in values):
        raise ValueError("a step value is NaN")


# --------------------------------------------------------------------------- locating with a threshold


def predict_first_error(values: Sequence[float], threshold: float) -> int | None:
    """The index of the first step whose value is below ``threshold``; None when there is none."""
    return next((i for i, v in enumerate(values) if v < threshold), None)


def _f1(acc_erroneous: float, acc_correct: float) -> float:
    total = acc_erroneous + acc_correct
    return 2 * acc_erroneous * acc_correct / total if total > 0 else 0.0


def _scores(hits_erroneous: int, n_erroneous: int, hits_correct: int, n_correct: int) -> dict:
    # An empty class scores 0 (its n_ field says why) so the F1 stays defined.
    acc_erroneous = hits_erroneous / n_erroneous if n_erroneous else 0.0
    acc_correct = hits_correct / n_correct if n_correct else 0.0
    return {"acc_erroneous": acc_erroneous, "acc_correct": acc_correct, "f1": _f1(acc_erroneous, acc_correct),
            "n_erroneous": n_erroneous, "n_correct": n_correct}


def localisation_scores(items: Sequence[Item], threshold: float) -> dict:
    """ProcessBench's scores of one threshold over (values, first_error_label) items.

    Returns acc_erroneous (labelled transcripts whose predicted first error
    is the label), acc_correct (unlabelled ones predicted error-free), f1
    (their harmonic mean, 0 when both are 0), n_erroneous and n_correct.
    """
    return _localise(items, lambda values: predict_first_error(values, threshold))


def predict_first_error_by_step(values: Sequence[float], thresholds: Sequence[float]) -> int | None:
    """The first step i whose value is below ``thresholds[i]`` (the last threshold for later steps)."""
    return next((i for i, v in enumerate(values) if v < thresholds[min(i, len(thresholds) - 1)]), None)


def localisation_scores_by_step(items: Sequence[Item], thresholds: Sequence[float]) -> dict:
    """`localisation_scores` with one threshold per step position (per agent, in a team of fixed order)."""
    return _localise(items, lambda values: predict_first_error_by_step(values, thresholds))


def _localise(items: Sequence[Item], predict) -> dict:
    hits_erroneous = hits_correct = n_erroneous = 0
    for values, label in items:
        predicted = predict(values)
        if label is None:
            hits_correct += predicted is None
        else:
            n_erroneous += 1
            hits_erroneous += predicted == label
    return _scores(hits_erroneous, n_erroneous, hits_correct, len(items) - n_erroneous)


# --------------------------------------------------------------------------- choosing the threshold


def candidate_thresholds(items: Sequence[Item]) -> list[float]:
    """Ascending: one below the smallest step value, the midpoints between distinct values, one above the largest.

    Between two consecutive candidates no prediction changes, so these cover
    every distinct behaviour of a threshold.
    """
    values = sorted({v for step_values, _ in items for v in step_values})
    if not values:
        return []
    mids = [(a + b) / 2 for a, b in zip(values, values[1:])]
    return [values[0] - 1.0, *mids, values[-1] + 1.0]


def _hit_interval(values: Sequence[float], label: int | None) -> tuple[float, float] | None:
    """The thresholds t in (lo, hi] at which this transcript is located correctly; None when there are none.

    A correct transcript is predicted error-free iff t <= min(values). An
    erroneous one is predicted at its label L iff every earlier value is >= t
    and value L is < t.
    """
    if label is None:
        return (-math.inf, min(values, default=math.inf))
    if not 0 <= label < len(values):
        return None
    lo, hi = values[label], min(values[:label], default=math.inf)
    return (lo, hi) if lo < hi else None


def best_threshold(items: Sequence[Item]) -> float:
    """The candidate threshold with the highest F1 over the items; ties go to the smaller threshold.

    One sweep: each transcript is located correctly on an interval of
    thresholds (see ``_hit_interval``), so the hits of every candidate come
    from counting intervals, in O((transcripts + candidates) log candidates).
    """
    for values, _ in items:
        _check_values(values)
    candidates = candidate_thresholds(items)
    if not candidates:
        raise ValueError("best_threshold needs at least one step value")
    # +1 where a transcript starts counting, -1 past where it stops; per class.
    delta = {True: [0] * (len(candidates) + 1), False: [0] * (len(candidates) + 1)}
    n_erroneous = 0
    for values, label in items:
        n_erroneous += label is not None
        interval = _hit_interval(values, label)
        if interval is None:
            continue
        first, stop = bisect_right(candidates, interval[0]), bisect_right(candidates, interval[1])
        if first < stop:
            delta[label is None][first] += 1
            delta[label is None][stop] -= 1
    n_correct = len(items) - n_erroneous
    best, best_f1 = candidates[0], -1.0
    hits = {True: 0, False: 0}
    for i, threshold in enumerate(candidates):
        hits[True] += delta[True][i]
        hits[False] += delta[False][i]
        f1 = _scores(hits[False], n_erroneous, hits[True], n_correct)["f1"]
        if f1 > best_f1:   # strict: an equal F1 later (a larger threshold) does not replace it
            best, best_f1 = threshold, f1
    return best


def best_thresholds_by_step(items: Sequence[Item], rounds: int = 3, max_candidates: int = 64) -> list[float]:
    """One threshold per step position, chosen for F1 by coordinate ascent from `best_threshold`.

    A round visits the positions in order; at position k every candidate (the
    `candidate_thresholds` of the position-k values, at most ``max_candidates``
    of them evenly spaced by rank, the current one included) is tried with the
    other thresholds fixed, and the highest F1 wins (a tie keeps the current
    one; among equal gains the smaller threshold). The ascent stops after a round that changed nothing, or
    after ``rounds`` rounds. F1 never decreases, so the result is at least as
    good on the items as the single threshold it starts from.
    """
    n_steps = max((len(values) for values, _ in items), default=0)
    if not n_steps:
        raise ValueError("best_thresholds_by_step needs at least one step value")
    thresholds = [best_threshold(items)] * n_steps
    for _ in range(rounds):
        changed = False
        for k in range(n_steps):
            found = candidate_thresholds([(values[k:k + 1], None) for values, _ in items])
            step = max(1, math.ceil(len(found) / max_candidates))
            best, best_f1 = thresholds[k], localisation_scores_by_step(items, thresholds)["f1"]
            for t in found[::step]:
                f1 = localisation_scores_by_step(items, thresholds[:k] + [t] + thresholds[k + 1:])["f1"]
                if f1 > best_f1:   # ascending candidates: the smallest of equal gains; no gain keeps the current
                    best, best_f1 = t, f1
            changed |= best != thresholds[k]
            thresholds[k] = best
        if not changed:
            break
    return thresholds


# --------------------------------------------------------------------------- ranking quality


def auc(values: Sequence[float], labels: Sequence[int]) -> float | None:
    """ROC AUC of ``values`` against binary ``labels`` (1 = right step); None when a class is empty.

    Mann-Whitney: the chance that a random right step outranks a random wrong
    one, a tie counting one half. Computed from mid-ranks after one sort.
    """
    if len(values) != len(labels):
        raise ValueError(f"auc: {len(values)} values but {len(labels)} labels")
    _check_values(values)
    if any(label not in (0, 1) for label in labels):
        raise ValueError("auc: labels must be 0 or 1")
    n_pos = sum(1 for label in labels if label == 1)
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    order = sorted(range(len(values)), key=lambda i: values[i])
    rank_sum_pos = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mid_rank = (i + j) / 2 + 1          # ranks i+1..j+1 share their mean
        rank_sum_pos += mid_rank * sum(labels[order[k]] for k in range(i, j + 1))
        i = j + 1
    return (rank_sum_pos - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


# --------------------------------------------------------------------------- calibration

ECE_BINS = 10


def expected_calibration_error(probs: Sequence[float], labels: Sequence[int], bins: int = ECE_BINS) -> float | None:
    """Expected calibration error of probabilities in [0, 1] against binary labels; None for no values.

    ``bins`` equal-width bins over [0, 1] (a value p falls in bin min(floor(p * bins), bins - 1), so 1.0 is
    in the last); the ECE is the mean over bins of |mean probability - share of 1s|, weighted by the
    bin's share of the values.
    """
    if len(probs) != len(labels):
        raise ValueError(f"expected_calibration_error: {len(probs)} values but {len(labels)} labels")
    _check_values(probs)
    if any(not 0.0 <= p <= 1.0 for p in probs):
        raise ValueError("expected_calibration_error: probabilities must lie in [0, 1]")
    if not probs:
        return None
    # per bin: n_b / N * |mean p - mean y| = |sum p - sum y| / N
    gaps: dict[int, float] = {}
    for p, y in zip(probs, labels):
        b = min(int(p * bins), bins - 1)
        gaps[b] = gaps.get(b, 0.0) + p - y
    return sum(abs(gap) for gap in gaps.values()) / len(probs)
