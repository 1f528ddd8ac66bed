"""Logging: one logger per package under masprm, the stages' lines unchanged by default, -q and -v on every command."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from masprm.cli import ArgumentParser
from masprm.log import RESULT, get_logger, quiet, set_verbosity
from masprm.progress import progress_bar
from masprm.stages import evaluate, export_scorer, train, trees

from helpers import REPO


@pytest.fixture(autouse=True)
def default_level():
    yield
    set_verbosity()


def test_one_logger_per_package_writes_lines_as_print_did(capsys):
    assert get_logger("masprm.stages.trees") is get_logger("masprm.stages.evaluate") is logging.getLogger("masprm.stages")
    assert get_logger("masprm.io").name == "masprm" and get_logger("masprm.train.trainer").name == "masprm.train"
    log = get_logger("masprm.stages.trees")
    log.info("wrote 3 trees to results/x", extra=RESULT)
    log.info("skipped 1 example")
    out, err = capsys.readouterr()
    assert (out, err) == ("wrote 3 trees to results/x\n", "skipped 1 example\n")   # no level, no time


def test_quiet_keeps_warnings_and_hides_lines_and_bars(capsys):
    log = get_logger("masprm.stages.trees")
    set_verbosity(quiet=True)
    assert quiet()
    log.info("a summary", extra=RESULT)
    log.info("a note")
    log.warning("a warning")
    assert capsys.readouterr() == ("", "a warning\n")
    assert progress_bar(range(3)).disable
    set_verbosity(verbose=True)
    log.debug("a debug line")
    assert capsys.readouterr().err == "a debug line\n" and not quiet()


@pytest.mark.parametrize("build", [trees.build_parser, train.build_parser, evaluate.build_parser])
def test_every_command_takes_q_and_v(build):
    parser = build()
    parser.parse_known_args(["-q"])
    assert quiet()
    parser.parse_known_args(["--verbose"])
    assert not quiet() and get_logger("masprm").level == logging.DEBUG
    parser.parse_known_args([])
    assert get_logger("masprm").level == logging.INFO


def test_a_stage_own_quiet_flag_is_the_command_quiet_flag():
    """Stage 3's --quiet (no progress, no log lines) answers to -q as well and sets the level too."""
    args = train.build_parser().parse_args(["-q"])
    assert args.progress is False and quiet()


def test_q_silences_a_stage_that_could_not_be_silenced(tmp_path):
    """aggregate: its table and 'wrote' lines by default, nothing with -q (the files are still written)."""
    from test_aggregator import summary, write_log

    logs = tmp_path / "logs"
    logs.mkdir()
    write_log(logs, "gsm8k_mcts_prm_abcd_Qwen_14", summary(0.5, 100.0))
    base = [sys.executable, str(REPO / "aggregator.py"), "--logs_dir", str(logs), "--out", str(tmp_path / "a.csv")]
    loud = subprocess.run(base, capture_output=True, text=True, timeout=120)
    hushed = subprocess.run(base + ["-q"], capture_output=True, text=True, timeout=120)
    assert loud.returncode == hushed.returncode == 0, loud.stderr
    assert "wrote" in loud.stdout and hushed.stdout == "" and hushed.stderr == ""


def test_every_parser_has_q_and_v_in_its_help(capsys):
    parser = ArgumentParser()
    assert vars(parser.parse_args(["-q"])) == {} and quiet()   # no setting of its own (fingerprints never see it)
    with pytest.raises(SystemExit):
        export_scorer.build_parser().parse_args(["--help"])
    text = capsys.readouterr().out
    assert "-q, --quiet" in text and "-v, --verbose" in text
