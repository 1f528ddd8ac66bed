"""Checkpoint selection's held-out split drawn by question: no question on both sides."""

from __future__ import annotations

import math

import pytest

from masprm.errors import MasprmError
from masprm.train.data import record_group, split_eval, split_eval_by_group


def test_every_question_lands_on_one_side_only():
    # 30 questions with 1..4 records each (75 records); 4% of 30 questions -> ceil(1.2) = 2 held out
    groups = [f"q{g}" for g in range(30) for _ in range(1 + g % 4)]
    train, held = split_eval_by_group(groups, seed=7)
    assert sorted(train + held) == list(range(len(groups)))
    assert {groups[i] for i in train}.isdisjoint({groups[i] for i in held})
    assert len({groups[i] for i in held}) == math.ceil(0.04 * 30) == 2
    assert split_eval_by_group(groups, seed=7) == (train, held)
    assert split_eval_by_group(groups, seed=8) != (train, held)


def test_a_record_split_would_put_questions_on_both_sides():
    # the original's split over the same 75 records: 3 held out, and their questions also train
    groups = [f"q{g}" for g in range(30) for _ in range(1 + g % 4)]
    train, held = split_eval(len(groups), seed=7)
    assert len(held) == 3
    shared = {groups[i] for i in held} & {groups[i] for i in train}
    assert shared   # with these seeds at least one held-out question has records in training


def test_the_record_order_is_the_record_splits_permutation():
    # the two splits share one seeded order of the records: the question split only moves whole groups
    groups = ["a", "a", "b", "c", "c", "c"]
    train, held = split_eval_by_group(groups, seed=3, fraction=0.5)   # 3 questions -> ceil(1.5) = 2 held out
    order, none = split_eval(len(groups), seed=3, fraction=0.0)   # the whole seeded permutation
    assert none == [] and [i for i in order if i in train] == train and [i for i in order if i in held] == held
    assert len({groups[i] for i in held}) == 2 and len({groups[i] for i in train}) == 1
    with pytest.raises(MasprmError, match="at least 2 questions"):
        split_eval_by_group(["a", "a"], seed=0)


def test_a_records_question():
    assert record_group({"prompt": "How many?", "completions": ["x"], "labels": [1]}) == "How many?"
    assert record_group({"prompt": "inbox text", "meta": {"question": "How many?"}}) == "How many?"
