"""The toy task: deterministic, disjoint splits, stories that say what the gold answer computes."""

import json
import re
from itertools import islice

import pytest

from masprm.errors import MasprmError
from masprm.data import load_examples
from masprm.worlds.toy import task
from masprm.worlds.toy.task import MAX_VALUE, SPLIT_SIZES, apply_op, generate_split, iter_split

# An independent reading of the stories: sentence pattern -> (op, operand or None = the number in it).
STORY_OPS = [
    (r"buys (\d+) more", "+", None), (r"finds (\d+) more", "+", None), (r"gives (?:him|her) (\d+)", "+", None),
    (r"gives away half", "/", 2), (r"gives away (\d+)", "-", None), (r"loses (\d+)", "-", None),
    (r"sells (\d+) of them", "-", None), (r"doubles", "*", 2), (r"triples", "*", 3),
    (r"ends up with (\d+) times", "*", None), (r"splits them into (\d+) equal piles", "/", None),
]


def read_story(question: str, name: str) -> int:
    """Recompute the answer from the text alone, ignoring sentences about others."""
    sentences = re.findall(r"[^.?]+[.?]", question)
    start = next(int(m.group(1)) for s in sentences
                 if (m := re.match(rf"\s*{name} (?:has|starts with|owns) (\d+)", s)))
    total = start
    for s in sentences:
        if re.match(rf"\s*{name} (?:has|starts with|owns)", s) or "How many" in s or not re.match(
                r"\s*(He|She|Then|A friend)", s):
            continue  # the start, the question, or a distractor about someone else
        for pattern, op, fixed in STORY_OPS:
            m = re.search(pattern, s)
            if m:
                total = apply_op(total, op, fixed if fixed is not None else int(m.group(1)))
                break
        else:
            raise AssertionError(f"unreadable sentence {s!r}")
    return total


def test_splits_are_fixed_sized_and_disjoint():
    test, train = generate_split("test"), generate_split("train")
    assert len(test) == SPLIT_SIZES["test"] and len(train) == SPLIT_SIZES["train"]
    sft = {p.question for p in islice(iter_split("sft"), 6000)}
    questions = [p.question for p in test + train]
    assert len(set(questions)) == len(questions)
    assert not sft & set(questions)


def test_generation_is_deterministic():
    task.generate_split.cache_clear()
    again = generate_split("test")
    assert [p.question for p in again] == [p.question for p in islice(iter_split("test"), len(again))]


@pytest.mark.parametrize("split", ["train", "test"])
def test_story_text_computes_the_gold_answer(split):
    for p in generate_split(split):
        name = next(n for n, *_ in task.PEOPLE if re.search(rf"How many \w+ does {n} ", p.question))
        assert read_story(p.question, name) == p.answer, p.question
        assert p.row()["answer"].endswith(f"#### {p.answer}")
        assert 2 <= len(p.ops) <= 3


def test_running_totals_stay_small_whole_numbers():
    for p in generate_split("train"):
        total = p.start
        for op, n in p.ops:
            if op == "/":
                assert total % n == 0
            total = apply_op(total, op, n)
            assert 1 <= total <= MAX_VALUE
        assert total == p.answer


def test_some_stories_have_a_distractor_and_written_numbers_never_repeat():
    problems = generate_split("train")
    share = sum(p.distractor for p in problems) / len(problems)
    assert abs(share - task.DISTRACTOR_SHARE) < 0.1
    for p in problems:
        written = [int(w) for w in re.findall(r"\d+", p.question)]
        assert len(written) == len(set(written)), p.question
    # every kind of event and both lengths occur
    assert {op for p in problems for op, _ in p.ops} == {"+", "-", "*", "/"}


def test_registered_dataset_selects_by_seed():
    a = load_examples("toy", "test", seed=14)
    b = load_examples("toy", "test", seed=24)
    assert len(a) == SPLIT_SIZES["test"] and a.skipped == 0
    assert {e.question for e in a} == {e.question for e in b}            # same questions...
    assert [e.question for e in a] != [e.question for e in b]            # ...in seeded order
    assert [e.question for e in load_examples("toy", "test", n=5, seed=14)] == [e.question for e in a][:5]
    gold = {p.question: str(p.answer) for p in generate_split("test")}
    assert all(gold[e.question] == e.gold for e in a)


def test_data_file_in_gsm8k_schema(tmp_path):
    path = tmp_path / "toy.jsonl"
    path.write_text("\n".join(json.dumps(p.row()) for p in generate_split("test")[:4]) + "\n")
    loaded = load_examples("toy", "test", data_file=str(path), seed=1)
    assert sorted(e.gold for e in loaded) == sorted(str(p.answer) for p in generate_split("test")[:4])


def test_bad_split_and_options_are_user_errors():
    with pytest.raises(MasprmError, match="toy has splits"):
        load_examples("toy", "validation")
    with pytest.raises(MasprmError, match="levels"):
        load_examples("toy", "test", levels=[4])
