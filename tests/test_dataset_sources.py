"""--dataset given as a hub dataset id or a local file or folder, with --question_field / --answer_field.

A local folder stands in for the hub: ``datasets.load_dataset`` reads a folder of split files exactly as it
reads a hub repository's (no network here). The registered names keep working and refuse the field flags.
"""

from __future__ import annotations

import json

import pytest

from helpers_cli import FAST, call_main, make_workdir

from masprm.data import load_examples, seeded_order
from masprm.dataset_sources import DatasetFields, dataset_name_tag, is_dataset_source, source_record
from masprm.dataset_rows import any_gold
from masprm.errors import MasprmError
from masprm.eval.logs import LogFiles
from masprm.run_folder import run_folder_name

ROWS = {   # a question set in the user's own schema: prompt / target (text in every split: one schema)
    "train": [{"prompt": f"What is {i} + {i}?", "target": str(2 * i)} for i in range(1, 6)],
    "test": [{"prompt": "What is 3 times 4?", "target": "#### 12"},
             {"prompt": "Pick one: A or B?", "target": "b"},
             {"prompt": "What is 1/2 of 3/2?", "target": "so \\boxed{3/4}"},
             {"prompt": "No answer here", "target": "unknown"}],
}


def write_dataset(folder, rows=ROWS):
    """A dataset folder as a hub repository holds one: one JSONL file per split, named by the split."""
    folder.mkdir(parents=True)
    for split, records in rows.items():
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


FIELDS = DatasetFields(question_field="prompt", answer_field="target")


@pytest.mark.parametrize("value,gold", [(7, "7"), (2.5, "2.5"), ("1,200", "1200"), (" b ", "B"),
                                        ("so 5\n#### 1,200", "1200"), ("x \\boxed{3/4}", "3/4"), ("hello", None),
                                        (None, None), (True, None), (float("nan"), None)])
def test_any_gold_reads_numbers_gsm8k_boxed_and_letters(value, gold):
    assert any_gold(value) == gold


def test_a_local_folder_loads_by_split_with_the_named_fields(tmp_path):
    folder = write_dataset(tmp_path / "myset")
    loaded = load_examples(str(folder), "test", seed=0, fields=FIELDS)
    # the seeded order of the 4 test rows; the row whose answer is not a number is skipped
    order = seeded_order(4, 0)
    expected = [(ROWS["test"][i]["prompt"], ["12", "B", "3/4", None][i]) for i in order]
    assert [(e.question, e.gold) for e in loaded.examples] == [(q, g) for q, g in expected if g is not None]
    assert loaded.skipped == 1 and loaded.examples[0].meta["dataset"] == str(folder)
    train = load_examples(str(folder), "train", n=2, seed=3, fields=FIELDS)
    assert [e.gold for e in train.examples] == [str(2 * (i + 1)) for i in seeded_order(5, 3)[:2]]


def test_a_hub_id_that_is_a_local_folder_is_read_from_it(tmp_path, monkeypatch):
    write_dataset(tmp_path / "owner" / "myset")
    monkeypatch.chdir(tmp_path)
    assert is_dataset_source("owner/myset") and not is_dataset_source("gsm8k")
    loaded = load_examples("owner/myset", "train", seed=0, fields=FIELDS)
    assert sorted(e.gold for e in loaded.examples) == ["10", "2", "4", "6", "8"]


def test_a_local_file_is_its_one_split(tmp_path):
    path = tmp_path / "qs.jsonl"
    path.write_text("".join(json.dumps({"question": r["prompt"], "answer": int(r["target"])}) + "\n"
                            for r in ROWS["train"]))   # answers stored as numbers
    loaded = load_examples(str(path), "train", seed=0)   # default fields: question / answer
    assert sorted(e.gold for e in loaded.examples) == ["10", "2", "4", "6", "8"]
    assert dataset_name_tag(str(path)) == "qs"


def test_names_in_run_folders_and_logs_carry_no_slash(tmp_path):
    assert dataset_name_tag("owner/set") == "owner_set" and dataset_name_tag("gsm8k") == "gsm8k"
    assert run_folder_name("owner/set", "train", "m", 2, 4, 3, 0.7, 0.95, "configs/gsm8k.yaml").startswith(
        "owner_set_gsm8k_res_train_m_r2")
    assert LogFiles.for_condition(tmp_path, "owner/set", "single_pass", "fp", "m", 1).stem.name == \
        "owner_set_single_pass_fp_m_1"


