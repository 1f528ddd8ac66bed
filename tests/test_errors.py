"""Domain errors name no flag; the CLI layer shows them as one line naming the flag."""

import sys

import pytest

from masprm.cli import ArgumentParser, UsageError, error_line, run_cli
from masprm.errors import ConfigError, DataError, MasprmError, first_line


def test_first_line():
    assert first_line(ValueError("\n  bad value \nTraceback ...")) == "bad value"
    assert first_line(KeyError()) == "KeyError"
    try:
        try:
            raise OSError("disk\nmore")
        except OSError as cause:
            raise RuntimeError("cannot read") from cause
    except RuntimeError as err:
        assert first_line(err, with_cause=True) == "cannot read: disk"
    assert first_line("x" * 50, limit=10) == "x" * 10


def test_error_line_puts_the_flag_of_the_setting():
    flags = {"epochs": "--epochs", "data_file": "--data_file"}
    assert error_line(ConfigError("epochs must be > 0, got 0", setting="epochs"), flags) == "--epochs must be > 0, got 0"
    assert error_line(DataError("d.jsonl: no records", setting="data_file"), flags) == "--data_file: d.jsonl: no records"
    assert error_line(DataError("d.jsonl: no records"), flags) == "d.jsonl: no records"
    assert error_line(UsageError("--n must be >= 1"), flags) == "--n must be >= 1"
    assert issubclass(UsageError, MasprmError) and issubclass(MasprmError, ValueError)


def test_run_cli_names_the_flag_as_the_script_spells_it(monkeypatch, capsys):
    def main():
        parser = ArgumentParser(prog="stage")
        parser.add_argument("--model-id", "--model_id", dest="model_id", default="m")
        parser.parse_args([])
        raise ConfigError("model_id is not a model folder\n(details)", setting="model_id")

    monkeypatch.setattr(sys, "argv", ["stage.py"])
    with pytest.raises(SystemExit) as done:
        run_cli(main)
    assert done.value.code == 2
    assert capsys.readouterr().err == "stage.py: error: --model-id is not a model folder\n"
