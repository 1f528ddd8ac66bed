"""Dataset loaders through local files in each hub schema, selection and errors."""

from __future__ import annotations

import dataclasses
import json
import random
import sys
from pathlib import Path

import pytest

from masprm import data
from masprm.cli import COMMON_FLAGS, error_line
from masprm.errors import MasprmError
from masprm.registry import Registry
from masprm.data import (
    COMPETITION_MATH,
    Example,
    LoadedData,
    dataset_names,
    load_examples,
    register_dataset,
    round_robin,
    seeded_order,
    stratified_order,
)
from masprm.dataset_rows import gpqa_gold, gpqa_permutation, gpqa_question, mmlu_gold

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"


def fixture(name: str) -> str:
    return str(FIXTURES / name)


def rows_of(name: str) -> list[dict]:
    path = FIXTURES / name
    if path.suffix == ".json":
        return json.loads(path.read_text())
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def by_source(loaded: LoadedData) -> dict[int, Example]:
    return {e.meta["source_index"]: e for e in loaded.examples}


# --------------------------------------------------------------------------- every loader through data_file


def test_gsm8k_gold_after_hashes_and_skips_unreadable():
    loaded = load_examples("gsm8k", "train", data_file=fixture("gsm8k.jsonl"))
    got = by_source(loaded)
    assert {i: e.gold for i, e in got.items()} == {0: "72", 1: "10", 2: "3500", 3: "-5", 5: "5", 6: "624",
                                                   7: "18"}
    assert loaded.skipped == 1                      # record 4 has no "####" line
    assert got[0].question.startswith("Natalia sold clips")
    assert [e.idx for e in loaded.examples] == list(range(7))


def test_competition_math_boxed_gold():
    loaded = load_examples("competition_math", "test", data_file=fixture("competition_math.jsonl"))
    golds = {i: e.gold for i, e in by_source(loaded).items()}
    assert golds[0] == "3/4"          # \boxed{\frac{3}{4}}: nested braces
    assert golds[2] == "4"            # the last \boxed wins
    assert golds[6] == "30"           # \boxed{\$30}
    assert golds[7] == "-5/8"         # -\dfrac{5}{8}
    assert golds[10] == "45"          # 45^\circ
    assert 3 not in golds and 12 not in golds   # 2\sqrt{2} and \pi are not numbers: skipped
    assert loaded.skipped == 2
    assert by_source(loaded)[4].meta["type"] == "Number Theory"
    assert by_source(loaded)[4].meta["level"] == "Level 4"


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


def test_mmlu_question_format_and_int_gold():
    loaded = load_examples("mmlu", "test", data_file=fixture("mmlu.jsonl"))
    got = by_source(loaded)
    assert {i: e.gold for i, e in got.items()} == {0: "A", 1: "B", 2: "C", 3: "D"}  # index 0 is not lost
    assert got[0].question == ("What is the capital of France?\nA. Paris\nB. Rome\nC. Berlin\nD. Madrid\n"
                               "Answer with a single letter (A, B, C, or D) only.")
    assert got[0].meta["subject"] == "geography"


def test_mmlu_gold_from_letter_and_option_text():
    loaded = load_examples("mmlu", "test", data_file=fixture("mmlu_text_answers.jsonl"))
    golds = {i: e.gold for i, e in by_source(loaded).items()}
    assert golds == {0: "B", 1: "C", 2: "D", 3: "A"}   # letter, option text "7", "  red ", lowercase "a"
    assert loaded.skipped == 1                         # an answer that matches no option


@pytest.mark.parametrize("row,letter", [
    ({"choices": ["a", "b", "c", "d"], "answer": 0}, "A"),
    ({"choices": ["a", "b", "c", "d"], "answer": 3}, "D"),
    ({"choices": ["a", "b", "c", "d"], "answer": 4}, None),
    ({"choices": ["1", "2", "3", "4"], "answer": "2"}, "B"),   # option text before index
    ({"choices": ["x", "y", "z", "w"], "answer": "2"}, "C"),   # no option "2": an index
    ({"choices": ["x", "y", "z", "w"], "answer": "(C) z"}, "C"),
    ({"options": ["x", "y", "z", "w"], "target": "d"}, "D"),
    ({"choices": ["x", "y", "z", "w"], "answer": None}, None),
])
def test_mmlu_gold_cases(row, letter):
    assert mmlu_gold(row) == letter


