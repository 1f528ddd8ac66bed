"""The shipped toy policy: recorded by fingerprint, checked by file hashes, copied instead of trained."""

import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from masprm.worlds import build as toy_build
from masprm.worlds.train_policy import PolicySpec

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs/toy.yaml"
TINY = PolicySpec(vocab_size=400, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
                  intermediate_size=64, steps=4, batch_size=8, warmup=2, drill_every=2, drill_batch_size=8,
                  n_problems=60)
TENSORS = {"embed.weight": np.arange(12, dtype=np.float32).reshape(3, 4), "norm.weight": np.ones(4, np.float32)}


def tiny_key(spec: PolicySpec = TINY) -> str:
    return toy_build.fingerprint(asdict(spec), CONFIG.read_text(encoding="utf-8"))


def fake_policy_folder(folder: Path, tensors: dict | None = None) -> Path:
    """A policy folder with a couple of small files: a config and a safetensors model."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "fake"}')
    save_file(tensors or TENSORS, str(folder / "model.safetensors"))
    return folder


def log_nothing(message: str) -> None:
    pass


# --------------------------------------------------------------------------- the repository's shipped policy


def test_the_repository_ships_the_policy_of_the_default_build():
    """The shipped policy must be the one the default build would train.

    Any change to the toy code (task.py, transcripts.py, train_policy.py), to
    configs/toy.yaml or to PolicySpec's defaults changes the build fingerprint,
    and every machine would then retrain instead of using the shipped weights.
    When this fails, retrain and reship on the reference machine:
    ``PYTHONPATH=src python -m masprm.worlds.build --ship`` (it retrains the policy
    and rewrites src/masprm/worlds/toy/shipped_policy/shipped.json), then commit.
    """
    key = toy_build.fingerprint(asdict(PolicySpec()), (ROOT / "configs/toy.yaml").read_text(encoding="utf-8"))
    manifest = json.loads((toy_build.SHIPPED / toy_build.SHIPPED_MANIFEST).read_text())
    assert manifest["fingerprint"] == key, "toy code/config/spec changed since the policy was shipped: reship"
    # the listed files are there and unchanged, and they are a whole model folder
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(manifest["files"])
    for name, digest in manifest["files"].items():
        assert toy_build.file_digest(toy_build.SHIPPED / name) == digest, f"{name} changed since it was shipped"
    assert toy_build.shipped_policy(key) == manifest


# --------------------------------------------------------------------------- a temporary shipped folder


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A fake policy shipped for the TINY build in a temporary folder that the module uses."""
    folder = tmp_path / "shipped"
    monkeypatch.setattr(toy_build, "SHIPPED", folder)
    toy_build.ship_policy(fake_policy_folder(tmp_path / "trained"), tiny_key(), {"final_loss": 0.5, "parameters": 16},
                          shipped=folder)   # named: a test never touches the repository's shipped policy
    return folder


def fake_trainer(monkeypatch) -> list:
    """Replace train_policy by one that writes a marked config.json; returns the list of its calls."""
    calls = []

    def fake_train(out_dir, graph, spec, **kwargs):
        calls.append(spec)
        Path(out_dir).mkdir(parents=True)
        (Path(out_dir) / "config.json").write_text('{"trained": "here"}')
        return {"final_loss": 1.0, "parameters": 1}

    monkeypatch.setattr("masprm.worlds.train_policy.train_policy", fake_train)
    return calls


def test_ship_policy_records_the_fingerprint_and_every_files_hash(shipped):
    manifest = json.loads((shipped / toy_build.SHIPPED_MANIFEST).read_text())
    assert manifest["fingerprint"] == tiny_key()
    assert set(manifest["files"]) == {"config.json", "model.safetensors"}
    assert manifest["files"]["config.json"] == toy_build.file_digest(shipped / "config.json")
    assert (manifest["final_loss"], manifest["parameters"]) == (0.5, 16)
    assert toy_build.shipped_policy(tiny_key(), shipped) == manifest
    assert toy_build.shipped_policy(tiny_key()) == manifest             # the module's folder, read at call time
    assert toy_build.shipped_policy("0000000000000000", shipped) is None
    assert toy_build.shipped_policy(tiny_key(), shipped.parent / "nowhere") is None


