"""Every long flag of every stage answers to both spellings (dashes or underscores); help shows the declared one."""

from __future__ import annotations

import pytest

from masprm.cli import SPELLINGS_NOTE, ArgumentParser, other_spelling
from masprm.stages import evaluate, export_scorer, preprocess, train, trees


def test_the_other_spelling_swaps_dashes_and_underscores():
    assert other_spelling("--lora-r") == "--lora_r" and other_spelling("--lora_r") == "--lora-r"
    assert other_spelling("--seed") == "--seed"


@pytest.mark.parametrize("build", [trees.build_parser, train.build_parser, evaluate.build_parser,
                                   export_scorer.build_parser])
def test_every_long_flag_of_a_stage_takes_its_other_spelling(build):
    parser = build()
    declared = {opt for action in parser._actions for opt in action.option_strings if opt.startswith("--")}
    assert declared
    for flag in declared:
        assert parser._declared_spelling(other_spelling(flag)) in declared, flag
        assert parser._declared_spelling(other_spelling(flag) + "=3") in {f + "=3" for f in declared}, flag


def test_the_spellings_the_issue_found_refused_now_parse():
    stage1 = trees.build_parser().parse_args(["--n-rollouts", "2", "--search-c", "4", "--no-plot", "--no-compile"])
    assert (stage1.n_rollouts, stage1.c, stage1.no_plot) == (2, 4.0, True)
    stage2 = preprocess.parse_args(["--input", "results/run", "--target_nodes", "5", "--make_ppm",
                                    "--ppm_max_pairs", "8"])
    assert (stage2.target_nodes, stage2.make_ppm, stage2.ppm_max_pairs) == (5, True, 8)
    stage3 = train.build_parser().parse_args(["--lora_r", "4", "--train_batch_size=2", "--output_dir", "x"])
    assert (stage3.lora_r, stage3.train_batch_size, stage3.output_dir) == (4, 2, "x")
    stage4 = evaluate.build_parser().parse_args(["--n-simulations", "5", "--prm-dir", "p", "--top-p", "0.9"])
    assert (stage4.n_simulations, stage4.prm_dir, stage4.top_p) == (5, "p", 0.9)


def test_a_flag_declared_in_both_spellings_and_values_after_a_double_dash_stay_as_they_are():
    parser = ArgumentParser()
    parser.add_argument("--a-b", type=int)
    parser.add_argument("--a_b_c", type=int)
    parser.add_argument("rest", nargs="*")
    args = parser.parse_args(["--a_b", "1", "--a-b-c", "2", "--", "--a_b"])
    assert (args.a_b, args.a_b_c, args.rest) == (1, 2, ["--a_b"])


def test_help_shows_the_seed_readme_spellings_and_says_both_work(capsys):
    with pytest.raises(SystemExit):
        train.build_parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--lora-r LORA_R" in text and "--lora_r LORA_R" not in text   # the README's stage 3 spelling
    assert SPELLINGS_NOTE in text
    assert "masprm-preprocess (src/train/preprocess_data.py)" in text
