"""The handoff team and its turn loop: private messages, one recipient per turn.

Roles are the config's agents, named by ``name``. Messages are private: a
turn is visible to its speaker and its recipient only. Each turn the active
speaker sees the question, its private history, who it is and whom it may
address; the policy proposes ``candidates`` actions in one batched call, the
ones that parse are ranked by a selector (policy log-prob or the handoff
PRM), and the best one hands control to its recipient. The route mode
decides whether the recipient is the speaker's own choice or forced (the
fixed schedule, or a seeded random draw).

Pure Python: the policy and scorers are reached only through the evaluation
context.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Sequence

from masprm.errors import quoted
from masprm.graph import ConfigError, MASGraph
from masprm.handoff.protocol import FINAL, PARSERS, ParseError, RoutedTurn, fallback_turn, role_key
from masprm.interfaces import Messages
from masprm.registry import Registry

PREFIX_TURNS = (4, 8, 12)
DEFAULT_MIN_TURNS = 4
DEFAULT_MAX_TURNS = 12

INSTRUCTION = ("Produce exactly one action and nothing else: the four fields SPEAKER, RECIPIENT, "
               "MESSAGE and CURRENT_ANSWER, each on its own line, once each, in that order. "
               "SPEAKER is the active speaker; RECIPIENT must be one of the permitted recipients.")


# --------------------------------------------------------------------------- the team


@dataclass(frozen=True)
class HandoffTeam:
    roles: tuple[str, ...]
    system_prompts: tuple[str, ...]
    max_new_tokens: tuple[int, ...]
    initial_role: str
    fixed_schedule: tuple[str, ...]
    min_turns: int | None = None      # the config's own defaults; flags override them
    max_turns: int | None = None

    @classmethod
    def from_graph(cls, graph: MASGraph) -> "HandoffTeam":
        src = graph.source
        section = graph.handoff
        if not section:
            raise ConfigError(f"{src}: handoff methods need a top-level 'handoff' section")
        roles = tuple(a.name for a in graph.agents)
        canonical: dict[str, str] = {}
        for r in roles:
            if role_key(r) == role_key(FINAL):
                raise ConfigError(f"{src}: agent name {quoted(r)} is reserved for ending a handoff run")
            if role_key(r) in canonical:
                raise ConfigError(f"{src}: agent names {quoted(canonical[role_key(r)])} and {quoted(r)} "
                                  "are the same role (names are case-insensitive)")
            canonical[role_key(r)] = r

        def known(name: Any, where: str) -> str:
            if not isinstance(name, str) or role_key(name) not in canonical:
                raise ConfigError(f"{src}: handoff.{where} {quoted(name)} is not an agent name")
            return canonical[role_key(name)]

        schedule = section.get("fixed_schedule") or []
        if not isinstance(schedule, list):
            raise ConfigError(f"{src}: handoff.fixed_schedule must be a list of agent names")
        schedule = tuple(known(r, f"fixed_schedule[{i}]") for i, r in enumerate(schedule))
        initial = section.get("initial_role")
        initial = known(initial, "initial_role") if initial is not None else (schedule or roles)[0]
        turns = {}
        for key in ("min_turns", "max_turns"):
            value = section.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ConfigError(f"{src}: handoff.{key} must be a positive integer")
            turns[key] = value
        return cls(roles, tuple(a.system_prompt for a in graph.agents),
                   tuple(a.max_new_tokens for a in graph.agents), initial, schedule, **turns)

    def index(self, role: str) -> int:
        return [role_key(r) for r in self.roles].index(role_key(role))

    def permitted(self, speaker: str, *, allow_self: bool, final_allowed: bool) -> list[str]:
        out = [r for r in self.roles if allow_self or role_key(r) != role_key(speaker)]
        return out + [FINAL] if final_allowed else out

    def messages(self, question: str, speaker: str, history: Sequence[RoutedTurn],
                 permitted: Sequence[str], *, output_check: bool = False) -> Messages:
        return [{"role": "system", "content": self.system_prompts[self.index(speaker)]},
                {"role": "user", "content": user_content(question, speaker, history, permitted,
                                                         output_check=output_check)}]


def visible_turns(role: str, turns: Sequence[RoutedTurn]) -> list[RoutedTurn]:
    """A role's private history: the turns it spoke or received, in order."""
    key = role_key(role)
    return [t for t in turns if role_key(t.speaker) == key or role_key(t.recipient) == key]


def user_content(question: str, speaker: str, history: Sequence[RoutedTurn],
                 permitted: Sequence[str], *, output_check: bool = False) -> str:
    rendered = "\n\n".join(t.render() for t in history) or "(none)"
    return "\n\n".join([
        f"ORIGINAL QUESTION:\n{question}",
        f"PRIVATE ROUTED HISTORY:\n{rendered}",
        f"ACTIVE SPEAKER: {speaker}",
        f"PERMITTED RECIPIENTS: {', '.join(permitted)}",
        INSTRUCTION,
        *([output_check_block(speaker, permitted)] if output_check else []),
    ])


