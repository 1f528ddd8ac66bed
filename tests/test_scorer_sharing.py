"""Sharing a trained scorer: its model card's snippet (peft + transformers only), the merged export, the hub push.

The hub is exercised through its client's own offline mode (HF_HUB_OFFLINE=1, set by conftest): the
push goes as far as the client's upload call (``create_commit``), whose first request the client
itself refuses. What the hub would do with the commit is not exercised.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from masprm.models.scorer import load_scorer
from masprm.state_text import join_steps

from helpers import REPO
from helpers_training import step_record, write_jsonl

pytestmark = pytest.mark.slow

TRANSCRIPTS = [("Q: 3 plus 4? ", ["Read the numbers.", "3 + 4 = 7. VERDICT: CORRECT"]),
               ("Q: 12 plus 30? ", ["12 + 30 = 41.", "VERDICT: INCORRECT", "So 41."])]
HUB_ID = "masprm-test/tiny-prm"


def card_code(folder: Path) -> str:
    return re.search(r"```python\n(.*?)```", (folder / "README.md").read_text(), re.S).group(1)


def run_snippet(code: str, cwd: Path) -> list[float]:
    """The card's code in a fresh interpreter (no PYTHONPATH), then score() on each transcript."""
    calls = "".join(f"print('SCORE', repr(score({json.dumps(p)}, {json.dumps(s)})))\n" for p, s in TRANSCRIPTS)
    check = "import sys\nprint('MASPRM_IMPORTED', any(m.split('.')[0] == 'masprm' for m in sys.modules))\n"
    done = subprocess.run([sys.executable, "-I", "-c", code + "\n" + calls + check], cwd=cwd, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MASPRM_IMPORTED False" in done.stdout
    return [float(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("SCORE ")]


def project_scores(folder: Path) -> list[float]:
    return load_scorer(folder).score_batch([join_steps(p, s) for p, s in TRANSCRIPTS])


@pytest.fixture(scope="module")
def prm_scorer_pushed(tmp_path_factory, tiny_model_dir):
    """A prm scorer from the stage-3 CLI with --push_to_hub, offline: (folder, finished process)."""
    import random

    tmp = tmp_path_factory.mktemp("prm_push")
    data = write_jsonl(tmp / "steps.jsonl", [step_record(random.Random(i)) for i in range(12)])
    out = tmp / "scorer"
    done = subprocess.run([sys.executable, str(REPO / "src/train/trainer.py"), "--mode", "prm", "--data_dir", str(data),
                           "--model-id", str(tiny_model_dir), "--output-dir", str(out), "--max-steps", "2",
                           "--train-batch-size", "4", "--grad-accum", "1", "--lora-r", "4", "--lora-alpha", "8",
                           "--max-prompt-length", "6", "--seed", "0", "--report_to", "none",
                           "--push_to_hub", "--hub_model_id", HUB_ID],
                          capture_output=True, text=True, timeout=400)
    return out, done


def test_the_card_snippet_scores_a_ppm_scorer_as_the_project(prm_dir):
    """prm_dir: the session's ppm adapter, trained by src/train/trainer.py (whole-text style)."""
    code = card_code(prm_dir)
    assert "SCORER = \".\"" in code   # no hub id: the snippet runs from inside the folder
    assert run_snippet(code, cwd=prm_dir) == pytest.approx(project_scores(prm_dir), abs=1e-6)


def test_a_failed_push_keeps_a_complete_scorer_and_says_so_in_one_line(prm_scorer_pushed):
    out, done = prm_scorer_pushed
    assert done.returncode == 1, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("trainer.py: error: upload of") and "offline mode is enabled" in last
    assert f"masprm-export-scorer {out} --push_to_hub --hub_model_id {HUB_ID}" in last
    # the upload got as far as the file list: what loads goes up, training by-products stay
    listed = re.search(r"uploading (\d+) files of .*? to the hub as masprm-test/tiny-prm: (.*)", done.stderr)
    files = listed.group(2).split(", ")
    assert int(listed.group(1)) == len(files)
    assert {"README.md", "adapter_config.json", "adapter_model.safetensors", "masprm_scorer.json",
            "tokenizer.json"} <= set(files)
    assert not [f for f in files if f.startswith(("checkpoint-", "runs/", "map_cache/")) or f == "training_args.bin"]
    assert (out / "checkpoint-2").is_dir() and json.loads((out / "masprm_scorer.json").read_text())["status"] == \
        "completed"


def test_the_card_snippet_runs_as_written_inside_a_checkout_whose_base_is_a_relative_path(prm_dir, tiny_model_dir,
                                                                                           tmp_path):
    """The demo's scorers name their base as training was given it, relative to the checkout
    (`--model-id artifacts/toy/policy`): the card's code, run from inside the scorer folder as it says
    (SCORER = "."), finds that base from the folders above (before, it asked the hub for "artifacts/toy/policy")."""
    import shutil

    from masprm.scorer_meta import read_scorer_meta
    from masprm.train.card import write_model_card

    checkout = tmp_path / "checkout"
    shutil.copytree(tiny_model_dir, checkout / "artifacts" / "toy" / "policy")
    scorer = checkout / "checkpoints" / "toy-ppm"
    shutil.copytree(prm_dir, scorer, ignore=shutil.ignore_patterns("checkpoint-*", "runs", "map_cache"))
    adapter = json.loads((scorer / "adapter_config.json").read_text())
    (scorer / "adapter_config.json").write_text(json.dumps({**adapter, "base_model_name_or_path": "artifacts/toy/policy"}))
    write_model_card(scorer, {**read_scorer_meta(scorer), "base_model_id": "artifacts/toy/policy"})
    code = card_code(scorer)
    assert "SCORER = \".\"" in code
    # the same adapter on the same base weights: the project's values for the original folder
    assert run_snippet(code, cwd=scorer) == pytest.approx(project_scores(prm_dir), abs=1e-6)


def test_the_card_snippet_scores_a_stepwise_scorer_as_the_project(prm_scorer_pushed):
    out, _ = prm_scorer_pushed
    code = card_code(out)
    assert f"SCORER = \"{HUB_ID}\"" in code   # the card names the repository it was pushed to
    local = code.replace(f"SCORER = \"{HUB_ID}\"", f"SCORER = {json.dumps(str(out))}")   # offline: the folder
    assert run_snippet(local, cwd=out.parent) == pytest.approx(project_scores(out), abs=1e-6)


def test_a_merged_export_loads_without_peft_and_scores_as_the_adapter(prm_scorer_pushed, tmp_path):
    out, _ = prm_scorer_pushed
    merged = tmp_path / "merged"
    done = subprocess.run([sys.executable, "-m", "masprm.stages.export_scorer", str(out), "--merged", str(merged)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (merged / "adapter_config.json").exists() and (merged / "model.safetensors").is_file()
    meta = json.loads((merged / "masprm_scorer.json").read_text())
    assert meta["lora"] is False and meta["merged_from"]["adapter"] == out.name
    merged_scores = project_scores(merged)
    assert merged_scores == pytest.approx(project_scores(out), abs=1e-5)   # fp32 merge: rounding only
    assert run_snippet(card_code(merged), cwd=merged) == pytest.approx(merged_scores, abs=1e-6)
    # a second export into the same folder is refused before any model loads
    again = subprocess.run([sys.executable, "-m", "masprm.stages.export_scorer", str(out), "--merged", str(merged)],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "not an empty folder" in again.stderr


def test_pushing_an_existing_folder_sends_a_card_and_leaves_the_folder_as_it_is(prm_dir):
    before = {p.name: p.read_bytes() for p in prm_dir.iterdir() if p.is_file()}
    done = subprocess.run([sys.executable, "-m", "masprm.stages.export_scorer", str(prm_dir), "--push_to_hub",
                           "--hub_model_id", "masprm-test/tiny-ppm"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "offline mode is enabled" in done.stderr and "masprm-test/tiny-ppm" in done.stderr
    assert {p.name: p.read_bytes() for p in prm_dir.iterdir() if p.is_file()} == before


def _into_hub_cache(cache: Path, repo_id: str, folder: Path) -> None:
    """`folder` as the cached snapshot of the hub model `repo_id`, laid out as huggingface_hub keeps it."""
    import shutil

    repo = cache / f"models--{repo_id.replace('/', '--')}"
    commit = "0" * 40
    shutil.copytree(folder, repo / "snapshots" / commit, ignore=shutil.ignore_patterns("checkpoint-*", "runs",
                                                                                        "map_cache"))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


def test_the_card_snippet_loads_a_hub_scorer_offline_from_the_cache(tmp_path, tiny_model_dir):
    """A scorer trained on a hub base (from the cache), its card naming its hub id: the snippet runs with
    HF_HUB_OFFLINE=1, where peft's own loader cannot resize the embeddings (it asks the hub)."""
    import os
    import random
    import shutil

    from masprm.train.card import write_model_card

    cache, base_id, scorer_id = tmp_path / "cache", "masprm-test/tiny-base", "masprm-test/tiny-prm-offline"
    base = tmp_path / "base"
    shutil.copytree(tiny_model_dir, base)
    (base / "README.md").write_text("---\nlicense: apache-2.0\n---\n# tiny\n")
    _into_hub_cache(cache, base_id, base)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}
    data = write_jsonl(tmp_path / "steps.jsonl", [step_record(random.Random(i)) for i in range(12)])
    out = tmp_path / "scorer"
    done = subprocess.run([sys.executable, str(REPO / "src/train/trainer.py"), "--mode", "prm", "--data_dir", str(data),
                           "--model-id", base_id, "--output-dir", str(out), "--max-steps", "2",
                           "--train-batch-size", "4", "--grad-accum", "1", "--lora-r", "4", "--seed", "0",
                           "--report_to", "none", "--quiet"], capture_output=True, text=True, timeout=400, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    meta = json.loads((out / "masprm_scorer.json").read_text())
    assert meta["base_model_id"] == base_id and meta["base_license"] == "apache-2.0"
    card = write_model_card(out, hub_model_id=scorer_id).read_text()
    assert "license: apache-2.0" in card and f"base_model: {base_id}" in card
    _into_hub_cache(cache, scorer_id, out)
    code = card_code(out)
    assert f'SCORER = "{scorer_id}"' in code
    calls = "".join(f"print('SCORE', repr(score({json.dumps(p)}, {json.dumps(s)})))\n" for p, s in TRANSCRIPTS)
    ran = subprocess.run([sys.executable, "-I", "-c", code + "\n" + calls], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env=env)
    assert ran.returncode == 0, ran.stderr[-3000:]
    scores = [float(line.split()[1]) for line in ran.stdout.splitlines() if line.startswith("SCORE ")]
    expected = load_scorer(out, base_model_id=str(base)).score_batch([join_steps(p, s) for p, s in TRANSCRIPTS])
    assert scores == pytest.approx(expected, abs=1e-6)
