"""The CUDA-only branches, driven on a CPU: the precision rule, multi-GPU training launches, QLoRA biases,
Ray GPU shares, and a CUDA build that sees no GPU (the 4-bit inference tests are in test_policy/test_scorer)."""

from __future__ import annotations

import random

import pytest
import torch

from masprm.errors import ConfigError
from masprm.models import loading
from masprm.models.loading import choose_dtype


def fake_gpu(monkeypatch, capability: tuple[int, int]) -> None:
    """A CUDA device of this compute capability; is_bf16_supported says True as it does on T4/V100."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)


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


@pytest.mark.parametrize("share", [1.5, 2.25, -1.0, float("nan")])
def test_gpu_shares_ray_cannot_give_are_usage_errors_before_ray_starts(share, monkeypatch):
    from masprm import parallel

    monkeypatch.setattr(parallel, "_ray_map", lambda *a, **k: pytest.fail("Ray must not be started"))
    with pytest.raises(ConfigError, match="give a share of one GPU .* or a whole number"):
        list(parallel.map_examples(lambda: None, lambda s, x: x, [1], use_ray=True, num_gpus_per_worker=share))
    for fine in (0.0, 0.25, 1.0, 2.0):
        parallel.check_gpu_share(fine)


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