def output_check_block(speaker: str, permitted: Sequence[str]) -> str:
    """The newer branch's closing check of the turn prompt (``--handoff_output_check``), in this project's words:
    whether FINAL may be used this turn, and the four lines to fill in with the speaker already written."""
    final = ("FINAL is allowed now, but only for an answer that is complete and checked." if FINAL in permitted
             else "FINAL is not allowed on this turn.")
    return "\n".join([
        "BEFORE YOU ANSWER, CHECK:",
        final,
        "Begin with SPEAKER; write nothing before it, no heading and no ACTION label. Fill in these four lines:",
        f"SPEAKER: {speaker}",
        f"RECIPIENT: <one of {', '.join(permitted)}>",
        "MESSAGE: <your work or advice>",
        "CURRENT_ANSWER: <the best answer so far>",
    ])


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class HandoffPlan:
    """What one handoff run plays by: the settings' values with the config's turn limits applied
    (the defaults are the settings classes'; ``resolve`` builds it)."""

    candidates: int
    min_turns: int
    max_turns: int
    allow_self: bool
    random_fixed_horizon: bool
    temperature: float
    top_p: float
    max_new_tokens: int | None   # None: each agent's own cap
    parser: str = "strict"       # PARSERS name (--handoff_parser)
    output_check: bool = False   # --handoff_output_check
    distinct_only: bool = False  # --handoff_score_distinct: identical proposals scored once, a lone one not at all

    @classmethod
    def resolve(cls, settings: Any, team: HandoffTeam, *, random_fixed_horizon: bool = False) -> "HandoffPlan":
        """``settings``: the turn and sampling settings (``masprm.handoff.settings``). Set flags win;
        turn limits left unset come from the config, then the defaults."""
        def first_set(*values: Any) -> Any:
            return next(v for v in values if v is not None)

        return cls(candidates=settings.handoff_candidates,
                   min_turns=first_set(settings.min_turns, team.min_turns, DEFAULT_MIN_TURNS),
                   max_turns=first_set(settings.max_turns, team.max_turns, DEFAULT_MAX_TURNS),
                   allow_self=settings.allow_self_handoff, random_fixed_horizon=random_fixed_horizon,
                   temperature=first_set(settings.handoff_temperature, settings.sbs_temperature),
                   top_p=settings.top_p, max_new_tokens=settings.max_new_tokens,
                   parser=settings.handoff_parser, output_check=settings.handoff_output_check,
                   distinct_only=settings.handoff_score_distinct)


# --------------------------------------------------------------------------- route modes


@dataclass
class TurnInfo:
    turn: int                  # 1-based
    speaker: str
    permitted: list[str]       # recipients the speaker may address under the flags
    final_allowed: bool


def default_schedule(roles: Sequence[str], max_turns: int) -> tuple[str, ...]:
    """The fixed schedule of a config without one: the other roles round-robin, the finalizer last.

    The finalizer is the role named "Finalizer" (any case), else the last role.
    """
    finalizer = next((r for r in roles if r.casefold() == "finalizer"), roles[-1])
    working = [r for r in roles if r != finalizer] or list(roles)
    return tuple(working[i % len(working)] for i in range(max(0, max_turns - 1))) + (finalizer,)


def schedule(team: HandoffTeam, plan: HandoffPlan) -> tuple[str, ...]:
    """The speakers of handoff_fixed: the config's schedule (or the default one), cut to max_turns."""
    planned = team.fixed_schedule or default_schedule(team.roles, plan.max_turns)
    if len(planned) < plan.max_turns:
        raise ConfigError(f"handoff.fixed_schedule has {len(planned)} roles; handoff_fixed needs at least "
                          f"`max_turns` ({plan.max_turns})")
    return planned[:plan.max_turns]


def fixed_recipient(team: HandoffTeam, plan: HandoffPlan, info: TurnInfo, rng: random.Random) -> str:
    """The scheduled roles speak in order; the last one says FINAL."""
    planned = schedule(team, plan)
    return planned[info.turn] if info.turn < len(planned) else FINAL


def random_recipient(team: HandoffTeam, plan: HandoffPlan, info: TurnInfo, rng: random.Random) -> str:
    choices = [r for r in info.permitted if r != FINAL]
    if info.final_allowed and not plan.random_fixed_horizon:
        choices.append(FINAL)
    return rng.choice(choices) if choices else FINAL


def own_recipient(team: HandoffTeam, plan: HandoffPlan, info: TurnInfo, rng: random.Random) -> None:
    return None


