"""Results do not depend on the number of workers: --workers 1 and --workers 2 (Ray) write the same files."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from helpers_cli import FAST, write_gsm8k
from helpers_cli import run_eval as run

pytestmark = pytest.mark.slow   # trains a scorer and runs stage 4 on workers

TEAM = {"agents": [{"name": "Solver", "system_prompt": "Solve it.", "max_new_tokens": 6},
                   {"name": "Checker", "system_prompt": "Check it.", "max_new_tokens": 6}],
        "edges": [[-1, 0], [0, 1], [-1, 1]]}
METHODS = ["single_pass", "sbs_prm", "mcts_logprob"]
# Files are compared per method, ignoring fingerprints and manifest hashes: those include a hash of
# the source code, which can change between the two runs in a working tree that is being edited.
MANIFEST = re.compile(r"manifest=\w+")


def method_of(name: str) -> str:
    return next(m for m in METHODS if name.startswith(f"gsm8k_{m}_"))


def test_one_and_two_workers_give_identical_logs(tiny_model_dir, prm_dir, tmp_path):  # noqa: F811
    config = tmp_path / "team.yaml"
    config.write_text(yaml.safe_dump(TEAM))
    data = write_gsm8k(tmp_path / "gsm8k.jsonl")
    outputs = {}
    for workers in (1, 2):
        logs = tmp_path / f"logs{workers}"
        done = run("--dataset", "gsm8k", "--data_file", data, "--mas_config", config, "--seed", 24,
                   "--gen_model_id", tiny_model_dir, "--prm_dir", prm_dir, "--prm_base_model_id", tiny_model_dir,
                   "--methods", *METHODS, "--b1", 2, "--b2", 2, "--n_simulations", 3, "--max_children", 2,
                   "--workers", workers, "--logs_dir", logs, *FAST, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        outputs[workers] = {(method_of(p.name), p.suffix): MANIFEST.sub("manifest=", p.read_text())
                            for p in sorted(logs.iterdir()) if p.suffix in (".txt", ".jsonl")}
    assert len(outputs[1]) == 2 * len(METHODS)
    assert outputs[1] == outputs[2]
    records = [json.loads(ln) for (_, suffix), text in outputs[2].items() if suffix == ".jsonl"
               for ln in text.splitlines()]
    assert len(records) == 3 * len(METHODS) and not any(r["error"] for r in records)
