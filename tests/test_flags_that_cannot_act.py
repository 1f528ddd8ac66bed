"""A flag that cannot act with the others given is refused at parse time, naming what it needs (``Needs`` on its
field, ``masprm.config``); its default, when not given, never is. Stage 4's widening flags are in
test_mcts_options.py."""

from __future__ import annotations

import pytest

from masprm.cli import PARSED_FLAGS, error_line
from masprm.errors import ConfigError


def _refusal(build_parser, argv: list[str]) -> str | None:
    try:
        build_parser().parse_args(argv)
    except ConfigError as err:
        return error_line(err, PARSED_FLAGS)
    return None


MODE_ONLY = "(no other objective reads it)"


@pytest.mark.parametrize("argv, said", [
    (["--mode", "ppm", "--loss", "mse"], f"--loss needs --mode prm or orm {MODE_ONLY}"),
    (["--mode", "traj", "--loss", "bce"], f"--loss needs --mode prm or orm {MODE_ONLY}"),   # its default, given
    (["--mode", "prm", "--huber-beta", "0.2"], "--huber-beta needs --loss huber (the other losses have no "
                                               "transition point)"),
    (["--mode", "prm", "--agg", "mean"], f"--agg needs --mode traj {MODE_ONLY}"),
    (["--mode", "traj", "--agg", "min", "--softmin-temperature", "0.1"],
     "--softmin-temperature needs --mode traj with --agg softmin (no other aggregation has a temperature)"),
    (["--mode", "ppm", "--pqm-margin", "2"], f"--pqm-margin needs --mode pqm {MODE_ONLY}"),
    (["--mode", "ppm", "--implicit-beta", "0.1"], f"--implicit-beta needs --mode implicit {MODE_ONLY}"),
    (["--mode", "prm", "--ensemble-heads", "3"], f"--ensemble-heads needs --mode ensemble {MODE_ONLY}"),
    (["--mode", "prm", "--ensemble-std", "0.1"], f"--ensemble-std needs --mode ensemble {MODE_ONLY}"),
    (["--mode", "prm", "--ensemble-confidence", "0.8"], f"--ensemble-confidence needs --mode ensemble {MODE_ONLY}"),
    (["--mode", "prm", "--ppm-best-metric", "pair_acc"], f"--ppm-best-metric needs --mode ppm {MODE_ONLY}"),
    (["--mode", "prm", "--no-lora", "--lora-r", "8"], "--lora-r needs LoRA (drop --no-lora)"),
    (["--mode", "prm", "--no-lora", "--lora_alpha", "8"], "--lora-alpha needs LoRA (drop --no-lora)"),
    (["--mode", "prm", "--no-lora", "--lora-dropout", "0"], "--lora-dropout needs LoRA (drop --no-lora)"),
    (["--mode", "prm", "--hub_private_repo"], "--hub_private_repo needs --push_to_hub (nothing is uploaded "
                                              "without it)"),
])
def test_a_training_flag_that_cannot_act_is_refused_naming_what_it_needs(argv, said):
    from masprm.stages.train import build_parser

    assert _refusal(build_parser, argv) == said


@pytest.mark.parametrize("argv", [
    ["--mode", "prm", "--loss", "huber", "--huber-beta", "0.2"],
    ["--mode", "traj", "--agg", "softmin", "--softmin-temperature", "0.1"],
    ["--mode", "ensemble", "--ensemble-heads", "3", "--ensemble-std", "0.1", "--ensemble-confidence", "0.8"],
    ["--mode", "pqm", "--pqm-margin", "2"],
    ["--mode", "implicit", "--implicit-beta", "0.1"],
    ["--mode", "ppm", "--ppm-best-metric", "pair_acc", "--lora-r", "8"],
    ["--mode", "prm", "--hub_private_repo", "--push_to_hub", "--hub_model_id", "me/x"],
    ["--mode", "traj"],   # nothing given: every default stands, whatever the mode
])
def test_the_same_flags_with_what_they_need_are_accepted(argv):
    from masprm.stages.train import build_parser

    assert _refusal(build_parser, argv) is None


def test_the_trainer_command_refuses_in_one_line_before_reading_anything(tmp_path, monkeypatch, capsys):
    from helpers import snapshot
    from helpers_cli import run_module

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pairs.jsonl").write_text("{}\n")
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.stages.train",
                                ["--mode", "ppm", "--data_dir", "pairs.jsonl", "--output-dir", "out", "--loss", "mse"])
    assert code == 2 and lines == [f"train.py: error: --loss needs --mode prm or orm {MODE_ONLY}"]
    assert snapshot(tmp_path) == before


def test_the_export_refuses_a_private_repository_without_an_upload():
    from masprm.stages.export_scorer import build_parser

    assert _refusal(build_parser, ["scorer", "--hub_private_repo"]) == ("--hub_private_repo needs --push_to_hub "
                                                                        "(nothing is uploaded without it)")
    assert _refusal(build_parser, ["scorer", "--hub_private_repo", "--push_to_hub", "--hub_model_id", "me/x"]) is None
