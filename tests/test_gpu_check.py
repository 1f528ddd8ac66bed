"""The GPU check itself (bench/gpu_check.sh), run on a CPU: its plan, skips, bad input, version report,
throughput table and the real-size model's shape."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

BENCH = REPO / "bench"
sys.path.insert(0, str(BENCH))
import gpu_check  # noqa: E402
import gpu_plan  # noqa: E402
import gpu_realsize  # noqa: E402


def run_check(*args: str, hide: str = "", cwd: Path = REPO, **env_vars: str) -> subprocess.CompletedProcess:
    """bench/gpu_check.sh with this interpreter; `hide` makes packages look absent (GPU_CHECK_HIDE)."""
    env = {**os.environ, "PY": sys.executable, "GPU_CHECK_HIDE": hide, **env_vars}
    return subprocess.run(["bash", str(BENCH / "gpu_check.sh"), *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


def test_gpu_check_script_parses_and_is_the_make_target():
    script = BENCH / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    planned = subprocess.run(["make", "--no-print-directory", "-n", "gpu-check"], cwd=REPO, capture_output=True,
                             text=True, timeout=60)   # under `make test-fast` a nested make names its folder
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.splitlines()[-1].endswith("bash bench/gpu_check.sh")   # what `make gpu-check` runs last


def test_help_and_plan_list_every_step_and_both_calls_fit_their_six_minutes():
    names = [step.name for step in gpu_plan.STEPS]
    assert {"setup", "rs-sample", "rs-score", "rs-train", "compile", "torchrun", "smoke", "bnb", "train", "stage4",
            "ray", "decode"} == set(names)
    for args in (["--help"], ["--plan"]):
        result = run_check(*args)
        assert result.returncode == 0, result.stderr
        listed = {line.split()[0] for line in result.stdout.splitlines() if line.split()}
        assert set(names) <= listed, args
    plan = run_check("--plan").stdout
    for call in (1, 2):
        parts, total = gpu_plan.call_budget(call)
        assert total < gpu_plan.CALL_LIMIT_S == 360
        assert f"= {total} s, within the 360 s" in plan
    assert gpu_plan.call_budget(2)[0][0] == ("wheels", gpu_plan.WHEELS_LIMIT_S)  # installing counts too
    # every step that needs bitsandbytes or datasets is in call 2, which carries them; ray goes in neither
    for step in gpu_plan.STEPS:
        if set(step.needs) <= set(gpu_plan.CALL_WHEELS[2]) and step.needs:
            assert 2 in step.calls
        assert not ("ray" in step.needs and step.calls)


def test_a_step_whose_package_is_absent_gives_one_skip_line(tmp_path):
    result = run_check("--cpu", "--steps", "bnb", str(tmp_path / "work"), hide="bitsandbytes")
    assert result.returncode == 0, result.stdout + result.stderr
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIP")]
    assert skips == ["SKIP bnb: needs bitsandbytes, not installed here"]
    assert "bitsandbytes  absent  (requirements.txt pins" in result.stdout
    assert "== setup" not in result.stdout  # a skipped step pulls in no prerequisites
    assert "bnb        SKIP" in result.stdout


def test_a_package_that_does_not_import_skips_its_steps_and_says_why(tmp_path):
    """A carried wheel can miss a dependency on the lent machine: its steps are skipped, not failed."""
    fake = tmp_path / "shadow" / "datasets"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('pyarrow>=24.0.0 is required')\n")
    result = run_check("--cpu", "--steps", "stage4", str(tmp_path / "work"), hide="bitsandbytes",
                       PYTHONPATH=str(tmp_path / "shadow"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARN: does not import (ImportError: pyarrow>=24.0.0 is required)" in result.stdout
    assert [line for line in result.stdout.splitlines() if line.startswith("SKIP")] == \
        ["SKIP stage4: needs datasets, which does not import here"]


def test_hidden_packages_look_absent_to_import_find_spec_and_metadata():
    code = ("import importlib.util, importlib.metadata as md\n"
            "assert importlib.util.find_spec('datasets') is None and importlib.util.find_spec('json')\n"
            "try:\n    import datasets\nexcept ModuleNotFoundError as e:\n    print('absent:', e)\n"
            "try:\n    md.version('datasets')\nexcept md.PackageNotFoundError:\n    print('no metadata')\n")
    env = {**os.environ, "PYTHONPATH": str(BENCH / "gpu_hide"), "GPU_CHECK_HIDE": "datasets"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert "hidden by GPU_CHECK_HIDE" in result.stdout and "no metadata" in result.stdout


def test_skip_reasons_name_the_missing_package_or_the_step_that_did_not_pass():
    stage4 = gpu_plan.BY_NAME["stage4"]
    assert gpu_plan.skip_reason(stage4, set(), {"setup", "train"}) == \
        "SKIP stage4: needs datasets, not installed here"
    assert gpu_plan.skip_reason(stage4, {"datasets"}, {"setup"}) == \
        "SKIP stage4: needs step train, which did not pass"
    assert gpu_plan.skip_reason(stage4, {"datasets"}, {"setup", "train"}) is None
    # prerequisites are added for the steps that can run, in the check's order
    added = gpu_plan.with_prerequisites([stage4, gpu_plan.BY_NAME["bnb"]], {"datasets"})
    assert [s.name for s in added] == ["setup", "bnb", "train", "stage4"]


@pytest.mark.parametrize("args, message", [
    (["--wheels", "/no/such/folder"], "--wheels /no/such/folder: no such folder"),
    (["--wheels", "EMPTY"], "no .whl file in it"),
    (["--steps", "setup,warp"], "--steps: unknown step warp"),
    (["--steps", "setup", "--call", "1"], "give one of them"),
    (["--call", "3"], "invalid choice"),
    (["A_FILE"], "exists and is not a folder"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    (tmp_path / "EMPTY").mkdir()
    (tmp_path / "A_FILE").write_text("x")
    result = run_check(*[str(tmp_path / a) if a in ("EMPTY", "A_FILE") else a for a in args])
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr


def test_an_unknown_hidden_package_is_bad_input():
    result = run_check("--plan", hide="bitsandbites")
    assert result.returncode == 2 and "GPU_CHECK_HIDE: unknown package bitsandbites" in result.stderr


def test_versions_are_compared_with_the_pins():
    pins = gpu_check.pinned_versions()
    assert pins["torch"] and pins["transformers"] and pins["bitsandbytes"]
    found = {"torch": "2.11.0+cu130", "transformers": pins["transformers"], "bitsandbytes": None,
             "datasets": pins["datasets"]}
    lines = {line.split()[0]: line for line in gpu_check.version_report(found, pins, carried={"datasets"})}
    assert f"WARN: requirements.txt pins {pins['torch']}" in lines["torch"]
    assert "WARN" not in lines["transformers"]
    assert "absent" in lines["bitsandbytes"] and "skipped" in lines["bitsandbytes"]
    assert "(carried)" in lines["datasets"] and "WARN" not in lines["datasets"]
    assert gpu_check.call2_wheels(pins)[:2] == [f"bitsandbytes=={pins['bitsandbytes']}",
                                                f"datasets=={pins['datasets']}"]


def test_throughput_table_from_fake_timings():
    rows = [{"what": "sample (HFPolicy.sample)", "setting": "16 rows", "rows_per_call": 16, "tokens_per_s": 1234.5,
             "items_per_s": 9.6, "item": "rows", "seconds": 13.3, "peak_gib": 4.25, "floor_tokens_per_s": 22000.0},
            {"what": "ppm step (train_scorer)", "setting": "LoRA r=256", "tokens_per_s": 98765.4, "items_per_s": 12.0,
             "item": "pairs", "seconds": 10.7}]
    table = gpu_realsize.throughput_table(rows, "title").splitlines()
    assert table[0] == "title" and table[1].split()[:3] == ["measurement", "setting", "rows/call"]
    assert set(table[2]) == {"-", " "} and len({len(line) for line in table[1:]}) == 1  # aligned
    first, second = table[3], table[4]
    assert "1,234" in first and "9.6 rows" in first and "13.30" in first and "4.2" in first and "22,000" in first
    assert "98,765" in second and "12.0 pairs" in second and second.rstrip().endswith("-")  # no peak, no floor


def test_call_2_keeps_call_1s_rows_measured_in_the_same_folder(tmp_path):
    rows = [{"step": "rs-sample", "device": "cuda", "setting": "16 rows"},
            {"step": "rs-train", "device": "cuda", "setting": "LoRA"},
            {"step": "rs-score", "device": "cpu", "setting": "toy"}]
    (tmp_path / gpu_realsize.ROWS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert gpu_realsize.keep_earlier_rows(tmp_path, "cuda") == 2  # the other device's row goes
    measured_now = [{"step": "rs-train", "device": "cuda", "setting": "QLoRA"},
                    {"step": "rs-sample", "device": "cuda", "setting": "16 rows"}]
    latest = gpu_realsize.latest_rows(gpu_realsize.read_rows(tmp_path) + measured_now)
    # LoRA (call 1) and QLoRA (call 2) rows both stay; a row measured again replaces the earlier one
    assert [(r["setting"], bool(r.get("earlier"))) for r in latest] == [("LoRA", True), ("QLoRA", False),
                                                                          ("16 rows", False)]


def test_real_size_model_is_qwen25_15b_instruct():
    shape = gpu_realsize.QWEN25_15B_INSTRUCT
    assert {k: shape[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                  "intermediate_size", "vocab_size", "rope_theta", "tie_word_embeddings")} == {
        "hidden_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
        "intermediate_size": 8960, "vocab_size": 151936, "rope_theta": 1e6, "tie_word_embeddings": True}
    workload = gpu_realsize.GPU_WORKLOAD
    assert workload.params == 1_543_714_304  # the published 1.54B
    assert workload.kv_bytes_per_token() == 28 * 2 * 2 * 128 * 2
    assert workload.sample_rows == (16, 64, 256)
    from transformers import Qwen2Config

    config = Qwen2Config(**shape)
    theta = getattr(config, "rope_theta", None) or config.rope_parameters["rope_theta"]
    assert theta == 1e6 and config.hidden_size // config.num_attention_heads == 128
    # the bandwidth bound: 3.1 GB of weights per decode step on ~4.3 TB/s is ~1,400 steps/s at most
    floor = gpu_realsize.decode_floor_tokens_per_s(workload, 16, 256)
    assert 16 * 1000 < floor < 16 * 1500


def test_real_size_tokenizer_has_qwens_size_and_one_token_per_filler_word():
    import gpu_throughput

    tokenizer = gpu_throughput.synthetic_tokenizer(gpu_realsize.QWEN_REGULAR_TOKENS)
    assert len(tokenizer) == 151646
    assert [tokenizer.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")] == \
        [151643, 151644, 151645]
    text = gpu_throughput.text_of(tokenizer, random.Random(0), 40)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == 40 == len(text.split()) and max(ids) < 151643
    assert tokenizer.decode(ids) == text


@pytest.mark.slow
def test_cpu_dry_run_of_the_real_size_steps(tmp_path):
    """The three real-size steps at toy size on the CPU, LoRA (bitsandbytes hidden): the table comes out."""
    work = tmp_path / "work"
    result = run_check("--cpu", "--steps", "rs-sample,rs-score,rs-train", str(work), "--report",
                       str(tmp_path / "report"), hide="bitsandbytes,ray")
    assert result.returncode == 0, result.stdout[-3000:]
    for step in ("setup", "rs-sample", "rs-score", "rs-train"):
        assert f"{step:<10} PASS" in result.stdout
    rows = [json.loads(line) for line in (work / "throughput.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == ["rs-sample"] * 3 + ["rs-score"] * 2 + ["rs-train"] * 2
    assert [r["rows_per_call"] for r in rows[:3]] == [16, 64, 256]
    assert "LoRA r=8 (fp32, CPU)" in rows[-1]["setting"] and all(r["tokens_per_s"] > 0 for r in rows)
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["report.txt", "steps.log", "throughput.jsonl"]
    assert "== throughput" in (tmp_path / "report" / "report.txt").read_text()
    # nothing written outside WORK: caches and temporary files are redirected into it
    assert (work / "cache").is_dir() and (work / "tmp").is_dir()
