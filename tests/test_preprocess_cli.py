"""Stage 2 command line (src/train/preprocess_data.py): outputs, flags and user errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from masprm.cli import UsageError
from masprm.errors import MasprmError
from helpers_trees import GSM8K, dylan_tree, gsm8k_tree, preprocess_workdir, write_trees

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "src" / "train" / "preprocess_data.py"
README_RUN = "gsm8k_res_train_Qwen_Qwen2.5-1.5B-Instruct_r40_c4_cand3_t0p7_p0p95"

from masprm.stages import preprocess as preprocess_data


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A repo-like working folder: configs/ and results/<run>/ with trees."""
    monkeypatch.chdir(tmp_path)
    return preprocess_workdir(tmp_path, README_RUN)


def test_seed_readme_command_writes_next_to_the_tree_folder(workdir, capsys):
    # the seed README's spelling of the team, --config (today's is --mas_config): it keeps working
    preprocess_data.main(["--input", f"results/{README_RUN}", "--target-nodes", "5", "--make-ppm",
                          "--ppm-max-pairs", "8", "--ppm-pos-topk", "4", "--ppm-neg-topk", "4",
                          "--view", "full", "--config", "configs/gsm8k.yaml"])
    prm = read_jsonl(workdir / "results" / f"prm_samples_{README_RUN}.jsonl")
    ppm = read_jsonl(workdir / "results" / f"ppm_pairs_{README_RUN}.jsonl")
    assert len(prm) == 3 and len(ppm) == 2  # the two in-window trees are identical: deduped
    assert ppm[0]["chosen_actions"] == ["read", "plan A"] and ppm[0]["rejected_actions"] == ["read", "plan B"]
    out = capsys.readouterr().out
    assert "[preprocess][PRM] files=3 trees=3 malformed=0 outside_root_window=1 | candidate_paths=6 " \
           "| R+1=2 | R-1=4 | records=6 duplicates=3 | kept=3" in out
    assert f"wrote -> {workdir / 'results' / f'ppm_pairs_{README_RUN}.jsonl'}" in out
    assert "pairs=4 duplicates=2 | kept=2" in out
    assert not list((workdir / "results").glob(".*.tmp"))


def test_local_view_derives_the_config_from_the_folder_name(workdir, capsys):
    run = "gsm8k_dylan_res_train_tiny_r2_c4_cand3_t0p7_p0p95"
    write_trees(workdir / "results" / run, [dylan_tree()])
    preprocess_data.main(["--input", f"results/{run}", "--target-nodes", "0", "--make-ppm", "--view", "local"])
    prm = read_jsonl(workdir / "results" / f"prm_samples_local_{run}.jsonl")
    ppm = read_jsonl(workdir / "results" / f"ppm_pairs_local_{run}.jsonl")
    assert {r["prompt"] for r in prm if r["meta"]["agent_idx"] == 3} == {"What is 2 + 2?\n\nVERDICT: DISAGREE"}
    assert [p["meta"]["agent_idx"] for p in ppm] == [2, 4]
    assert "configs/gsm8k_dylan.yaml" in capsys.readouterr().out


def test_single_tree_file_input(workdir):
    preprocess_data.main(["--input", f"results/{README_RUN}/0.json"])
    assert len(read_jsonl(workdir / "results" / README_RUN / "prm_samples_0.jsonl")) == 3


def test_no_dedupe_flag(workdir):
    preprocess_data.main(["--input", f"results/{README_RUN}", "--no-dedupe"])
    assert len(read_jsonl(workdir / "results" / f"prm_samples_{README_RUN}.jsonl")) == 6


def test_empty_result_says_why(workdir, capsys):
    preprocess_data.main(["--input", f"results/{README_RUN}", "--make-ppm", "--ppm-root-window", "0.5", "0.6"])
    out = capsys.readouterr().out
    assert "no PPM pairs: every tree's root value is outside the window [0.5, 0.6]" in out
    assert read_jsonl(workdir / "results" / f"ppm_pairs_{README_RUN}.jsonl") == []


def test_malformed_trees_are_named_on_stderr(workdir, capsys):
    (workdir / "results" / README_RUN / "sub").mkdir()
    (workdir / "results" / README_RUN / "sub" / "7.json").write_text("{broken")
    preprocess_data.main(["--input", f"results/{README_RUN}"])
    err = capsys.readouterr().err
    assert "skipped 1 unreadable tree(s): sub/7.json: not valid JSON" in err


