"""The handoff turn loop with a scripted policy: private histories, route modes, FINAL, prefix answers."""

import random
import re
from types import SimpleNamespace

import pytest

from masprm.search.context import SearchContext
from masprm.graph import ConfigError, MASGraph
from masprm.search.engine import drive
from masprm.handoff.protocol import FINAL
from masprm.handoff.scoring import logprob_selector
from masprm.handoff.team import HandoffPlan, HandoffTeam, default_schedule, run_handoff, user_content

ROLES = ["Analyst", "Algebraist", "Critic", "Finalizer"]
QUESTION = "What is 2 + 2?"


def make_graph(schedule=("Analyst", "Algebraist", "Critic", "Analyst", "Finalizer"), **section):
    return MASGraph.from_dict({
        "agents": [{"name": r, "system_prompt": f"You are the {r}.", "max_new_tokens": 64} for r in ROLES],
        "edges": [],
        "handoff": {"initial_role": "Analyst", "fixed_schedule": list(schedule), **section},
    }, source="team.yaml")


def flags(**kw):
    base = dict(handoff_candidates=2, min_turns=4, max_turns=12, allow_self_handoff=False,
                random_fixed_horizon=False, prm_context_length=1000, handoff_logprob_agg="avg_token",
                handoff_temperature=None, sbs_temperature=0.7, top_p=0.95, max_new_tokens=256,
                handoff_parser="strict", handoff_output_check=False, handoff_score_distinct=False)
    base.update(kw)
    return SimpleNamespace(**base)


def field(messages, name):
    return re.search(rf"^{name}: (.*)$", messages[-1]["content"], re.M).group(1)


def action(speaker, recipient, message, answer):
    return f"SPEAKER: {speaker}\nRECIPIENT: {recipient}\nMESSAGE: {message}\nCURRENT_ANSWER: {answer}"


class Script:
    """respond() for FakePolicy: turn t's proposals come from plan(t, speaker, permitted, k)."""

    def __init__(self, plan, n):
        self.plan, self.n, self.samples, self.prompts = plan, n, 0, []

    def __call__(self, messages, k, rng):
        if k == 0:
            self.prompts.append(messages)
        turn = self.samples // self.n + 1
        self.samples += 1
        permitted = field(messages, "PERMITTED RECIPIENTS").split(", ")
        return self.plan(turn, field(messages, "ACTIVE SPEAKER"), permitted, k)


def play(fake_policy, plan, mode="free", seed=0, graph=None, score=None, **kw):
    settings = flags(**kw)
    script = Script(plan, settings.handoff_candidates)
    policy = fake_policy(script, score)
    graph = graph or make_graph()
    ctx = SearchContext(policy=policy, graph=graph, settings=settings, rng=random.Random(seed))
    team = HandoffTeam.from_graph(graph)
    plan = HandoffPlan.resolve(settings, team, random_fixed_horizon=settings.random_fixed_horizon)
    run = drive(run_handoff(ctx, team, plan, QUESTION, mode=mode,
                            select=logprob_selector(ctx, settings.handoff_logprob_agg)), ctx)
    return run, script, policy, ctx


def route_plan(route):
    """Speaker of turn t hands to route[t] (FINAL ends); each proposal carries marker M<t>."""
    def plan(turn, speaker, permitted, k):
        return action(speaker, route[turn], f"M{turn} from {speaker}", f"A{turn}")
    return plan


def test_a_turn_is_visible_to_its_speaker_and_recipient_only(fake_policy):
    route = {1: "Algebraist", 2: "Critic", 3: "Analyst", 4: "Algebraist", 5: FINAL}
    run, script, policy, _ = play(fake_policy, route_plan(route))
    assert [t.speaker for t in run.turns] == ["Analyst", "Algebraist", "Critic", "Analyst", "Algebraist"]
    assert run.stop_reason == "final" and run.answer == "A5"
    seen = [re.findall(r"MESSAGE: (M\d)", p[-1]["content"]) for p in script.prompts]
    assert seen == [[],              # Analyst starts with no history
                    ["M1"],          # Algebraist received turn 1
                    ["M2"],          # Critic got turn 2, never saw turn 1
                    ["M1", "M3"],    # Analyst: its own turn 1 and Critic's turn 3, not turn 2
                    ["M1", "M2", "M4"]]
    assert "PRIVATE ROUTED HISTORY:\n(none)" in script.prompts[0][-1]["content"]
    assert script.prompts[0][0] == {"role": "system", "content": "You are the Analyst."}
    # one batched call per turn with --handoff_candidates proposals
    assert [c for c in policy.calls if c[0] == "sample"] == [("sample", 1)] * 5
    assert script.samples == 5 * 2


