"""--exclude_questions_file: question-disjoint development runs, by the original newer branch's rule."""

from __future__ import annotations

import json

import pytest

from masprm.data import Example, LoadedData, load_examples
from masprm.excluded_questions import exclude_questions, read_excluded_questions
from masprm.errors import DataError


def _loaded() -> LoadedData:
    # six usable rows in a seeded order; source_index is the row's place in the dataset
    order = [4, 1, 5, 0, 3, 2]
    return LoadedData([Example(i, f"q{src}", str(src), {"source_index": src}) for i, src in enumerate(order)], 1)


def test_rest_in_dataset_order_shuffled_by_pythons_random_then_cut():
    # left out q1 and q4: the rest in dataset order is [0, 2, 3, 5]; random.Random(42).shuffle gives
    # [3, 2, 5, 0] and Random(7) [5, 2, 0, 3] (the original's rule, worked out once with Python 3.11)
    picked = exclude_questions(_loaded(), {"q1", "q4"}, n=3, seed=42)
    assert [e.question for e in picked.examples] == ["q3", "q2", "q5"]
    assert [e.idx for e in picked.examples] == [0, 1, 2] and picked.skipped == 1
    assert [e.gold for e in exclude_questions(_loaded(), {"q1", "q4"}, n=None, seed=7).examples] == ["5", "2", "0", "3"]


def test_the_file_lists_prompts_or_questions(tmp_path):
    path = tmp_path / "train_pairs.jsonl"
    path.write_text(json.dumps({"prompt": "A?", "question": "ignored"}) + "\n\n"
                    + json.dumps({"question": "B?"}) + "\n" + json.dumps({"other": 1}) + "\n")
    assert read_excluded_questions(path) == {"A?", "B?"}
    path.write_text(json.dumps({"prompt": "A?"}) + "\n{broken\n")
    with pytest.raises(DataError, match="train_pairs.jsonl: line 2 is not JSON"):
        read_excluded_questions(path)
    with pytest.raises(DataError, match="no such file"):
        read_excluded_questions(tmp_path / "missing.jsonl")


def test_toy_split_without_the_listed_questions(tmp_path):
    full = load_examples("toy", "test", seed=3)
    listed = {e.question for e in full.examples[:5]}
    picked = exclude_questions(full, listed, n=4, seed=3)
    assert len(picked.examples) == 4 and not {e.question for e in picked.examples} & listed


def test_the_files_identity_joins_the_fingerprint_only_when_given(tmp_path):
    from masprm.eval.runner import condition_manifest
    from helpers_eval_world import chain_graph, settings
    from test_eval_runner import SPECS, data

    listed = tmp_path / "dev.jsonl"
    listed.write_text(json.dumps({"prompt": "A?"}) + "\n")

    def manifest(**kw):
        s = settings(dataset="chain", split="test", gen_model_id="fake-policy", seed=14, **kw)
        return condition_manifest("sbs_prm", s, chain_graph(), data(), SPECS)

    plain = manifest()
    assert "exclude_questions_file" not in plain["definition"]["data"]
    first = manifest(exclude_questions_file=str(listed))["fingerprint"]
    assert first != plain["fingerprint"]
    listed.write_text(json.dumps({"prompt": "B?"}) + "\n")
    assert manifest(exclude_questions_file=str(listed))["fingerprint"] not in (first, plain["fingerprint"])
