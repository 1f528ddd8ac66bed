"""A scorer folder checked whole before any model loads or any log opens: its adapter's settings, its record
and its weights' shapes against the base model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _scorer(folder: Path, base: Path, adapter: dict | None = None, meta: dict | None = None, lora=None) -> Path:
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps(
        {"base_model_name_or_path": str(base), "peft_type": "LORA", "r": 2, **(adapter or {})}))
    (folder / "masprm_scorer.json").write_text(json.dumps({"mode": "ppm", "status": "completed", **(meta or {})}))
    save_file({k: torch.zeros(*v) for k, v in (lora or {"w": (1,)}).items()}, str(folder / "adapter_model.safetensors"))
    return folder


@pytest.mark.parametrize("adapter, meta, lora, problem", [
    ({"r": "8"}, None, None, "adapter_config.json: r must be a whole number >= 1, got '8'"),
    ({"r": 0}, None, None, "adapter_config.json: r must be a whole number >= 1, got 0"),
    ({"lora_alpha": -16}, None, None, "adapter_config.json: lora_alpha must be a number > 0, got -16"),
    ({"lora_dropout": 1.5}, None, None, "adapter_config.json: lora_dropout must be a number in [0, 1), got 1.5"),
    ({"target_modules": 7}, None, None, "adapter_config.json: target_modules must be a module name or a list of "
                                        "them, got 7"),
    (None, {"max_length": -5}, None, "masprm_scorer.json: max_length must be a whole number >= 2, got -5"),
    (None, {"max_prompt_length": "long"}, None, "masprm_scorer.json: max_prompt_length must be a whole number >= 0, "
                                                "got 'long'"),
    (None, None, {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": (2, 32)},
     "the adapter does not fit base model {base}: base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight "
     "is [2, 32], the base's model.layers.0.self_attn.q_proj needs [2, 64]"),
    (None, None, {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": (64, 4)},
     "the adapter does not fit base model {base}: base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight "
     "is [64, 4], the base's model.layers.0.self_attn.q_proj needs [64, 2]"),
    (None, None, {"base_model.model.model.layers.9.mlp.up_proj.lora_A.weight": (2, 64)},
     "the adapter adapts model.layers.9.mlp.up_proj, which base model {base} does not have"),
])
def test_a_scorer_folder_is_checked_whole_before_any_model_loads(tiny_model_dir, tmp_path, adapter, meta, lora,
                                                                   problem):
    from masprm.errors import ModelError
    from masprm.models.weight_files import weight_shapes
    from masprm.models.scorer_checks import check_scorer_fits
    from masprm.scorer_folder import read_scorer_folder

    base = Path(tiny_model_dir)
    assert weight_shapes(base, "s", "s")["model.layers.0.self_attn.q_proj.weight"] == (64, 64)   # the sizes used
    folder = _scorer(tmp_path / "scorer", base, adapter, meta, lora)
    with pytest.raises(ModelError) as caught:
        check_scorer_fits(read_scorer_folder(folder), "prm_dir", str(base))
    assert str(caught.value).startswith(f"prm_dir {folder}: {problem.format(base=base)}"), str(caught.value)


def test_a_fitting_adapter_passes(tiny_model_dir, tmp_path):
    from masprm.models.scorer_checks import check_scorer_fits
    from masprm.scorer_folder import read_scorer_folder

    lora = "base_model.model.model.layers.{}.self_attn.{}.lora_{}.weight"
    shapes = {lora.format(i, m, "A"): (2, 64) for i in (0, 1) for m in ("q_proj", "v_proj")}
    shapes.update({lora.format(0, "q_proj", "B"): (64, 2), "base_model.model.score.modules_to_save.weight": (1, 64),
                   "base_model.model.score.bias": (1,)})   # the one-output head, as peft saves it
    folder = _scorer(tmp_path / "scorer", Path(tiny_model_dir), {"lora_alpha": 16, "target_modules": ["q_proj"]},
                     {"max_length": 512}, shapes)
    check_scorer_fits(read_scorer_folder(folder), "prm_dir", str(tiny_model_dir))


@pytest.mark.slow
def test_a_scorer_stage3_trained_passes_the_whole_folder_check_and_holds_only_new_files(tmp_path_factory,
                                                                                          tiny_model_dir):
    from helpers_cli import trained_adapter

    from masprm.io import process_umask
    from masprm.models.scorer_checks import check_scorer_fits
    from masprm.scorer_folder import read_scorer_folder

    folder = trained_adapter(tmp_path_factory, tiny_model_dir)
    record = read_scorer_folder(folder)
    check_scorer_fits(record, "prm_dir", str(tiny_model_dir))
    assert record.meta["status"] == "completed" and record.adapter["r"] == 4
    assert not list(folder.glob(".save.*"))                                  # the temporary folder is gone
    mode = 0o666 & ~process_umask()
    assert (folder / "adapter_model.safetensors").stat().st_mode & 0o777 == mode   # written private, then the umask's
