"""Adding a dataset is one registration: it then runs end to end through the stage-1 and stage-4 CLIs."""

import json
import sys

import pytest
import yaml

from masprm.cli import run_cli
from masprm.data import DATASETS, register_dataset, seeded_order, select_examples
from masprm.dataset_rows import gsm8k_gold

from helpers import REPO
from helpers_cli import stage_module

pytestmark = pytest.mark.slow   # runs stages 1 and 4 end to end

ROWS = [{"question": f"What is {a} plus {b}?", "answer": f"{a} + {b} = {a + b}\n#### {a + b}"}
        for a, b in ((1, 2), (3, 4), (5, 6))]


@pytest.fixture
def plugin_dataset():
    # The one place the new dataset is defined: a loader registered under its --dataset name.
    @register_dataset("arith_plugin")
    def load(split, *, n=None, seed=42, data_file=None):
        return select_examples(ROWS, seeded_order(len(ROWS), seed), n=n, gold=gsm8k_gold,
                               question=lambda row: row["question"],
                               meta=lambda i, row: {"dataset": "arith_plugin", "split": split, "source_index": i})

    yield "arith_plugin"
    DATASETS.unregister("arith_plugin")


def cli(monkeypatch, script, args):
    monkeypatch.setattr(sys, "argv", [script.name, *map(str, args)])
    with pytest.raises(SystemExit) as done:
        run_cli(stage_module(script.stem).main)
    return done.value.code


def test_a_registered_dataset_runs_through_stage_1_and_stage_4(plugin_dataset, tiny_model_dir, tmp_path,
                                                                monkeypatch, capsys):
    config = yaml.safe_load((REPO / "configs" / "gsm8k.yaml").read_text())
    for agent in config["agents"]:
        agent["max_new_tokens"] = 4   # the random tiny model never stops: keep its outputs short
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "arith_plugin.yaml").write_text(yaml.safe_dump(config))   # its default config path
    monkeypatch.chdir(tmp_path)

    code = cli(monkeypatch, REPO / "src" / "run_mcts.py",
               ["--dataset", plugin_dataset, "--split", "train", "--n", 2, "--n_rollouts", 1, "--n_candidates", 1,
                "--mas_config", "configs/arith_plugin.yaml", "--model_id", tiny_model_dir, "--device_map", "cpu", "--no_compile",
                "--max_new_tokens", 4, "--no_plot"])
    assert code == 0, capsys.readouterr().err
    (folder,) = (tmp_path / "results").iterdir()
    assert folder.name.startswith(f"{plugin_dataset}_res_train_")
    trees = [json.loads((folder / f"{i}.json").read_text()) for i in range(2)]
    order = seeded_order(len(ROWS), 42)
    assert [t["node_text"] for t in trees] == [ROWS[i]["question"] for i in order[:2]]

    code = cli(monkeypatch, REPO / "src" / "experiments" / "compare_sbs_mcts.py",
               ["--dataset", plugin_dataset, "--split", "test", "--sample_n", 2, "--methods", "single_pass",
                "--gen_model_id", tiny_model_dir, "--mas_config", "configs/arith_plugin.yaml", "--device_map", "cpu",
                "--no_compile", "--max_new_tokens", 4, "--workers", 1, "--logs_dir", tmp_path / "logs"])
    assert code == 0, capsys.readouterr().err
    (log,) = (tmp_path / "logs").glob(f"{plugin_dataset}_single_pass_*.txt")
    text = log.read_text()
    assert f"dataset={plugin_dataset}" in text and "[data] examples=2" in text and text.rstrip().endswith("COMPLETED")


def test_an_unknown_dataset_names_the_valid_ones_and_a_close_match(plugin_dataset, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    code = cli(monkeypatch, REPO / "src" / "run_mcts.py", ["--dataset", "arith_plugn", "--model_id", "x"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "unknown dataset 'arith_plugn'" in err and "gsm8k" in err and "did you mean 'arith_plugin'?" in err
