"""The evaluation CLI's dynamic-routing flags and their checks.

``add_handoff_args(parser)`` adds the flags; ``check_handoff_args(args)``
checks their values and ``check_handoff_config(args, graph, methods)``
checks them against the MAS config, both raising ``UsageError`` with one
line that names the flag or the config file.
"""

from __future__ import annotations

import argparse
from typing import Any, Sequence

from masprm.cli import UsageError, check
from masprm.graph import MASGraph
from masprm.handoff.scoring import TURN_LOGPROB_AGGS
from masprm.handoff.protocol import role_key
from masprm.handoff.team import (DEFAULT_MAX_TURNS, DEFAULT_MIN_TURNS, HandoffSettings, HandoffTeam,
                                  default_schedule)

HANDOFF_DATASET = "competition_math"
HANDOFF_CONFIG = "configs/math_handoff8.yaml"
HANDOFF_SAMPLE_N = 200


def add_handoff_args(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    group = parser.add_argument_group("dynamic handoff (handoff_* methods)")
    group.add_argument("--handoff_candidates", type=int, default=3,
                       help="proposals sampled per turn in one batched call (default 3)")
    group.add_argument("--min_turns", type=int, default=None,
                       help=f"first turn at which FINAL is allowed (default: the config's "
                            f"handoff.min_turns, else {DEFAULT_MIN_TURNS})")
    group.add_argument("--max_turns", type=int, default=None,
                       help=f"turn limit (default: the config's handoff.max_turns, else {DEFAULT_MAX_TURNS})")
    group.add_argument("--allow_self_handoff", action="store_true",
                       help="let a role address itself")
    group.add_argument("--random_fixed_horizon", action="store_true",
                       help="handoff_random never draws FINAL, so every run lasts --max_turns turns")
    group.add_argument("--prm_context_length", type=int, default=16384,
                       help="token budget of the handoff PRM's transcript; oldest turns are dropped first")
    group.add_argument("--handoff_logprob_agg", choices=TURN_LOGPROB_AGGS, default="avg_token",
                       help="how policy log-prob ranks proposals (default avg_token)")
    group.add_argument("--handoff_temperature", type=float, default=None,
                       help="sampling temperature of handoff proposals (default: --sbs_temperature)")
    return group


def check_handoff_args(args: Any) -> None:
    for name in ("handoff_candidates", "min_turns", "max_turns", "prm_context_length"):
        value = getattr(args, name, None)
        check(value is None or value >= 1, f"--{name} must be at least 1, got {value}")
    if args.min_turns is not None and args.max_turns is not None:
        check(args.max_turns >= args.min_turns,
              f"--max_turns ({args.max_turns}) must be at least --min_turns ({args.min_turns})")
    temperature = getattr(args, "handoff_temperature", None)
    check(temperature is None or temperature > 0, f"--handoff_temperature must be > 0, got {temperature}")


def check_handoff_config(args: Any, graph: MASGraph, methods: Sequence[str]) -> HandoffSettings:
    """The settings the run will use; a config that cannot serve the methods is a UsageError."""
    team = HandoffTeam.from_graph(graph)   # a ConfigError naming the file
    settings = HandoffSettings.from_flags(args, team)
    if settings.max_turns < settings.min_turns:
        raise UsageError(f"{graph.source}: max_turns ({settings.max_turns}) is below min_turns "
                         f"({settings.min_turns}) after applying the config's handoff section and the flags")
    if "handoff_fixed" in methods:
        check_schedule(graph.source, team, settings)
    if len(team.roles) < 2 and not settings.allow_self:
        raise UsageError(f"{graph.source}: a handoff team needs two roles, or --allow_self_handoff")
    return settings


def check_schedule(source: Any, team: HandoffTeam, settings: HandoffSettings) -> None:
    """handoff_fixed's schedule (the config's, else the default one) must fill --max_turns turns
    and, without --allow_self_handoff, never hand a role to itself."""
    planned = team.fixed_schedule or default_schedule(team.roles, settings.max_turns)
    where = "handoff.fixed_schedule" if team.fixed_schedule else "the default fixed schedule (no handoff.fixed_schedule)"
    if len(planned) < settings.max_turns:
        raise UsageError(f"{source}: handoff.fixed_schedule has {len(planned)} roles, fewer than the "
                         f"--max_turns ({settings.max_turns}) turns of handoff_fixed")
    planned = planned[:settings.max_turns]
    for turn, (a, b) in enumerate(zip(planned, planned[1:]), start=1):
        if role_key(a) == role_key(b) and not settings.allow_self:
            raise UsageError(f"{source}: {where} hands {a} to itself after turn {turn}; "
                             "change it or pass --allow_self_handoff")
