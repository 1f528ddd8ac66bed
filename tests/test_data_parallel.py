"""Stage 3 under torchrun: real data parallelism on CPUs (gloo), checked against one process.

Two processes with a batch of 4 each and one process with a batch of 8 take the
same examples at every step (each process half of them) and end with the same
adapter, up to float rounding; only the first process writes the folder and speaks.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from safetensors.torch import load_file

from helpers import REPO
from helpers_training import step_record, write_jsonl

pytestmark = pytest.mark.slow   # two trainings, one of them in two processes

WORKER = str(REPO / "tests" / "fixtures" / "train_recording.py")


def _train(tmp_path, name: str, batch: int, processes: int) -> tuple[subprocess.CompletedProcess, list[list]]:
    flags = ["--mode", "prm", "--data_dir", str(tmp_path / "steps.jsonl"), "--model-id", str(tmp_path / "model"),
             "--output-dir", str(tmp_path / name), "--max-steps", "2", "--train-batch-size", str(batch),
             "--grad-accum", "1", "--lora-r", "4", "--max-length", "64", "--lr", "1e-3", "--seed", "1"]
    launch = [sys.executable] if processes == 1 else \
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]
    done = subprocess.run([*launch, WORKER, str(tmp_path / f"seen_{name}"), *flags], capture_output=True,
                          text=True, timeout=300, env={**__import__("os").environ, "TQDM_DISABLE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    seen = [json.loads((tmp_path / f"seen_{name}.{rank}.json").read_text()) for rank in range(processes)]
    return done, seen


def test_two_gloo_processes_split_every_step_and_train_the_single_process_adapter(tmp_path, tiny_model_dir):
    import shutil

    shutil.copytree(tiny_model_dir, tmp_path / "model")
    write_jsonl(tmp_path / "steps.jsonl", [step_record(random.Random(i)) for i in range(17)])  # 16 train, 1 eval

    one, (alone,) = _train(tmp_path, "one", batch=8, processes=1)
    two, (rank0, rank1) = _train(tmp_path, "two", batch=4, processes=2)

    # Each step: the two processes hold 4 examples each, disjoint, together the single process's 8.
    for step in range(2):
        assert len(alone[step]) == 8 and len(rank0[step]) == len(rank1[step]) == 4
        assert not set(rank0[step]) & set(rank1[step])
        assert sorted(rank0[step] + rank1[step]) == sorted(alone[step])
    assert len({text for step in alone[:2] for text in step}) == 16   # one epoch: every example once

    a = load_file(tmp_path / "one" / "adapter_model.safetensors")
    b = load_file(tmp_path / "two" / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    lora_b = [k for k in a if "lora_B" in k]
    assert lora_b and max(a[k].abs().max().item() for k in lora_b) > 1e-4   # trained: LoRA B starts at 0
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5

    # One writer, one voice: the summary and the saved line once, naming the world size and effective batch.
    assert two.stdout.count("saved prm scorer") == 1
    assert two.stderr.count("2 optimizer steps on 2 processes (effective batch 2 x 4 x 1 = 8)") == 1
    assert "parallel_mode != ParallelMode.DISTRIBUTED" not in two.stderr
    meta = json.loads((tmp_path / "two" / "masprm_scorer.json").read_text())
    assert meta["status"] == "completed"
