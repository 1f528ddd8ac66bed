"""The stages as a user runs them, for what they leave behind: files the umask lets colleagues read,
one training per scorer folder, and a full disk answered with one line that loses nothing finished.

Every test here starts the stage scripts as subprocesses on the tiny model (slow).
"""

from __future__ import annotations

import json
import os
import random
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from helpers_cli import write_gsm8k
from helpers_training import ppm_record, write_jsonl

pytestmark = pytest.mark.slow
SRC = REPO / "src"
TRAIN = [sys.executable, str(SRC / "train" / "trainer.py"), "--mode", "ppm", "--train-batch-size", "4",
         "--grad-accum", "1", "--lora-r", "4", "--lora-alpha", "8", "--seed", "0", "--quiet"]
CPU = ["--device_map", "cpu", "--no_compile"]


def run(cmd, cwd, mask=0o022, file_limit=None, **kw):
    def child():
        os.umask(mask)
        if file_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, resource.RLIM_INFINITY))

    quiet = {**os.environ, "TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}   # no bars: lines count
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=600,
                          preexec_fn=child, env=quiet, **kw)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_stage_writes_files_the_umask_lets_others_read(tmp_path, tiny_model_dir):
    """Under umask 022 every file of stages 1-5 and show_tree is readable by group and others."""
    from helpers_cli import make_workdir

    work = make_workdir(tmp_path)
    stage1 = run([sys.executable, SRC / "run_mcts.py", "--dataset", "gsm8k", "--data_file", "gsm8k.jsonl", "--n",
                  "2", "--n_rollouts", "2", "--n_candidates", "2", "--max_new_tokens", "4", "--model_id",
                  tiny_model_dir, "--mas_config", "configs/gsm8k.yaml", *CPU], work)
    assert stage1.returncode == 0, stage1.stderr
    [trees] = (work / "results").glob("gsm8k_res_*")
    stage2 = run([sys.executable, SRC / "train" / "preprocess_data.py", "--input", trees, "--make-ppm"], work)
    assert stage2.returncode == 0, stage2.stderr
    write_jsonl(work / "pairs.jsonl", [ppm_record(random.Random(i)) for i in range(8)])
    stage3 = run([*TRAIN, "--data_dir", "pairs.jsonl", "--model-id", tiny_model_dir, "--output-dir", "scorer",
                  "--max-steps", "2", "--eval-steps", "1"], work)
    assert stage3.returncode == 0, stage3.stderr
    write_gsm8k(work / "eval.jsonl")
    stage4 = run([sys.executable, SRC / "experiments" / "compare_sbs_mcts.py", "--methods", "single_pass", "sbs_prm",
                  "--dataset", "gsm8k", "--data_file", "eval.jsonl", "--gen_model_id", tiny_model_dir,
                  "--mas_config", "configs/gsm8k.yaml", "--prm_dir", "scorer", "--sample_n", "2", "--b1", "2",
                  "--b2", "2", "--max_new_tokens", "4", "--logs_dir", "logs", *CPU], work)
    assert stage4.returncode == 0, stage4.stderr
    stage5 = run([sys.executable, REPO / "aggregator.py", "--logs_dir", "logs", "--out", "table.csv"], work)
    assert stage5.returncode == 0, stage5.stderr
    shown = run([sys.executable, SRC / "show_tree.py", trees / "0.json", "--out", "tree.png"], work)
    assert shown.returncode == 0, shown.stderr

    written = [p for p in work.rglob("*") if p.is_file() and p.name not in ("gsm8k.jsonl", "eval.jsonl",
                                                                            "pairs.jsonl", "gsm8k.yaml")]
    assert {"table.csv", "table.png", "tree.png", "adapter_model.safetensors", "masprm_scorer.json",
            "0.json"} <= {p.name for p in written}
    assert any(p.suffix == ".txt" for p in (work / "logs").iterdir())
    private = [f"{p.relative_to(work)} {oct(stat.S_IMODE(p.stat().st_mode))}" for p in written
               if stat.S_IMODE(p.stat().st_mode) & 0o044 != 0o044]
    assert not private


