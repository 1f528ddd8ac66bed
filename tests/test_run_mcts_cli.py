"""`src/run_mcts.py` and `src/show_tree.py` as a user runs them (tiny model, local data, CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers_cli import RUN_MCTS, SHOW_TREE, SMOKE, call_main


def run(script: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})


@pytest.mark.slow
def test_readme_smoke_command_writes_the_documented_folder_and_resumes(workdir, tiny_model_dir, monkeypatch,
                                                                        capsys):
    args = SMOKE + ["--model_id", str(tiny_model_dir), "--data_file", "gsm8k.jsonl"]
    proc = run(RUN_MCTS, args, workdir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    folder = workdir / "results" / f"gsm8k_res_train_{Path(tiny_model_dir).name}_r2_c4_cand3_t0p7_p0p95"
    assert sorted(p.name for p in folder.iterdir()) == [".run_settings", "0.json", "0.png", "1.json", "1.png"]
    golds = set()
    for i in range(2):
        tree = json.loads((folder / f"{i}.json").read_text())
        meta = tree["meta"]
        assert meta["index"] == i and meta["dataset"] == "gsm8k" and meta["split"] == "train"
        assert meta["config"] == "configs/gsm8k.yaml" and meta["model"] == str(tiny_model_dir)
        assert meta["search"]["n_rollouts"] == 2 and meta["search"]["c"] == 4 and meta["seed"] == 42
        assert tree["visits"] >= 2 and len(tree["children"]) == 3  # three candidates for the first agent
        golds.add(meta["gold"])
    assert golds == {"7", "12"}  # the row without a gold answer was skipped
    assert "skipped 1" in proc.stderr and "trees" in proc.stderr  # the count and the progress bar

    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    monkeypatch.chdir(workdir)
    code, out, _ = call_main(monkeypatch, capsys, args)  # the rerun loads no model: nothing to do
    assert code == 0 and "2 trees already" in out and "0 to build" in out
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps

    code, out, _ = call_main(monkeypatch, capsys, [str(folder / "0.json"), "--text", "--max_depth", "1"],
                             script="show_tree")
    assert code == 0 and out.startswith("ROOT [N=")
    # agents by the names of the team the trees record (configs/gsm8k.yaml here: Reader first)
    assert out.count("-> Reader") == 3 and "-> Planner" not in out
    code, _, _ = call_main(monkeypatch, capsys, [str(folder / "1.json"), "--out", "pic.png"], script="show_tree")
    assert code == 0 and (workdir / "pic.png").read_bytes()[:4] == b"\x89PNG"


def test_bad_input_subprocess_is_one_line(workdir):
    proc = run(RUN_MCTS, ["--dataset", "nosuchset"], workdir)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "unknown dataset 'nosuchset'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--n", "0"], "--n must be >= 1, got 0"),
    (["--top_p", "1.5"], "--top_p must be in (0, 1]"),
    (["--n_candidates", "0"], "--n_candidates must be >= 1"),
    (["--actors", "2"], "--actors needs --ray"),
    (["--data_file", "missing.jsonl"], "missing.jsonl"),
    (["--data_file", "broken.jsonl"], "broken.jsonl"),
    (["--mas_config", "configs/nothere.yaml"], "configs/nothere.yaml: MAS config not found"),
    (["--mas_config", "configs/cycle.yaml"], "cycle among agents"),
    (["--dataset", "svamp"], "svamp.yaml: MAS config not found"),  # default config: configs/<dataset>.yaml
    (["--n_rollouts", "many"], "invalid int value"),
    (["--ray", "--gpus_per_actor", "1.5"], "--gpus_per_actor 1.5: give a share of one GPU"),  # not Ray's ValueError
    (["--ray", "--ray_start_timeout", "0"], "--ray_start_timeout must be > 0 seconds, got 0"),
    (["--ray", "--ray_retries", "-1"], "--ray_retries must be >= 0, got -1"),
])
def test_bad_input_is_one_clear_line_and_exit_2(workdir, monkeypatch, capsys, args, message):
    monkeypatch.chdir(workdir)
    (workdir / "broken.jsonl").write_text('{"question": "unterminated\n')
    (workdir / "configs" / "cycle.yaml").write_text(yaml.safe_dump({
        "agents": [{"name": "a", "system_prompt": "x"}, {"name": "b", "system_prompt": "y"}],
        "edges": [[-1, 0], [0, 1], [1, 0]]}))
    (workdir / "svamp.json").write_text(json.dumps([{"Body": "Sam has 2 cats.", "Question": "How many?",
                                                     "Answer": 2}]))
    if "--data_file" not in args:
        args = args + ["--data_file", "svamp.json" if "svamp" in args else "gsm8k.jsonl"]
    (workdir / "results" / "keep").mkdir(parents=True)
    (workdir / "results" / "keep" / "0.json").write_text("{}")
    code, _, err = call_main(monkeypatch, capsys, args)
    assert code == 2
    # The last line is ours; above it, `datasets` may log its own complaint about a malformed file.
    last = err.strip().splitlines()[-1]
    assert last.startswith("run_mcts.py: error: ") and message in last, err
    if "broken.jsonl" not in args:
        assert err.strip() == last
    assert (workdir / "results" / "keep" / "0.json").read_text() == "{}"  # nothing already written is touched


def test_show_tree_rejects_what_is_not_a_tree(tmp_path):
    (tmp_path / "x.json").write_text('{"pairs": []}')
    proc = run(SHOW_TREE, [str(tmp_path / "x.json")], tmp_path)
    assert proc.returncode == 2 and "not a search tree" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- run-folder names


def test_run_folder_name_of_the_seed_readme():
    from masprm.run_folder import run_folder_name

    assert run_folder_name("gsm8k", "train", "Qwen/Qwen2.5-1.5B-Instruct", 40, 4.0, 3, 0.7, 0.95,
                           "configs/gsm8k.yaml") == "gsm8k_res_train_Qwen_Qwen2.5-1.5B-Instruct_r40_c4_cand3_t0p7_p0p95"


def test_a_max_new_tokens_cap_is_part_of_the_run_folder_name():
    from masprm.run_folder import run_folder_name

    base = ("gsm8k", "train", "Qwen/Qwen2.5-1.5B-Instruct", 40, 4.0, 3, 0.7, 0.95, "configs/gsm8k.yaml")
    plain = "gsm8k_res_train_Qwen_Qwen2.5-1.5B-Instruct_r40_c4_cand3_t0p7_p0p95"
    assert run_folder_name(*base, max_new_tokens=None) == plain  # unset: the name is unchanged
    assert run_folder_name(*base, max_new_tokens=256) == plain + "_mnt256"
    assert run_folder_name(*base, max_new_tokens=64) != run_folder_name(*base, max_new_tokens=256)


@pytest.mark.slow
def test_run_mcts_writes_a_capped_run_to_its_own_folder(workdir, tiny_model_dir, monkeypatch, capsys):
    import importlib

    script = importlib.import_module("masprm.stages.trees")
    seen = []
    monkeypatch.setattr(script, "run_trees", lambda job, *a, **k: seen.append(job) or (0, []))
    monkeypatch.chdir(workdir)
    args = SMOKE + ["--model_id", str(tiny_model_dir), "--data_file", "gsm8k.jsonl"]
    for extra in ([], ["--max_new_tokens", "32"]):
        code, _, _ = call_main(monkeypatch, capsys, args + extra)
        assert code == 0
    plain = f"results/gsm8k_res_train_{Path(tiny_model_dir).name}_r2_c4_cand3_t0p7_p0p95"
    assert [job.out_dir for job in seen] == [plain, plain + "_mnt32"]
    assert seen[1].settings.max_new_tokens == 32


def test_run_folder_name_parts(tmp_path):
    from masprm.run_folder import dataset_tag, dataset_tag_of_run, format_number, model_tag

    assert [format_number(x) for x in (4.0, 0.7, 0.95, 1, 1e-5, 2.5)] == ["4", "0p7", "0p95", "1", "1e-05", "2p5"]
    local = tmp_path / "models" / "tiny-policy"
    local.mkdir(parents=True)
    assert model_tag(str(local) + "/") == "tiny-policy"  # a local folder: its last component
    assert model_tag("Qwen/Qwen2.5-7B-Instruct") == "Qwen_Qwen2.5-7B-Instruct"
    assert dataset_tag("gsm8k", None) == "gsm8k"
    assert dataset_tag("gsm8k", "configs/gsm8k.yaml") == "gsm8k"
    assert dataset_tag("gsm8k", "configs/gsm8k_refine.yaml") == "gsm8k_refine"
    assert dataset_tag("gsm8k", "other/single.yaml") == "gsm8k_single"
    assert dataset_tag_of_run("results/gsm8k_refine_res_train_m_r4_c4_cand3_t0p7_p0p95") == "gsm8k_refine"
    with pytest.raises(ValueError):
        dataset_tag_of_run("results/whatever")


def test_search_defaults_are_the_originals_single_process_values():
    from helpers_cli import stage_module
    from masprm.run_folder import run_folder_name

    args = stage_module("run_mcts").build_parser().parse_args([])
    # The original has neither flag: 4 candidates per expansion on both paths, c = 4 in one process.
    assert (args.n_candidates, args.c, args.temperature, args.top_p) == (4, 4.0, 0.7, 0.95)
    name = run_folder_name("gsm8k", "train", "Qwen/Qwen2.5-1.5B-Instruct", args.n_rollouts, args.c,
                           args.n_candidates, args.temperature, args.top_p, "configs/gsm8k.yaml")
    assert name == "gsm8k_res_train_Qwen_Qwen2.5-1.5B-Instruct_r64_c4_cand4_t0p7_p0p95"