def test_speaker_prompt_layout():
    text = user_content("Q?", "Critic", [], ["Analyst", "Finalizer", FINAL])
    parts = text.split("\n\n")
    assert parts[:4] == ["ORIGINAL QUESTION:\nQ?", "PRIVATE ROUTED HISTORY:\n(none)",
                         "ACTIVE SPEAKER: Critic", "PERMITTED RECIPIENTS: Analyst, Finalizer, FINAL"]
    assert "exactly one action" in parts[4] and "CURRENT_ANSWER" in parts[4]


def test_final_is_refused_before_min_turns_and_taken_after(fake_policy):
    # proposal 0 says FINAL, proposal 1 hands on; log-prob prefers FINAL whenever it parses
    def plan(turn, speaker, permitted, k):
        to = FINAL if k == 0 else next(r for r in permitted if r != FINAL)
        return action(speaker, to, f"turn {turn}", f"A{turn}")
    prefer_final = lambda messages, text: 0.0 if "RECIPIENT: FINAL" in text else -5.0
    run, script, _, _ = play(fake_policy, plan, score=prefer_final, min_turns=3)
    assert [t.recipient == FINAL for t in run.turns] == [False, False, True]
    assert run.parse_failures == 2 and run.fallback_turns == 0 and run.proposals == 6
    assert "FINAL" not in field(script.prompts[0], "PERMITTED RECIPIENTS")
    assert field(script.prompts[2], "PERMITTED RECIPIENTS").endswith(", FINAL")


def test_log_prob_selection_picks_the_best_proposal(fake_policy):
    def plan(turn, speaker, permitted, k):
        return action(speaker, permitted[k], "short" if k == 1 else "a much longer message", f"A{turn}")
    # default FakePolicy score is -len(text), avg_token divides by word count
    run, _, policy, ctx = play(fake_policy, plan, max_turns=4,
                               score=lambda m, text: 10.0 if "short" in text else -10.0)
    assert all(t.message == "short" for t in run.turns)
    assert [t.recipient for t in run.turns][:2] == ["Critic", "Algebraist"]  # permitted[1] of each speaker
    assert run.stop_reason == "max_turns" and len(run.turns) == 4
    # the original counts one agent run per batched turn (4 turns x 2 proposals = 4 runs, 8 proposals)
    assert ctx.usage.agent_runs == 4 and run.proposals == 8
    # and scores every turn, a lone proposal or a fallback turn included
    assert [c[0] for c in policy.calls].count("logprob") == 4


def test_self_handoff_needs_the_flag(fake_policy):
    def plan(turn, speaker, permitted, k):
        return action(speaker, speaker, "again", "1")
    run, script, _, _ = play(fake_policy, plan, max_turns=4)
    assert run.parse_failures == 8 and run.fallback_turns == 4
    assert all(t.recipient != t.speaker for t in run.turns)          # fallback goes to the first other role
    assert "Analyst" not in field(script.prompts[0], "PERMITTED RECIPIENTS")
    run, script, _, _ = play(fake_policy, plan, max_turns=4, allow_self_handoff=True)
    assert run.parse_failures == 0 and [t.speaker for t in run.turns] == ["Analyst"] * 4


def test_fixed_mode_forces_the_schedule_and_ends_with_final(fake_policy):
    # a disobedient policy always hands to the Critic; the schedule wins through fallback turns
    def plan(turn, speaker, permitted, k):
        return action(speaker, "Critic" if k == 0 else permitted[0], f"T{turn}", f"A{turn}")
    run, script, _, _ = play(fake_policy, plan, mode="fixed", max_turns=5)
    schedule = ["Analyst", "Algebraist", "Critic", "Analyst", "Finalizer"]
    assert [t.speaker for t in run.turns] == schedule
    assert [t.recipient for t in run.turns] == schedule[1:] + [FINAL]
    assert [field(p, "PERMITTED RECIPIENTS") for p in script.prompts] == schedule[1:] + [FINAL]
    assert run.stop_reason == "final"
    # the fixed schedule is cut to max_turns: the last allowed speaker says FINAL
    run, _, _, _ = play(fake_policy, plan, mode="fixed", min_turns=1, max_turns=3)
    assert [t.speaker for t in run.turns] == schedule[:3]
    assert [t.recipient for t in run.turns] == ["Algebraist", "Critic", FINAL]


