"""`--mas_config` takes a path or a shipped config's name, from any folder."""

import pytest

from masprm.errors import ConfigError
from masprm.graph import SHIPPED_CONFIGS, load_mas_config, resolve_config_path, shipped_config_names

from helpers import REPO


def test_the_checkout_configs_folder_is_the_shipped_one():
    assert (REPO / "configs").resolve() == SHIPPED_CONFIGS
    assert {"gsm8k", "toy", "math_handoff8"} <= set(shipped_config_names())


def test_an_existing_path_is_used_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    own = tmp_path / "configs" / "gsm8k.yaml"
    own.write_text((SHIPPED_CONFIGS / "single.yaml").read_text())
    assert resolve_config_path("configs/gsm8k.yaml") == own.relative_to(tmp_path)   # the local file wins
    assert len(load_mas_config("configs/gsm8k.yaml").agents) == len(load_mas_config(SHIPPED_CONFIGS / "single.yaml").agents)


@pytest.mark.parametrize("given", ["toy", "toy.yaml", "configs/toy.yaml"])
def test_a_name_or_the_readme_spelling_finds_the_shipped_config_anywhere(tmp_path, monkeypatch, given):
    monkeypatch.chdir(tmp_path)   # no configs/ here, as after `pip install`
    assert resolve_config_path(given) == SHIPPED_CONFIGS / "toy.yaml"
    assert [a.name for a in load_mas_config(given).agents] == ["Reader", "Planner", "Solver", "Verifier"]


@pytest.mark.parametrize("given", ["nothere", "configs/nothere.yaml", "elsewhere/toy.yaml"])
def test_an_unknown_config_names_the_shipped_ones(tmp_path, monkeypatch, given):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        resolve_config_path(given)
    message = str(err.value)
    assert message.startswith(f"{given}: MAS config not found") and "gsm8k" in message and "toy" in message
