"""Model loading and its options: missing or unusable folders, hub ids, model flags, dtypes, devices."""

from __future__ import annotations

import argparse
import sys

import pytest

torch = pytest.importorskip("torch")

from masprm.errors import ConfigError, ModelError  # noqa: E402
from masprm.models import loading  # noqa: E402
from masprm.config import add_config_args, config_from_args  # noqa: E402
from masprm.models.loading import ModelOptions, load_causal_lm  # noqa: E402
from masprm.models.options import ModelFlags  # noqa: E402
from masprm.models.policy import HFPolicy  # noqa: E402



@pytest.mark.parametrize("bad", ["./no/such/model", "/definitely/missing/dir", "artifacts/nope/policy"])
def test_missing_local_model_is_a_model_error(bad):
    with pytest.raises(ModelError, match="no such model folder"):
        HFPolicy(bad)


def test_folder_without_config_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match="not a model folder"):
        load_causal_lm(str(tmp_path), setting="gen_model_id")


def test_unreachable_hub_id_is_a_model_error(monkeypatch):
    import time

    from masprm import checks

    # conftest sets HF_HUB_OFFLINE=1, so an uncached hub id fails at once, before transformers is asked
    with pytest.raises(ModelError, match=r"^model_id no-such-org/no-such-model: not a local folder and not "
                                         r"in the Hugging Face cache, and HF_HUB_OFFLINE is set"):
        HFPolicy("no-such-org/no-such-model")
    # Without the flag, an unreachable hub is found by one short probe instead of ~30 s of retries.
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    probes = []

    def no_network(address, timeout):
        probes.append((address, timeout))
        raise OSError("Network is unreachable")

    monkeypatch.setattr(checks.socket, "create_connection", no_network)
    checks.hub_reachable.cache_clear()
    started = time.monotonic()
    with pytest.raises(ModelError, match="the hub is unreachable"):
        checks.check_hub_id("no-such-org/no-such-model", "model_id")
    assert time.monotonic() - started < 2 and probes == [(("huggingface.co", 443), checks.HUB_PROBE_TIMEOUT_S)]
    checks.hub_reachable.cache_clear()


def test_cli_reports_a_bad_model_path_in_one_line(tmp_path, monkeypatch, capsys):
    from masprm.cli import run_cli
    from masprm.models.policy import HFPolicy

    monkeypatch.setattr(sys, "argv", ["stage.py"])
    with pytest.raises(SystemExit) as done:
        run_cli(lambda: HFPolicy(str(tmp_path / "missing"), setting="gen_model_id") and 0,
                {"gen_model_id": "--gen_model_id"})
    err = capsys.readouterr().err
    assert done.value.code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--gen_model_id" in lines[0] and "missing" in lines[0]
    assert "Traceback" not in err


def model_options(argv: list[str]) -> ModelOptions:
    parser = argparse.ArgumentParser()
    add_config_args(parser, ModelFlags)
    return config_from_args(ModelFlags, parser.parse_args(argv)).options()


def test_model_flags_give_the_loading_options():
    assert model_options(["--load_in_4bit", "--no_compile", "--attn_impl", "eager"]) == ModelOptions(
        device_map="auto", load_in_4bit=True, attn_impl="eager", compile=False, trust_remote_code=False)
    assert model_options(["--device_map", "cpu"]) == ModelOptions(device_map="cpu", compile=True)


def test_policy_dtype_is_fp16_on_cuda_by_default_and_dtype_chooses_another():
    assert model_options([]).dtype is None
    assert loading.policy_dtype(ModelOptions(), "cuda") is torch.float16  # the original's policy dtype
    assert loading.policy_dtype(ModelOptions(), "cpu") is torch.float32
    chosen = model_options(["--dtype", "bfloat16"])
    assert loading.policy_dtype(chosen, "cuda") is torch.bfloat16
    with pytest.raises(SystemExit):
        model_options(["--dtype", "int8"])
    # 4-bit computes in the same dtype (fp16 unless bf16 is chosen)
    assert loading.quantization_config(torch.float16).bnb_4bit_compute_dtype == torch.float16
    assert loading.quantization_config(torch.bfloat16).bnb_4bit_compute_dtype == torch.bfloat16