@pytest.mark.parametrize("argv, message", [
    (["--input", "results/nope"], "--input: results/nope does not exist"),
    (["--input", "empty"], "--input: no tree files (*.json) under empty"),
    (["--input", f"results/{README_RUN}", "--mas_config", "configs/missing.yaml"],
     "configs/missing.yaml: MAS config not found"),
    (["--input", f"results/{README_RUN}", "--mas_config", "configs/cycle.yaml"], "cycle among agents"),
    (["--input", f"results/{README_RUN}", "--mas_config", "configs/broken.yaml"], "not valid YAML"),
    (["--input", "other", "--view", "local"], "cannot derive the MAS config from the folder name 'other'"),
    (["--input", "nosuch_res_x", "--view", "local"], "configs/nosuch.yaml (derived from the input folder name) not found"),
    (["--input", f"results/{README_RUN}", "--target-nodes", "1"], "--target-nodes 1"),
    (["--input", f"results/{README_RUN}", "--ppm-max-pairs", "0"], "--ppm-max-pairs must be at least 1"),
    (["--input", f"results/{README_RUN}", "--ppm-root-window", "0.5", "-0.5"], "LO (0.5) must not exceed HI (-0.5)"),
])
def test_user_errors_are_one_clear_line_and_write_nothing(workdir, argv, message):
    (workdir / "empty").mkdir()
    write_trees(workdir / "other", [gsm8k_tree()])
    write_trees(workdir / "nosuch_res_x", [gsm8k_tree()])
    (workdir / "configs" / "cycle.yaml").write_text(yaml.safe_dump(
        {"agents": [{"name": "a"}, {"name": "b"}], "edges": [[0, 1], [1, 0]]}))
    (workdir / "configs" / "broken.yaml").write_text("agents: [\n")
    old = workdir / "results" / f"prm_samples_{README_RUN}.jsonl"
    old.write_text("keep me\n")
    with pytest.raises(MasprmError) as err:   # a UsageError, or a domain error (ConfigError) run_cli shows
        preprocess_data.main(argv)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert old.read_text() == "keep me\n"


def test_no_readable_tree_is_a_user_error_that_keeps_the_old_outputs(workdir):
    run = workdir / "results" / "gsm8k_res_broken"
    write_trees(run, ["{broken", "[]"])
    old = workdir / "results" / "prm_samples_gsm8k_res_broken.jsonl"
    old.write_text("keep me\n")
    with pytest.raises(UsageError, match=r"none of the 2 tree file\(s\) could be read \(0.json: not valid JSON"):
        preprocess_data.main(["--input", str(run)])
    assert old.read_text() == "keep me\n"
    assert not list((workdir / "results").glob(".*.tmp"))


def test_a_crash_mid_run_keeps_the_old_outputs(workdir, monkeypatch):
    old = workdir / "results" / f"prm_samples_{README_RUN}.jsonl"
    old.write_text("keep me\n")
    calls = []

    def explode(self, path, name=None):
        calls.append(path)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return [{"prompt": "p", "completions": ["c"], "labels": [1.0]}], []

    monkeypatch.setattr(preprocess_data.Preprocessor, "process_file", explode)
    with pytest.raises(RuntimeError):
        preprocess_data.main(["--input", f"results/{README_RUN}"])
    assert old.read_text() == "keep me\n"
    assert not list((workdir / "results").glob(".*.tmp"))


def test_script_runs_from_the_repo_root_and_exits_2_on_user_error(workdir):
    env = dict(os.environ)   # the package is found as installed by make setup (here: conftest's PYTHONPATH)
    ok = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and "--ppm-root-window" in ok.stdout and "--no-dedupe" in ok.stdout
    bad = subprocess.run([sys.executable, str(SCRIPT), "--input", "results/nope"], capture_output=True,
                         text=True, env=env)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "--input: results/nope does not exist" in bad.stderr
    flag = subprocess.run([sys.executable, str(SCRIPT), "--input", "x", "--view", "global"], capture_output=True,
                          text=True, env=env)
    assert flag.returncode == 2 and flag.stderr.strip().count("\n") == 0 and "--view" in flag.stderr


# --------------------------------------------------------------------------- trees written by stage 1