def test_what_defines_the_examples_is_recorded_for_a_source_only(tmp_path):
    folder = write_dataset(tmp_path / "myset")
    record = source_record(str(folder), FIELDS)
    assert record["question_field"] == "prompt" and record["answer_field"] == "target"
    (folder / "test.jsonl").write_text("")   # another content: another identity
    assert source_record(str(folder), FIELDS)["dataset_identity"] != record["dataset_identity"]
    assert source_record("gsm8k", DatasetFields()) == {}   # registered: nothing new recorded
    assert source_record("owner/set", FIELDS)["dataset_identity"] is None   # a hub id: no local content


@pytest.mark.parametrize("name,split,fields,message", [
    ("{folder}", "test", DatasetFields(question_field="question"), "no field 'question' (`question_field`"),
    ("{folder}", "test", DatasetFields("prompt", "answer"), "no field 'answer' (`answer_field`"),
    ("{folder}", "dev", FIELDS, "cannot load split 'dev'"),
    ("nobody/nothing-here", "train", FIELDS, "--dataset nobody/nothing-here: cannot load split 'train'"),
    ("gsm8k", "test", FIELDS, "`question_field` and `answer_field` name the fields of a dataset given by hub id"),
])
def test_bad_sources_and_fields_are_one_clear_error(tmp_path, name, split, fields, message):
    folder = write_dataset(tmp_path / "myset")
    with pytest.raises(MasprmError, match=None) as err:
        load_examples(name.format(folder=folder), split, fields=fields)
    assert message in str(err.value)


def test_stage1_asks_a_source_for_its_team_and_names_what_dataset_may_be(tmp_path, monkeypatch, capsys):
    write_dataset(tmp_path / "myset")
    monkeypatch.chdir(tmp_path)
    code, _, err = call_main(monkeypatch, capsys, ["--dataset", "myset", "--question_field", "prompt"])
    assert code == 2 and err.strip().splitlines() == [
        "run_mcts.py: error: --dataset myset has no team of its own: give one with --mas_config (e.g. "
        "configs/gsm8k.yaml)"]
    assert not (tmp_path / "results").exists()
    code, _, err = call_main(monkeypatch, capsys, ["--dataset", "nosuch"])
    assert code == 2 and "or a hub dataset id (owner/name) or a local file or folder" in err


@pytest.mark.slow
def test_stage1_builds_trees_of_a_local_dataset(tmp_path, monkeypatch, capsys, tiny_model_dir):
    workdir = make_workdir(tmp_path)
    write_dataset(workdir / "myset")
    monkeypatch.chdir(workdir)
    args = ["--dataset", "myset", "--split", "test", "--question_field", "prompt", "--answer_field", "target",
            "--n", "2", "--n_rollouts", "1", "--n_candidates", "2", "--mas_config", "configs/gsm8k.yaml",
            "--model_id", str(tiny_model_dir), "--no_plot", *FAST]
    code, _, err = call_main(monkeypatch, capsys, args)
    assert code == 0, err
    [run] = (workdir / "results").iterdir()
    assert run.name.startswith("myset_gsm8k_res_test_")
    trees = [json.loads((run / f"{i}.json").read_text()) for i in range(2)]
    order = [i for i in seeded_order(4, 42) if i != 3][:2]   # row 3 has no readable answer
    assert [t["meta"]["gold"] for t in trees] == [["12", "B", "3/4"][i] for i in order]
    settings = json.loads((run / ".run_settings").read_text())
    assert settings["question_field"] == "prompt" and settings["dataset_identity"]


@pytest.mark.slow
def test_stage4_evaluates_a_local_dataset_and_names_its_logs_by_it(tmp_path, tiny_model_dir):
    from helpers import REPO
    from helpers_cli import run_eval

    folder = write_dataset(tmp_path / "myset")
    logs = tmp_path / "logs"
    args = ["--dataset", folder, "--split", "test", "--question_field", "prompt", "--answer_field", "target",
            "--sample_n", 1, "--gen_model_id", tiny_model_dir, "--mas_config", REPO / "configs" / "gsm8k.yaml",
            "--methods", "single_pass", "--logs_dir", logs, *FAST]
    done = run_eval(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    [log] = logs.glob("*.txt")
    assert log.name.startswith("myset_single_pass_") and log.read_text().splitlines()[-1] == "COMPLETED"
    data = json.loads(log.with_suffix(".manifest.json").read_text())["definition"]["data"]
    assert (data["dataset"], data["question_field"], data["answer_field"]) == (str(folder), "prompt", "target")
    assert data["dataset_identity"]   # the folder's content: an edited copy gives another fingerprint
