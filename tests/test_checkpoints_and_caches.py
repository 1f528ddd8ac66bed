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


GOOD = [{"text": "a", "input_ids": [1, 2], "positions": [1], "targets": [0.5], "pos_has_sep": True, "weight": 1.0,
         "group": 0}]


def _cache_run(tmp_path, monkeypatch):
    """cached_examples on a stand-in objective and tokenizer: (call, the cache file, the builds made)."""
    from types import SimpleNamespace

    from masprm.train import cache

    built = []

    def build(records, encoder, separator, source):
        built.append(source)
        return [dict(ex) for ex in GOOD], 0

    monkeypatch.setattr(cache, "OBJECTIVES", {"prm": SimpleNamespace(build_examples=build)})
    data = tmp_path / "samples.jsonl"
    data.write_text("{}\n")
    cfg = SimpleNamespace(data_file=str(data), seed=1, mode="prm", max_length=64, max_prompt_length=0,
                          separator="</step>")
    tokenizer = type("Tok", (), {"name_or_path": "tok", "bos_token_id": None, "__len__": lambda self: 10})()
    encoder = SimpleNamespace(tokenizer=tokenizer)
    path = tmp_path / "out" / cache.CACHE_DIR / f"prm_{cache.cache_key(cfg, encoder.tokenizer)}.json"
    return (lambda: cache.cached_examples(cfg, [{}], encoder, tmp_path / "out")), path, built


def _written(path):
    """What the cache writes for GOOD under the file's own key (a valid file to damage)."""
    from masprm.train.cache import _digest

    key = path.stem.split("_", 1)[1]
    return {"key": key, "digest": _digest(GOOD, 0), "examples": GOOD, "skipped": 0}


@pytest.mark.parametrize("name, damage, said", [
    ("old-layout", lambda p, w: json.dumps({"examples": [{"x": 1}], "skipped": 0}),
     "written for other data or settings"),
    ("no-group", lambda p, w: json.dumps({**w, "examples": [{k: v for k, v in GOOD[0].items() if k != "group"}]}),
     "its content does not match its digest (edited or cut)"),
    ("ids-text", lambda p, w: json.dumps({**w, "examples": [{**GOOD[0], "input_ids": "12"}]}),
     "its content does not match its digest (edited or cut)"),
    ("other-key", lambda p, w: json.dumps({**w, "key": "0" * 16}), "written for other data or settings"),
    ("nested", lambda p, w: json.dumps({**w, "examples": [{"input_ids": [{"x": 1}]}]}),
     "its examples are not the cache's layout"),
    ("empty", lambda p, w: json.dumps({**w, "examples": []}), "its examples are not the cache's layout"),
    ("negative", lambda p, w: json.dumps({**w, "skipped": -1}), "not the cache's layout"),
    ("list", lambda p, w: json.dumps(["not", "a", "cache"]), "not the cache's layout"),
    ("cut", lambda p, w: json.dumps(w)[:40], "unreadable (JSONDecodeError)"),
    ("edited-text", lambda p, w: json.dumps(w).replace('"text": "a"', '"text": "b"'),
     "its content does not match its digest (edited or cut)"),
    ("latin-1", lambda p, w: json.dumps(w).replace('"text": "a"', '"text": "\u00e9"').encode("latin-1"),
     "unreadable (UnicodeDecodeError)"),
])
def test_a_cache_not_written_for_this_key_is_rebuilt_in_one_line(tmp_path, monkeypatch, caplog, name, damage, said):
    """A map cache of the wrong structure (or edited, cut, copied from another run) never reaches the trainer:
    it is rebuilt, one warning line naming the file and why, and the rebuilt file is read back next time."""
    import logging

    call, path, built = _cache_run(tmp_path, monkeypatch)
    path.parent.mkdir(parents=True)
    damaged = damage(path, _written(path))
    path.write_bytes(damaged if isinstance(damaged, bytes) else damaged.encode())
    with caplog.at_level(logging.WARNING):
        examples, skipped, from_cache = call()
    assert (examples, skipped, from_cache) == (GOOD, 0, False) and len(built) == 1
    assert [r.getMessage() for r in caplog.records] == [f"tokenised-data cache {path}: {said}; rebuilt"]
    assert call() == (GOOD, 0, True) and len(built) == 1   # the file it wrote is its own: read back


def test_a_cache_this_module_wrote_is_read_back_unchanged(tmp_path, monkeypatch):
    call, path, built = _cache_run(tmp_path, monkeypatch)
    assert call()[2] is False and json.loads(path.read_text()) == _written(path)
    assert call() == (GOOD, 0, True) and len(built) == 1


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


def test_a_folder_at_the_caches_name_is_named_never_removed(tmp_path, monkeypatch):
    from masprm.errors import ConfigError

    call, path, built = _cache_run(tmp_path, monkeypatch)
    (path / "inside").mkdir(parents=True)
    with pytest.raises(ConfigError) as err:
        call()
    assert str(err.value) == (f"output_dir {tmp_path / 'out'}: map_cache/{path.name} is a folder where a cache file "
                              "goes; move it away") and (path / "inside").is_dir()
