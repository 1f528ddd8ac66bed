"""Adding a model role is one registration: its flags, checks, label, manifest and context slot follow."""

from __future__ import annotations

import json

import pytest

from conftest import FakePolicy
from helpers_eval_world import FakeScorer, chain_graph, example, respond
from masprm.cli import UsageError
from masprm.errors import ModelError
from masprm.eval.methods import METHODS, register_method
from masprm.roles import ROLES, STEP_MODES, ModelRole, register_role
from masprm.search.context import SearchResult
from masprm.search.settings import PassSettings

CRITIC = ModelRole("critic", "critic", modes=("orm",), help_name="critic")


def _critic_pass(ctx, example):
    """The question scored by the critic: the value goes to the record."""
    (value,) = yield from ctx.score("critic", [example.question])
    return SearchResult("7", ["7"], extra={"critic_value": value})


@pytest.fixture
def critic_role():
    """The one registration of the new role (and a method that reads it); both removed afterwards."""
    register_role(CRITIC)
    register_method("critic_pass", needs=("critic",), settings=(PassSettings,))(_critic_pass)
    yield CRITIC
    METHODS.unregister("critic_pass")
    ROLES.unregister("critic")


def test_a_role_is_one_record_with_its_flags_checks_label_and_slot(critic_role, tmp_path, monkeypatch):
    from masprm.eval.runner import ModelSpec, label_of, run_conditions
    from masprm.data import LoadedData
    from masprm.stages import evaluate as cli

    # its two flags, read into the model settings under the role's name
    run, s = cli.parse_command(["--methods", "critic_pass", "--critic_dir", str(tmp_path / "critic")])
    assert s.models.scorer_folders()["critic"] == str(tmp_path / "critic")
    assert s.models.scorer_bases()["critic"] is None
    assert s.roles("critic_pass") == ("critic",)
    # a method that needs it without its folder names its flag
    run, s = cli.parse_command(["--methods", "critic_pass"])
    with pytest.raises(UsageError, match="^critic_pass needs --critic_dir$"):
        cli.validate(run, s)
    # a folder trained with another objective is refused for the role (its modes say orm)
    folder = tmp_path / "critic"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "base"}))
    (folder / "masprm_scorer.json").write_text(json.dumps({"objective": "ppm", "status": "completed"}))
    run, s = cli.parse_command(["--methods", "critic_pass", "--critic_dir", str(folder)])
    with pytest.raises(ModelError, match=r"^critic_dir .*--mode ppm .* the critic role needs --mode orm"):
        cli.check_scorer_roles(run, s, cli.read_scorers(run, s))
    # the condition label tags the folder with the flag stem
    assert label_of("critic_pass", s).endswith("[critic: critic]")
    # the search reads the scorer from its context slot; the manifest keys it by the role's name
    world = s.with_data(dataset="chain", split="test", seed=1).with_models(gen_model_id="fake-policy")
    specs = {"policy": ModelSpec("policy", "fake-policy"), "critic": ModelSpec("scorer", str(folder))}
    fakes = {"policy": FakePolicy(respond), "scorer": FakeScorer(lambda text: 0.25)}
    (cond,) = run_conditions(["critic_pass"], world, chain_graph(), LoadedData([example(0)], skipped=0), specs,
                             logs_dir=tmp_path / "logs", loader=lambda spec: fakes[spec.model_type],
                             announce=lambda m: None)
    [record] = [json.loads(line) for line in cond.files.records.read_text().splitlines()]
    assert record["error"] is None and record["extra"]["critic_value"] == 0.25
    assert record["metrics"]["scorer_calls"] == 1
    assert set(cond.manifest["definition"]["models"]) == {"policy", "critic"}
    assert cond.manifest["definition"]["models"]["critic"]["training"]["objective"] == "ppm"


def test_the_registry_is_as_before_once_the_test_is_done():
    assert "critic" not in ROLES and "critic_pass" not in METHODS
    assert [(r.name, r.flag_stem, r.modes) for r in ROLES.values()] == [
        ("handoff_masprm", "handoff_prm", STEP_MODES), ("masprm", "prm", STEP_MODES), ("orm", "orm", ("orm", "gorm"))]
    assert ROLES["masprm"].default_folder == "checkpoints/Qwen2.5-1.5B-RM"
