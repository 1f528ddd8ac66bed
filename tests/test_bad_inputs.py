"""A table of bad inputs across the six command lines.

Every case must end with exit code 2, exactly one line on stderr that names
the offending file or flag, and every file that was there before unchanged
(nothing written, nothing overwritten). The CLIs run in this process (argv
patched, `run_cli` as the scripts call it), so the table stays fast; the
checks that catch these inputs all run before any model is loaded.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers import snapshot
from helpers_bad_input_files import build_workspace
from helpers_bad_inputs import PRM, READONLY, RUN, SCRIPTS, ev, invoke, stage1, tr

pytestmark = pytest.mark.slow   # its workspace is built by running stage 1 on a model

LONG_NAME = "n" * 300   # one name component over the file system's 255 bytes (ENAMETOOLONG)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, tiny_model_dir):
    """Everything the cases read, built once: configs, data, models, trees, pairs, scorers, logs."""
    return build_workspace(tmp_path_factory.mktemp("bad_inputs"), tiny_model_dir)


# (id, cli, argv, what the one line must name)
CASES = [
    # ---- stage 1: src/run_mcts.py
    ("s1-n-zero", "run_mcts", stage1("--n", "0"), "--n"),
    ("s1-top-p", "run_mcts", stage1("--top_p", "1.5"), "--top_p"),
    ("s1-c-inf", "run_mcts", stage1("--search_c", "inf"), "--search_c"),
    ("s1-temp-nan", "run_mcts", stage1("--temperature", "nan"), "--temperature"),
    ("s1-c-negative", "run_mcts", stage1("--search_c", "-1"), "--search_c"),
    ("s1-rollouts-text", "run_mcts", stage1("--n_rollouts", "many"), "--n_rollouts"),
    ("s1-tokens-zero", "run_mcts", stage1("--max_new_tokens", "0"), "--max_new_tokens"),
    ("s1-actors-no-ray", "run_mcts", stage1("--actors", "2"), "--actors"),
    ("s1-dataset", "run_mcts", stage1("--dataset", "nosuchset"), "--dataset"),
    ("s1-config-missing", "run_mcts", stage1("--mas_config", "configs/nothere.yaml"), "configs/nothere.yaml"),
    ("s1-config-cycle", "run_mcts", stage1("--mas_config", "configs/cycle.yaml"), "configs/cycle.yaml"),
    ("s1-config-noroot", "run_mcts", stage1("--mas_config", "configs/noroot.yaml"), "configs/noroot.yaml"),
    ("s1-config-latin1", "run_mcts", stage1("--mas_config", "configs/latin1.yaml"), "configs/latin1.yaml"),
    ("s1-data-missing", "run_mcts", stage1("--data_file", "missing.jsonl"), "missing.jsonl"),
    ("s1-data-empty", "run_mcts", stage1("--data_file", "empty.jsonl"), "empty.jsonl"),
    ("s1-data-latin1", "run_mcts", stage1("--data_file", "latin1.jsonl"), "latin1.jsonl"),
    ("s1-data-broken", "run_mcts", stage1("--data_file", "broken.jsonl"), "broken.jsonl"),
    ("s1-model-missing", "run_mcts", stage1("--model_id", "models/none/here"), "--model_id"),
    ("s1-model-notok", "run_mcts", stage1("--model_id", "models/notok"), "--model_id"),
    ("s1-model-trunc", "run_mcts", stage1("--model_id", "models/trunc"), "--model_id"),
    ("s1-model-hub", "run_mcts", stage1("--model_id", "no-such-org/no-such-model"), "--model_id"),
    ("s1-out-root-file", "run_mcts", stage1("--out_root", "afile"), "--out_root"),
    ("s1-out-root-under-file", "run_mcts", stage1("--out_root", "afile/results"), "--out_root"),
    ("s1-out-root-readonly", "run_mcts", stage1("--out_root", f"{READONLY}/results"), "--out_root"),
    ("s1-run-folder-is-file", "run_mcts", stage1("--out_root", "rf"), "rf/"),
    ("s1-other-seed", "run_mcts", stage1("--seed", "7"), "--seed"),
    ("s1-trees-without-record", "run_mcts", stage1("--out_root", "legacy"), "--out_root"),
    ("s1-other-data", "run_mcts", stage1("--data_file", "gsm8k_b.jsonl"), "--data_file"),
    ("s1-same-basename-model", "run_mcts", stage1("--model_id", "models/b/tiny"), "--model_id"),
    # ---- stage 2: src/train/preprocess_data.py
    ("s2-input-missing", "preprocess", ["--input", "results/nope"], "--input"),
    ("s2-input-empty", "preprocess", ["--input", "empty_dir"], "--input"),
    ("s2-input-unreadable", "preprocess", ["--input", "trees/latin1_res_x"], "--input"),
    ("s2-target-nodes", "preprocess", ["--input", RUN, "--target-nodes", "1"], "--target-nodes"),
    ("s2-max-pairs", "preprocess", ["--input", RUN, "--ppm-max-pairs", "0"], "--ppm-max-pairs"),
    ("s2-window-order", "preprocess", ["--input", RUN, "--ppm-root-window", "0.5", "0.1"], "--ppm-root-window"),
    ("s2-window-nan", "preprocess", ["--input", RUN, "--ppm-root-window", "nan", "0.7"], "--ppm-root-window"),
    ("s2-prm-window-order", "preprocess", ["--input", RUN, "--prm-root-window", "0.5", "0.1"], "--prm-root-window"),
    ("s2-prm-window-text", "preprocess", ["--input", RUN, "--prm-root-window", "low", "0.7"], "--prm-root-window"),
    ("s2-prm-window-pairs", "preprocess", ["--input", RUN, "--labels", "masprm", "--prm-root-window", "-1", "1"],
     "--prm-root-window"),
    ("s2-step-truth-elsewhere", "preprocess", ["--input", RUN, "--labels", "step_truth"], "--labels step_truth"),
    ("s2-view", "preprocess", ["--input", RUN, "--view", "global"], "--view"),
    ("s2-config-missing", "preprocess", ["--input", RUN, "--view", "local", "--mas_config", "configs/nothere.yaml"],
     "configs/nothere.yaml"),
    ("s2-config-latin1", "preprocess", ["--input", RUN, "--view", "local", "--mas_config", "configs/latin1.yaml"],
     "configs/latin1.yaml"),
    ("s2-config-mismatch", "preprocess", ["--input", RUN, "--view", "local", "--mas_config", "configs/other.yaml"],
     "--mas_config"),
    ("s2-config-underivable", "preprocess", ["--input", "trees/noname", "--view", "local"], "--mas_config"),
    ("s2-output-is-folder", "preprocess", ["--input", "trees/blocked_res_x", "--make-ppm"],
     "ppm_pairs_blocked_res_x.jsonl"),
    ("s2-output-readonly", "preprocess", ["--input", f"{READONLY}/gsm8k_res_x"], READONLY),
    # ---- stage 3: src/train/trainer.py
    ("s3-mode", "trainer", tr("--mode", "xyz"), "--mode"),
    ("s3-data-missing", "trainer", tr("--data_dir", "none.jsonl"), "none.jsonl"),
    ("s3-data-broken", "trainer", tr("--data_dir", "broken.jsonl"), "broken.jsonl"),
    ("s3-data-latin1", "trainer", tr("--data_dir", "latin1_pairs.jsonl"), "latin1_pairs.jsonl"),
    ("s3-data-empty", "trainer", tr("--data_dir", "empty.jsonl"), "empty.jsonl"),
    ("s3-data-folder", "trainer", tr("--data_dir", "empty_dir"), "empty_dir"),
    ("s3-data-identical", "trainer", tr("--data_dir", "same.jsonl"), "same.jsonl"),
    ("s3-data-one-record", "trainer", tr("--data_dir", "one.jsonl"), "one.jsonl"),
    ("s3-data-wrong-mode", "trainer", tr("--mode", "prm"), "pairs.jsonl"),
    ("s3-dropout", "trainer", tr("--lora-dropout", "1.5"), "--lora-dropout"),
    ("s3-lr-nan", "trainer", tr("--lr", "nan"), "--lr"),
    ("s3-head-read-pairs", "trainer", tr("--head-read", "step_mean"), "--head-read"),
    ("s3-epochs-inf", "trainer", tr("--epochs", "inf"), "--epochs"),
    ("s3-steps-multiple", "trainer", tr("--save-steps", "3", "--eval-steps", "2"), "--save-steps"),
    ("s3-max-length", "trainer", tr("--max-length", "1"), "--max-length"),
    ("s3-output-file", "trainer", tr("--output-dir", "afile"), "--output-dir"),
    ("s3-output-under-file", "trainer", tr("--output-dir", "afile/scorer"), "--output-dir"),
    ("s3-output-readonly", "trainer", tr("--output-dir", f"{READONLY}/scorer"), "--output-dir"),
    ("s3-model-notok", "trainer", tr("--model-id", "models/notok"), "--model-id"),
    ("s3-model-trunc", "trainer", tr("--model-id", "models/trunc"), "--model-id"),
    ("s3-model-missing", "trainer", tr("--model-id", "models/none/here"), "--model-id"),
    ("s3-resume-other-data", "trainer", tr("--output-dir", "ckpt/finished", "--data_dir", "pairs2.jsonl",
                                           "--resume"), "--data_dir"),
    # ---- stage 4: src/experiments/compare_sbs_mcts.py
    ("s4-dataset", "eval", ev("--dataset", "gsm9k"), "unknown dataset"),
    ("s4-method", "eval", ev("--methods", "beam_magic"), "--methods"),
    ("s4-top-p", "eval", ev("--top_p", "0"), "--top_p"),
    ("s4-c-inf", "eval", ev("--c_uct", "inf"), "--c_uct"),
    ("s4-temp-nan", "eval", ev("--sbs_temperature", "nan"), "--sbs_temperature"),
    ("s4-prm-missing", "eval", ev("--methods", "sbs_prm"), "--prm_dir"),
    ("s4-prm-empty", "eval", ev(*PRM, "scorers/empty"), "--prm_dir"),
    ("s4-prm-no-weights", "eval", ev(*PRM, "scorers/noweights"), "--prm_dir"),
    ("s4-prm-corrupt-config", "eval", ev(*PRM, "scorers/corrupt"), "--prm_dir"),
    ("s4-prm-truncated", "eval", ev(*PRM, "scorers/truncated"), "--prm_dir"),
    ("s4-prm-unfinished", "eval", ev(*PRM, "scorers/unfinished"), "--prm_dir"),
    ("s4-prm-base-notok", "eval", ev(*PRM, "scorers/good", "--prm_base_model_id", "models/notok"),
     "--prm_base_model_id"),
    ("s4-orm-empty", "eval", ev("--methods", "mcts_orm", "--orm_dir", "scorers/empty"), "--orm_dir"),
    ("s4-orm-truncated", "eval", ev("--methods", "voter_orm", "--orm_dir", "scorers/truncated"), "--orm_dir"),
    ("s4-handoff-prm-noweights", "eval", ev("--methods", "handoff_prm", "--handoff_prm_dir", "scorers/noweights",
                                            "--mas_config", "configs/math_handoff8.yaml"), "--handoff_prm_dir"),
    ("s4-gen-notok", "eval", ev("--gen_model_id", "models/notok"), "--gen_model_id"),
    ("s4-gen-trunc", "eval", ev("--gen_model_id", "models/trunc"), "--gen_model_id"),
    ("s4-gen-missing", "eval", ev("--gen_model_id", "models/none/here"), "--gen_model_id"),
    ("s4-logs-file", "eval", ev("--logs_dir", "afile"), "--logs_dir"),
    ("s4-logs-readonly", "eval", ev("--logs_dir", f"{READONLY}/logs"), "--logs_dir"),
    ("s4-data-empty", "eval", ev("--data_file", "empty.jsonl"), "empty.jsonl"),
    ("s4-data-latin1", "eval", ev("--data_file", "latin1.jsonl"), "latin1.jsonl"),
    ("s4-config-noroot", "eval", ev("--mas_config", "configs/noroot.yaml"), "configs/noroot.yaml"),
    ("s4-config-latin1", "eval", ev("--mas_config", "configs/latin1.yaml"), "configs/latin1.yaml"),
    # ---- stage 5: aggregator.py
    ("s5-logs-missing", "aggregator", ["--logs_dir", "nope"], "--logs_dir"),
    ("s5-logs-empty", "aggregator", ["--logs_dir", "empty_dir"], "--logs_dir"),
    ("s5-logs-unfinished", "aggregator", ["--logs_dir", "unfinished_logs"], "--logs_dir"),
    ("s5-out-folder", "aggregator", ["--out", "empty_dir"], "--out"),
    ("s5-out-under-file", "aggregator", ["--out", "afile/agg.csv"], "--out"),
    ("s5-archive-missing", "aggregator", ["--archive", "nope", "--out", "agg.csv"], "--archive"),
    ("s5-archive-not-one", "aggregator", ["--archive", "empty_dir", "--out", "agg.csv"], "empty_dir"),
    ("s5-out-readonly", "aggregator", ["--out", f"{READONLY}/agg.csv"], "--out"),
    # ---- show_tree: src/show_tree.py
    ("st-missing", "show_tree", ["results/none.json"], "results/none.json"),
    ("st-not-a-tree", "show_tree", ["trees/notatree.json"], "trees/notatree.json"),
    ("st-latin1", "show_tree", ["trees/latin1_res_x/0.json"], "trees/latin1_res_x/0.json"),
    ("st-folder", "show_tree", ["trees"], "trees"),
    ("st-out-suffix", "show_tree", ["trees/noname/0.json", "--out", "tree.txt"], "--out"),
    ("st-out-under-file", "show_tree", ["trees/noname/0.json", "--out", "afile/tree.png"], "--out"),
    ("st-out-folder", "show_tree", ["trees/noname/0.json", "--out", "pic.png"], "--out pic.png: is a folder"),
    ("st-out-readonly", "show_tree", ["trees/noname/0.json", "--out", f"{READONLY}/tree.png"], "--out"),
    ("st-depth", "show_tree", ["trees/noname/0.json", "--text", "--max_depth", "-1"], "--max_depth"),
    ("st-team-too-small", "show_tree", ["trees/noname/0.json", "--text", "--mas_config", "configs/other.yaml"],
     "--mas_config configs/other.yaml has 1 agent, but the tree runs agent 3"),
    # ---- --config FILE, a run file of a command's settings (issue 58)
    ("cfg-missing", "eval", ["--config", "runs/nothere.yaml"], "--config runs/nothere.yaml: no such file"),
    ("cfg-team-no-team", "trainer", ["--config", "configs/gsm8k.yaml"], "this command takes no team"),
    ("cfg-unknown-key", "run_mcts", ["--config", "configs/run_typo.yaml"],
     "--config configs/run_typo.yaml: key 'n_rollout': no such setting (did you mean 'n_rollouts'?)"),
    ("cfg-wrong-type", "trainer", ["--config", "configs/run_badtype.yaml"],
     "--config configs/run_badtype.yaml: key 'epochs': expected a value for --epochs, got a list"),
    ("cfg-not-a-mapping", "aggregator", ["--config", "configs/run_list.yaml"], "expected a mapping of settings"),
    # ---- --dataset as a hub id or a local file or folder, with --question_field / --answer_field (issue 58)
    ("ds-fields-of-registered", "run_mcts", stage1("--question_field", "prompt"),
     "--question_field and --answer_field name the fields of a dataset given by hub id or path; gsm8k reads its own"),
    ("ds-source-no-field", "run_mcts", ["--dataset", "gsm8k.jsonl", "--question_field", "prompt", "--mas_config",
                                        "configs/gsm8k.yaml", "--model_id", "models/a/tiny", "--n", "1"],
     "no field 'prompt' (--question_field"),
    ("ds-source-no-team", "eval", ["--dataset", "gsm8k.jsonl", "--gen_model_id", "models/a/tiny",
                                   "--methods", "single_pass"], "--dataset gsm8k.jsonl has no team of its own"),
    ("ds-source-and-data-file", "run_mcts", stage1("--dataset", "gsm8k_b.jsonl"), "--data_file stands in for"),
] + [
    # ---- round 3, outputs: nothing written outside the chosen output, nothing through a link
    ("s1-lock-link", "run_mcts", stage1("--out_root", "planted"), ".lock is a link"),
    ("s1-split-traversal", "run_mcts", stage1("--split", "../../../escaped"), "--split"),
    ("s1-split-dotdot", "run_mcts", stage1("--split", ".."), "--split"),
    ("s1-split-slash", "run_mcts", stage1("--split", "train/x"), "--split"),
    ("s1-split-empty", "run_mcts", stage1("--split", ""), "--split"),
    ("s1-out-root-is-model", "run_mcts", stage1("--out_root", "models/a/tiny"), "--out_root"),
    ("s1-out-root-in-model", "run_mcts", stage1("--out_root", "models/a/tiny/results"), "--out_root"),
    ("s3-output-is-base", "trainer", tr("--output-dir", "models/a/tiny"), "--output-dir"),
    ("s3-output-in-base", "trainer", tr("--output-dir", "models/a/tiny/scorer"), "--output-dir"),
    ("s3-output-link", "trainer", tr("--output-dir", "ckpt/linked"), "adapter_config.json is a link"),
    ("s3-finished", "trainer", tr("--output-dir", "ckpt/finished"), "--overwrite"),
    ("s3-finished-resume-nothing", "trainer", tr("--output-dir", "ckpt/finished", "--resume"), "--overwrite"),
    ("s4-logs-in-scorer", "eval", ev(*PRM, "scorers/good", "--logs_dir", "scorers/good/logs"), "--logs_dir"),
    ("s4-logs-is-model", "eval", ev("--logs_dir", "models/a/tiny"), "--logs_dir"),
    ("s4-logs-in-model", "eval", ev("--logs_dir", "models/a/tiny/logs"), "--logs_dir"),
    ("s5-out-png", "aggregator", ["--out", "agg.png"], "--out"),
    ("s5-out-log", "aggregator", ["--out", "logs/gsm8k_single_pass_abc_tiny_14.txt"], "--out"),
    ("s5-out-manifest", "aggregator", ["--out", "manifest.json"], "--out"),
    ("s5-out-not-csv", "aggregator", ["--out", "fake.csv"], "--out"),
    # ---- every flag before any output
    ("s1-device-map", "run_mcts", stage1("--device_map", "tpu:9"), "--device_map"),
    ("s1-device-map-gpu", "run_mcts", stage1("--device_map", "cuda:7"), "--device_map"),
    ("s1-attn-impl", "run_mcts", stage1("--attn_impl", "bogus"), "--attn_impl"),
    ("s1-attn-flash", "run_mcts", stage1("--attn_impl", "flash_attention_2"), "--attn_impl"),
    ("s3-attn-impl", "trainer", tr("--attn-impl", "bogus"), "--attn-impl"),
    ("s4-device-map", "eval", ev("--device_map", "tpu:9"), "--device_map"),
    ("s4-attn-impl", "eval", ev("--attn_impl", "bogus"), "--attn_impl"),
    ("s1-decode", "run_mcts", stage1("--decode", "cudagraph"), "--decode"),
    ("s1-decode-graphs-no-compile", "run_mcts", stage1("--decode", "graphs"), "--decode needs compiling for graphs"),
    ("s4-decode", "eval", ev("--decode", "cudagraph"), "--decode"),
    # ---- seeds numpy cannot take
    ("s1-seed-negative", "run_mcts", stage1("--seed", "-1"), "--seed"),
    ("s1-seed-too-big", "run_mcts", stage1("--seed", str(2**32), "--out_root", "fresh"), "--seed"),
    ("s2-seed-negative", "preprocess", ["--input", RUN, "--seed", "-1"], "--seed"),
    ("s3-seed-negative", "trainer", tr("--seed", "-1"), "--seed"),
    ("s4-seed-negative", "eval", ev("--seed", "-1"), "--seed"),
    ("s4-seeds-negative", "eval", ev("--seeds", "1", "-5"), "--seeds"),
    ("s5-seed-negative", "aggregator", ["--seed", "-1"], "--seed"),
    # ---- model folders that cannot serve
    ("s1-model-other-arch", "run_mcts", stage1("--model_id", "models/llama"), "do not fit config.json"),
    ("s1-model-gpt2-config", "run_mcts", stage1("--model_id", "models/gpt2cfg"), "--model_id"),
    ("s1-model-heads7", "run_mcts", stage1("--model_id", "models/heads7"), "--model_id"),
    ("s1-model-adapter", "run_mcts", stage1("--model_id", "scorers/good"), "is a PEFT adapter"),
    ("s1-model-big-vocab", "run_mcts", stage1("--model_id", "models/bigvocab"), "embeddings"),
    ("s1-model-bad-template", "run_mcts", stage1("--model_id", "models/badtemplate"), "chat template"),
    ("s1-model-pickle", "run_mcts", stage1("--model_id", "models/pickled"), "weights_only"),
    ("s3-model-other-arch", "trainer", tr("--model-id", "models/llama"), "--model-id"),
    ("s3-model-heads7", "trainer", tr("--model-id", "models/heads7"), "--model-id"),
    ("s3-model-adapter", "trainer", tr("--model-id", "scorers/good"), "is a PEFT adapter"),
    ("s3-model-big-vocab", "trainer", tr("--model-id", "models/bigvocab"), "--model-id"),
    ("s3-model-pickle", "trainer", tr("--model-id", "models/pickled"), "--model-id"),
    ("s4-gen-other-arch", "eval", ev("--gen_model_id", "models/llama"), "--gen_model_id"),
    ("s4-gen-adapter", "eval", ev("--gen_model_id", "scorers/good"), "is a PEFT adapter"),
    ("s4-gen-big-vocab", "eval", ev("--gen_model_id", "models/bigvocab"), "--gen_model_id"),
    ("s4-gen-bad-template", "eval", ev("--gen_model_id", "models/badtemplate"), "--gen_model_id"),
    ("s4-gen-pickle", "eval", ev("--gen_model_id", "models/pickled"), "--gen_model_id"),
    # ---- scorer folders of the wrong kind
    ("s4-prm-is-orm", "eval", ev(*PRM, "scorers/orm"), "--prm_dir"),
    ("s4-orm-is-ppm", "eval", ev("--methods", "mcts_orm", "--orm_dir", "scorers/good"), "--orm_dir"),
    ("s4-prm-is-policy", "eval", ev(*PRM, "models/a/tiny"), "--prm_dir"),
    ("s4-handoff-prm-is-orm", "eval", ev("--methods", "handoff_prm", "--handoff_prm_dir", "scorers/orm",
                                         "--mas_config", "configs/math_handoff8.yaml"), "--handoff_prm_dir"),
    # ---- MAS configs off the schema
    ("s1-config-typo-prompt", "run_mcts", stage1("--mas_config", "configs/typo_prompt.yaml"), "'system_prompt'"),
    ("s1-config-typo-mnt", "run_mcts", stage1("--mas_config", "configs/typo_mnt.yaml"), "configs/typo_mnt.yaml"),
    ("s1-config-typo-top", "run_mcts", stage1("--mas_config", "configs/typo_top.yaml"), "did you mean 'edges'"),
    ("s1-config-typo-edge", "run_mcts", stage1("--mas_config", "configs/typo_edge.yaml"), "did you mean 'src'"),
    ("s1-config-duplicate-key", "run_mcts", stage1("--mas_config", "configs/dup.yaml"), "duplicate key"),
    ("s1-config-orphan", "run_mcts", stage1("--mas_config", "configs/orphan.yaml"), "no incoming edge"),
    ("s1-config-huge-mnt", "run_mcts", stage1("--mas_config", "configs/huge_mnt.yaml"), "configs/huge_mnt.yaml"),
    ("s1-config-alias-bomb", "run_mcts", stage1("--mas_config", "configs/bomb.yaml"), "configs/bomb.yaml"),
    ("s2-config-duplicate-key", "preprocess", ["--input", RUN, "--view", "local", "--mas_config", "configs/dup.yaml"],
     "duplicate key 'edges'"),
    ("s4-config-typo-prompt", "eval", ev("--mas_config", "configs/typo_prompt.yaml"), "configs/typo_prompt.yaml"),
    ("s4-config-orphan", "eval", ev("--mas_config", "configs/orphan.yaml"), "configs/orphan.yaml"),
    ("s4-config-alias-bomb", "eval", ev("--methods", "handoff_fixed", "--mas_config", "configs/bomb.yaml"),
     "configs/bomb.yaml"),
    ("s4-config-handoff-typo", "eval", ev("--methods", "handoff_fixed", "--mas_config", "configs/handoff_typo.yaml"),
     "'fixed_schedule'"),
    # ---- data checked when read
    ("s1-data-question-list", "run_mcts", stage1("--data_file", "qlist.jsonl", "--out_root", "fresh"), "qlist.jsonl"),
    ("s1-data-question-number", "run_mcts", stage1("--data_file", "qnum.jsonl", "--out_root", "fresh"), "qnum.jsonl"),
    ("s1-data-question-blank", "run_mcts", stage1("--data_file", "blank.jsonl", "--out_root", "fresh"), "blank.jsonl"),
    ("s1-data-question-too-long", "run_mcts", stage1("--data_file", "long.jsonl", "--out_root", "fresh"),
     "long.jsonl"),
    ("s4-data-question-list", "eval", ev("--data_file", "qlist.jsonl"), "qlist.jsonl"),
    ("s4-data-question-number", "eval", ev("--data_file", "qnum.jsonl"), "qnum.jsonl"),
    ("s4-data-question-too-long", "eval", ev("--data_file", "long.jsonl"), "long.jsonl"),
    ("s3-data-empty-texts", "trainer", tr("--data_dir", "empty_text.jsonl"), "empty_text.jsonl"),
    ("s3-data-empty-steps", "trainer", tr("--mode", "prm", "--data_dir", "empty_steps.jsonl"), "empty_steps.jsonl"),
    # ---- trees
    ("s2-tree-nan", "preprocess", ["--input", "trees/nan_res_x"], "'q_mean' is nan"),
    ("st-tree-nan", "show_tree", ["trees/nan_res_x/0.json", "--text"], "trees/nan_res_x/0.json"),
    ("st-tree-deep", "show_tree", ["trees/deep300.json", "--text"], "trees/deep300.json"),
    ("st-tree-very-deep", "show_tree", ["trees/deep5000.json"], "trees/deep5000.json"),
    ("st-children-mapping", "show_tree", ["trees/mapping.json"], "trees/mapping.json"),
    # ---- round 4 (issue 44): "" is no path, OSErrors of named paths, links at and below an output, logs
    ("r4-s1-out-root-empty", "run_mcts", stage1("--out_root", ""), "--out_root"),
    ("r4-s2-input-empty", "preprocess", ["--input", ""], "--input"),
    ("r4-s3-output-empty", "trainer", tr("--output-dir", ""), "--output-dir"),
    ("r4-s4-logs-empty", "eval", ev("--logs_dir", ""), "--logs_dir"),
    ("r4-s5-logs-empty", "aggregator", ["--logs_dir", ""], "--logs_dir"),
    ("r4-st-tree-empty", "show_tree", [""], "tree"),
    ("r4-s1-out-root-loop", "run_mcts", stage1("--out_root", "loop"), "--out_root loop: it is a loop of symbolic"),
    ("r4-s2-input-loop", "preprocess", ["--input", "loop/run"], "--input loop/run: it is a loop of symbolic"),
    ("r4-s3-output-loop", "trainer", tr("--output-dir", "loop/ckpt"), "--output-dir"),
    ("r4-s4-logs-loop", "eval", ev("--logs_dir", "loop"), "--logs_dir loop: it is a loop of symbolic"),
    ("r4-s5-logs-loop", "aggregator", ["--logs_dir", "loop"], "--logs_dir loop: it is a loop of symbolic"),
    ("r4-s5-out-loop", "aggregator", ["--logs_dir", "badlogs", "--out", "loop/t.csv"], "--out"),
    ("r4-s1-out-root-too-long", "run_mcts", stage1("--out_root", LONG_NAME), "--out_root"),
    ("r4-s2-input-too-long", "preprocess", ["--input", LONG_NAME], "--input"),
    ("r4-s3-output-too-long", "trainer", tr("--output-dir", LONG_NAME), "--output-dir"),
    ("r4-s4-logs-too-long", "eval", ev("--logs_dir", f"elogs/{LONG_NAME}"), "--logs_dir"),
    ("r4-s5-logs-too-long", "aggregator", ["--logs_dir", LONG_NAME], "--logs_dir"),
    ("r4-st-tree-too-long", "show_tree", [f"{LONG_NAME}.json"], LONG_NAME),
    ("r4-s1-run-folder-link", "run_mcts", stage1("--out_root", "linked_results"), "is a link to"),
    ("r4-s3-output-link", "trainer", tr("--output-dir", "ckpt/alias"), "--output-dir ckpt/alias: is a link to"),
    ("r4-s5-impossible-logs", "aggregator", ["--logs_dir", "badlogs"], "3 cannot be counted"),
    ("r4-s4-adapter-rank-text", "eval", ev(*PRM, "scorers/rank_text"),
     "--prm_dir scorers/rank_text: adapter_config.json: r must be a whole number >= 1, got '8'"),
    ("r4-s4-scorer-negative-length", "eval", ev(*PRM, "scorers/neg_length"),
     "masprm_scorer.json: max_length must be a whole number >= 2, got -5"),
    ("r4-s4-adapter-misfit", "eval", ev(*PRM, "scorers/misfit"), "the adapter does not fit base model"),
    ("r4-s4-store-link", "eval", ev("--logs_dir", "plogs"), "--logs_dir plogs: sampled_passes is a link to"),
    ("r4-s3-empty-separator", "trainer", tr("--step-separator", ""), "--step-separator"),
    # ---- round 5 (issue 61): every model folder through one checker before anything loads
    ("r5-s1-model-nan", "run_mcts", stage1("--model_id", "models/nan"),
     "--model_id models/nan: model.safetensors: tensor model.norm.weight holds inf"),
    ("r5-s1-model-no-eos", "run_mcts", stage1("--model_id", "models/noeos"),
     "--model_id models/noeos: no end-of-turn token"),
    ("r5-s4-gen-nan", "eval", ev("--gen_model_id", "models/nan"), "--gen_model_id models/nan: model.safetensors"),
    ("r5-s4-prm-no-head", "eval", ev(*PRM, "models/claims_prm"),
     "--prm_dir models/claims_prm: the weights hold no trained head (score.bias [2] is missing)"),
    ("r5-s4-prm-labels-text", "eval", ev(*PRM, "models/labels_text"),
     'config.json: num_labels must be a whole number >= 1, got "two"'),
    ("r5-s4-prm-target-missing", "eval", ev(*PRM, "scorers/target_missing"),
     "adapter_config.json: target module 'c_attn' is not a module of base model"),
    ("r5-s4-prm-adapter-nan", "eval", ev(*PRM, "scorers/nan_adapter"),
     "--prm_dir scorers/nan_adapter: adapter_model.safetensors: tensor "),
    ("r5-s3-init-adapter-nan", "trainer", tr("--init-adapter-dir", "scorers/nan_adapter"),
     "--init-adapter-dir scorers/nan_adapter: adapter_model.safetensors: tensor "),
    ("r5-s3-init-adapter-pickle", "trainer", tr("--init-adapter-dir", "scorers/pickle_adapter"),
     "adapter_model.bin cannot be loaded safely"),
    ("r5-s3-init-adapter-shapes", "trainer", tr("--init-adapter-dir", "scorers/misfit"),
     "--init-adapter-dir scorers/misfit: the adapter does not fit base model"),
    ("r5-s3-max-length", "trainer", tr("--max-length", "4096"), "--max-length 4096: more than the context of"),
    # ---- round 5 (issue 61): stage 2's rollout label schemes check what they are given before the policy loads
    ("r5-s2-rollout-policy-scorer", "preprocess", ["--input", RUN, "--labels", "mc_rollouts", "--rollout-policy",
                                                   "scorers/good"], "--rollout-policy scorers/good: is a PEFT adapter"),
    ("r5-s2-rollout-policy-nan", "preprocess", ["--input", RUN, "--labels", "shapley", "--rollout-policy",
                                                "models/nan"], "--rollout-policy models/nan: model.safetensors: tensor"),
    ("r5-s2-rollout-budget-zero", "preprocess", ["--input", RUN, "--labels", "mc_rollouts_uniform",
                                                 "--rollout-policy", "models/a/tiny", "--rollout-budget", "0"],
     "--rollout-budget must be at least 1, got 0"),
    ("r5-s2-rollout-temperature", "preprocess", ["--input", RUN, "--labels", "mc_rollouts", "--rollout-policy",
                                                 "models/a/tiny", "--rollout-temperature", "-1"],
     "--rollout-temperature must be > 0, got -1.0"),
    ("r5-s2-rollout-other-team", "preprocess", ["--input", RUN, "--labels", "step_consistency", "--rollout-policy",
                                                "models/a/tiny", "--config", "configs/other.yaml"],
     "the rollouts would sample another team"),
    # ---- round 5 (issue 61): side files through the JSONL reader, every metric line checked, flags that cannot act
    ("r5-s4-exclude-latin1", "eval", ev("--exclude_questions_file", "lists/latin1.jsonl"),
     "--exclude_questions_file: lists/latin1.jsonl:2: not UTF-8 text (byte 0xe9)"),
    ("r5-s4-exclude-surrogate", "eval", ev("--exclude_questions_file", "lists/surrogate.jsonl"),
     "--exclude_questions_file: lists/surrogate.jsonl:2: a string holds a lone surrogate"),
    ("r5-s4-exclude-no-field", "eval", ev("--exclude_questions_file", "lists/no_field.jsonl"),
     "lists/no_field.jsonl:1: a record with neither 'prompt' nor 'question'"),
    ("r5-s4-exclude-scalar", "eval", ev("--exclude_questions_file", "lists/scalar.jsonl"),
     "lists/scalar.jsonl:1: expected a JSON object, got str"),
    ("r5-s4-exclude-number-prompt", "eval", ev("--exclude_questions_file", "lists/number_prompt.jsonl"),
     "lists/number_prompt.jsonl:1: 'prompt' must be a string, got int"),
    ("r5-s5-pool-metric-inf", "aggregator", ["--logs_dir", "poollogs"],
     "1 cannot be counted: gsm8k_voter_abc_tiny_14 (its judge_calls value is not a number)"),
    ("r5-s5-cut-metric-lines", "aggregator", ["--logs_dir", "cutlogs"],
     "1 cannot be counted: gsm8k_single_pass_abc_tiny_14 (it has no tokens line)"),
    ("r5-s4-pw-alpha-alone", "eval", ev("--pw_alpha", "0.5"), "--pw_alpha needs --pw_k"),
    ("r5-s3-loss-with-ppm", "trainer", tr("--loss", "mse"), "--loss needs --mode prm or orm"),
    ("r5-s3-lora-r-without-lora", "trainer", tr("--no-lora", "--lora-r", "8"), "--lora-r needs LoRA"),
    # a method flag given for a run of no method that reads it (EVAL runs single_pass), its default included
    ("r5-s4-distinct-tries-no-mcts", "eval", ev("--distinct_tries", "0"),
     "--distinct_tries needs a method named mcts_* in --methods"),
    ("r5-s4-beam-width-no-sbs", "eval", ev("--b1", "3"), "--b1 needs a method named sbs_* in --methods"),
    ("r5-s1-gpu-share-no-ray", "run_mcts", stage1("--gpus_per_actor", "0.5"), "--gpus_per_actor needs --ray"),
    # the ensemble of mc_rollouts_active is checked with the other model folders, before the rollout policy loads
    ("r5-s2-rollout-ensemble-nan", "preprocess", ["--input", RUN, "--labels", "mc_rollouts_active", "--rollout-policy",
                                                  "models/a/tiny", "--rollout-ensemble", "scorers/nan_adapter"],
     "--rollout-ensemble scorers/nan_adapter: adapter_model.safetensors"),
]
ROUND3 = 81   # rows added by the third reliability round (issue 29); the ones above them came before
ROUND4 = 26   # rows added by the fourth (issue 44)
ROUND5 = sum(c[0].startswith("r5-") for c in CASES)   # rows added by the fifth (issue 61), the last ones


@pytest.fixture
def workspace(pristine, tmp_path, monkeypatch):
    root = tmp_path / "ws"
    shutil.copytree(pristine, root, symlinks=True)
    [run] = (root / "results").glob("gsm8k_res_*")
    monkeypatch.chdir(root)
    # Tests run as root, for whom permission bits do not apply: a read-only folder is simulated
    # where the kernel would be asked (os.access), which is what a non-root user's run meets.
    readonly = (root / READONLY).resolve()
    real_access = os.access

    def access(path, mode, *a, **kw):
        inside = Path(os.path.abspath(path)).resolve().is_relative_to(readonly)
        if inside and mode & os.W_OK:
            return False
        return real_access(path, mode, *a, **kw)

    monkeypatch.setattr(os, "access", access)
    shutil.copytree(root / "trees" / "gsm8k_res_plain", root / READONLY / "gsm8k_res_x")
    return root, run.name


@pytest.mark.parametrize("cli, argv, names", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(workspace, monkeypatch, capsys, cli, argv, names):
    root, run = workspace
    argv = [a.replace("{run}", run) for a in argv]
    before = snapshot(root)
    code, lines = invoke(monkeypatch, capsys, cli, argv)
    assert code == 2 and len(lines) == 1, "\n".join(line[:3000] for line in lines[-30:])
    assert names in lines[0], lines[0][:3000]
    assert "Traceback" not in lines[0]
    assert len(lines[0]) <= 2200, f"{len(lines[0])} characters"   # a message quotes user data bounded
    assert snapshot(root) == before


def test_the_table_is_large_and_covers_every_cli():
    assert len(CASES) >= 103 + 60 + 20 and ROUND3 >= 60 and len(CASES) - ROUND3 - ROUND4 - ROUND5 >= 103
    assert all(c[0].startswith("r4-") for c in CASES[-ROUND4 - ROUND5:len(CASES) - ROUND5])
    assert ROUND5 >= 11 and all(c[0].startswith("r5-") for c in CASES[-ROUND5:])
    assert {c[1] for c in CASES} == set(SCRIPTS)
    assert len({c[0] for c in CASES}) == len(CASES)
