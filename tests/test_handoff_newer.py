"""The handoff options of the original's newer branch (docs/differences.md): each off by default."""

from __future__ import annotations

import pytest

from masprm.handoff.protocol import FINAL, ParseError, parse_turn, parse_turn_lenient
from masprm.handoff.team import user_content
from test_handoff_team import action, field, play

ROLES = ["Analyst", "Algebraist", "Critic", "Finalizer"]


def lenient(text, allow_final=True, permitted=("Algebraist", "Critic", FINAL)):
    return parse_turn_lenient(text, speaker="Analyst", roles=ROLES, permitted=list(permitted), allow_final=allow_final)


def strict(text):
    return parse_turn(text, speaker="Analyst", roles=ROLES, permitted=["Algebraist", "Critic", FINAL], allow_final=True)


def test_lenient_parser_reads_what_the_newer_branch_reads():
    # no CURRENT_ANSWER: the message is the answer (strict refuses the text)
    turn = lenient("SPEAKER: Analyst\nRECIPIENT: critic\nMESSAGE: it is 12")
    assert (turn.recipient, turn.message, turn.current_answer) == ("Critic", "it is 12", "it is 12")
    with pytest.raises(ParseError):
        strict("SPEAKER: Analyst\nRECIPIENT: critic\nMESSAGE: it is 12")
    # labels repeated while revising: the last CURRENT_ANSWER wins, the rest stays in the message
    revised = "SPEAKER: Analyst\nRECIPIENT: Critic\nMESSAGE: try 3\nCURRENT_ANSWER: 3\nMESSAGE: no, 4\nCURRENT_ANSWER: 4"
    turn = lenient(revised)
    assert turn.message == "try 3\nCURRENT_ANSWER: 3\nMESSAGE: no, 4" and turn.current_answer == "4"
    with pytest.raises(ParseError):
        strict(revised)
    # none / end / stop mean FINAL, only where FINAL is allowed
    for word in ("none", "End", "STOP", "final"):
        assert lenient(action("Analyst", word, "done", "4")).recipient == FINAL
    with pytest.raises(ParseError, match="FINAL is not allowed"):
        lenient(action("Analyst", "stop", "done", "4"), allow_final=False)
    with pytest.raises(ParseError, match="unknown recipient 'stop'"):
        strict(action("Analyst", "stop", "done", "4"))
    # the opening fields stay strict: order, nothing before SPEAKER, the active speaker, a message
    for bad, words in [("RECIPIENT: Critic\nSPEAKER: Analyst\nMESSAGE: x", "open with"),
                       ("Sure!\n" + action("Analyst", "Critic", "x", "1"), "start with"),
                       (action("Critic", "Analyst", "x", "1"), "not the active role"),
                       ("SPEAKER: Analyst\nRECIPIENT: Critic\nMESSAGE:\nCURRENT_ANSWER: 1", "MESSAGE is empty"),
                       (action("Analyst", "Finalizer", "x", "1"), "not permitted")]:
        with pytest.raises(ParseError, match=words):
            lenient(bad)
    # a well-formed action reads the same both ways
    assert lenient(action("Analyst", "Critic", "x", "1")) == strict(action("Analyst", "Critic", "x", "1"))


def test_output_check_block_closes_the_prompt_only_when_asked():
    plain = user_content("Q?", "Critic", [], ["Analyst", FINAL])
    assert "CHECK" not in plain
    checked = user_content("Q?", "Critic", [], ["Analyst", FINAL], output_check=True)
    assert checked.startswith(plain + "\n\n")
    block = checked[len(plain) + 2:].splitlines()
    assert block[1] == "FINAL is allowed now, but only for an answer that is complete and checked."
    assert block[3:] == ["SPEAKER: Critic", "RECIPIENT: <one of Analyst, FINAL>", "MESSAGE: <your work or advice>",
                         "CURRENT_ANSWER: <the best answer so far>"]
    early = user_content("Q?", "Critic", [], ["Analyst"], output_check=True)
    assert "FINAL is not allowed on this turn." in early.splitlines()


def _twins_and_one(turn, speaker, permitted, k):
    # turn 1: two identical proposals and a different one; turn 2: three identical; turn 3: two broken + one
    if turn == 1:
        return action(speaker, permitted[0], "same" if k < 2 else "other", "1")
    if turn == 2:
        return action(speaker, permitted[0], "alone", "2")
    return "garbage" if k < 2 else action(speaker, FINAL, "end", "3")


def test_identical_proposals_are_scored_once_and_a_lone_one_not_at_all(fake_policy):
    prefer_other = lambda messages, text: 1.0 if "other" in text else 0.0
    runs = {}
    for distinct in (False, True):
        run, script, policy, ctx = play(fake_policy, _twins_and_one, handoff_candidates=3, min_turns=3,
                                        score=prefer_other, handoff_score_distinct=distinct)
        scored = [n for kind, n in policy.calls if kind == "logprob"]
        runs[distinct] = (run, scored)
    (plain, plain_scored), (once, once_scored) = runs[False], runs[True]
    assert plain_scored == [3, 3, 1]          # main: every sample scored, the lone turn-3 action too
    assert once_scored == [2]                 # turn 1: "same" once + "other"; turns 2 and 3: one action, unscored
    assert [t.render() for t in once.turns] == [t.render() for t in plain.turns]   # the same choices
    assert once.turns[0].message == "other"
    assert (once.proposals, once.parse_failures) == (plain.proposals, plain.parse_failures) == (9, 2)


def test_the_options_reach_the_turn_loop(fake_policy):
    run, script, _, _ = play(fake_policy, lambda t, s, p, k: f"SPEAKER: {s}\nRECIPIENT: none\nMESSAGE: 5",
                             min_turns=1, handoff_parser="lenient", handoff_output_check=True)
    assert run.stop_reason == "final" and run.answer == "5" and run.parse_failures == 0
    assert "BEFORE YOU ANSWER, CHECK:" in script.prompts[0][-1]["content"]
    assert field(script.prompts[0], "SPEAKER") == "Analyst"


def test_a_handoff_run_says_which_defaults_it_took():
    from masprm.stages.evaluate import handoff_defaults_line
    from helpers_eval_world import settings

    line = handoff_defaults_line(settings())
    assert line.startswith("[info] handoff run on --dataset competition_math with --mas_config "
                           "configs/math_handoff8.yaml (")
    assert "--dataset gsm8k --mas_config configs/gsm8k_handoff8.yaml" in line
    assert "--dataset gsm8k with --mas_config configs/math_handoff8.yaml" in handoff_defaults_line(
        settings(dataset="gsm8k"))
