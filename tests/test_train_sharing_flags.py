"""Stage 3's inputs and flags for sharing: Parquet data through `datasets`, --report_to, hub flags, help text."""

from __future__ import annotations

import json
import random

import datasets
import pytest

from masprm.errors import ConfigError, MasprmError
from masprm.stages.train import build_parser
from masprm.train.data import load_records
from masprm.train.trainer import _report_to

from helpers_cli import call_main
from helpers_training import config, ppm_record, step_record, write_jsonl



def to_parquet(records: list[dict], path):
    datasets.Dataset.from_list(records).to_parquet(str(path))
    return path


def test_every_stage3_flag_has_help_text():
    parser = build_parser()
    missing = [a.option_strings[0] for a in parser._actions if a.option_strings and not a.help]
    assert not missing


def test_parquet_records_read_as_their_jsonl_twins(tmp_path):
    pairs = [ppm_record(random.Random(i)) for i in range(5)]
    steps = [step_record(random.Random(i)) for i in range(5)]
    assert load_records(to_parquet(pairs, tmp_path / "pairs.parquet"), "ppm") == \
        load_records(write_jsonl(tmp_path / "pairs.jsonl", pairs), "ppm") == pairs
    assert load_records(to_parquet(steps, tmp_path / "steps.parquet"), "prm") == steps


def test_a_bad_parquet_row_or_file_is_named(tmp_path):
    rows = [step_record(random.Random(i)) for i in range(3)]
    rows[1]["labels"] = [0.5, 1.7]
    with pytest.raises(MasprmError, match=r"steps.parquet: row 1: label 1.7 is not a number in \[-1, 1\]"):
        load_records(to_parquet(rows, tmp_path / "steps.parquet"), "prm")
    with pytest.raises(MasprmError, match=r"missing field\(s\) rejected_actions for ppm training"):
        load_records(to_parquet([{"prompt": "q", "chosen_actions": ["a"]}], tmp_path / "half.parquet"), "ppm")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(MasprmError, match=r"junk.parquet: not a readable Parquet file"):
        load_records(tmp_path / "junk.parquet", "ppm")


def test_a_json_list_with_an_incomplete_record_names_the_record(tmp_path):
    # `datasets` fills the missing field with None; the line-by-line reader names what is really wrong
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps([ppm_record(random.Random(0)), {"prompt": "q", "chosen_actions": ["a"]}]))
    with pytest.raises(MasprmError, match=r"pairs.json: record 1: missing field\(s\) rejected_actions"):
        load_records(path, "ppm")


def test_report_to_follows_transformers_and_hub_logs_maps_onto_it(tmp_path):
    base = config(tmp_path, tmp_path / "d.jsonl", tmp_path / "m", "ppm")
    assert _report_to(base) == ["tensorboard"]                       # the original's default
    base.hub_logs = False
    assert _report_to(base) == "none"                                # --no-hub-logs
    base.hub_logs, base.report_to = True, ["none"]
    assert _report_to(base) == "none"
    base.report_to = ["all"]
    assert _report_to(base) == "all"
    base.report_to = ["tensorboard"]
    assert _report_to(base) == ["tensorboard"]
    base.report_to = ["tensorbored"]
    with pytest.raises(ConfigError, match=r"report_to tensorbored: not one of transformers' integrations .*wandb"):
        _report_to(base)
    base.report_to = ["tensorboard", "swanlab"]                      # a known integration, not installed here
    with pytest.raises(ConfigError, match=r"report_to swanlab: its package is not installed"):
        _report_to(base)
    with pytest.raises(ConfigError, match="contradicts --no-hub-logs"):
        config(tmp_path, tmp_path / "d.jsonl", tmp_path / "m", "ppm", hub_logs=False, report_to=["wandb"]).validate()


@pytest.mark.parametrize("extra, flag, message", [
    (["--report_to", "tensorbored"], "--report_to", "not one of transformers' integrations"),
    (["--push_to_hub"], "--push_to_hub", "needs --hub_model_id"),
    (["--push_to_hub", "--hub_model_id", "no-owner"], "--hub_model_id", "name the owner too"),
    (["--hub_model_id", "a/b/c"], "--hub_model_id", "not a hub repository id"),
])
def test_bad_sharing_flags_fail_in_one_line_before_training(tmp_path, tiny_model_dir, extra, flag, message,
                                                            monkeypatch, capsys):
    data = write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(random.Random(i)) for i in range(4)])
    code, _, err = call_main(monkeypatch, capsys, ["--mode", "ppm", "--data_dir", str(data), "--model-id",
                                                   str(tiny_model_dir), "--output-dir", str(tmp_path / "out"), *extra],
                             script="trainer")
    assert code == 2 and err.count("\n") == 1, err
    assert flag in err and message in err
    assert not (tmp_path / "out").exists()
