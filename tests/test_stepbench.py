"""ProcessBench-style localisation metrics and AUC, on small sets computed by hand."""

import random

import pytest

from masprm.step_metrics import (auc, best_threshold, best_thresholds_by_step, candidate_thresholds, localisation_scores,
                                 localisation_scores_by_step, predict_first_error, predict_first_error_by_step)

# Five scored transcripts: (step values, first-error label). At threshold 0.5:
#   A: first value below 0.5 is step 2, label 2     -> hit
#   B: step 1 (0.4) is below first, label 2         -> miss
#   C: nothing below 0.5, label 1                   -> miss
#   D: nothing below, label None                    -> hit
#   E: step 1 (0.45) below, label None             -> miss
# acc_erroneous = 1/3 (A of A, B, C); acc_correct = 1/2 (D of D, E);
# F1 = 2 * (1/3) * (1/2) / (1/3 + 1/2) = (1/3) / (5/6) = 2/5.
FIVE = [
    ([0.9, 0.8, 0.2, 0.7], 2),
    ([0.9, 0.4, 0.3], 2),
    ([0.6, 0.7, 0.9], 1),
    ([0.9, 0.6, 0.8], None),
    ([0.7, 0.45, 0.9], None),
]


def test_predict_first_error():
    assert predict_first_error([0.9, 0.4, 0.3], 0.5) == 1
    assert predict_first_error([0.9, 0.5], 0.5) is None      # equal to the threshold is not below it
    assert predict_first_error([], 0.5) is None


def test_localisation_scores_by_hand():
    scores = localisation_scores(FIVE, 0.5)
    assert scores["acc_erroneous"] == pytest.approx(1 / 3)
    assert scores["acc_correct"] == pytest.approx(1 / 2)
    assert scores["f1"] == pytest.approx(2 / 5)
    assert (scores["n_erroneous"], scores["n_correct"]) == (3, 2)


def test_localisation_scores_with_an_empty_class():
    scores = localisation_scores([([0.9], None), ([0.8, 0.7], None)], 0.5)
    assert scores == {"acc_erroneous": 0.0, "acc_correct": 1.0, "f1": 0.0, "n_erroneous": 0, "n_correct": 2}
    assert localisation_scores([], 0.5)["f1"] == 0.0


# X: error at step 1, Y: correct, Z: error at step 0. Distinct values 0.2 0.3 0.7 0.8 0.9, so the candidates
# are -0.8, 0.25, 0.5, 0.75, 0.85, 1.9. F1 by candidate:
#   -0.8: all predicted error-free -> acc_err 0         -> 0
#   0.25: X hit (0.2), Z missed (0.3 not below), Y hit  -> acc_err 1/2, acc_cor 1 -> 2/3
#   0.5:  X hit, Z hit (0.3), Y hit                     -> 1
#   0.75: Y predicted at step 1 (0.7)                   -> acc_cor 0 -> 0
#   0.85, 1.9: Y flagged as well                        -> 0
THREE = [([0.9, 0.2], 1), ([0.8, 0.7], None), ([0.3, 0.9], 0)]


def test_candidate_thresholds():
    assert candidate_thresholds(THREE) == pytest.approx([-0.8, 0.25, 0.5, 0.75, 0.85, 1.9])
    assert candidate_thresholds([([], None)]) == []


def test_best_threshold_by_hand():
    assert best_threshold(THREE) == pytest.approx(0.5)
    assert localisation_scores(THREE, best_threshold(THREE))["f1"] == 1.0


def test_best_threshold_breaks_ties_towards_the_smaller_threshold():
    # candidates -0.8, 0.3, 0.5, 1.6; both 0.3 and 0.5 locate everything (F1 1)
    assert best_threshold([([0.6], None), ([0.2, 0.4], 0)]) == pytest.approx(0.3)


