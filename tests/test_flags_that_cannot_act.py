"""A flag that cannot act with the others given is refused at parse time, naming what it needs (``Needs`` on its
field, ``masprm.config``); its default, when not given, never is. Stage 4's widening flags are in
test_mcts_options.py."""

from __future__ import annotations

import argparse

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


def _eval_parser():
    from masprm.stages.evaluate import build_parser

    return build_parser()


@pytest.mark.parametrize("argv, said", [
    # 0 is --distinct_tries' default: given, it still says the user meant MCTS
    (["--methods", "single_pass", "--distinct_tries", "0"], "--distinct_tries needs a method named mcts_* in --methods"),
    (["--methods", "sbs_prm", "--n_simulations", "5"], "--n_simulations needs a method named mcts_* in --methods"),
    (["--methods", "mcts_prm", "--b1", "3"], "--b1 needs a method named sbs_* in --methods"),
    (["--methods", "sbs_prm", "--bon_n", "8"], "--bon_n needs a method named bon_* in --methods"),
    (["--methods", "bon_prm", "--voter_k", "5"], "--voter_k needs one of pooled_judge, voter_* in --methods"),
    (["--methods", "single_pass", "--judge_temperature", "0"],
     "--judge_temperature needs one of mcts_judge, pooled_judge in --methods"),
    (["--methods", "mcts_logprob", "--orm_leaf"], "--orm_leaf needs mcts_prm in --methods"),
    (["--methods", "sbs_prm", "--logprob_agg", "sum"],
     "--logprob_agg needs one of bon_logprob, mcts_logprob, sbs_logprob, voter_logprob in --methods"),
    (["--methods", "single_pass", "--max_turns", "4"], "--max_turns needs a method named handoff_* in --methods"),
])
def test_a_method_flag_without_a_method_that_reads_it_is_refused(argv, said):
    assert _refusal(_eval_parser, argv) == said


@pytest.mark.parametrize("argv", [
    ["--methods", "mcts_judge", "--distinct_tries", "0", "--judge_temperature", "0"],
    ["--methods", "pooled_judge", "--voter_k", "3", "--sbs_temperature", "0.7"],
    ["--n_simulations", "5", "--orm_leaf"],   # the default methods hold mcts_prm
    ["--methods", "single_pass", "--top_p", "0.9"],   # every static method samples with it
])
def test_method_flags_with_a_method_that_reads_them_are_accepted(argv):
    assert _refusal(_eval_parser, argv) is None


def test_every_method_flag_not_read_by_every_method_needs_one_that_reads_it():
    """Derived from the registry, so a new method's flags are covered: a flag some method does not read has a
    need, and the need holds exactly for a run of a method that reads it."""
    import dataclasses

    from masprm.eval.methods import METHODS, method_flag_needs

    needs = method_flag_needs()
    for name, method in METHODS.items():
        read = {f.name for cls in method.settings for f in dataclasses.fields(cls)}
        for setting, need in needs.items():
            assert need.ok(argparse.Namespace(methods=[name])) == (setting in read), (name, setting)


@pytest.mark.parametrize("argv, said", [
    (["--actors", "2"], "--actors needs --ray (or --ray_address)"),
    (["--gpus_per_actor", "0.5"], "--gpus_per_actor needs --ray (or --ray_address)"),
])
def test_a_ray_flag_of_stage_1_without_ray_is_refused(monkeypatch, argv, said):
    from masprm.stages.trees import build_parser

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert _refusal(build_parser, argv) == said
    assert _refusal(build_parser, [*argv, "--ray"]) is None


def test_a_stage_names_a_need_its_fields_cannot_declare():
    """``add_settings_args(needs=...)``: a need known only to the stage (its methods), given by the setting's
    name; a field's own need comes first."""
    from dataclasses import dataclass

    from masprm.cli import ArgumentParser
    from masprm.config import Needs, add_settings_args, arg

    @dataclass(frozen=True)
    class Flags:
        kind: list[str] = arg(flags=("--kind",), nargs="+", default_factory=lambda: ["a"])
        width: int = arg(1, flags=("--width",))
        depth: int = arg(1, flags=("--depth",), needs=Needs("`width` above 1", lambda s: s.width > 1))

    def parser():
        p = ArgumentParser()
        # "some value of a list flag": the stage's rule reads the list as parsed
        add_settings_args(p, ((None, (Flags,)),), needs={"width": Needs("b in `kind`", lambda s: "b" in s.kind),
                                                          "depth": Needs("never", lambda s: False)})
        return p

    assert _refusal(parser, ["--width", "2"]) == "--width needs b in --kind"
    assert _refusal(parser, ["--kind", "a", "b", "--width", "2"]) is None
    assert _refusal(parser, ["--kind", "b", "--depth", "2"]) == "--depth needs --width above 1"


def test_the_stage_4_run_files_documented_commands_parse(monkeypatch):
    """The run file's own examples stay valid now that its method flags need methods that read them."""
    import shlex
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    lines = (root / "configs/runs/toy_stage4_eval.yaml").read_text().splitlines()
    examples = [shlex.split(line.lstrip("# "))[1:] for line in lines if line.startswith("#   masprm-eval ")]
    assert len(examples) == 2 and all(_refusal(_eval_parser, argv) is None for argv in examples)