def test_fixed_mode_fallback_uses_the_forced_recipient(fake_policy):
    plan = lambda turn, speaker, permitted, k: action(speaker, "Critic", "m", "1") if k else "garbled"
    run, _, _, _ = play(fake_policy, plan, mode="fixed", max_turns=5)
    assert [t.recipient for t in run.turns] == ["Algebraist", "Critic", "Analyst", "Finalizer", FINAL]
    assert [t.parsed for t in run.turns] == [False, True, False, False, False]
    assert run.turns[0].message == "garbled"


def test_default_schedule_is_round_robin_with_the_finalizer_last():
    # the original's rule: the role named "finalizer" (any case, else the last role) speaks last,
    # the others take turns before it
    assert default_schedule(["X", "finalizer", "Y"], 4) == ("X", "Y", "X", "finalizer")
    assert default_schedule(["A", "B", "C"], 3) == ("A", "B", "C")
    assert default_schedule(["A", "B", "C"], 1) == ("C",)


def test_fixed_mode_without_a_schedule_uses_the_default_one(fake_policy):
    obey = lambda turn, speaker, permitted, k: action(speaker, permitted[0], f"T{turn}", f"A{turn}")
    graph = MASGraph.from_dict({
        "agents": [{"name": r, "system_prompt": f"You are the {r}."} for r in ROLES],
        "handoff": {"initial_role": "Critic"}}, source="team.yaml")
    run, _, _, _ = play(fake_policy, obey, mode="fixed", graph=graph, max_turns=6)
    assert [t.speaker for t in run.turns] == ["Analyst", "Algebraist", "Critic", "Analyst", "Algebraist",
                                              "Finalizer"]
    assert run.turns[-1].recipient == FINAL and run.stop_reason == "final"
    with pytest.raises(ConfigError, match=r"5 roles; handoff_fixed needs at least `max_turns` \(6\)"):
        play(fake_policy, obey, mode="fixed", max_turns=6)      # make_graph's schedule has 5 roles


def test_a_first_turn_fallback_answers_unknown(fake_policy):
    run, _, _, _ = play(fake_policy, lambda turn, speaker, permitted, k: "no fields at all", max_turns=4)
    assert [t.parsed for t in run.turns] == [False] * 4
    assert [t.current_answer for t in run.turns] == ["UNKNOWN"] * 4    # carried forward from turn 1
    assert run.turns[0].message == "no fields at all"


def test_random_mode_is_seeded_and_draws_only_permitted_recipients(fake_policy):
    def obey(turn, speaker, permitted, k):
        assert len(permitted) == 1                     # the drawn recipient is forced
        return action(speaker, permitted[0], "m", f"A{turn}")
    routes = {}
    for seed in (1, 1, 2):
        run, _, _, _ = play(fake_policy, obey, mode="random", seed=seed, max_turns=12)
        routes.setdefault(seed, []).append([(t.speaker, t.recipient) for t in run.turns])
        assert all(s != r for s, r in routes[seed][-1])                      # no self-handoff
        assert all(r != FINAL for _, r in routes[seed][-1][:3])               # not before min_turns
        assert run.stop_reason == ("final" if routes[seed][-1][-1][1] == FINAL else "max_turns")
    assert routes[1][0] == routes[1][1] and routes[1][0] != routes[2][0]
    finals = []
    for seed in range(20):
        run, _, _, _ = play(fake_policy, obey, mode="random", seed=seed, random_fixed_horizon=True)
        assert len(run.turns) == 12 and not any(t.is_final for t in run.turns)
        run, _, _, _ = play(fake_policy, obey, mode="random", seed=seed)
        finals.append(run.turns[-1].is_final)
    assert any(finals)                                 # FINAL can be drawn without the fixed horizon


def test_random_mode_draws_what_the_originals_rng_draws(fake_policy):
    # The original: random.Random(seed + idx) for the example, one choice per turn from the other
    # roles in config order, plus FINAL from turn min_turns on. The context's rng is that seed.
    obey = lambda turn, speaker, permitted, k: action(speaker, permitted[0], "m", f"A{turn}")
    for seed in (3, 11, 14):
        run, _, _, _ = play(fake_policy, obey, mode="random", seed=seed, min_turns=3, max_turns=8)
        rng, speaker, expected = random.Random(seed), "Analyst", []
        for turn in range(1, 9):
            choices = [r for r in ROLES if r != speaker] + ([FINAL] if turn >= 3 else [])
            to = rng.choice(choices)
            expected.append((speaker, to))
            if to == FINAL:
                break
            speaker = to
        assert [(t.speaker, t.recipient) for t in run.turns] == expected