@dataclass(frozen=True)
class Route:
    """Who speaks first and the forced recipient of each turn (None: free)."""

    recipient: Callable[[HandoffTeam, HandoffPlan, TurnInfo, random.Random], "str | None"]
    follows_schedule: bool = False
    draws_final: bool = False      # may draw FINAL itself: --random_fixed_horizon applies

    def first_speaker(self, team: HandoffTeam, plan: HandoffPlan) -> str:
        return schedule(team, plan)[0] if self.follows_schedule else team.initial_role


ROUTE_MODES: Registry[Route] = Registry("route mode")
ROUTE_MODES.register("fixed", Route(fixed_recipient, follows_schedule=True))
ROUTE_MODES.register("random", Route(random_recipient, draws_final=True))
ROUTE_MODES.register("free", Route(own_recipient))


# --------------------------------------------------------------------------- one run


@dataclass
class Proposal:
    """A parsed candidate action of one turn, with what the selector needs to rank it."""

    turn: RoutedTurn
    text: str                  # the policy's raw completion
    messages: Messages         # the prompt it answered


@dataclass
class HandoffRun:
    question: str
    turns: list[RoutedTurn] = field(default_factory=list)
    stop_reason: str = ""
    proposals: int = 0
    parse_failures: int = 0
    fallback_turns: int = 0
    scored: list[dict] = field(default_factory=list)   # selector bookkeeping (e.g. PRM context tokens)

    @property
    def answer(self) -> str:
        return self.turns[-1].current_answer if self.turns else ""

    def prefix_answers(self, thresholds: Sequence[int] = PREFIX_TURNS) -> dict[int, str]:
        """The latest answer after T turns; a run that stopped earlier carries its answer forward."""
        if not self.turns:
            return {t: "" for t in thresholds}
        return {t: self.turns[min(max(1, t), len(self.turns)) - 1].current_answer for t in thresholds}


# ``select(run, proposals)``: a search step (it yields model requests) returning one score per
# proposal (higher is better).
Selector = Callable[[HandoffRun, list[Proposal]], Generator[Any, Any, list[float]]]


def run_handoff(ctx: Any, team: HandoffTeam, plan: HandoffPlan, question: str, *,
                mode: str, select: Selector) -> Generator[Any, Any, HandoffRun]:
    """Play one routed conversation on ``question`` (a search step); ``ctx`` is the evaluation context."""
    route = ROUTE_MODES[mode]
    run = HandoffRun(question)
    speaker = route.first_speaker(team, plan)
    for turn_no in range(1, plan.max_turns + 1):
        final_allowed = turn_no >= plan.min_turns
        info = TurnInfo(turn_no, speaker,
                        team.permitted(speaker, allow_self=plan.allow_self, final_allowed=final_allowed),
                        final_allowed)
        forced = route.recipient(team, plan, info, ctx.rng)
        shown = [forced] if forced is not None else info.permitted
        history = visible_turns(speaker, run.turns)
        messages = team.messages(question, speaker, history, shown, output_check=plan.output_check)
        own = team.max_new_tokens[team.index(speaker)]
        max_new = own if plan.max_new_tokens is None else min(plan.max_new_tokens, own)
        # One batched call per turn counts as one agent run (and one PRM call below), as in the original.
        [gens] = yield from ctx.sample([messages], plan.candidates, temperature=plan.temperature,
                                       top_p=plan.top_p, max_new_tokens=max_new, batched=True)
        texts = [g.text for g in gens]
        run.proposals += len(texts)
        # --handoff_score_distinct: one proposal per distinct text (in first-seen order, so the max picks
        # the same action); parse failures still count per sample.
        copies = Counter(texts) if plan.distinct_only else None
        proposals = []
        for text in (list(copies) if copies else texts):
            try:
                turn = PARSERS[plan.parser](text, speaker=speaker, roles=team.roles, permitted=shown,
                                            allow_final=final_allowed or forced == FINAL)
            except ParseError:
                run.parse_failures += copies[text] if copies else 1
                continue
            proposals.append(Proposal(turn, turn.raw, messages))
        if not proposals:
            fallback_to = forced if forced is not None else next((r for r in shown if r != FINAL), FINAL)
            turn = fallback_turn(texts[0] if texts else "", speaker=speaker, recipient=fallback_to,
                                 previous_answer=run.answer or None)
            proposals = [Proposal(turn, turn.raw or turn.render(), messages)]
            run.fallback_turns += 1
        # Even a lone proposal is scored, as in the original's main branch: the scorer's calls and
        # context statistics then count every turn. Its newer branch (--handoff_score_distinct) skips it.
        if plan.distinct_only and len(proposals) == 1:
            chosen = proposals[0].turn
        else:
            scores = yield from select(run, proposals)
            chosen = proposals[max(range(len(proposals)), key=scores.__getitem__)].turn
        run.turns.append(chosen)
        if chosen.is_final:
            run.stop_reason = "final"
            return run
        speaker = chosen.recipient
    run.stop_reason = "max_turns"
    return run