def test_4bit_policy_format_is_the_originals_fp4_unless_nf4_is_asked_for():
    from transformers import BitsAndBytesConfig

    # The original's policy config names no quant type, so bitsandbytes' default applies: FP4.
    original = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float16,
                                  bnb_4bit_use_double_quant=True)
    assert original.bnb_4bit_quant_type == "fp4"
    options = model_options(["--load_in_4bit"])
    ours = loading.quantization_config(torch.float16, quant_type=options.quant_type)
    keys = ("load_in_4bit", "bnb_4bit_quant_type", "bnb_4bit_use_double_quant", "bnb_4bit_compute_dtype")
    assert {k: ours.to_dict()[k] for k in keys} == {k: original.to_dict()[k] for k in keys}
    assert model_options(["--load_in_4bit", "--bnb_4bit_quant_type", "nf4"]).quant_type == "nf4"
    with pytest.raises(SystemExit):
        model_options(["--bnb_4bit_quant_type", "int4"])
    # the scorers keep the original's NF4 whatever the policy's format
    for precision in ("auto", "4bit", "fp32"):
        assert loading.scorer_options(options, precision).quant_type == "nf4"
    with pytest.raises(ConfigError, match="bnb_4bit_quant_type 'int4'"):
        loading.quantization_config(torch.float16, quant_type="int4")


def test_device_resolution():
    assert loading.resolve_device("cpu").type == "cpu"
    assert loading.resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ConfigError, match="^device_map 'gpu0'"):
        loading.resolve_device("gpu0")


def test_cuda_request_without_cuda_names_the_build_and_what_torch_said(monkeypatch):
    monkeypatch.setattr(loading, "_warned", set())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(ConfigError) as err:
        loading.resolve_device("cuda:0")
    message = str(err.value)
    assert "\n" not in message and message.startswith("device_map 'cuda:0'") and err.value.setting == "device_map"
    assert f"torch {torch.__version__} is a CPU-only build" in message
    assert "torch.cuda.is_available() returned False" in message
    # A CUDA build that sees no GPU (e.g. a driver too old for its CUDA): the same error names the CUDA
    # version, and "auto" says why it falls back to the CPU instead of doing so silently.
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    with pytest.raises(ConfigError, match=r"built for CUDA 13\.0, but torch\.cuda\.is_available\(\) returned False"):
        loading.resolve_device("cuda")
    with pytest.warns(RuntimeWarning, match="running on CPU: .*too old for CUDA 13.0"):
        assert loading.resolve_device("auto").type == "cpu"


def test_policy_embeddings_are_resized_to_the_tokenizer_as_the_original(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    n = len(tokenizer)
    assert model.get_input_embeddings().weight.shape[0] == n
    # A checkpoint padded beyond its tokenizer, as Qwen2.5's (151,936 rows for 151,665 tokens).
    model.resize_token_embeddings(n + 8)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    padded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert padded.get_input_embeddings().weight.shape[0] == n + 8

    # The original: if len(tokenizer) != rows, resize to len(tokenizer). The kept rows are the saved ones.
    policy = HFPolicy(str(tmp_path), ModelOptions(device_map="cpu"))
    weights = policy.model.get_input_embeddings().weight
    assert weights.shape[0] == n and torch.equal(weights, padded.get_input_embeddings().weight[:n])
    assert policy.model.get_output_embeddings().weight.shape[0] == n
    # A no-op when they agree: the tiny model loads with its own rows.
    same = HFPolicy(str(tiny_model_dir), ModelOptions(device_map="cpu"))
    assert torch.equal(same.model.get_input_embeddings().weight, model.get_input_embeddings().weight[:n])
