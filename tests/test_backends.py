"""Generation backends: one registry row each, chosen by --backend, recorded only when not the default.

The vLLM backend's own behaviour is tested in its environment (tests/test_vllm_backend.py); here, in the
main environment, what every stage sees: the flag, its refusals, the records, and that a new backend is one
registration that stage 1 runs end to end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from masprm.errors import ConfigError
from masprm.models.backends import (BACKENDS, Backend, BackendFlags, check_backend, identity, load_policy,
                                    register_backend)
from masprm.models.options import ModelOptions

ROOT = Path(__file__).resolve().parents[1]


def test_the_default_is_hf_and_an_unknown_name_lists_the_valid_ones():
    assert BackendFlags().backend == "hf" and {"hf", "vllm"} <= set(BACKENDS)
    with pytest.raises(ConfigError, match=r"unknown generation backend 'vlm' \(valid: hf, vllm; did you mean 'vllm'"):
        BackendFlags(backend="vlm")


def test_engine_options_belong_to_the_backends_that_read_them():
    with pytest.raises(ConfigError, match="gpu_memory_utilization is an engine option the hf backend does not take"):
        BackendFlags(gpu_memory_utilization=0.5)
    with pytest.raises(ConfigError, match="no_prefix_caching is an engine option the hf backend"):
        BackendFlags(no_prefix_caching=True)
    assert BackendFlags(backend="vllm", gpu_memory_utilization=0.5, no_prefix_caching=True).no_prefix_caching
    with pytest.raises(ConfigError, match=r"gpu_memory_utilization must be in \(0, 1\], got 1.5"):
        BackendFlags(backend="vllm", gpu_memory_utilization=1.5)


def test_only_a_backend_other_than_the_default_is_recorded():
    """Runs made before backends existed keep their .run_settings and fingerprints (hf records nothing)."""
    assert identity(None) == identity(BackendFlags()) == {}
    assert identity(BackendFlags(backend="vllm", enforce_eager=True)) == {"backend": "vllm"}


def test_stage_4_fingerprints_name_the_backend_only_when_not_hf():
    from helpers_eval_world import chain_graph, example, settings
    from masprm.data import LoadedData
    from masprm.eval.runner import ModelSpec, condition_manifest

    data = LoadedData([example(0)], skipped=0)

    def manifest(backend):
        spec = ModelSpec("policy", "fake-policy", backend=backend)
        return condition_manifest("single_pass", settings(dataset="chain", split="test", gen_model_id="fake-policy",
                                                          seed=1), chain_graph(), data, {"policy": spec})

    before = manifest(None)   # a spec as built before backends existed
    assert "backend" not in before["definition"]["models"]["policy"]
    assert manifest(BackendFlags())["fingerprint"] == before["fingerprint"]
    vllm = manifest(BackendFlags(backend="vllm"))
    assert vllm["definition"]["models"]["policy"]["backend"] == "vllm"
    assert vllm["fingerprint"] != before["fingerprint"]
    # engine options change speed, not samples: one fingerprint
    assert manifest(BackendFlags(backend="vllm", no_prefix_caching=True))["fingerprint"] == vllm["fingerprint"]


def test_every_backends_module_is_on_the_evaluations_code_path():
    """The registry names a backend's module by string; its code still versions the logs it writes."""
    from masprm.eval.logs import code_files
    names = {f.relative_to(ROOT / "src" / "masprm").as_posix() for f in code_files()}
    assert {"models/backends.py", "models/policy.py", "models/chat.py", "models/vllm_policy.py"} <= names


def test_a_stage_1_folder_of_one_backend_refuses_a_run_of_another(tmp_path):
    from masprm.run_folder import check_or_record_settings
    from masprm.eval.tree_runner import tree_path

    folder = tmp_path / "run"
    folder.mkdir()
    check_or_record_settings(folder, {"seed": 1})          # an hf run records no backend
    assert json.loads((folder / ".run_settings").read_text()) == {"seed": 1}
    tree_path(folder, 0).write_text("{}")
    check_or_record_settings(folder, {"seed": 1})          # hf resumes hf
    with pytest.raises(ConfigError, match="`backend` was 'hf', now 'vllm'"):
        check_or_record_settings(folder, {"seed": 1, "backend": "vllm"})