def test_best_threshold_needs_values():
    with pytest.raises(ValueError):
        best_threshold([])
    with pytest.raises(ValueError):
        best_threshold([([], None)])
    with pytest.raises(ValueError):
        best_threshold([([float("nan")], None)])


def test_best_threshold_matches_a_brute_force_search():
    rng = random.Random(7)
    for _ in range(200):
        items = []
        for _ in range(rng.randint(1, 8)):
            values = [round(rng.random(), 1) for _ in range(rng.randint(0, 4))]
            label = rng.choice([None] + list(range(len(values) + 1)))   # len(values): never reachable
            items.append((values, label))
        candidates = candidate_thresholds(items)
        if not candidates:
            continue
        f1s = [localisation_scores(items, t)["f1"] for t in candidates]
        expected = candidates[f1s.index(max(f1s))]   # the first (smallest) of the best
        assert best_threshold(items) == expected


def test_auc_by_hand():
    # right steps 0.4 and 0.8, wrong steps 0.1 and 0.4. Pairs (right, wrong):
    # (0.4, 0.1) 1, (0.4, 0.4) tie 1/2, (0.8, 0.1) 1, (0.8, 0.4) 1 -> 3.5 / 4 = 0.875
    assert auc([0.1, 0.4, 0.4, 0.8], [0, 1, 0, 1]) == pytest.approx(0.875)
    assert auc([0.1, 0.2, 0.3], [0, 1, 1]) == 1.0
    assert auc([0.1, 0.2, 0.3], [1, 0, 0]) == 0.0
    assert auc([0.5, 0.5], [1, 0]) == 0.5
    assert auc([0.5, 0.7], [1, 1]) is None
    assert auc([], []) is None


def test_auc_matches_counting_pairs():
    rng = random.Random(3)
    for _ in range(100):
        n = rng.randint(2, 30)
        values = [rng.randint(0, 5) / 5 for _ in range(n)]
        labels = [rng.randint(0, 1) for _ in range(n)]
        pos = [v for v, y in zip(values, labels) if y]
        neg = [v for v, y in zip(values, labels) if not y]
        if not pos or not neg:
            assert auc(values, labels) is None
            continue
        pairs = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in pos for q in neg)
        assert auc(values, labels) == pytest.approx(pairs / (len(pos) * len(neg)))


def test_auc_rejects_bad_input():
    with pytest.raises(ValueError):
        auc([0.1, 0.2], [1])
    with pytest.raises(ValueError):
        auc([0.1, 0.2], [1, 2])


def test_per_step_thresholds_by_hand():
    # A correct transcript with a low Reader value, and an error whose Planner value (0.5) is above that
    # Reader value: one threshold cannot serve both. A needs t <= 0.2, B needs t in (0.5, 0.9].
    items = [([0.2, 0.9], None),   # A: correct
             ([0.9, 0.5], 1),      # B: wrong from step 1
             ([0.1, 0.9], 0),      # C: wrong from step 0
             ([0.8, 0.8], None)]   # D: correct
    # one threshold: (0.1, 0.2] finds A, C, D and misses B: acc 1/2 and 1, F1 2/3 (the smaller of the tie)
    assert best_threshold(items) == pytest.approx(0.15)
    assert localisation_scores(items, 0.15)["f1"] == pytest.approx(2 / 3)
    # per step: the Reader's stays 0.15; the Planner's moves to the midpoint 0.65 (of 0.5 and 0.8): B is
    # found at step 1, A and D pass their Planner values (0.9, 0.8): F1 1
    thresholds = best_thresholds_by_step(items)
    assert thresholds == [pytest.approx(0.15), pytest.approx(0.65)]
    assert localisation_scores_by_step(items, thresholds)["f1"] == 1.0
    assert predict_first_error_by_step([0.9, 0.5, 0.1], [0.15, 0.65]) == 1   # later steps: the last threshold
    with pytest.raises(ValueError, match="at least one step value"):
        best_thresholds_by_step([])
