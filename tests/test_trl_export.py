"""Stage 2's --export trl: TRL's preference and stepwise-supervision formats, loadable with `datasets`.

TRL's dataset-formats guide (standard format): preference rows are {"prompt", "chosen", "rejected"}, all
strings; stepwise-supervision rows are {"prompt": str, "completions": [str], "labels": [bool]}.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from masprm.errors import MasprmError
from masprm.labels.mining import ppm_texts
from masprm.labels.trl import export_trl, preference_row, stepwise_row, trl_path
from masprm.stages import preprocess

from helpers_trees import gsm8k_tree, write_trees

RUN = "gsm8k_res_train_tiny_r4_c4_cand2_t0p7_p0p95"


def load(path: Path, cache: Path) -> datasets.Dataset:
    return datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(cache))


def test_a_pair_becomes_its_shared_steps_and_the_two_differing_steps():
    record = {"prompt": "Q?", "chosen_actions": ["read", "plan A", "solve A"],
              "rejected_actions": ["read", "plan B", "solve B"], "meta": {"agent_idx": 2}}
    row = preference_row(record)
    # the pair differs last at the third step; the scorer's texts share the chosen steps before it
    assert row == {"prompt": "Q?read</step>plan A</step>", "chosen": "solve A</step>",
                   "rejected": "solve B</step>", "meta": {"agent_idx": 2}}
    pos, neg = ppm_texts(record)
    assert (row["prompt"] + row["chosen"], row["prompt"] + row["rejected"]) == (pos, neg)
    assert preference_row({**record, "rejected_actions": record["chosen_actions"]}) is None


def test_a_step_sample_gets_boolean_labels_by_sign_and_keeps_its_values():
    row = stepwise_row({"prompt": "Q?", "completions": ["a", "b", "c", "d"], "labels": [0.5, 0, -0.2, 1]})
    assert row == {"prompt": "Q?", "completions": ["a", "b", "c", "d"], "labels": [True, False, False, True],
                   "values": [0.5, 0.0, -0.2, 1.0]}
    assert all(isinstance(v, float) for v in row["values"])


def test_preprocess_export_trl_writes_files_datasets_loads_with_trls_columns(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_trees(tmp_path / "results" / RUN, [gsm8k_tree(), gsm8k_tree(0.1)])
    code = preprocess.main(["--input", f"results/{RUN}", "--target-nodes", "5", "--make-ppm", "--no-dedupe",
                            "--export", "trl"])
    assert code == 0
    results = tmp_path / "results"
    pairs, steps = results / f"ppm_pairs_{RUN}.jsonl", results / f"prm_samples_{RUN}.jsonl"
    assert trl_path(pairs) == results / f"trl_ppm_pairs_{RUN}.jsonl"
    out = capsys.readouterr().out
    assert f"trl_ppm_pairs_{RUN}.jsonl" in out and f"trl_prm_samples_{RUN}.jsonl" in out

    preference = load(trl_path(pairs), tmp_path / "cache")
    assert {name: preference.features[name] for name in ("prompt", "chosen", "rejected")} == \
        {name: datasets.Value("string") for name in ("prompt", "chosen", "rejected")}
    source = [json.loads(line) for line in pairs.read_text().splitlines()]
    assert len(preference) == len(source) > 0
    for row, record in zip(preference, source):
        assert row["prompt"] + row["chosen"] == ppm_texts(record)[0]
        assert row["prompt"] + row["rejected"] == ppm_texts(record)[1]

    stepwise = load(trl_path(steps), tmp_path / "cache")
    assert stepwise.features["prompt"] == datasets.Value("string")
    assert stepwise.features["completions"] == datasets.List(datasets.Value("string"))
    assert stepwise.features["labels"] == datasets.List(datasets.Value("bool"))
    assert stepwise.features["values"] == datasets.List(datasets.Value("float64"))
    source = [json.loads(line) for line in steps.read_text().splitlines()]
    assert len(stepwise) == len(source) > 0
    for row, record in zip(stepwise, source):
        assert row["completions"] == record["completions"] and row["values"] == [float(v) for v in record["labels"]]
        assert row["labels"] == [v > 0 for v in record["labels"]]


def test_the_export_of_identical_pairs_leaves_them_out_and_counts_them(tmp_path):
    same = {"prompt": "Q", "chosen_actions": ["x"], "rejected_actions": ["x"]}
    other = {"prompt": "Q", "chosen_actions": ["x"], "rejected_actions": ["y"]}
    source = tmp_path / "ppm_pairs_run.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in (same, other, same)))
    count = export_trl(source, pairs=True)
    assert (count.written, count.left_out) == (1, 2)
    assert [json.loads(line) for line in count.path.read_text().splitlines()] == \
        [{"prompt": "Q", "chosen": "x</step>", "rejected": "y</step>"}]


def test_an_unwritable_export_is_refused_before_the_trees_are_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_trees(tmp_path / "results" / RUN, [gsm8k_tree()])
    (tmp_path / "results" / f"trl_prm_samples_{RUN}.jsonl").mkdir()   # a folder where the file goes
    with pytest.raises(MasprmError, match=f"trl_prm_samples_{RUN}.jsonl"):
        preprocess.main(["--input", f"results/{RUN}", "--export", "trl"])
    assert not (tmp_path / "results" / f"prm_samples_{RUN}.jsonl").exists()


@pytest.mark.slow
def test_the_stepwise_export_trains_trl_113s_prm_trainer(tmp_path, tiny_model_dir, monkeypatch):
    """TRL <= 1.13 only: 1.14 removed PRMTrainer (TRL PR #7133), so no current TRL consumes this file."""
    import random

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    prm = pytest.importorskip("trl.experimental.prm", reason="TRL's PRMTrainer exists up to TRL 1.13 only")
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from helpers_training import step_record, write_jsonl

    rows = [stepwise_row(step_record(random.Random(i))) for i in range(16)]
    data = load(write_jsonl(tmp_path / "trl_prm_samples.jsonl", rows), tmp_path / "cache")
    model = AutoModelForTokenClassification.from_pretrained(str(tiny_model_dir), num_labels=2)
    args = prm.PRMConfig(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=4,
                         report_to="none", step_separator="</step>", use_cpu=True, disable_tqdm=True)
    trainer = prm.PRMTrainer(model=model, args=args, train_dataset=data,
                             processing_class=AutoTokenizer.from_pretrained(str(tiny_model_dir)))
    result = trainer.train()
    assert result.global_step == 2 and 0 < result.training_loss < 5
