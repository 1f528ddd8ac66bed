"""The toy worlds' records: the toy world trains from exactly what it trained from before worlds existed,
and the deep world builds (a tiny build) from its own team, transcripts and noisy targets."""

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from masprm.graph import load_mas_config
from masprm.worlds import build as toy_build
from masprm.worlds.toy.task import generate_split
from masprm.worlds import WORLDS

ROOT = Path(__file__).resolve().parents[1]


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()[:16]


def test_the_toy_world_trains_from_the_same_inputs_as_before_it_became_a_world_record():
    """The shipped toy policy's fingerprint was renewed without retraining when the toy code was
    parametrised by world; these digests (computed from the code at 192a954) say its inputs did not move."""
    world = WORLDS["toy"]
    graph = load_mas_config(ROOT / "configs/toy.yaml")
    sft = generate_split("sft")
    assert digest([p.row() for p in sft]) == "9945d43113b07f35"
    assert digest([p.row() for p in generate_split("test")]) == "f9f1ef9f9ba2ab0d"
    assert digest(list(world.training_turns(sft[:500], graph, 0, 0.0))) == "6cfbbe717c0517b2"
    assert digest(list(world.corpus_lines(sft[:500], graph))) == "1d41dc437023a839"
    with pytest.raises(ValueError, match="no noise"):
        list(world.training_turns(sft[:1], graph, 0, 0.1))


def test_the_deep_world_trains_from_the_same_inputs_as_before_its_code_moved_into_worlds():
    """The shipped deep policy's fingerprint was renewed without retraining when the toy code moved from
    masprm/toy/ into masprm/worlds/ (import lines only); these digests (computed from the code at 54fe6a8, before
    the move) say its training inputs did not move."""
    import itertools

    world = WORLDS["toy_deep"]
    graph = load_mas_config(ROOT / "configs/toy_deep.yaml")
    sft = list(itertools.islice(world.task.iter_split("sft"), 500))
    noise = dict(world.policy_defaults)["target_noise"]
    assert digest([p.row() for p in sft]) == "851a6eef55d34d7f"
    assert digest(list(world.training_turns(sft, graph, 0, noise))) == "d8e77bba9cf2e408"
    assert digest(list(world.corpus_lines(sft, graph))) == "4e35afe96a9aee9a"


def test_each_world_has_its_own_build_folder_config_and_shipped_policy():
    toy, deep = WORLDS["toy"], WORLDS["toy_deep"]
    assert (toy.out, toy.config, toy.shipped) == ("artifacts/toy", "configs/toy.yaml", "toy/shipped_policy")
    assert (deep.out, deep.config, deep.shipped) == ("artifacts/toy_deep", "configs/toy_deep.yaml",
                                                     "toy_deep/shipped_policy")
    assert "toy_deep/task.py" in deep.sources and "toy_deep/task.py" not in toy.sources
    with pytest.raises(Exception, match="unknown toy world"):
        WORLDS["toy_deeper"]


def test_the_repository_ships_the_deep_policy_of_its_default_build():
    """The shipped deep policy is the one `python -m masprm.worlds.build --world toy_deep` builds (its settings,
    team config and toy code), its files unchanged since it was shipped (checked by hash)."""
    from masprm.worlds.train_policy import PolicySpec

    world = WORLDS["toy_deep"]
    key = toy_build.build_key(world, PolicySpec(**dict(world.policy_defaults)), ROOT / world.config)
    manifest = json.loads((world.shipped_dir / toy_build.SHIPPED_MANIFEST).read_text())
    assert manifest["fingerprint"] == key, "deep toy code/config/spec changed since its policy was shipped: reship"
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(manifest["files"])
    assert toy_build.shipped_policy(key, world.shipped_dir) == manifest
    assert manifest["trained_on"]["ATEN_CPU_CAPABILITY"] == "avx2"


def test_a_tiny_deep_build_trains_on_its_team_and_records_its_noise(tmp_path):
    from masprm.worlds.train_policy import PolicySpec

    spec = PolicySpec(vocab_size=400, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
                      intermediate_size=64, steps=3, batch_size=8, warmup=2, drill_every=2, drill_batch_size=8,
                      n_problems=40, target_noise=0.2)
    manifest = toy_build.build_toy_world(tmp_path / "w", config=ROOT / "configs/toy_deep.yaml", spec=spec,
                                         world="toy_deep", log=lambda m: None)
    assert manifest["source"] == "trained" and manifest["spec"]["target_noise"] == 0.2
    assert sorted(manifest["data"]) == ["dev", "train"]   # the test split is not written out
    assert (tmp_path / "w/policy/model.safetensors").is_file()
    again = toy_build.build_toy_world(tmp_path / "w", config=ROOT / "configs/toy_deep.yaml", spec=spec,
                                      world="toy_deep", log=lambda m: None)
    assert again == manifest   # cached: same settings and code
    other = toy_build.fingerprint(asdict(spec), (ROOT / "configs/toy_deep.yaml").read_text(), WORLDS["toy"].sources)
    assert other != manifest["fingerprint"]   # the deep world's code is part of its key
