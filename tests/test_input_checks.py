"""The shared checks behind the third round's bad-input rows, where the table cannot show a detail:
what they accept (so a good input is never refused), the override flags, and the exact rule."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from masprm.checks import SEED_MAX, check_scorer_role, check_seed
from masprm.roles import ROLES
from masprm.train.objectives import MODES
from masprm.outputs import check_csv_output, check_outside_inputs
from masprm.errors import ConfigError, DataError, ModelError, TreeError


# --------------------------------------------------------------------------- outputs against inputs


def test_an_output_is_compared_with_the_inputs_after_resolving_links(tmp_path):
    model = tmp_path / "models" / "base"
    model.mkdir(parents=True)
    (tmp_path / "alias").symlink_to(model)
    data = tmp_path / "pairs.jsonl"
    data.write_text("{}\n")
    inputs = {"model_id": str(model), "data_file": str(data), "other": "Qwen/Qwen2.5-1.5B-Instruct", "none": None}
    for inside in (tmp_path / "alias", tmp_path / "alias" / "deeper" / "out"):
        with pytest.raises(ConfigError, match="the input folder .*base \\(`model_id`\\)") as err:
            check_outside_inputs(inside, "output_dir", inputs)
        assert err.value.setting == "output_dir"
    with pytest.raises(ConfigError, match="is the input file .*pairs.jsonl \\(`data_file`\\)"):
        check_outside_inputs(data, "out", inputs)
    for fine in (tmp_path / "models", tmp_path / "models" / "base2", tmp_path / "pairs.jsonl.out"):
        check_outside_inputs(fine, "output_dir", inputs)   # next to an input, or above it: allowed


def test_a_csv_output_may_replace_a_table_only(tmp_path):
    table = tmp_path / "aggregated_results.csv"
    table.write_text("Experiment,Seeds,pass@1\nsbs,3,0.5\n")
    assert check_csv_output(table, "out") == table        # an earlier aggregation: replaced
    (tmp_path / "empty.csv").write_text("")
    check_csv_output(tmp_path / "empty.csv", "out")
    check_csv_output(tmp_path / "new.CSV", "out")           # not there yet; the suffix in any case
    for name, content in (("log.csv", "=== START x ===\nCOMPLETED\n"), ("manifest.csv", '{"a": 1, "b": 2}\n'),
                          ("picture.csv", "\x89PNG\r\n\x1a\n\0\0"), ("one.csv", "just a line\n")):
        (tmp_path / name).write_text(content)
        with pytest.raises(ConfigError, match=f"^out .*{name}: the file there is not a CSV table"):
            check_csv_output(tmp_path / name, "out")


@pytest.mark.parametrize("seed, ok", [(0, True), (SEED_MAX, True), (-1, False), (SEED_MAX + 1, False),
                                      (True, False), (1.5, False)])
def test_seeds_are_numpys_range(seed, ok):
    if ok:
        assert check_seed(seed) == seed
    else:
        with pytest.raises(ConfigError, match=r"^seed must be an integer in 0\.\.4294967295"):
            check_seed(seed)


# --------------------------------------------------------------------------- scorer kinds


def _scorer(folder: Path, base: Path, mode: str | None) -> Path:
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base)}))
    save_file({"w": torch.zeros(4, 4)}, str(folder / "adapter_model.safetensors"))
    if mode:
        (folder / "masprm_scorer.json").write_text(json.dumps({"mode": mode, "status": "completed"}))
    return folder


def test_each_role_takes_the_modes_that_train_it_and_the_flag_takes_any(tmp_path, tiny_model_dir):
    role_modes = {name: ROLES[name].modes for name in ROLES}
    step = ("ppm", "prm", "traj", "pqm", "implicit", "gorm", "gprm", "ensemble", "biprm")
    assert role_modes == {"masprm": step, "orm": ("orm", "gorm"), "handoff_masprm": step}
    # every objective the trainer knows makes a scorer some role takes
    assert set(MODES) == {m for modes in role_modes.values() for m in modes}
    folders = {mode: _scorer(tmp_path / mode, Path(tiny_model_dir), mode) for mode in ("ppm", "prm", "orm", "pqm")}
    for role, modes in role_modes.items():
        for mode, folder in folders.items():
            if mode in modes:
                check_scorer_role(folder, role, "x_dir")
            else:
                with pytest.raises(ModelError, match=f"^x_dir .*: holds a scorer trained with --mode {mode} "
                                                     f".* the {role} role needs"):
                    check_scorer_role(folder, role, "x_dir")
                check_scorer_role(folder, role, "x_dir", allow_any=True)
    # An adapter from before the record existed cannot be told apart: accepted; an empty or corrupt
    # folder is left to check_scorer_folder, which names what is missing.
    check_scorer_role(_scorer(tmp_path / "old", Path(tiny_model_dir), None), "masprm", "prm_dir")
    (tmp_path / "empty").mkdir()
    check_scorer_role(tmp_path / "empty", "masprm", "prm_dir")
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "masprm_scorer.json").write_text("{not json")
    check_scorer_role(tmp_path / "corrupt", "orm", "orm_dir")
    # The record of an unfinished run sits above its checkpoints.
    unfinished = tmp_path / "unfinished"
    _scorer(unfinished / "checkpoint-2", Path(tiny_model_dir), None)
    (unfinished / "masprm_scorer.json").write_text(json.dumps({"mode": "orm", "status": "training"}))
    with pytest.raises(ModelError, match="--mode orm"):
        check_scorer_role(unfinished, "masprm", "prm_dir")
    with pytest.raises(ModelError, match="plain model .* score head would be untrained; pass "
                                         "`allow_scorer_kind_mismatch`"):
        check_scorer_role(tiny_model_dir, "masprm", "prm_dir")


def test_a_finished_scorer_is_trained_over_only_with_overwrite(tmp_path):
    from masprm.train.checkpoints import check_not_finished

    out = tmp_path / "scorer"
    out.mkdir()
    check_not_finished(out, resume=False, overwrite=False)   # nothing recorded yet
    (out / "masprm_scorer.json").write_text(json.dumps({"mode": "orm", "status": "training"}))
    check_not_finished(out, resume=False, overwrite=False)   # an interrupted run: the checkpoint rule applies
    (out / "masprm_scorer.json").write_text(json.dumps({"mode": "orm", "status": "completed"}))
    with pytest.raises(ConfigError, match="holds a finished orm scorer .*pass `overwrite`"):
        check_not_finished(out, resume=False, overwrite=False)
    with pytest.raises(ConfigError, match="no checkpoint is left to resume from"):
        check_not_finished(out, resume=True, overwrite=False)
    (out / "checkpoint-4").mkdir()
    check_not_finished(out, resume=True, overwrite=False)    # --resume continues from its checkpoint
    check_not_finished(out, resume=False, overwrite=True)


# --------------------------------------------------------------------------- configs


def test_the_shipped_configs_and_the_handoff_keys_pass_the_schema():
    from masprm.graph import HANDOFF_KEYS, load_mas_config, shipped_config_names

    for name in shipped_config_names():
        graph = load_mas_config(name)
        assert set(graph.handoff or {}) <= set(HANDOFF_KEYS)


def test_an_unknown_key_without_a_close_one_lists_the_known_keys(tmp_path):
    from masprm.graph import load_mas_config

    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"agents": [{"name": "A", "temperature": 0.3}], "edges": [[-1, 0]]}))
    with pytest.raises(ConfigError) as err:
        load_mas_config(path)
    assert str(err.value) == (f"{path}: agent 0: unknown key 'temperature'; known keys: name, system_prompt, "
                              "max_new_tokens")


# --------------------------------------------------------------------------- data and records


def _rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_blank_question_is_skipped_and_counted_like_an_unreadable_answer(tmp_path):
    from masprm.data import load_examples

    rows = [{"question": "What is 1 + 1?", "answer": "#### 2"}, {"question": " \t", "answer": "#### 3"},
            {"question": None, "answer": "#### 4"}, {"question": "What is 2 + 3?", "answer": "#### 5"}]
    loaded = load_examples("gsm8k", "train", data_file=_rows(tmp_path / "d.jsonl", rows), seed=0)
    assert sorted(e.question for e in loaded.examples) == ["What is 1 + 1?", "What is 2 + 3?"] and loaded.skipped == 2


def test_a_question_field_of_another_type_names_the_record_in_every_dataset(tmp_path):
    from masprm.data import load_examples

    mmlu = [{"question": "Pick one.", "choices": ["a", "b", "c", "d"], "answer": 0},
            {"question": {"text": "Pick?"}, "choices": ["a", "b", "c", "d"], "answer": 1}]
    with pytest.raises(DataError, match=r"m.jsonl: record 2: field 'question' must be text, got dict \{'text': 'Pick\?'\}"):
        load_examples("mmlu", "test", data_file=_rows(tmp_path / "m.jsonl", mmlu))
    with pytest.raises(DataError, match="toy.jsonl: record 1: field 'question' must be text, got float"):
        load_examples("toy", "train", data_file=_rows(tmp_path / "toy.jsonl", [{"question": 1.5, "answer": "#### 1"}]))


def test_a_record_with_some_text_trains_and_one_without_any_is_refused(tmp_path):
    from masprm.train.data import load_records

    fine = {"prompt": "What is 2 + 2?", "chosen_actions": ["", ""], "rejected_actions": ["", " "]}
    assert load_records(_rows(tmp_path / "ok.jsonl", [fine]), "ppm") == [fine]
    empty = {"prompt": "\n", "completions": ["", " "], "labels": [0.5, 1.0]}
    with pytest.raises(DataError, match=r"e.jsonl:2: the prompt and every step are empty"):
        load_records(_rows(tmp_path / "e.jsonl", [{"prompt": "q", "completions": ["a"], "labels": [1]}, empty]), "prm")


def test_a_nan_value_in_a_tree_is_named_and_only_that_tree_is_skipped(tmp_path):
    from helpers_trees import gsm8k_tree, write_trees
    from masprm.labels.mining import Options, Preprocessor

    bad = gsm8k_tree()
    bad["children"][0]["children"][1]["q_sum"] = math.inf
    bad["children"][0]["children"][1]["q_mean"] = None   # the value comes from q_sum / visits
    good, nan = write_trees(tmp_path / "run", [gsm8k_tree(), bad])
    prep = Preprocessor(Options(), None)
    assert prep.process_file(good)[0] and prep.process_file(nan) == ([], [])
    assert prep.malformed_summary() == "skipped 1 unreadable tree(s): 1.json: root/0/1: 'q_sum' is inf (not a " \
                                       "finite number)"
    from masprm.tree_schema import node_value
    with pytest.raises(TreeError, match="'q_mean' is nan"):
        node_value({"q_mean": math.nan})
