"""State read back from disk is checked: a broken checkpoint is set aside and an earlier one resumed, a cache
of the wrong structure is rebuilt, a checkpoint file torch refuses stops the resume in one line, and a
finished scorer is unchanged until a new run over it finishes."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest


def _checkpoint(folder: Path, step: int) -> Path:
    import torch
    from safetensors.torch import save_file

    ck = folder / f"checkpoint-{step}"
    ck.mkdir(parents=True)
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    save_file({"w": torch.zeros(2, 2)}, str(ck / "adapter_model.safetensors"))
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        torch.save({"step": step}, ck / name)
    return ck


@pytest.mark.parametrize("name, damage, reason", [
    ("optimizer.pt", lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "optimizer.pt"),
    ("rng_state.pth", lambda p: p.write_bytes(os.urandom(300)), "rng_state.pth"),
    ("scheduler.pt", lambda p: p.write_bytes(b""), "scheduler.pt"),
    ("trainer_state.json", lambda p: p.write_text('{"global_step": 2'), "trainer_state.json is cut short"),
])
def test_a_corrupt_checkpoint_file_sets_the_checkpoint_aside(tmp_path, name, damage, reason):
    from masprm.train.checkpoints import resume_checkpoint

    _checkpoint(tmp_path, 1)
    damage(_checkpoint(tmp_path, 2) / name)
    said = []
    assert resume_checkpoint(tmp_path, said.append) == tmp_path / "checkpoint-1"
    assert (tmp_path / "incomplete-checkpoint-2" / name).exists() and reason in said[0]


@pytest.mark.parametrize("stored", [
    {"examples": {"input_ids": [1]}, "skipped": 0},
    {"examples": [[1, 2, 3]], "skipped": 0},
    {"examples": [{"input_ids": [{"x": 1}]}], "skipped": 0},
    {"examples": [{"input_ids": [1]}], "skipped": -1},
    {"examples": [], "skipped": 0},
    ["not", "a", "cache"],
])
def test_a_cache_of_the_wrong_structure_is_rebuilt(stored):
    from masprm.train.cache import _well_formed

    assert not _well_formed(stored)
    assert _well_formed({"examples": [{"text": "a", "input_ids": [1, 2], "positions": [1], "targets": [0.5],
                                      "pos_has_sep": True, "weight": 1.0}], "skipped": 0})


def test_torch_files_are_zip_archives():
    """The checkpoint check relies on torch.save writing a zip archive (torch >= 1.6)."""
    import io

    import torch

    buf = io.BytesIO()
    torch.save({"a": 1}, buf)
    assert zipfile.is_zipfile(io.BytesIO(buf.getvalue()))


def test_a_finished_scorer_is_unchanged_until_a_new_run_over_it_finishes(tmp_path, tiny_model_dir):
    """Its record stays "completed" and its weights stay byte for byte while a new run (--overwrite) trains
    into the folder; a run that dies half way leaves the finished scorer as it was."""
    import random

    from transformers import TrainerCallback

    from helpers_training import config, ppm_record, write_jsonl
    from masprm.train.trainer import train_scorer

    data = write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(random.Random(i)) for i in range(12)])
    cfg = config(tmp_path, data, tiny_model_dir, "ppm", max_steps=2, eval_steps=1, save_steps=1)
    out = Path(cfg.output_dir)
    train_scorer(cfg)
    import shutil

    for checkpoint in out.glob("checkpoint-*"):   # a finished scorer as shared: its checkpoints removed
        shutil.rmtree(checkpoint)
    finished = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert json.loads(finished["masprm_scorer.json"])["status"] == "completed"

    class Dies(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            assert json.loads((out / "masprm_scorer.json").read_text())["status"] == "completed"
            raise KeyboardInterrupt("killed half way")

    import dataclasses

    with pytest.raises(KeyboardInterrupt):
        train_scorer(dataclasses.replace(cfg, overwrite=True, seed=1), callbacks=[Dies()])
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name in finished} == finished


@pytest.mark.slow
def test_resuming_from_a_checkpoint_file_torch_refuses_is_one_line(tmp_path, tiny_model_dir):
    """A checkpoint file that is a complete zip but holds a pickle the weights-only loader refuses (here the RNG
    state) cannot be told without loading it: the resume stops in one ConfigError naming the checkpoint."""
    import dataclasses
    import datetime
    import random

    import torch
    from transformers import TrainerCallback

    from helpers_training import config, ppm_record, write_jsonl
    from masprm.errors import ConfigError
    from masprm.train.trainer import train_scorer

    data = write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(random.Random(i)) for i in range(12)])
    cfg = config(tmp_path, data, tiny_model_dir, "ppm", max_steps=3, eval_steps=1, save_steps=1)
    out = Path(cfg.output_dir)

    class Dies(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            raise KeyboardInterrupt("killed after the first checkpoint")

    with pytest.raises(KeyboardInterrupt):
        train_scorer(cfg, callbacks=[Dies()])
    [checkpoint] = out.glob("checkpoint-*")
    [rng] = checkpoint.glob("rng_state*.pth")
    torch.save({"when": datetime.datetime(2024, 1, 1)}, rng)   # a zip archive, but not only tensors
    with pytest.raises(ConfigError) as caught:
        train_scorer(dataclasses.replace(cfg, resume=True))
    assert str(caught.value).startswith(f"output_dir {out}: {checkpoint.name} holds a file torch refuses to load (")
    assert str(caught.value).endswith("move that checkpoint aside and resume again")
