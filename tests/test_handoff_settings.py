"""The handoff methods' settings: their flags, checks, and the checks against the MAS config."""

import pytest

from masprm.cli import PARSED_FLAGS, ArgumentParser, error_line
from masprm.config import add_settings_args, settings_from_args
from masprm.errors import ConfigError, MasprmError
from masprm.graph import MASGraph
from masprm.handoff.settings import HANDOFF_FLAGS, TurnSettings, check_team
from masprm.search.settings import PassSettings, combined_settings

CLASSES = (PassSettings, *HANDOFF_FLAGS)


def parse(*argv):
    """The handoff flags (and the sampling ones they fall back on) parsed and checked: one settings object."""
    parser = ArgumentParser(prog="compare_sbs_mcts.py")
    add_settings_args(parser, [(None, CLASSES)])
    return combined_settings(CLASSES, settings_from_args(CLASSES, parser.parse_args(list(argv))))


def graph(**section):
    return MASGraph.from_dict({"agents": [{"name": "Solver"}, {"name": "Critic"}],
                               "handoff": {"initial_role": "Solver", **section}}, source="h.yaml")


def test_defaults_and_flags():
    s = parse()
    assert (s.handoff_candidates, s.min_turns, s.max_turns, s.prm_context_length) == (3, None, None, 16384)
    assert (s.allow_self_handoff, s.random_fixed_horizon, s.handoff_logprob_agg) == (False, False, "avg_token")
    s = parse("--handoff_candidates", "5", "--min_turns", "2", "--max_turns", "8", "--allow_self_handoff",
              "--random_fixed_horizon", "--handoff_logprob_agg", "sum", "--handoff_temperature", "0.5")
    plan = check_team(s, graph(), ["handoff_policy"])
    assert (plan.candidates, plan.min_turns, plan.max_turns, plan.allow_self, plan.temperature) == (5, 2, 8, True, 0.5)
    assert s.handoff_logprob_agg == "sum"


def test_a_bad_aggregation_is_a_one_line_argparse_error(capsys):
    with pytest.raises(SystemExit) as err:
        parse("--handoff_logprob_agg", "avg_step")
    assert err.value.code == 2
    assert "--handoff_logprob_agg" in capsys.readouterr().err


@pytest.mark.parametrize("argv,line", [
    *(([flag, "0"], f"{flag} must be at least 1, got 0")
      for flag in ("--handoff_candidates", "--min_turns", "--prm_context_length")),
    (["--min_turns", "5", "--max_turns", "4"], "--max_turns (4) must be at least --min_turns (5)"),
    (["--handoff_temperature", "0"], "--handoff_temperature must be > 0, got 0.0"),
])
def test_bad_values_name_the_flag(argv, line):
    with pytest.raises(ConfigError) as err:
        parse(*argv)
    assert error_line(err.value, PARSED_FLAGS) == line   # the line the CLI prints


def test_the_turn_settings_check_themselves_in_the_library_too():
    with pytest.raises(ConfigError, match="handoff_candidates must be at least 1") as err:
        TurnSettings(handoff_candidates=0)
    assert err.value.setting == "handoff_candidates"


def test_config_checks_name_the_file():
    # no schedule: the default one (Solver x 11, then the last role) would hand the Solver to itself
    with pytest.raises(MasprmError, match=r"h.yaml: the default fixed schedule .* hands Solver to itself after turn 1"):
        check_team(parse(), graph(), ["handoff_fixed", "handoff_policy"])
    check_team(parse("--allow_self_handoff"), graph(), ["handoff_fixed"])
    # the original's rule: a schedule must cover --max_turns
    short = graph(fixed_schedule=["Solver", "Critic", "Solver"])
    with pytest.raises(MasprmError, match=r"h.yaml: handoff.fixed_schedule has 3 roles, fewer than the "
                                         r"`max_turns` \(4\) turns"):
        check_team(parse("--min_turns", "2", "--max_turns", "4"), short, ["handoff_fixed"])
    check_team(parse("--min_turns", "2", "--max_turns", "3"), short, ["handoff_fixed"])
    check_team(parse("--min_turns", "2", "--max_turns", "4"), short, ["handoff_policy"])
    with pytest.raises(MasprmError, match=r"handoff.fixed_schedule hands Critic to itself after turn 2"):
        check_team(parse("--min_turns", "2", "--max_turns", "3"),
                   graph(fixed_schedule=["Solver", "Critic", "Critic"]), ["handoff_fixed"])
    with pytest.raises(MasprmError, match=r"h.yaml: max_turns \(3\) is below min_turns \(4\)"):
        check_team(parse(), graph(max_turns=3), ["handoff_policy"])
    s = check_team(parse(), graph(min_turns=2, max_turns=3), ["handoff_policy"])
    assert (s.min_turns, s.max_turns, s.temperature) == (2, 3, 1.0)
    with pytest.raises(MasprmError, match="h.yaml: handoff.initial_role 'Nobody' is not an agent name"):
        check_team(parse(), graph(initial_role="Nobody"), ["handoff_policy"])
