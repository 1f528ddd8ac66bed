"""Which rows a loader picks: the seeded order, --n over usable rows, levels, the original's stratified pick,
and the test/train partitions."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from masprm.errors import MasprmError
from masprm.data import COMPETITION_MATH, load_examples, round_robin, seeded_order, stratified_order

from helpers_datasets import by_source, fixture, rows_of


def test_competition_math_levels_filter():
    loaded = load_examples("competition_math", "test", data_file=fixture("competition_math.jsonl"),
                           levels=[4, 5])
    levels = {e.meta["level"] for e in loaded.examples}
    assert levels == {"Level 4", "Level 5"}
    rows = rows_of("competition_math.jsonl")
    usable_45 = [i for i, r in enumerate(rows) if r["level"] in ("Level 4", "Level 5")
                 and i not in (3, 12)]
    assert sorted(by_source(loaded)) == sorted(usable_45)


def test_stratified_pick_is_the_originals_rule():
    # rows 0-8 in this order; their types appear as Geometry, Algebra, Prealgebra (not sorted)
    kind = {0: "Geometry", 1: "Algebra", 2: "Geometry", 3: "Prealgebra", 4: "Algebra", 5: "Geometry",
            6: "Algebra", 7: "Prealgebra", 8: "Geometry"}
    order = list(range(9))
    # The original, by hand: one random.Random(seed) shuffles each group in the order the groups
    # first appear, the groups are taken round-robin in sorted order until n rows are picked, and
    # the picked rows are shuffled once more by the same generator.
    rng = random.Random(14)
    geometry, algebra, prealgebra = [0, 2, 5, 8], [1, 4, 6], [3, 7]
    for group in (geometry, algebra, prealgebra):
        rng.shuffle(group)
    picked = [algebra[0], geometry[0], prealgebra[0], algebra[1], geometry[1]]   # n = 5
    rng.shuffle(picked)
    rest = [prealgebra[1], algebra[2], geometry[2], geometry[3]]
    assert stratified_order(order, kind.__getitem__, 5, 14) == picked + rest


def test_competition_math_stratified_selection_through_the_loader(tmp_path):
    types = ["Algebra", "Geometry", "Algebra", "Number Theory", "Geometry", "Algebra", "Geometry", "Algebra",
             "Number Theory", "Prealgebra"]
    rows = [{"problem": f"Problem {i}?", "level": f"Level {3 if i == 9 else 4 + i % 2}", "type": kind,
             "solution": f"So it is $\\boxed{{{10 + i}}}$."} for i, kind in enumerate(types)]
    rows[5]["solution"] = "So it is $\\boxed{x + 1}$."   # no number: a skipped gold
    path = tmp_path / "math.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    seed, n = 14, 4
    # the seeded order, the test split (every row: the split holds out 2000), levels 4-5 (row 9 is level 3)
    order = [i for i in seeded_order(len(rows), seed) if i != 9]
    rng = random.Random(seed)
    groups: dict[str, list[int]] = {}
    for i in order:                              # groups in first-appearance order
        groups.setdefault(types[i], []).append(i)
    for members in groups.values():
        rng.shuffle(members)
    interleaved = []
    for depth in range(4):
        interleaved += [groups[k][depth] for k in sorted(groups) if depth < len(groups[k])]
    picked = interleaved[:n]
    rng.shuffle(picked)
    assert 5 in picked   # (seed 14) the unreadable row is picked: the next interleaved row replaces it
    expected = [i for i in picked + interleaved[n:] if i != 5][:n]

    loaded = load_examples("competition_math", "test", data_file=str(path), levels=[4, 5],
                           stratify_by="type", seed=seed, n=n)
    assert [e.meta["source_index"] for e in loaded.examples] == expected
    assert [e.gold for e in loaded.examples] == [str(10 + i) for i in expected]
    assert loaded.skipped == 1
    # without --n the original does not stratify: the seeded, level-filtered order
    every = load_examples("competition_math", "test", data_file=str(path), levels=[4, 5], stratify_by="type",
                          seed=seed)
    assert [e.meta["source_index"] for e in every.examples] == [i for i in order if i != 5]


def test_competition_math_test_train_partition():
    small = dataclasses.replace(COMPETITION_MATH, test_size=5)   # the real one holds out 2000
    test = small("test", seed=7, data_file=fixture("competition_math.jsonl"))
    train = small("train", seed=7, data_file=fixture("competition_math.jsonl"))
    rows = rows_of("competition_math.jsonl")
    order = seeded_order(len(rows), 7)
    assert set(by_source(test)) | {3, 12} >= set(order[:5])
    assert set(by_source(test)) <= set(order[:5])
    assert set(by_source(train)) <= set(order[5:])
    assert len(test) + len(train) + test.skipped + train.skipped == len(rows)
    with pytest.raises(MasprmError, match="splits 'train' and 'test'"):
        small("validation", data_file=fixture("competition_math.jsonl"))


def test_gpqa_loader_partitions_and_is_stable():
    first = load_examples("gpqa", "test", data_file=fixture("gpqa.jsonl"), seed=1)
    again = load_examples("gpqa", "test", data_file=fixture("gpqa.jsonl"), seed=1)
    assert first.examples == again.examples
    assert len(first) == 5                           # fewer than 100 records: all are test
    with pytest.raises(MasprmError, match="no usable examples"):
        load_examples("gpqa", "train", data_file=fixture("gpqa.jsonl"))


def test_selection_is_deterministic_by_seed_and_n_takes_a_prefix():
    a = load_examples("gsm8k", "train", data_file=fixture("gsm8k.jsonl"), seed=42)
    b = load_examples("gsm8k", "train", data_file=fixture("gsm8k.jsonl"), seed=42)
    c = load_examples("gsm8k", "train", data_file=fixture("gsm8k.jsonl"), seed=43)
    assert a.examples == b.examples
    assert [e.question for e in a.examples] != [e.question for e in c.examples]
    assert sorted(e.question for e in a.examples) == sorted(e.question for e in c.examples)
    three = load_examples("gsm8k", "train", data_file=fixture("gsm8k.jsonl"), seed=42, n=3)
    assert three.examples == a.examples[:3]


def test_n_counts_usable_examples():
    rows = rows_of("gsm8k.jsonl")
    for seed in range(10):
        order = seeded_order(len(rows), seed)
        if order.index(4) < 2:      # the unreadable record comes early in this order
            break
    loaded = load_examples("gsm8k", "train", data_file=fixture("gsm8k.jsonl"), seed=seed, n=2)
    assert len(loaded) == 2 and loaded.skipped == 1
    assert [e.meta["source_index"] for e in loaded.examples] == [i for i in order if i != 4][:2]


def test_seeded_order_matches_datasets_shuffle():
    import datasets

    ds = datasets.Dataset.from_dict({"i": list(range(50))})
    for seed in (0, 14, 42):
        assert seeded_order(50, seed) == ds.shuffle(seed=seed)["i"][:]


def test_round_robin_groups_sorted_keys():
    keys = {0: "b", 1: "a", 2: "b", 3: "c", 4: "a", 5: "b"}
    assert round_robin([0, 1, 2, 3, 4, 5], keys.__getitem__) == [1, 0, 3, 4, 2, 5]
    assert round_robin([], keys.__getitem__) == []
