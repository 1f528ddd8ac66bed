"""The evaluation CLI's handoff flags and their checks."""

import pytest

from masprm.cli import ArgumentParser, UsageError
from masprm.errors import MasprmError
from masprm.graph import MASGraph
from masprm.handoff.cli import add_handoff_args, check_handoff_args, check_handoff_config


def parse(*argv):
    parser = ArgumentParser(prog="compare_sbs_mcts.py")
    parser.add_argument("--sbs_temperature", type=float, default=1.0)
    add_handoff_args(parser)
    return parser.parse_args(list(argv))


def graph(**section):
    return MASGraph.from_dict({"agents": [{"name": "Solver"}, {"name": "Critic"}],
                               "handoff": {"initial_role": "Solver", **section}}, source="h.yaml")


def test_defaults_and_flags():
    args = parse()
    assert (args.handoff_candidates, args.min_turns, args.max_turns, args.prm_context_length) == (3, None, None, 16384)
    assert (args.allow_self_handoff, args.random_fixed_horizon, args.handoff_logprob_agg) == (False, False, "avg_token")
    args = parse("--handoff_candidates", "5", "--min_turns", "2", "--max_turns", "8", "--allow_self_handoff",
                 "--random_fixed_horizon", "--handoff_logprob_agg", "sum", "--handoff_temperature", "0.5")
    s = check_handoff_config(args, graph(), ["handoff_policy"])
    assert (s.candidates, s.min_turns, s.max_turns, s.allow_self, s.logprob_agg, s.temperature) == \
        (5, 2, 8, True, "sum", 0.5)


def test_a_bad_aggregation_is_a_one_line_argparse_error(capsys):
    with pytest.raises(SystemExit) as err:
        parse("--handoff_logprob_agg", "avg_step")
    assert err.value.code == 2
    assert "--handoff_logprob_agg" in capsys.readouterr().err


@pytest.mark.parametrize("argv,needle", [
    (["--handoff_candidates", "0"], "--handoff_candidates must be at least 1"),
    (["--min_turns", "0"], "--min_turns must be at least 1"),
    (["--prm_context_length", "0"], "--prm_context_length must be at least 1"),
    (["--min_turns", "5", "--max_turns", "4"], "--max_turns (4) must be at least --min_turns (5)"),
    (["--handoff_temperature", "0"], "--handoff_temperature must be > 0"),
])
def test_bad_values_name_the_flag(argv, needle):
    with pytest.raises(UsageError) as err:
        check_handoff_args(parse(*argv))
    assert needle in str(err.value)


def test_config_checks_name_the_file():
    # no schedule: the default one (Solver x 11, then the last role) would hand the Solver to itself
    with pytest.raises(MasprmError, match=r"h.yaml: the default fixed schedule .* hands Solver to itself after turn 1"):
        check_handoff_config(parse(), graph(), ["handoff_fixed", "handoff_policy"])
    check_handoff_config(parse("--allow_self_handoff"), graph(), ["handoff_fixed"])
    # the original's rule: a schedule must cover --max_turns
    short = graph(fixed_schedule=["Solver", "Critic", "Solver"])
    with pytest.raises(MasprmError, match=r"h.yaml: handoff.fixed_schedule has 3 roles, fewer than the "
                                         r"--max_turns \(4\) turns"):
        check_handoff_config(parse("--min_turns", "2", "--max_turns", "4"), short, ["handoff_fixed"])
    check_handoff_config(parse("--min_turns", "2", "--max_turns", "3"), short, ["handoff_fixed"])
    check_handoff_config(parse("--min_turns", "2", "--max_turns", "4"), short, ["handoff_policy"])
    with pytest.raises(MasprmError, match=r"handoff.fixed_schedule hands Critic to itself after turn 2"):
        check_handoff_config(parse("--min_turns", "2", "--max_turns", "3"),
                             graph(fixed_schedule=["Solver", "Critic", "Critic"]), ["handoff_fixed"])
    with pytest.raises(MasprmError, match=r"h.yaml: max_turns \(3\) is below min_turns \(4\)"):
        check_handoff_config(parse(), graph(max_turns=3), ["handoff_policy"])
    s = check_handoff_config(parse(), graph(min_turns=2, max_turns=3), ["handoff_policy"])
    assert (s.min_turns, s.max_turns, s.temperature) == (2, 3, 1.0)
    with pytest.raises(MasprmError, match="h.yaml: handoff.initial_role 'Nobody' is not an agent name"):
        check_handoff_config(parse(), graph(initial_role="Nobody"), ["handoff_policy"])
