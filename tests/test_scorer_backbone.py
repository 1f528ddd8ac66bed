"""toy_deep's scorer backbone (docs/learnability.md, cell C7): a larger LM of the world's SFT corpus, built, shipped
and hash-checked as the policy is, so a scorer can start from something larger than the policy it guides."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from helpers import snapshot
from helpers_cli import run_module
from masprm.errors import ConfigError
from masprm.worlds import WORLDS
from masprm.worlds import build as toy_build

ROOT = Path(__file__).resolve().parents[1]
DEEP_CONFIG = ROOT / "configs/toy_deep.yaml"


def tiny_scorer_spec():
    """The deep world's scorer settings cut to a few seconds of training (the shape stays the backbone's)."""
    from masprm.worlds.train_policy import PolicySpec

    settings = WORLDS["toy_deep"].backbone_defaults("scorer")
    return PolicySpec(**{**settings, "vocab_size": 400, "steps": 3, "batch_size": 8, "warmup": 2, "drill_every": 2,
                         "drill_batch_size": 8, "n_problems": 40})


def test_the_deep_world_names_a_larger_backbone_for_its_scorers_and_the_toy_world_none():
    deep, toy = WORLDS["toy_deep"], WORLDS["toy"]
    policy, scorer = deep.backbone_defaults("policy"), deep.backbone_defaults("scorer")
    # the scorer's settings are the policy's but for its shape: the same corpus, steps, noise and seed
    assert {k: v for k, v in scorer.items() if k not in dict(deep.scorer_backbone)} == policy
    assert (scorer["hidden_size"], scorer["num_layers"], scorer["num_heads"], scorer["num_kv_heads"],
            scorer["intermediate_size"]) == (128, 4, 4, 2, 384)
    assert toy.scorer_backbone == () and toy.scorer_shipped is None
    assert toy_build.default_out(deep, "scorer") == "artifacts/toy_deep_scorer"
    assert toy_build.default_out(deep, "policy") == "artifacts/toy_deep"
    assert toy_build.shipped_dir(deep, "scorer") == ROOT / "src/masprm/worlds/toy_deep/shipped_scorer"


def test_a_scorer_backbone_rebuilds_bit_identically_and_in_its_own_folder(tmp_path):
    """Two builds of the same settings give the same bytes (the trainer's data order, initialisation and
    threads are fixed), so a shipped backbone can be checked by retraining it; the model sits in <out>/scorer."""
    spec = tiny_scorer_spec()
    first, second = (toy_build.build_toy_world(tmp_path / name, config=DEEP_CONFIG, spec=spec, world="toy_deep",
                                               backbone="scorer", log=lambda m: None) for name in ("a", "b"))
    assert first["source"] == second["source"] == "trained" and first["fingerprint"] == second["fingerprint"]
    assert first["scorer"] == str(tmp_path / "a" / "scorer") and "policy" not in first
    assert not (tmp_path / "a" / "policy").exists()
    assert toy_build.compare_weights(tmp_path / "a" / "scorer", tmp_path / "b" / "scorer") == {
        "identical": True, "max_abs_diff": 0.0}
    config = json.loads((tmp_path / "a" / "scorer" / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"]) == (128, 4, 4)
    # another shape is another build: the policy's settings at these steps do not share the scorer's key
    from masprm.worlds.train_policy import PolicySpec
    shape = dict(WORLDS["toy_deep"].scorer_backbone)
    policy_spec = PolicySpec(**{**asdict(spec), **{k: getattr(PolicySpec(), k) for k in shape}})
    assert toy_build.build_key(WORLDS["toy_deep"], policy_spec, DEEP_CONFIG) != first["fingerprint"]
    again = toy_build.build_toy_world(tmp_path / "a", config=DEEP_CONFIG, spec=spec, world="toy_deep",
                                      backbone="scorer", log=lambda m: None)
    assert again == first   # cached: found by its build.json and its scorer folder


def test_the_repository_ships_the_scorer_backbone_of_its_default_build():
    """The shipped backbone is the one `python -m masprm.worlds.build --world toy_deep --backbone scorer` builds,
    its files unchanged since it was shipped (checked by hash), its tokenizer the policy's (a scorer reads the
    policy's transcripts token for token)."""
    from masprm.worlds.train_policy import PolicySpec

    world = WORLDS["toy_deep"]
    shipped = toy_build.shipped_dir(world, "scorer")
    key = toy_build.build_key(world, PolicySpec(**world.backbone_defaults("scorer")), ROOT / world.config)
    manifest = json.loads((shipped / toy_build.SHIPPED_MANIFEST).read_text())
    assert manifest["fingerprint"] == key, "deep toy code/config/scorer spec changed since it was shipped: reship"
    assert toy_build.shipped_policy(key, shipped) == manifest
    assert manifest["trained_on"]["ATEN_CPU_CAPABILITY"] == "avx2"
    assert (shipped / "tokenizer.json").read_bytes() == (world.shipped_dir / "tokenizer.json").read_bytes()
    assert manifest["parameters"] > 2 * json.loads((world.shipped_dir / toy_build.SHIPPED_MANIFEST).read_text())[
        "parameters"]


