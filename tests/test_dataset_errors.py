"""A data file or a selection a loader cannot use: one error naming the file, the field or the setting."""

from __future__ import annotations

import pytest

from masprm.cli import COMMON_FLAGS, error_line
from masprm.errors import MasprmError
from masprm.data import load_examples

from helpers_datasets import fixture


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
