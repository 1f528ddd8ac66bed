"""Stage 3 scorer training: seeding, resume after a crash or a kill mid-save, and resume on its own data only.

Everything runs on CPU with the session's tiny Qwen2 model; training runs are a few steps.
"""

from __future__ import annotations

import json
import random

import pytest
import torch
from safetensors.torch import load_file

from masprm.errors import ConfigError, DataError
from masprm.train import train_scorer

from helpers_training import config, ppm_record, write_jsonl

pytestmark = pytest.mark.slow   # trains scorers


class _Crash(Exception):
    pass


def test_training_is_seeded_and_resumes_after_a_crash(tmp_path, tiny_model_dir):
    from transformers import TrainerCallback

    rng = random.Random(2)
    data = write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(rng) for _ in range(40)])
    run = lambda name, seed=7, **kw: config(tmp_path, data, tiny_model_dir, "ppm", seed=seed, max_steps=4,  # noqa: E731
                                            eval_steps=2, lora_dropout=0.1, output_dir=str(tmp_path / name), **kw)
    adapter = lambda name: load_file(tmp_path / name / "adapter_model.safetensors")  # noqa: E731

    train_scorer(run("a"))
    train_scorer(run("b"))
    train_scorer(run("c", seed=8))
    a, b, c = adapter("a"), adapter("b"), adapter("c")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)
    # the rest of the folder repeats too: module lists in sorted order, no wall-clock figures
    read = lambda name, file: (tmp_path / name / file).read_text()  # noqa: E731
    assert read("a", "adapter_config.json") == read("b", "adapter_config.json")
    modules = json.loads(read("a", "adapter_config.json"))["target_modules"]
    assert modules == sorted(modules) and len(modules) == 7
    metrics = [json.loads(read(name, "masprm_scorer.json"))["eval_metrics"] for name in "ab"]
    assert metrics[0] == metrics[1] and "eval_loss" in metrics[0]

    class CrashAtStep3(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                raise _Crash

    with pytest.raises(_Crash):
        train_scorer(run("d"), callbacks=[CrashAtStep3()])
    assert [p.name for p in (tmp_path / "d").glob("checkpoint-*")] == ["checkpoint-2"]
    with pytest.raises(ConfigError, match="^output_dir .*already holds checkpoints .*`resume`"):
        train_scorer(run("d"))
    train_scorer(run("d", resume=True))
    d = adapter("d")
    assert all(torch.allclose(a[k], d[k], atol=1e-6) for k in a)


def test_a_kill_while_a_checkpoint_is_saved_resumes_to_identical_weights(tmp_path, tiny_model_dir, monkeypatch):
    from transformers import Trainer

    rng = random.Random(2)
    data = write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(rng) for _ in range(40)])
    run = lambda name, **kw: config(tmp_path, data, tiny_model_dir, "ppm", seed=7, max_steps=4,  # noqa: E731
                                    eval_steps=2, lora_dropout=0.1, output_dir=str(tmp_path / name), **kw)
    train_scorer(run("whole"))

    save_rng_state = Trainer._save_rng_state

    def killed_at_step_4(self, output_dir):  # weights, optimizer and scheduler are on disk by now
        if self.state.global_step == 4:
            raise _Crash
        return save_rng_state(self, output_dir)

    monkeypatch.setattr(Trainer, "_save_rng_state", killed_at_step_4)
    with pytest.raises(_Crash):
        train_scorer(run("killed"))
    monkeypatch.undo()
    out = tmp_path / "killed"
    assert (out / "checkpoint-4" / "adapter_model.safetensors").is_file()
    assert not (out / "checkpoint-4" / "trainer_state.json").exists()
    (out / "checkpoint-6").mkdir()  # another kill, right after the folder was made

    train_scorer(run("killed", resume=True))
    whole = load_file(tmp_path / "whole" / "adapter_model.safetensors")
    resumed = load_file(out / "adapter_model.safetensors")
    assert whole.keys() == resumed.keys() and all(torch.equal(whole[k], resumed[k]) for k in whole)
    assert sorted(p.name for p in out.glob("*checkpoint-*")) == [
        "checkpoint-2", "checkpoint-4", "incomplete-checkpoint-4", "incomplete-checkpoint-6"]
    assert json.loads((out / "masprm_scorer.json").read_text())["status"] == "completed"


def test_incomplete_checkpoints_are_set_aside_with_one_line_each(tmp_path):
    from masprm.train.checkpoints import resume_checkpoint

    def checkpoint(step, *, state=True, weights=b"", cut=False):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        if state:
            (folder / "trainer_state.json").write_text('{"global_step": %d' % step + ("" if cut else "}"))
        from safetensors.torch import save_file
        save_file({"w": torch.ones(4, 4)}, str(folder / "adapter_model.safetensors"))
        if weights == b"cut":
            data = (folder / "adapter_model.safetensors").read_bytes()
            (folder / "adapter_model.safetensors").write_bytes(data[:-10])

    checkpoint(10)
    checkpoint(20, weights=b"cut")           # killed while the weights were written
    checkpoint(30, state=False)              # killed before trainer_state.json
    checkpoint(40, cut=True)                 # killed while trainer_state.json was written
    (tmp_path / "checkpoint-9").mkdir()      # killed right after the folder was made
    (tmp_path / "incomplete-checkpoint-9").mkdir()  # an earlier one, set aside before
    lines = []
    assert resume_checkpoint(tmp_path, lines.append) == tmp_path / "checkpoint-10"
    assert len(lines) == 4 and all("resuming from checkpoint-10" in line for line in lines)
    assert "checkpoint-30 is incomplete (no trainer_state.json" in lines[2]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint-10", "incomplete-checkpoint-20", "incomplete-checkpoint-30", "incomplete-checkpoint-40",
        "incomplete-checkpoint-9", "incomplete-checkpoint-9.2"]
    assert resume_checkpoint(tmp_path / "nothing", lines.append) is None


def test_resume_keeps_a_scorer_on_its_own_data(tmp_path):
    from masprm.train.checkpoints import check_same_data, data_record

    pairs, other = tmp_path / "pairs.jsonl", tmp_path / "other.jsonl"
    pairs.write_text('{"a": 1}\n')
    other.write_text('{"a": 2}\n')
    out = tmp_path / "scorer"
    out.mkdir()
    check_same_data(out, str(other))  # no record yet: anything goes
    (out / "masprm_scorer.json").write_text(json.dumps({"status": "completed", "data": data_record(str(pairs))}))
    check_same_data(out, str(pairs))
    with pytest.raises(DataError, match=r"^data_file .*other.jsonl is not the data .*pairs.jsonl; status completed"):
        check_same_data(out, str(other))
    # A record without the data's identity cannot be checked: refused, naming the folder's setting.
    (out / "masprm_scorer.json").write_text(json.dumps({"status": "training", "settings": {"data_file": str(pairs)}}))
    with pytest.raises(ConfigError, match="records no identity of its training data") as err:
        check_same_data(out, str(pairs))
    assert err.value.setting == "output_dir"
