"""The routed-turn contract: strict parsing, rendering, fallback turns."""

import pytest

from masprm.handoff.protocol import FINAL, ParseError, RoutedTurn, fallback_turn, parse_turn

ROLES = ["Problem Analyst", "Algebraist", "Critic", "Finalizer"]
PERMITTED = ["Algebraist", "Critic", "Finalizer"]          # the analyst may not address itself


def action(speaker="Problem Analyst", recipient="Algebraist", message="Set x = 2.", answer="4"):
    return f"SPEAKER: {speaker}\nRECIPIENT: {recipient}\nMESSAGE: {message}\nCURRENT_ANSWER: {answer}"


def parse(text, permitted=PERMITTED, allow_final=False):
    return parse_turn(text, speaker="Problem Analyst", roles=ROLES, permitted=permitted, allow_final=allow_final)


VALID = [
    # (text, permitted, allow_final, expected recipient, expected message, expected answer)
    (action(), PERMITTED, False, "Algebraist", "Set x = 2.", "4"),
    (action(recipient="  algebraist "), PERMITTED, False, "Algebraist", "Set x = 2.", "4"),
    (action(speaker="problem   ANALYST"), PERMITTED, False, "Algebraist", "Set x = 2.", "4"),
    (action(recipient="FINALIZER"), PERMITTED, False, "Finalizer", "Set x = 2.", "4"),
    (action(recipient="final"), PERMITTED + [FINAL], True, FINAL, "Set x = 2.", "4"),
    ("\n  " + action() + "\n\n", PERMITTED, False, "Algebraist", "Set x = 2.", "4"),   # outer blank space
    (action(message="line one\nline two"), PERMITTED, False, "Algebraist", "line one\nline two", "4"),
    ("speaker : Problem Analyst\nrecipient:Critic\nmessage:  check it\ncurrent_answer: 7 ",
     PERMITTED, False, "Critic", "check it", "7"),
    (action(answer="$\\frac{1}{2}$"), PERMITTED, False, "Algebraist", "Set x = 2.", "$\\frac{1}{2}$"),
]


@pytest.mark.parametrize("text,permitted,allow_final,recipient,message,answer", VALID)
def test_valid_actions_parse_to_canonical_names(text, permitted, allow_final, recipient, message, answer):
    turn = parse(text, permitted, allow_final)
    assert turn.speaker == "Problem Analyst"
    assert (turn.recipient, turn.message, turn.current_answer) == (recipient, message, answer)
    assert turn.parsed and turn.is_final == (recipient == FINAL)


SWAPPED = "SPEAKER: Problem Analyst\nMESSAGE: hi\nRECIPIENT: Algebraist\nCURRENT_ANSWER: 4"
INVALID = [
    ("", PERMITTED, False, "no SPEAKER"),
    ("I think the answer is 4.", PERMITTED, False, "no SPEAKER"),
    ("Sure! " + action(), PERMITTED, False, "text before"),
    ("Here is my action:\n" + action(), PERMITTED, False, "text before"),
    ("**SPEAKER:** Problem Analyst\nRECIPIENT: Algebraist\nMESSAGE: m\nCURRENT_ANSWER: 4", PERMITTED, False,
     "text before"),
    (SWAPPED, PERMITTED, False, "in that order"),
    (action() + "\nCURRENT_ANSWER: 5", PERMITTED, False, "in that order"),               # duplicate field
    (action() + "\nSPEAKER: Critic", PERMITTED, False, "in that order"),
    ("SPEAKER: Problem Analyst\nRECIPIENT: Algebraist\nMESSAGE: m", PERMITTED, False, "in that order"),
    (action(speaker="Critic"), PERMITTED, False, "not the active role"),
    (action(speaker="ProblemAnalyst"), PERMITTED, False, "not the active role"),
    (action(recipient="Geometer"), PERMITTED, False, "unknown recipient"),
    (action(recipient="Algebraist."), PERMITTED, False, "unknown recipient"),
    (action(recipient="Problem Analyst"), PERMITTED, False, "not permitted"),            # self-handoff
    (action(recipient="Critic"), ["Algebraist"], False, "not permitted"),                # forced recipient
    (action(recipient="FINAL"), PERMITTED, False, "FINAL is not allowed"),               # too early
    (action(recipient="FINAL"), ["Algebraist"], True, "not permitted"),                  # forced role
    (action(message=""), PERMITTED, False, "MESSAGE is empty"),
    (action(message="   "), PERMITTED, False, "MESSAGE is empty"),
    (action(answer=""), PERMITTED, False, "CURRENT_ANSWER is empty"),
]


@pytest.mark.parametrize("text,permitted,allow_final,reason", INVALID)
def test_invalid_actions_are_rejected_with_the_reason(text, permitted, allow_final, reason):
    with pytest.raises(ParseError, match=reason):
        parse(text, permitted, allow_final)


def test_render_round_trips_through_the_parser():
    turn = RoutedTurn("Problem Analyst", "Critic", "two\nlines", "42")
    assert turn.render() == "SPEAKER: Problem Analyst\nRECIPIENT: Critic\nMESSAGE: two\nlines\nCURRENT_ANSWER: 42"
    again = parse(turn.render())
    assert (again.speaker, again.recipient, again.message, again.current_answer) == \
        ("Problem Analyst", "Critic", "two\nlines", "42")


def test_fallback_salvages_fields_else_raw_text_and_previous_answer():
    broken = "Let me think.\nMESSAGE: try x = 3\nCURRENT_ANSWER: 9"
    turn = fallback_turn(broken, speaker="Critic", recipient="Finalizer", previous_answer="7")
    assert (turn.speaker, turn.recipient, turn.message, turn.current_answer, turn.parsed) == \
        ("Critic", "Finalizer", "try x = 3", "9", False)
    plain = fallback_turn("just prose", speaker="Critic", recipient="Algebraist", previous_answer="7")
    assert (plain.message, plain.current_answer) == ("just prose", "7")
    # turn 1 has no previous answer: the original's "UNKNOWN"
    first = fallback_turn("the answer is 5", speaker="Critic", recipient="Algebraist", previous_answer=None)
    assert first.current_answer == "UNKNOWN" and first.message == "the answer is 5"
    empty = fallback_turn("MESSAGE:\nCURRENT_ANSWER:", speaker="Critic", recipient=FINAL, previous_answer="3")
    assert empty.message and empty.current_answer == "3" and empty.is_final


def test_fallback_reads_fields_as_the_original():
    # CURRENT_ANSWER is its label's line only; MESSAGE runs to the CURRENT_ANSWER label, other
    # labels included (the original's rule, not the strict parser's field split)
    text = "MESSAGE: part one\nSPEAKER: Critic\npart two\nCURRENT_ANSWER: 12\nbecause 3 * 4\nCURRENT_ANSWER: 13"
    turn = fallback_turn(text, speaker="Critic", recipient="Algebraist", previous_answer="7")
    assert turn.message == "part one\nSPEAKER: Critic\npart two" and turn.current_answer == "12"
    # an empty CURRENT_ANSWER line takes the next non-blank line; labels match in any case
    turn = fallback_turn("current_answer:\n\n  42 apples\nmore", speaker="Critic", recipient="A", previous_answer="7")
    assert turn.current_answer == "42 apples" and turn.message == "current_answer:\n\n  42 apples\nmore"
    # a MESSAGE label with nothing after it gives the placeholder message
    turn = fallback_turn("MESSAGE:   ", speaker="Critic", recipient="A", previous_answer=None)
    assert turn.message == "(no valid structured proposal was generated)" and turn.current_answer == "UNKNOWN"
