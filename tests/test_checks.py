"""Input and output checks made before any work (masprm.checks): each is one line naming what is wrong."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from masprm import checks
from masprm.cli import ArgumentParser, error_line
from masprm.errors import ConfigError, DataError, ModelError


def test_output_locations(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    assert checks.check_output_dir(tmp_path / "new" / "deeper", "out_root") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # checking makes nothing
    with pytest.raises(ConfigError, match=r"^out_root .*afile: is a file, not a folder$"):
        checks.check_output_dir(tmp_path / "afile", "out_root")
    with pytest.raises(ConfigError, match=r"^logs_dir .*afile/logs: .*afile is a file, so no folder can be made"):
        checks.check_output_dir(tmp_path / "afile" / "logs", "logs_dir")
    with pytest.raises(ConfigError, match=r"^out .*adir: is a folder, not a file$"):
        checks.check_output_file(tmp_path / "adir", "out")
    checks.check_output_file(tmp_path / "adir" / "x.csv", "out")
    # A folder the user may not write (simulated: tests run as root, who may write anywhere).
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == tmp_path / "adir" else real(p, mode))
    with pytest.raises(ConfigError, match=r"^out .*adir/x.csv: .*adir is not writable$"):
        checks.check_output_file(tmp_path / "adir" / "x.csv", "out")


def test_text_inputs_must_be_utf8_and_data_files_not_empty(tmp_path):
    latin1 = tmp_path / "team.yaml"
    latin1.write_bytes("name: caf\xe9".encode("latin-1"))
    with pytest.raises(DataError, match=r"team.yaml: the MAS config is not UTF-8 text \(byte 0xe9 at offset 9\)"):
        checks.read_utf8(latin1, "MAS config")
    (tmp_path / "blank.jsonl").write_text("\n \n")
    with pytest.raises(DataError, match=r"blank.jsonl: the data file \(`data_file`\) is empty$"):
        checks.check_text_data_file(tmp_path / "blank.jsonl")
    (tmp_path / "ok.jsonl").write_text('{"question": "q"}\n')
    checks.check_text_data_file(tmp_path / "ok.jsonl")


def test_float_flags_must_be_finite():
    parser = ArgumentParser(prog="x")
    parser.add_argument_group("g").add_argument("--c", type=float)
    assert parser.parse_args(["--c", "1e3"]).c == 1000.0
    for bad in ("inf", "-inf", "nan", "Infinity"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--c", bad])


def test_safetensors_completeness(tmp_path):
    import torch
    from safetensors.torch import save_file

    path = tmp_path / "w.safetensors"
    save_file({"a": torch.zeros(8, 8), "b": torch.ones(3)}, str(path))
    checks.check_safetensors(path, "model_id")
    data = path.read_bytes()
    path.write_bytes(data[:-1])
    with pytest.raises(ModelError, match=rf"^model_id: .*w.safetensors is truncated or corrupt \({len(data) - 1} "
                                         rf"bytes, its header describes {len(data)}\)"):
        checks.check_safetensors(path, "model_id")
    path.write_bytes(data[:20])
    with pytest.raises(ModelError, match="not a readable safetensors file"):
        checks.check_safetensors(path, "model_id")


def test_model_folders_need_weights_and_a_tokenizer(tmp_path, tiny_model_dir):
    assert checks.check_local_model(str(tiny_model_dir), "model_id") == str(tiny_model_dir)
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(Path(tiny_model_dir) / "config.json", bare)
    with pytest.raises(ModelError, match=r"^model_id .*bare: no model weights \(expected model.safetensors or"):
        checks.check_local_model(str(bare), "model_id")
    shutil.copy(Path(tiny_model_dir) / "model.safetensors", bare)
    with pytest.raises(ModelError, match=r"^model_id .*bare: no tokenizer files in the folder"):
        checks.check_local_model(str(bare), "model_id")
    assert checks.check_model_source(str(bare), "model_id") == str(bare)  # weights alone are enough for a base


def _adapter(folder: Path, base: Path, status: str | None = "completed") -> Path:
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base)}))
    save_file({"w": torch.zeros(2, 2)}, str(folder / "adapter_model.safetensors"))
    if status:
        (folder / "masprm_scorer.json").write_text(json.dumps({"status": status}))
    return folder


def test_scorer_folders(tmp_path, tiny_model_dir):
    good = _adapter(tmp_path / "good", tiny_model_dir)
    assert checks.check_scorer_folder(good, "orm_dir") is None
    running = _adapter(tmp_path / "running", tiny_model_dir, status="training")
    with pytest.raises(ModelError, match=r"^orm_dir .*running: its training did not finish .*status 'training'\); "
                                         r"pass `allow_unfinished_scorer`"):
        checks.check_scorer_folder(running, "orm_dir")
    assert "unfinished training (running)" in checks.check_scorer_folder(running, "orm_dir", allow_unfinished=True)
    only = tmp_path / "only"
    _adapter(only / "checkpoint-8", tiny_model_dir, status=None)
    _adapter(only / "checkpoint-12", tiny_model_dir, status=None)
    with pytest.raises(ModelError, match=r"holds only training checkpoints \(newest checkpoint-12\)"):
        checks.check_scorer_folder(only, "prm_dir")
    assert "(checkpoint-12)" in checks.check_scorer_folder(only, "prm_dir", allow_unfinished=True)
    (good / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA"}))
    with pytest.raises(ModelError, match="does not name its base model; pass `handoff_prm_base_model_id`"):
        checks.check_scorer_folder(good, "handoff_prm_dir", base_setting="handoff_prm_base_model_id")
    with pytest.raises(ModelError, match=r"^prm_base_model_id .*none: no such model folder"):
        checks.check_scorer_folder(good, "prm_dir", base_model_id=str(tmp_path / "none"))


def test_a_scorer_error_names_the_setting_that_named_the_scorer(tmp_path):
    from masprm.eval.runner import ModelSpec, _load_scorer

    for setting in ("orm_dir", "handoff_prm_dir"):
        with pytest.raises(ModelError, match=rf"^{setting} .*missing: no such folder") as caught:
            _load_scorer(ModelSpec("scorer", str(tmp_path / "missing"), setting=setting))
        assert caught.value.setting == setting
        # the CLI layer shows the flag of the setting in its place
        assert error_line(caught.value, {setting: f"--{setting}"}).startswith(f"--{setting} ")
    with pytest.raises(ModelError, match=r"^prm_dir "):
        _load_scorer(ModelSpec("scorer", str(tmp_path / "missing")))


def test_hints_name_settings_that_the_cli_shows_as_flags(tmp_path, tiny_model_dir):
    running = _adapter(tmp_path / "running", tiny_model_dir, status="training")
    with pytest.raises(ModelError) as caught:
        checks.check_scorer_folder(running, "orm_dir")
    flags = {"orm_dir": "--orm_dir", "allow_unfinished_scorer": "--allow_unfinished_scorer"}
    line = error_line(caught.value, flags)
    assert line.startswith("--orm_dir ") and "pass --allow_unfinished_scorer to use" in line
    assert "`" not in line