def test_the_vllm_backend_outside_its_environment_is_one_line_before_loading(tiny_model_dir):
    pytest.importorskip("torch")   # the main environment; vLLM's own runs tests/test_vllm_backend.py
    import importlib.util
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed in this environment")
    with pytest.raises(ConfigError, match=r"backend vllm: vLLM is not installed in this Python .*make setup-vllm"):
        check_backend(BackendFlags(backend="vllm"), str(tiny_model_dir), ModelOptions(device_map="cpu"))


def test_vllm_memory_share_follows_the_ray_actors_gpu_fraction():
    from masprm.models.vllm_policy import DEFAULT_MEMORY_SHARE, memory_share

    assert memory_share(None, None) == DEFAULT_MEMORY_SHARE == 0.9
    assert memory_share(None, 0.125) == pytest.approx(0.1125)   # 8 actors per GPU, as the original runs
    assert memory_share(None, 2.0) == 0.9                        # a whole GPU or more: the default
    assert memory_share(0.3, 0.125) == 0.3                       # given: as given


def test_vllm_head_size_is_read_from_the_folder(tmp_path):
    from masprm.models.vllm_policy import head_size

    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 4}))
    assert head_size(str(tmp_path)) == 16
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 4, "head_dim": 32}))
    assert head_size(str(tmp_path)) == 32
    assert head_size("Qwen/Qwen2.5-0.5B-Instruct") is None   # a hub id: vLLM's own check applies


def test_vllm_request_seeds_come_from_the_request_keys():
    from masprm.models.chat import stream_seed
    from masprm.models.vllm_policy import request_seed

    high, low = stream_seed((42, 3, 1, 0, 2))
    assert request_seed((42, 3, 1, 0, 2)) == high * 2 ** 31 + low < 2 ** 62
    assert len({request_seed((42, 3, 1, 0, k)) for k in range(100)}) == 100


# --------------------------------------------------------------------------- a new backend is one row


def scripted(model_id, options, flags, *, setting="model_id", max_batch_tokens=None):
    """A backend's loader: the scripted team of tests/conftest.py whatever the folder."""
    from conftest import FakePolicy
    policy = FakePolicy(lambda messages, k, rng: f"Answer: {rng.randint(1, 3)}")
    policy.loaded_with = (model_id, setting, max_batch_tokens)
    return policy


@pytest.fixture
def scripted_backend():
    register_backend(Backend("scripted", f"{__name__}:scripted", help="a scripted policy"))
    yield
    BACKENDS.unregister("scripted")


def test_a_new_backend_is_one_registration_that_loads_through_the_registry(scripted_backend):
    policy = load_policy(BackendFlags(backend="scripted"), "some/model", ModelOptions(), setting="gen_model_id",
                         max_batch_tokens=99)
    assert policy.loaded_with == ("some/model", "gen_model_id", 99)
    check_backend(BackendFlags(backend="scripted"), "some/model", ModelOptions())   # no check: nothing refused


@pytest.mark.slow
def test_stage_1_runs_a_registered_backend_and_records_it(scripted_backend, tiny_model_dir, tmp_path):
    from masprm.stages import trees

    argv = ["--dataset", "toy", "--split", "train", "--n", "2", "--seed", "3", "--model_id", str(tiny_model_dir),
            "--n_rollouts", "2", "--search_c", "2", "--n_candidates", "2", "--max_new_tokens", "8", "--no_plot",
            "--out_root", str(tmp_path), "--device_map", "cpu", "--no_compile"]
    assert trees.main(argv + ["--backend", "scripted"]) == 0
    [folder] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((folder / ".run_settings").read_text())["backend"] == "scripted"
    assert sorted(p.name for p in folder.glob("*.json")) == ["0.json", "1.json"]
    with pytest.raises(ConfigError, match="`backend` was 'scripted', now 'hf'"):
        trees.main(argv)   # the default backend may not resume the scripted run's trees


@pytest.mark.parametrize("text, problem", [("{", "not valid JSON"), ("[1, 2]", "not a JSON object")])
def test_a_broken_config_is_one_line_before_vllm_loads(tmp_path, text, problem):
    from masprm.errors import MasprmError
    from masprm.models.vllm_policy import head_size

    (tmp_path / "config.json").write_text(text, encoding="utf-8")
    with pytest.raises(MasprmError, match=f"^{tmp_path / 'config.json'}: {problem}"):
        head_size(str(tmp_path))
