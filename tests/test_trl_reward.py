"""docs/sharing.md's ORM recipe end to end: TRL's RewardTrainer on the pairs stage 2 exports from a tiny tree, the
saved folder read by stage 4 as --orm_dir (format trl_reward). Skipped where TRL is not installed; CI installs the
version requirements.txt pins, the one the docs name."""

from __future__ import annotations

import json
import math
import re

import pytest

from helpers import REPO
from helpers_cli import FAST, run_module, write_gsm8k
from helpers_trees import gsm8k_tree, write_trees
from masprm.scorer_folder import read_scorer_folder
from masprm.scorer_formats import detected_format
from masprm.state_text import StepText
from masprm.stages import preprocess

RUN = "gsm8k_res_train_tiny_r4_c4_cand2_t0p7_p0p95"


def recipe(**names: str) -> str:
    """The docs' train_orm.py with its three names (PAIRS, BASE, OUT) set to ``names``."""
    block = re.search(r"```python\n(# train_orm\.py.*?)```", (REPO / "docs" / "sharing.md").read_text(), re.S)
    script = block.group(1)
    for name, value in names.items():
        script, found = re.subn(rf'^{name} = ".*"$', f"{name} = {value!r}", script, flags=re.M)
        assert found == 1, name
    return script


@pytest.mark.slow
def test_the_docs_orm_recipe_trains_with_trl_and_stage_4_ranks_with_it(tmp_path, tiny_model_dir, monkeypatch,
                                                                        capsys):
    trl = pytest.importorskip("trl", reason="TRL is the [trl] extra (requirements.txt pins it for CI)")
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from masprm.models.scorer import load_scorer

    assert f"TRL {trl.__version__}" in (REPO / "docs" / "sharing.md").read_text()   # the version the docs name
    monkeypatch.chdir(tmp_path)
    write_trees(tmp_path / "results" / RUN, [gsm8k_tree(), gsm8k_tree(0.1)])
    assert preprocess.main(["--input", f"results/{RUN}", "--target-nodes", "5", "--make-ppm", "--no-dedupe",
                            "--export", "trl"]) == 0
    exec(compile(recipe(PAIRS=f"results/trl_ppm_pairs_{RUN}.jsonl", BASE=str(tiny_model_dir),
                        OUT="checkpoints/trl-orm"), "train_orm.py", "exec"), {})
    folder = tmp_path / "checkpoints" / "trl-orm"
    found = detected_format(read_scorer_folder(folder))
    assert found is not None and found[0].name == "trl_reward"

    # served: tanh(r / 2) of the reward the trained model gives the finished transcript plus EOS
    finished = StepText("What is 2 + 2?", ["read", "plan A", "solve A", "answer: 4"])
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        reward = model(torch.tensor([tokenizer(finished + tokenizer.eos_token)["input_ids"]])).logits[0, 0].item()
    assert load_scorer(folder, setting="orm_dir").score_batch([finished]) == pytest.approx([math.tanh(reward / 2)],
                                                                                          abs=1e-6)

    argv = ["--dataset", "gsm8k", "--split", "test", "--data_file", str(write_gsm8k(tmp_path / "gsm8k.jsonl")),
            "--sample_n", "1", "--methods", "bon_orm", "--step_agg", "last", "--bon_n", "2",
            "--orm_dir", "checkpoints/trl-orm", "--gen_model_id", str(tiny_model_dir),
            "--mas_config", "configs/gsm8k.yaml", "--logs_dir", "logs", *FAST]
    code, err, out = run_module(monkeypatch, capsys, "masprm.stages.evaluate", argv)
    assert code == 0, err
    assert "[orm: trl-orm (trl_reward)]" in out
    (manifest,) = (tmp_path / "logs").glob("gsm8k_bon_orm_*.manifest.json")
    assert json.loads(manifest.read_text())["definition"]["models"]["orm"]["scorer_format"] == {"name": "trl_reward"}
    (record,) = [json.loads(line) for line in manifest.with_name(
        manifest.name.replace(".manifest.json", ".jsonl")).read_text().splitlines()]
    scores = record["extra"]["bon_scores"]
    assert record["metrics"]["scorer_calls"] > 0 and len(scores) == 2 and all(-1 < s < 1 for s in scores)
