"""A scorer folder says what it was trained as; stage 4's manifest and printed label carry it."""

from __future__ import annotations

import json

from masprm.data import Example, LoadedData
from masprm.eval.aggregate import split_label
from masprm.eval.methods import METHODS
from masprm.eval.naming import condition_label, scorer_name
from masprm.eval.runner import ModelSpec, condition_manifest
from masprm.scorer_meta import training_of, training_tag

from helpers_eval_world import chain_graph, settings


def scorer_folder(tmp_path, name, **meta):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    (folder / "masprm_scorer.json").write_text(json.dumps(meta))
    return folder


def test_folders_from_before_the_record_were_trained_on_todays_files():
    assert training_of({"mode": "ppm"}) == {"objective": "ppm", "label_scheme": "masprm"}
    assert training_of({"mode": "orm"}) == {"objective": "orm", "label_scheme": "mc"}
    assert training_of({}) == {}
    traj = training_of({"mode": "traj", "objective": "traj", "label_scheme": "mc", "step_agg": "softmin",
                        "softmin_temperature": 0.5})
    assert traj == {"objective": "traj", "label_scheme": "mc", "step_agg": "softmin", "softmin_temperature": 0.5}
    assert training_tag(traj) == "mc+traj-softmin0.5"
    assert training_tag({"objective": "prm", "label_scheme": "first_error"}) == "first_error+prm"


def test_a_label_names_the_training_the_folder_name_does_not(tmp_path):
    traj = {"objective": "traj", "label_scheme": "mc", "step_agg": "min", "softmin_temperature": 0.1}
    assert scorer_name(scorer_folder(tmp_path, "toy-traj-min", **traj)) == "toy-traj-min"
    # "min" is not a word of "toy-traj-softmin", and the first_error scheme is not mc
    assert scorer_name(scorer_folder(tmp_path, "toy-traj-softmin", **traj)) == "toy-traj-softmin (mc+traj-min)"
    prm = {"objective": "prm", "label_scheme": "first_error"}
    assert scorer_name(scorer_folder(tmp_path, "toy-lab-first_error-prm", **prm)) == "toy-lab-first_error-prm"
    assert scorer_name(scorer_folder(tmp_path, "mine", **prm)) == "mine (first_error+prm)"
    # today's trainings keep today's labels, whatever the folder is called; no record, no addition
    assert scorer_name(scorer_folder(tmp_path, "MASPRM-GSM8K-1.5B", mode="ppm")) == "MASPRM-GSM8K-1.5B"
    assert scorer_name(str(tmp_path / "missing")) == "missing"
    s = settings(prm_dir=str(tmp_path / "mine"))
    label = condition_label(METHODS["sbs_prm"], s.method_settings("sbs_prm"), ("masprm",), s.models.scorer_folders())
    assert label == "SBS + PRM (B1=3, B2=5) [prm: mine (first_error+prm)]"
    # the aggregator still finds the settings group (the budget curves group by the rest)
    assert split_label(label) == ("SBS + PRM [prm: mine (first_error+prm)]", "B1=3, B2=5")


def test_the_manifest_names_the_scorers_training(tmp_path):
    data = LoadedData([Example(0, "What is 3 + 4?", "7", {})], skipped=0)
    s = settings(dataset="chain", split="test", gen_model_id="fake-policy", seed=14)

    def manifest(folder):
        specs = {"policy": ModelSpec("policy", "fake-policy"), "masprm": ModelSpec("scorer", str(folder))}
        return condition_manifest("sbs_prm", s, chain_graph(), data, specs)

    folder = scorer_folder(tmp_path, "a", objective="prm", label_scheme="first_error")
    first = manifest(folder)
    assert first["definition"]["models"]["masprm"]["training"] == {"objective": "prm", "label_scheme": "first_error"}
    assert "training" not in first["definition"]["models"]["policy"]
    (folder / "masprm_scorer.json").write_text(json.dumps({"objective": "prm", "label_scheme": "advantage"}))
    other = manifest(folder)
    assert other["definition"]["models"]["masprm"]["training"]["label_scheme"] == "advantage"
    assert other["fingerprint"] != first["fingerprint"]