def test_a_build_of_the_default_scorer_copies_the_shipped_one_without_training(tmp_path, monkeypatch):
    def must_not_train(*args, **kwargs):
        raise AssertionError("trained although the shipped scorer backbone matches")

    from masprm.worlds.train_policy import PolicySpec

    monkeypatch.setattr("masprm.worlds.train_policy.train_policy", must_not_train)
    world = WORLDS["toy_deep"]
    manifest = toy_build.build_toy_world(tmp_path / "w", config=DEEP_CONFIG, world="toy_deep", backbone="scorer",
                                         spec=PolicySpec(**world.backbone_defaults("scorer")), log=lambda m: None)
    assert manifest["source"] == "shipped"
    shipped = toy_build.shipped_dir(world, "scorer")
    assert (tmp_path / "w/scorer/model.safetensors").read_bytes() == (shipped / "model.safetensors").read_bytes()


def test_a_scorer_backbone_for_a_world_without_one_is_refused_before_any_output(tmp_path, monkeypatch, capsys):
    before = snapshot(WORLDS["toy"].shipped_dir)
    monkeypatch.chdir(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.worlds.build",
                                ["--world", "toy", "--backbone", "scorer", "--out", str(tmp_path / "out")])
    assert code == 2 and lines == ["build.py: error: --backbone scorer: the world toy has no scorer backbone "
                                   "(worlds with one: toy_deep)"]
    assert not any(tmp_path.iterdir()) and snapshot(WORLDS["toy"].shipped_dir) == before
    with pytest.raises(ConfigError, match="the world toy has no scorer backbone"):   # the library says it too
        toy_build.build_toy_world(tmp_path / "lib", config=ROOT / "configs/toy.yaml", world="toy", backbone="scorer",
                                  log=lambda m: None)
    assert not (tmp_path / "lib").exists()   # refused before the build writes its data


@pytest.mark.parametrize("backbone", ["policy", "scorer"])
def test_a_build_into_the_shipped_folder_it_copies_is_refused_for_each_backbone(tmp_path, monkeypatch, capsys,
                                                                               backbone):
    shipped = toy_build.shipped_dir(WORLDS["toy_deep"], backbone)
    assert shipped.is_dir()   # the refusal guards a folder that is there (a missing one is nothing to change)
    monkeypatch.chdir(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.worlds.build",
                                ["--world", "toy_deep", "--backbone", backbone, "--out", str(shipped / "again")])
    assert code == 2 and lines == [f"build.py: error: --out {shipped}/again: is inside the input folder {shipped} "
                                   f"(`shipped {backbone}`); writing there would change what the run reads: choose "
                                   "an output outside it"]
    assert not (shipped / "again").exists()