def test_stage1_trees_go_through_in_both_views(tmp_path, monkeypatch, fake_policy):
    """Trees from stage 1's own writer (a scripted policy on the shipped DyLAN config) preprocess without
    errors, and every local-view prompt is an inbox the policy was actually shown with that output."""
    train_mcts = pytest.importorskip("masprm.search.train_mcts")
    tree_runner = pytest.importorskip("masprm.eval.tree_runner")
    config = REPO / "configs" / "gsm8k_dylan.yaml"
    if not config.is_file():
        pytest.skip("configs/gsm8k_dylan.yaml is not there")
    from masprm.graph import load_mas_config

    graph = load_mas_config(config)
    shown = set()  # (system prompt, user content, output) of every sample

    def respond(messages, k, rng):
        system, user = messages[0]["content"], messages[1]["content"]
        if system.startswith("You are the Judge"):
            out = rng.choice(["VERDICT: AGREE\nAnswer: 4", "VERDICT: AGREE\nAnswer: 5",
                              "VERDICT: DISAGREE\nSolver B slipped."])
        else:
            out = rng.choice(["Answer: 4", "Answer: 5", "  Answer: 5  "])  # unstripped texts too
        shown.add((system, user, out.strip()))
        return out

    class Ex:
        def __init__(self, idx):
            self.idx, self.question, self.gold, self.meta = idx, f"What is {idx} + {4 - idx}?", "4", {}

    run = tmp_path / "results" / "gsm8k_dylan_res_train_fake_r8_c4_cand2_t0p7_p0p95"
    job = tree_runner.TreeJob(graph, train_mcts.TreeSearchSettings(n_rollouts=24, n_candidates=2), str(run), 7,
                             {"dataset": "gsm8k", "split": "train", "config": str(config), "model": "fake"},
                             plot=False, grade=lambda pred, gold: pred.strip().endswith(gold))
    written, failed = tree_runner.run_trees(job, lambda: fake_policy(respond), [Ex(i) for i in range(4)],
                                           log=lambda s: None)
    assert written == 4 and not failed

    monkeypatch.chdir(REPO)  # the config is derived from the folder name: configs/gsm8k_dylan.yaml
    flags = ["--input", str(run), "--make-ppm", "--ppm-root-window", "-1", "1"]
    preprocess_data.main(flags + ["--target-nodes", "0", "--view", "local"])
    preprocess_data.main(flags + ["--target-nodes", "5", "--view", "full"])
    local = read_jsonl(run.parent / f"prm_samples_local_{run.name}.jsonl")
    pairs = read_jsonl(run.parent / f"ppm_pairs_local_{run.name}.jsonl")
    assert local and pairs
    systems = [a.system_prompt for a in graph.agents]
    for r in local:
        assert (systems[r["meta"]["agent_idx"]], r["prompt"], r["completions"][0]) in shown
    for p in pairs:
        for text in p["chosen_actions"] + p["rejected_actions"]:
            assert (systems[p["meta"]["agent_idx"]], p["prompt"], text) in shown
    # Both branch lengths of the conditional team were graded (4 steps on agreement, 8 otherwise).
    assert {r["meta"]["step_index"] for r in local if r["meta"]["agent_idx"] == 3} == {3}
    assert any(r["meta"]["agent_idx"] == 7 for r in local)


def test_local_view_must_route_with_the_team_that_built_the_trees(workdir):
    from masprm.checks import file_identity

    run = workdir / "results" / "gsm8k_res_recorded"
    tree = gsm8k_tree()
    tree["meta"].update(config="configs/gsm8k.yaml", config_identity=file_identity("configs/gsm8k.yaml"))
    write_trees(run, [tree])
    preprocess_data.main(["--input", str(run), "--view", "local", "--mas_config", "configs/gsm8k.yaml"])
    out = workdir / "results" / "prm_samples_local_gsm8k_res_recorded.jsonl"
    kept = out.read_bytes()
    reworded = {**GSM8K, "agents": [{**a, "system_prompt": a["system_prompt"] + " Be brief."} for a in GSM8K["agents"]]}
    Path("configs/reworded.yaml").write_text(yaml.safe_dump(reworded))
    with pytest.raises(UsageError, match=r"^--mas_config configs/reworded.yaml is not the MAS config the trees were "
                                         r"built with \(configs/gsm8k.yaml, recorded in .*0.json\);.*--force"):
        preprocess_data.main(["--input", str(run), "--view", "local", "--mas_config", "configs/reworded.yaml"])
    assert out.read_bytes() == kept
    # The same team under another file name is the same team; --force routes with whatever is given.
    Path("configs/copy.yaml").write_bytes(Path("configs/gsm8k.yaml").read_bytes())
    preprocess_data.main(["--input", str(run), "--view", "local", "--mas_config", "configs/copy.yaml"])
    preprocess_data.main(["--input", str(run), "--view", "local", "--mas_config", "configs/reworded.yaml", "--force"])
    # Trees that record a config path only (no hash): that file's content, or the path itself when it is gone.
    del tree["meta"]["config_identity"]
    write_trees(run, [tree])
    preprocess_data.main(["--input", str(run), "--view", "local", "--mas_config", "configs/copy.yaml"])
    tree["meta"]["config"] = "configs/gone.yaml"
    write_trees(run, [tree])
    with pytest.raises(UsageError, match=r"not the MAS config the trees were built with \(configs/gone.yaml"):
        preprocess_data.main(["--input", str(run), "--view", "local", "--mas_config", "configs/copy.yaml"])


def test_input_default_is_the_originals(tmp_path, monkeypatch, capsys):
    assert preprocess_data.parse_args([]).input == Path("results/mmlu_res_train_Qwen_Qwen2.5-1.5B-Instruct")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="--input: results/mmlu_res_train_Qwen_Qwen2.5-1.5B-Instruct does not exist"):
        preprocess_data.main([])
    assert list(tmp_path.iterdir()) == []