def test_two_trainings_into_one_folder_the_second_is_refused(tmp_path, tiny_model_dir):
    """A second training started into the --output-dir of one that is running says who holds the folder and
    writes nothing; the first finishes with its own settings."""
    from transformers import TrainerCallback

    from helpers_training import config
    from masprm.train import train_scorer

    write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(random.Random(i)) for i in range(40)])
    out = tmp_path / "scorer"
    second_run = [*TRAIN, "--data_dir", "pairs.jsonl", "--model-id", tiny_model_dir, "--output-dir", out,
                  "--max-steps", "2", "--lr", "5e-3"]
    seen = {}

    class StartTheSecond(TrainerCallback):   # the first is mid-training when the second starts
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                seen["holder"] = (out / ".lock").read_text()
                seen["folder"] = snapshot(out)
                seen["second"] = run(second_run, tmp_path)
                seen["after"] = snapshot(out)

    cfg = config(tmp_path, tmp_path / "pairs.jsonl", tiny_model_dir, "ppm", output_dir=str(out), max_steps=3,
                 lr=1e-4, eval_steps=3)
    train_scorer(cfg, callbacks=[StartTheSecond()])
    second = seen["second"]
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 2 and len(lines) == 1, second.stderr
    assert f"{out} is in use by another run (pid {os.getpid()} on " in lines[0] and "--output-dir" in lines[0]
    assert seen["holder"].startswith(f"pid {os.getpid()} on ") and seen["after"] == seen["folder"]
    meta = json.loads((out / "masprm_scorer.json").read_text())
    assert meta["status"] == "completed" and meta["settings"]["lr"] == 1e-4 and meta["settings"]["max_steps"] == 3
    assert not (out / ".lock").exists()

    # Finished: another training over it needs --overwrite, even with its checkpoints gone.
    for checkpoint in out.glob("checkpoint-*"):
        subprocess.run(["rm", "-r", str(checkpoint)], check=True)
    again = run(second_run, tmp_path)
    assert again.returncode == 2 and "holds a finished ppm scorer" in again.stderr and "--overwrite" in again.stderr
    assert json.loads((out / "masprm_scorer.json").read_text()) == meta
    assert run([*second_run, "--overwrite"], tmp_path).returncode == 0
    assert json.loads((out / "masprm_scorer.json").read_text())["settings"]["lr"] == 5e-3


def test_a_full_disk_while_training_is_one_line_and_keeps_the_saved_checkpoints(tmp_path, tiny_model_dir):
    write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(random.Random(i)) for i in range(16)])
    args = [*TRAIN, "--data_dir", "pairs.jsonl", "--model-id", tiny_model_dir, "--output-dir", "scorer",
            "--max-steps", "2", "--eval-steps", "1"]
    done = run(args, tmp_path, file_limit=20_000)   # the scorer's settings fit, its weights do not
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert "cannot be written (File too large); nothing finished was lost: the checkpoints already saved in " \
           "scorer are intact (--resume continues from the newest)" in lines[0]
    assert json.loads((tmp_path / "scorer" / "masprm_scorer.json").read_text())["status"] == "training"
    resumed = run([*args, "--resume"], tmp_path)   # with room again, the same command finishes it
    assert resumed.returncode == 0, resumed.stderr[-3000:]


def test_a_full_disk_while_evaluating_is_one_line_and_keeps_finished_conditions(tmp_path, tiny_model_dir):
    from helpers_cli import make_workdir

    work = make_workdir(tmp_path)
    write_gsm8k(work / "eval.jsonl")
    base = [sys.executable, SRC / "experiments" / "compare_sbs_mcts.py", "--dataset", "gsm8k", "--data_file",
            "eval.jsonl", "--gen_model_id", tiny_model_dir, "--mas_config", "configs/gsm8k.yaml", "--sample_n",
            "3", "--max_new_tokens", "4", "--logs_dir", "logs", *CPU]
    first = run([*base, "--methods", "single_pass"], work)
    assert first.returncode == 0, first.stderr
    finished = snapshot(work / "logs")
    limit = max(len(data) for data in finished.values()) + 10   # the finished files fit; a larger new one does not
    done = run([*base, "--methods", "single_pass", "voter_plain", "--voter_k", "4"], work, file_limit=limit)
    lines = done.stderr.strip().splitlines()   # TQDM_DISABLE: the "evaluating" bar leaves no line either
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert "error: logs/" in lines[0] and ": cannot be written (File too large); nothing finished was lost: " in lines[0]
    assert {k: v for k, v in snapshot(work / "logs").items() if k in finished} == finished