def test_prefix_answers_carry_early_stops_forward(fake_policy):
    route = {t: ROLES[t % 4] for t in range(1, 6)} | {6: FINAL}
    run, _, _, _ = play(fake_policy, route_plan(route))
    assert len(run.turns) == 6
    assert run.prefix_answers() == {4: "A4", 8: "A6", 12: "A6"}
    long_route = {t: ROLES[t % 4] for t in range(1, 13)}
    run, _, _, _ = play(fake_policy, route_plan(long_route))
    assert run.prefix_answers() == {4: "A4", 8: "A8", 12: "A12"} and run.stop_reason == "max_turns"


def test_turn_limits_come_from_flags_then_config_then_defaults():
    graph = make_graph(min_turns=2, max_turns=6)
    team = HandoffTeam.from_graph(graph)
    s = HandoffPlan.resolve(flags(min_turns=None, max_turns=None), team)
    assert (s.min_turns, s.max_turns, s.temperature) == (2, 6, 0.7)
    s = HandoffPlan.resolve(flags(min_turns=3, max_turns=None, handoff_temperature=0.3), team)
    assert (s.min_turns, s.max_turns, s.temperature) == (3, 6, 0.3)
    s = HandoffPlan.resolve(flags(min_turns=None, max_turns=None), HandoffTeam.from_graph(make_graph()))
    assert (s.min_turns, s.max_turns) == (4, 12)


@pytest.mark.parametrize("section,needle", [
    ({"initial_role": "Geometer"}, "initial_role 'Geometer' is not an agent name"),
    ({"fixed_schedule": ["Analyst", "Nobody"]}, r"fixed_schedule\[1\]"),
    ({"min_turns": 0}, "min_turns must be a positive integer"),
])
def test_bad_handoff_sections_name_the_file_and_key(section, needle):
    with pytest.raises(ConfigError, match=needle) as err:
        HandoffTeam.from_graph(make_graph(**section))
    assert str(err.value).startswith("team.yaml:")


def test_role_names_must_be_distinct_and_not_final():
    for names, needle in ((["A", "a "], "same role"), (["A", "final"], "reserved")):
        graph = MASGraph.from_dict({"agents": [{"name": n} for n in names], "handoff": {}}, source="x.yaml")
        graph.handoff = {"initial_role": "A"}
        with pytest.raises(ConfigError, match=needle):
            HandoffTeam.from_graph(graph)
    with pytest.raises(ConfigError, match="need a top-level 'handoff' section"):
        HandoffTeam.from_graph(MASGraph.from_dict({"agents": [{"name": "A"}]}, source="x.yaml"))


def test_the_shipped_math_handoff8_config_builds_a_team():
    from pathlib import Path

    from masprm.graph import load_mas_config

    team = HandoffTeam.from_graph(load_mas_config(Path(__file__).resolve().parents[1] / "configs/math_handoff8.yaml"))
    assert len(team.roles) == 8 and team.initial_role == team.fixed_schedule[0]
    assert len(team.fixed_schedule) == 12 and team.fixed_schedule[-1] == "Finalizer"
    # without --allow_self_handoff the fixed schedule never hands a role to itself
    assert all(a != b for a, b in zip(team.fixed_schedule, team.fixed_schedule[1:]))
    s = HandoffPlan.resolve(flags(min_turns=None, max_turns=None), team)
    assert (s.min_turns, s.max_turns) == (4, 12)


def test_an_unknown_route_mode_names_the_registered_ones(fake_policy):
    from masprm.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match=r"unknown route mode 'fre' \(valid: fixed, free, random; "
                                               r"did you mean 'free'\?\)"):
        play(fake_policy, route_plan({1: FINAL}), mode="fre")


def test_the_log_prob_selector_ranks_by_the_shared_aggregation():
    from masprm.interfaces import LogProb

    def logprob(pairs):
        return [LogProb(-6.0, 5, 3), LogProb(-2.0, 5, 4)]
        yield  # a search step that is served at once

    proposals = [SimpleNamespace(messages=[], text="a"), SimpleNamespace(messages=[], text="b")]

    def ranks(agg):
        step = logprob_selector(SimpleNamespace(logprob=logprob), agg)(None, proposals)
        with pytest.raises(StopIteration) as done:
            next(step)
        return done.value.value

    assert ranks("avg_token") == [-2.0, -0.5]   # -6/3, -2/4
    assert ranks("sum") == [-6.0, -2.0]
    with pytest.raises(ValueError, match=r"'avg_step' \(expected one of sum, avg_token\)"):
        logprob_selector(SimpleNamespace(logprob=logprob), "avg_step")