def test_logiqa_question_and_gold():
    loaded = load_examples("logiqa", "train", data_file=fixture("logiqa.jsonl"))
    got = by_source(loaded)
    assert {i: e.gold for i, e in got.items()} == {0: "B", 1: "C", 2: "A"}
    assert got[0].question == ("Context: All cats are animals. Tom is a cat.\nQuestion: Which must be true?\n"
                               "A. Tom is a dog.\nB. Tom is an animal.\nC. Tom is not an animal.\n"
                               "D. No animals are cats.")


def test_gpqa_permutation_is_deterministic_and_gold_follows_it():
    rows = rows_of("gpqa.jsonl")
    perms = []
    for row in rows:
        perm = gpqa_permutation(row)
        assert perm == gpqa_permutation(dict(row)) and sorted(perm) == [0, 1, 2, 3]
        perms.append(tuple(perm))
        letter = gpqa_gold(row)
        line = next(l for l in gpqa_question(row).splitlines() if l.startswith(f"{letter}. "))
        assert line == f"{letter}. {row['Correct Answer'].strip()}"
    assert len(set(perms)) > 1                       # records are not all shuffled alike
    # the seed is the sum of the record id's character codes, as in the original research code
    import random
    expected = [0, 1, 2, 3]
    random.Random(sum(map(ord, "recA1b2C3"))).shuffle(expected)
    assert gpqa_permutation(rows[0]) == expected
    # without a record id the question seeds it
    no_id = {k: v for k, v in rows[0].items() if k != "Record ID"}
    expected = [0, 1, 2, 3]
    random.Random(sum(map(ord, no_id["Question"]))).shuffle(expected)
    assert gpqa_permutation(no_id) == expected


def test_gpqa_loader_partitions_and_is_stable():
    first = load_examples("gpqa", "test", data_file=fixture("gpqa.jsonl"), seed=1)
    again = load_examples("gpqa", "test", data_file=fixture("gpqa.jsonl"), seed=1)
    assert first.examples == again.examples
    assert len(first) == 5                           # fewer than 100 records: all are test
    with pytest.raises(MasprmError, match="no usable examples"):
        load_examples("gpqa", "train", data_file=fixture("gpqa.jsonl"))


def test_aqua_rat_gold_is_the_correct_option_value():
    loaded = load_examples("aqua_rat", "train", data_file=fixture("aqua_rat.jsonl"))
    golds = {i: e.gold for i, e in by_source(loaded).items()}
    assert golds == {0: "60", 1: "30", 2: "3/4", 4: "4"}
    assert loaded.skipped == 1                       # option "table" is not a number


def test_svamp_question_joins_body_and_question(tmp_path):
    loaded = load_examples("svamp", "test", data_file=fixture("svamp.json"))
    got = by_source(loaded)
    assert got[0].question == ("Jack had 8 pens and Mary had 5 pens. Jack gave 3 pens to Mary. "
                               "How many pens does Jack have now?")
    assert {i: e.gold for i, e in got.items()} == {0: "5", 1: "28", 2: "2.5"}


def test_parquet_file_reads_like_jsonl(tmp_path):
    import datasets

    path = tmp_path / "gsm8k.parquet"
    datasets.Dataset.from_list(rows_of("gsm8k.jsonl")).to_parquet(str(path))
    from_parquet = load_examples("gsm8k", "train", data_file=str(path), seed=5)
    from_jsonl = load_examples("gsm8k", "train", data_file=fixture("gsm8k.jsonl"), seed=5)
    assert from_parquet.examples == from_jsonl.examples


# --------------------------------------------------------------------------- selection


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


# --------------------------------------------------------------------------- registry


def test_registry_lists_the_hub_datasets():
    names = dataset_names()
    for name in ("gsm8k", "competition_math", "mmlu", "logiqa", "gpqa", "aqua_rat", "svamp"):
        assert name in names


def test_register_dataset_plugin_gets_only_set_options(monkeypatch):
    calls = []

    def loader(split, *, n=None, seed=42, data_file=None):
        calls.append((split, n, seed, data_file))
        return [Example(0, "q?", "1", {})]

    monkeypatch.setattr(data, "DATASETS", Registry("dataset"))  # a throwaway registry
    register_dataset("plugin_test")(loader)
    loaded = load_examples("plugin_test", "test", n=1, seed=9)
    assert isinstance(loaded, LoadedData) and loaded.examples == [Example(0, "q?", "1", {})]
    assert calls == [("test", 1, 9, None)]


def test_unknown_dataset_lists_known_ones(monkeypatch):
    monkeypatch.setitem(sys.modules, "masprm.toy.task", None)  # the toy plugin absent: still one clean error
    with pytest.raises(MasprmError) as err:
        load_examples("nope", "train")
    msg = str(err.value)
    assert "unknown dataset 'nope'" in msg and "gsm8k" in msg and "\n" not in msg


