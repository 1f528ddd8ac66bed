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
                    + json.dumps({"question": "B?"}) + "\n" + json.dumps({"question": "caf\u00e9?"}) + "\n")
    assert read_excluded_questions(path) == {"A?", "B?", "café?"}


A_PROMPT = json.dumps({"prompt": "A?"}) + "\n"
# Each fault of encoding and schema, the bytes of the file, and what its one line says after `file:line: `.
FAULTS = [
    ("latin-1", A_PROMPT.encode() + '{"prompt": "caf\xe9?"}\n'.encode("latin-1"),
     "2: not UTF-8 text (byte 0xe9); save the file as UTF-8"),
    ("lone-surrogate", (A_PROMPT + '{"prompt": "x\\ud800"}\n').encode(),
     "2: a string holds a lone surrogate (\\ud800), which cannot be written as UTF-8; fix the file's text"),
    ("no-field", (A_PROMPT + '{"other": 1}\n').encode(),
     "2: a record with neither 'prompt' nor 'question' (the question to leave out)"),
    ("bare-scalar", (A_PROMPT + '"A?"\n').encode(), "2: expected a JSON object, got str"),
    ("bare-number", (A_PROMPT + "7\n").encode(), "2: expected a JSON object, got int"),
    ("number-prompt", (A_PROMPT + '{"prompt": 7}\n').encode(), "2: 'prompt' must be a string, got int"),
    ("null-question", (A_PROMPT + '{"question": null}\n').encode(), "2: 'question' must be a string, got NoneType"),
    ("list-prompt", (A_PROMPT + '{"prompt": ["A?"]}\n').encode(), "2: 'prompt' must be a string, got list"),
    ("broken-json", (A_PROMPT + "{broken\n").encode(),
     "2: not valid JSON (Expecting property name enclosed in double quotes)"),
]


@pytest.mark.parametrize("data, said", [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_each_encoding_and_schema_fault_is_refused_naming_file_and_line(tmp_path, data, said):
    path = tmp_path / "dev.jsonl"
    path.write_bytes(data)
    with pytest.raises(DataError) as err:
        read_excluded_questions(path)
    assert str(err.value) == f"{path}:{said}" and err.value.setting == "exclude_questions_file"


def test_an_empty_file_and_a_path_that_is_no_file_are_refused(tmp_path):
    from masprm.errors import ConfigError

    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(DataError, match="empty.jsonl: holds no record, so no question would be left out$"):
        read_excluded_questions(tmp_path / "empty.jsonl")
    with pytest.raises(ConfigError, match="missing.jsonl: no such file"):
        read_excluded_questions(tmp_path / "missing.jsonl")
    with pytest.raises(ConfigError, match="is a folder, not a file"):
        read_excluded_questions(tmp_path)


@pytest.mark.parametrize("data, said", [f[1:] for f in FAULTS[:3]], ids=[f[0] for f in FAULTS[:3]])
def test_stage_4_refuses_a_faulty_file_in_one_line_before_any_model_loads(tmp_path, monkeypatch, capsys,
                                                                         tiny_model_dir, data, said):
    """The whole command: exit 2, one line naming the flag, the file and its line; no log folder made."""
    from helpers import snapshot
    from helpers_cli import FAST, run_module, write_gsm8k

    (tmp_path / "dev.jsonl").write_bytes(data)
    write_gsm8k(tmp_path / "gsm8k.jsonl")
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.stages.evaluate", [
        "--dataset", "gsm8k", "--split", "test", "--data_file", "gsm8k.jsonl", "--gen_model_id", str(tiny_model_dir),
        "--methods", "single_pass", "--exclude_questions_file", "dev.jsonl", "--logs_dir", "logs", *FAST])
    assert code == 2 and lines == [f"evaluate.py: error: --exclude_questions_file: dev.jsonl:{said}"]
    assert snapshot(tmp_path) == before


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
