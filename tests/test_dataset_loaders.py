"""Every dataset loader through a local file in its hub schema: the question each builds, the gold it reads,
the rows it skips, and the hub's split names."""

from __future__ import annotations

import json

import pytest

from masprm.data import load_examples
from masprm.dataset_rows import gpqa_gold, gpqa_permutation, gpqa_question, mmlu_gold

from helpers_datasets import by_source, fixture, rows_of


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
