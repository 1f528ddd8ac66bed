"""The handoff methods' settings: their flags, defaults and checks, and the run's defaults.

Every handoff method declares ``PassSettings`` (sampling) and ``TurnSettings``, plus
what its route and ranking read: ``HandoffLogProbSettings`` (ranked by policy
log-prob), ``RandomRouteSettings`` (handoff_random), ``HandoffPRMSettings`` (ranked
by the handoff MASPRM). ``check_team`` checks the flags against the MAS config
before anything loads. Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from masprm.config import arg, require, require_each
from masprm.errors import ConfigError
from masprm.graph import MASGraph
from masprm.handoff.protocol import PARSERS, role_key
from masprm.handoff.scoring import TURN_LOGPROB_AGGS
from masprm.handoff.team import DEFAULT_MAX_TURNS, DEFAULT_MIN_TURNS, HandoffPlan, HandoffTeam, default_schedule
from masprm.search.settings import AT_LEAST_ONE, MethodSettings

# What a run of handoff methods uses when the flags leave it open: the original main branch's experiment
# (competition_math levels 4-5 with the math team). Its newer branch defaults to gsm8k with its GSM8K team;
# that run is `--dataset gsm8k --mas_config configs/gsm8k_handoff8.yaml` here (the run says which it took).
HANDOFF_DATASET = "competition_math"
HANDOFF_CONFIG = "configs/math_handoff8.yaml"
GSM8K_HANDOFF_CONFIG = "configs/gsm8k_handoff8.yaml"
HANDOFF_SAMPLE_N = 200


@dataclass(frozen=True)
class TurnSettings(MethodSettings):
    """Every handoff method: proposals per turn, the turn limits, self-handoff, the proposals' temperature."""

    handoff_candidates: int = arg(3, flags=("--handoff_candidates",),
                                  help="proposals sampled per turn in one batched call (default 3)")
    min_turns: int | None = arg(None, flags=("--min_turns",),
                                help=f"first turn at which FINAL is allowed (default: the config's "
                                     f"handoff.min_turns, else {DEFAULT_MIN_TURNS})")
    max_turns: int | None = arg(None, flags=("--max_turns",),
                                help=f"turn limit (default: the config's handoff.max_turns, else {DEFAULT_MAX_TURNS})")
    allow_self_handoff: bool = arg(False, flags=("--allow_self_handoff",), help="let a role address itself")
    handoff_temperature: float | None = arg(None, flags=("--handoff_temperature",),
                                            help="sampling temperature of handoff proposals (default: --sbs_temperature)")
    # The original newer branch's turn rules; each changes results, so each is off by default (main's rules).
    handoff_parser: str = arg("strict", flags=("--handoff_parser",), choices=tuple(PARSERS),
                              help="how a proposal is read: strict (the four fields once each, in order; default) or "
                                   "lenient (CURRENT_ANSWER optional, the last one wins; none/end/stop mean FINAL)")
    handoff_output_check: bool = arg(False, flags=("--handoff_output_check",),
                                     help="end each turn prompt with a check block: whether FINAL is allowed and the "
                                          "four lines to fill in, the speaker already written")
    handoff_score_distinct: bool = arg(False, flags=("--handoff_score_distinct",),
                                       help="score identical proposals once and leave a turn with one distinct "
                                            "proposal unscored (selection is unchanged; the scorer's counts are not)")

    def __post_init__(self) -> None:
        require_each(self, ("handoff_candidates", "min_turns", "max_turns"), lambda v: v >= 1, AT_LEAST_ONE)
        if self.min_turns is not None and self.max_turns is not None:
            require(self.max_turns >= self.min_turns, "max_turns",
                    f"`max_turns` ({self.max_turns}) must be at least `min_turns` ({self.min_turns})")
        require_each(self, ("handoff_temperature",), lambda v: v > 0, "must be > 0")


@dataclass(frozen=True)
class HandoffLogProbSettings(MethodSettings):
    """Proposals ranked by the policy's log-prob (handoff_fixed, handoff_random, handoff_policy): per token
    or summed; a proposal is one step, so a mean per step would only repeat the sum."""

    handoff_logprob_agg: str = arg("avg_token", flags=("--handoff_logprob_agg",), choices=TURN_LOGPROB_AGGS,
                                   help="how policy log-prob ranks proposals (default avg_token)")


@dataclass(frozen=True)
class HandoffPRMSettings(MethodSettings):
    """Proposals ranked by the handoff MASPRM (handoff_prm): its transcript budget."""

    prm_context_length: int = arg(16384, flags=("--prm_context_length",),
                                  help="token budget of the handoff PRM's transcript; oldest turns are dropped first")

    def __post_init__(self) -> None:
        require_each(self, ("prm_context_length",), lambda v: v >= 1, AT_LEAST_ONE)


@dataclass(frozen=True)
class RandomRouteSettings(MethodSettings):
    """handoff_random: whether its random draws may end the run (declared by handoff_random alone, so the
    flag leaves the other conditions' logs as they are)."""

    random_fixed_horizon: bool = arg(False, flags=("--random_fixed_horizon",),
                                     help="handoff_random never draws FINAL, so every run lasts --max_turns turns")


HANDOFF_FLAGS = (TurnSettings, RandomRouteSettings, HandoffPRMSettings, HandoffLogProbSettings)   # --help's order


def check_team(settings: Any, graph: MASGraph, methods: Sequence[str]) -> HandoffPlan:
    """The plan the run will use (``settings``: the turn and sampling settings); a config that cannot
    serve the methods is a ConfigError naming the file."""
    team = HandoffTeam.from_graph(graph)   # a ConfigError naming the file
    plan = HandoffPlan.resolve(settings, team)
    if plan.max_turns < plan.min_turns:
        raise ConfigError(f"{graph.source}: max_turns ({plan.max_turns}) is below min_turns "
                          f"({plan.min_turns}) after applying the config's handoff section and the flags")
    if "handoff_fixed" in methods:
        check_schedule(graph.source, team, plan)
    if len(team.roles) < 2 and not plan.allow_self:
        raise ConfigError(f"{graph.source}: a handoff team needs two roles, or `allow_self_handoff`")
    return plan


def check_schedule(source: Any, team: HandoffTeam, plan: HandoffPlan) -> None:
    """handoff_fixed's schedule (the config's, else the default one) must fill `max_turns` turns
    and, without `allow_self_handoff`, never hand a role to itself."""
    planned = team.fixed_schedule or default_schedule(team.roles, plan.max_turns)
    where = "handoff.fixed_schedule" if team.fixed_schedule else "the default fixed schedule (no handoff.fixed_schedule)"
    if len(planned) < plan.max_turns:
        raise ConfigError(f"{source}: handoff.fixed_schedule has {len(planned)} roles, fewer than the "
                          f"`max_turns` ({plan.max_turns}) turns of handoff_fixed")
    planned = planned[:plan.max_turns]
    for turn, (a, b) in enumerate(zip(planned, planned[1:]), start=1):
        if role_key(a) == role_key(b) and not plan.allow_self:
            raise ConfigError(f"{source}: {where} hands {a} to itself after turn {turn}; "
                              "change it or pass `allow_self_handoff`")