def test_a_matching_shipped_policy_is_copied_not_trained(shipped, tmp_path, monkeypatch):
    def must_not_train(*args, **kwargs):
        raise AssertionError("trained although the shipped policy matches")

    monkeypatch.setattr("masprm.worlds.train_policy.train_policy", must_not_train)
    out = tmp_path / "toy"
    manifest = toy_build.build_toy_world(out, config=CONFIG, spec=TINY, log=log_nothing)
    assert manifest["source"] == "shipped" and manifest["fingerprint"] == tiny_key()
    assert manifest["final_loss"] == 0.5 and manifest["trained_on"]["machine"]
    policy = out / "policy"
    assert sorted(p.name for p in policy.iterdir()) == ["config.json", "model.safetensors"]  # no shipped.json
    assert (policy / "model.safetensors").read_bytes() == (shipped / "model.safetensors").read_bytes()
    assert not list(out.glob(".policy.tmp-*"))


def test_a_corrupted_shipped_file_makes_the_build_train(shipped, tmp_path, monkeypatch):
    data = bytearray((shipped / "model.safetensors").read_bytes())
    data[-1] ^= 0x01                                      # one changed byte in the weights
    (shipped / "model.safetensors").write_bytes(bytes(data))
    assert toy_build.shipped_policy(tiny_key(), shipped) is None
    calls = fake_trainer(monkeypatch)
    manifest = toy_build.build_toy_world(tmp_path / "toy", config=CONFIG, spec=TINY, log=log_nothing)
    assert calls == [TINY] and manifest["source"] == "trained"
    assert json.loads((tmp_path / "toy/policy/config.json").read_text()) == {"trained": "here"}


def test_another_fingerprint_makes_the_build_train(shipped, tmp_path, monkeypatch):
    calls = fake_trainer(monkeypatch)
    other = PolicySpec(**{**asdict(TINY), "steps": 5})
    manifest = toy_build.build_toy_world(tmp_path / "toy", config=CONFIG, spec=other, log=log_nothing)
    assert calls == [other] and manifest["source"] == "trained" and manifest["fingerprint"] == tiny_key(other)
    assert json.loads((tmp_path / "toy/policy/config.json").read_text()) == {"trained": "here"}


def test_retrain_trains_even_when_the_shipped_policy_matches(shipped, tmp_path, monkeypatch):
    calls = fake_trainer(monkeypatch)
    manifest = toy_build.build_toy_world(tmp_path / "toy", config=CONFIG, spec=TINY, retrain=True,
                                         log=log_nothing)
    assert calls == [TINY] and manifest["source"] == "trained"
    assert not (tmp_path / "toy/policy/model.safetensors").exists()


# --------------------------------------------------------------------------- comparing weights


def test_compare_weights_identical_and_one_changed_tensor(tmp_path):
    a = fake_policy_folder(tmp_path / "a")
    same = fake_policy_folder(tmp_path / "same")
    assert toy_build.compare_weights(a, same) == {"identical": True, "max_abs_diff": 0.0}
    changed = {**TENSORS, "norm.weight": TENSORS["norm.weight"] + np.array([0, 0.5, 0, 0], np.float32)}
    b = fake_policy_folder(tmp_path / "b", changed)
    assert toy_build.compare_weights(a, b) == {"identical": False, "max_abs_diff": 0.5}
    renamed = fake_policy_folder(tmp_path / "c", {"other.weight": TENSORS["norm.weight"]})
    assert toy_build.compare_weights(a, renamed)["identical"] is False


# --------------------------------------------------------------------------- the CLI


def test_verify_shipped_without_a_shipped_policy_for_the_build_is_one_line(tmp_path, monkeypatch, capsys):
    from masprm.cli import run_cli

    monkeypatch.setattr(sys, "argv", ["build.py", "--verify_shipped", "--steps", "5", "--out", str(tmp_path / "toy")])
    with pytest.raises(SystemExit) as done:
        run_cli(toy_build.main)
    err = capsys.readouterr().err
    assert done.value.code == 2, err
    assert err.strip().count("\n") == 0
    key = tiny_key(PolicySpec(steps=5))
    assert f"no shipped policy for build {key}" in err
    assert not (tmp_path / "toy").exists()                 # it writes nothing under --out


def test_the_build_key_follows_the_toy_code_not_its_docstrings_or_comments(tmp_path, monkeypatch):
    """Rewording a docstring or a comment of the training code keeps the shipped policy; a statement does not."""
    import shutil

    code = tmp_path / "toy"
    shutil.copytree(toy_build.TOY_CODE, code, ignore=shutil.ignore_patterns("__pycache__", "shipped_policy"))
    monkeypatch.setattr(toy_build, "TOY_CODE", code)
    key = tiny_key()
    source = (code / "train_policy.py").read_text()
    assert source.startswith('"""')
    (code / "train_policy.py").write_text('"""Reworded."""\n# a new comment\n' + source.split('"""', 2)[2]
                                          + "\n\n# trailing comment\n")
    assert tiny_key() == key
    (code / "train_policy.py").write_text(source + "\nEXTRA = 1\n")
    assert tiny_key() != key