# --------------------------------------------------------------------------- errors


def test_missing_data_file():
    with pytest.raises(MasprmError, match=r"missing\.jsonl: data file not found"):
        load_examples("gsm8k", "train", data_file="/nonexistent/missing.jsonl")


def test_unsupported_data_file_type(tmp_path):
    path = tmp_path / "gsm8k.csv"
    path.write_text("question,answer\n")
    with pytest.raises(MasprmError, match=r"gsm8k\.csv: unsupported data file type '\.csv'"):
        load_examples("gsm8k", "train", data_file=str(path))


def test_malformed_jsonl_names_the_file(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"question": "q", "answer": "#### 1"}\n{"question": oops\n')
    with pytest.raises(MasprmError) as err:
        load_examples("gsm8k", "train", data_file=str(path))
    assert str(path) in str(err.value) and "cannot read as JSON" in str(err.value)
    assert "\n" not in str(err.value)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    with pytest.raises(MasprmError, match="empty.jsonl"):
        load_examples("gsm8k", "train", data_file=str(path))


def test_wrong_schema_names_file_and_field(tmp_path):
    path = tmp_path / "wrong.jsonl"
    path.write_text('{"problem": "1+1?", "solution": "\\\\boxed{2}"}\n')
    with pytest.raises(MasprmError) as err:
        load_examples("gsm8k", "train", data_file=str(path))
    assert str(path) in str(err.value) and "'question'" in str(err.value)
    no_level = tmp_path / "no_level.jsonl"
    no_level.write_text('{"problem": "1+1?", "solution": "\\\\boxed{2}", "type": "Algebra"}\n')
    with pytest.raises(MasprmError, match="no_level.jsonl: missing field 'level'"):
        load_examples("competition_math", "test", data_file=str(no_level), levels=[5])
    with pytest.raises(MasprmError, match="'difficulty'"):
        load_examples("competition_math", "test", data_file=fixture("competition_math.jsonl"),
                      stratify_by="difficulty")


def test_levels_only_for_competition_math():
    with pytest.raises(MasprmError, match="levels"):
        load_examples("gsm8k", "train", data_file=fixture("gsm8k.jsonl"), levels=[4])


def test_bad_n():
    for n in (0, -3):
        with pytest.raises(MasprmError, match="positive integer"):
            load_examples("gsm8k", "train", data_file=fixture("gsm8k.jsonl"), n=n)


def test_hub_failure_suggests_data_file(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'gsm8k' on the Hub (LocalEntryNotFoundError)\nmore detail")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(MasprmError) as err:
        load_examples("gsm8k", "train")
    msg = str(err.value)
    assert "gsm8k" in msg and "Couldn't reach" in msg and "\n" not in msg and "--" not in msg  # names no flag
    assert error_line(err.value, COMMON_FLAGS).startswith("--data_file: cannot load gsm8k")  # the CLI's line


def test_hub_split_alias_for_mmlu(monkeypatch):
    import datasets

    seen = []

    def fake_load(path, name=None, split=None, **kwargs):
        seen.append((path, name, split))
        source = "mmlu.jsonl" if path == "cais/mmlu" else "competition_math.jsonl"
        return datasets.Dataset.from_list(rows_of(source))

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    load_examples("mmlu", "train")
    load_examples("mmlu", "test")
    load_examples("competition_math", "test")      # both partitions come from the hub's train split
    assert seen == [("cais/mmlu", "all", "test"), ("cais/mmlu", "all", "validation"),
                    ("qwedsacf/competition_math", None, "train")]


def test_questions_and_prompts_reach_the_agents_unstripped(tmp_path):
    """As the original: gsm8k/math/aqua/svamp fields verbatim; a YAML | prompt keeps its newline."""
    from masprm.dataset_rows import svamp_question
    from masprm.graph import load_mas_config

    rows = [{"question": "  Tom has 3 apples.\nHow many?\n", "answer": "#### 3"}]
    data = tmp_path / "g.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (ex,) = load_examples("gsm8k", "train", data_file=str(data)).examples
    assert ex.question == "  Tom has 3 apples.\nHow many?\n"
    assert svamp_question({"Body": "Ann has 3. ", "Question": "How many?"}) == "Ann has 3.  How many?"
    config = tmp_path / "team.yaml"
    config.write_text("agents:\n  - name: Solver\n    system_prompt: |\n      Solve it.\n      Be brief.\n"
                      "edges:\n  - [-1, 0]\n")
    assert load_mas_config(config).agents[0].system_prompt == "Solve it.\nBe brief.\n"
