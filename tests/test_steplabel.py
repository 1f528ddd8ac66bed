"""Step labels of toy transcripts: each message judged against the story, on hand-made problems."""

import random
from itertools import islice

import pytest

from masprm.worlds.toy.steplabel import (AGENTS, ERROR_KINDS, distractor_numbers, final_answer, label_transcript,
                                  parse_plan, planner_error, reader_error, solver_error, summarize, verifier_error,
                                  written_numbers)
from masprm.worlds.toy.task import Problem, iter_split

# 11 +5 *2 -3 = 29; "doubles" writes no number.
KEN = Problem("Ken starts with 11 stickers. A friend gives him 5 stickers. Then the number of stickers doubles. "
              "He loses 3 stickers. How many stickers does Ken have now?",
              11, (("+", 5), ("*", 2), ("-", 3)), 29, False, ("gift", "double", "lose"))
# 8 +4 /2 = 6, with Tom's 7 books as the distractor.
MIA = Problem("Mia has 8 pens. Tom has 7 books. She buys 4 more. She gives away half of them. "
              "How many pens does Mia have in the end?",
              8, (("+", 4), ("/", 2)), 6, True, ("buy", "half"))
# 6 *2 -5 = 7, where the distractor (Max's 2 toys) equals the fixed operand of "doubles".
ADA = Problem("Ada has 6 cakes. Max has 2 toys. Then the number of cakes doubles. She sells 5 of them. "
              "How many cakes does Ada have now?",
              6, (("*", 2), ("-", 5)), 7, True, ("double", "sell"))

KEN_WORKED = ["11 5 3", "11 +5 *2 -3", "Steps: 11+5=16, 16*2=32, then 32-3=29. Answer: 29",
              "Redo: 11+5=16, 16*2=32, 32-3=29. Answer: 29"]
KEN_DIRECT = ["11 5 3", "11 +5 *2 -3", "Answer: 29", "Answer: 29"]


def test_the_story_truth():
    assert written_numbers(KEN) == (11, 5, 3)
    assert written_numbers(MIA) == (8, 4)
    assert distractor_numbers(KEN) == frozenset()
    assert distractor_numbers(MIA) == {7}
    assert distractor_numbers(ADA) == {2}
    # an operation without a recorded kind counts as written
    assert written_numbers(Problem("q", 3, (("+", 4),), 7, False)) == (3, 4)


@pytest.mark.parametrize("outputs", [KEN_WORKED, KEN_DIRECT], ids=["worked", "direct"])
def test_a_correct_transcript_has_no_error(outputs):
    label = label_transcript(KEN, outputs)
    assert [s.agent for s in label.steps] == list(AGENTS)
    assert all(s.correct and s.kind is None for s in label.steps)
    assert (label.first_error, label.final_correct, label.repaired) == (None, True, False)


def test_every_phrasing_of_worked_solution_is_correct():
    for text in ("Work: 11+5=16; 16*2=32 and 32-3=29. Answer: 29",
                 "Steps: 11+5=16 and 16*2=32, 32-3=29. Answer: 29"):
        assert solver_error(KEN, text) is None


@pytest.mark.parametrize("problem, text, kind", [
    (KEN, "11 5 3", None),
    (MIA, "8 7 4", "distractor"),
    (KEN, "11 5", "missing"),
    (KEN, "11 5 2 3", "extra"),
    (KEN, "11 6 3", "wrong_number"),
    (KEN, "11 3 5", "wrong_number"),       # the right numbers in the wrong order
    (KEN, "no numbers here", "no_numbers"),
    (KEN, "", "no_numbers"),
    (ADA, "6 5", None),
    (ADA, "6 2 5", "distractor"),          # 2 is not written about Ada, only about Max
])
def test_reader_kinds(problem, text, kind):
    assert reader_error(problem, text) == kind


@pytest.mark.parametrize("problem, text, kind", [
    (KEN, "11 +5 *2 -3", None),
    (KEN, " 11 + 5 * 2 - 3 ", None),       # spacing does not matter
    (KEN, "11 +5 +2 -3", "wrong_op"),
    (KEN, "11 +5 *2 -4", "wrong_operand"),
    (KEN, "12 +5 *2 -3", "wrong_start"),
    (KEN, "11 +5 -3", "missing_op"),
    (KEN, "11 +5 *2 -3 +1", "extra_op"),
    (KEN, "11 5 3", "unparsed"),
    (KEN, "Steps: 11+5=16", "unparsed"),
    (MIA, "8 +7 /2", "distractor"),
    (MIA, "7 +4 /2", "distractor"),
    (ADA, "6 *2 -5", None),                # the 2 of "doubles" is not the distractor here
])
def test_planner_kinds(problem, text, kind):
    assert planner_error(problem, text) == kind


def test_parse_plan():
    assert parse_plan("11 +5 *2 -3") == (11, (("+", 5), ("*", 2), ("-", 3)))
    assert parse_plan("11") == (11, ())
    assert parse_plan("11 +5 then") is None


@pytest.mark.parametrize("text, kind", [
    ("Steps: 11+5=16, 16*2=30, then 30-3=27. Answer: 27", "arithmetic"),
    ("Steps: 11+5=16, 16+2=18, then 18-3=15. Answer: 15", "wrong_plan"),   # a wrong plan applied faithfully
    ("Steps: 11+5=16, 16*2=32. Answer: 32", "wrong_plan"),                   # a step left out
    ("Steps: 11+5=16, 16*2=32, then 32-3=29. Answer: 28", "answer_mismatch"),
    ("Steps: 11+5=16, 16*2=32, then 32-3=29.", "no_answer"),
    ("Answer: 31", "guess"),
    ("I think it is 29", "no_answer"),
    ("Answer: 28 Answer: 29", None),   # the last answer counts
])
def test_solver_kinds(text, kind):
    assert solver_error(KEN, text) == kind


@pytest.mark.parametrize("solver, verifier, kind", [
    ("Answer: 31", "Answer: 31", "missed"),
    ("Steps: 11+5=16, 16*2=30, then 30-3=27. Answer: 27", "Redo: 11+5=16, 16*2=30, 30-3=27. Answer: 27", "missed"),
    ("Answer: 29", "Redo: 11+5=16, 16*2=32, 32-3=30. Answer: 30", "introduced"),
    ("Answer: 31", "Answer: 30", "wrong"),
    ("Answer: 29", "Redo: 11+5=16, 16*2=33, 32-3=29. Answer: 29", "arithmetic"),   # right answer, false redo
    ("Answer: 29", "Redo: 11+5=16, 16*2=32, 32-3=29.", "no_answer"),
    ("Answer: 31", "Redo: 11+5=16, 16*2=32, 32-3=29. Answer: 29", None),            # a repair is correct
])
def test_verifier_kinds(solver, verifier, kind):
    assert verifier_error(KEN, verifier, solver) == kind


def test_distractor_taken_by_the_reader_is_the_first_error():
    label = label_transcript(MIA, ["8 7 4", "8 +7 /2", "Answer: 7", "Answer: 7"])
    assert [s.kind for s in label.steps] == ["distractor", "distractor", "guess", "missed"]
    assert (label.first_error, label.final_correct, label.repaired) == (0, False, False)


def test_wrong_plan_applied_correctly_is_a_solver_error_too():
    label = label_transcript(KEN, ["11 5 3", "11 +5 +2 -3", "Steps: 11+5=16, 16+2=18, then 18-3=15. Answer: 15",
                                   "Redo: 11+5=16, 16+2=18, 18-3=15. Answer: 15"])
    assert [s.kind for s in label.steps] == [None, "wrong_op", "wrong_plan", "missed"]
    assert label.first_error == 1 and not label.final_correct


def test_a_solver_slip_repaired_by_the_verifier():
    label = label_transcript(KEN, ["11 5 3", "11 +5 *2 -3", "Steps: 11+5=16, 16*2=30, then 30-3=27. Answer: 27",
                                   "Redo: 11+5=16, 16*2=32, 32-3=29. Answer: 29"])
    assert [s.correct for s in label.steps] == [True, True, False, True]
    assert (label.first_error, label.final_correct, label.repaired) == (2, True, True)


def test_an_error_introduced_by_the_verifier_is_not_a_repair():
    label = label_transcript(KEN, KEN_DIRECT[:3] + ["Answer: 30"])
    assert label.steps[3].kind == "introduced"
    assert (label.first_error, label.final_correct, label.repaired) == (3, False, False)


def test_a_verifier_arithmetic_slip_with_the_right_answer():
    label = label_transcript(KEN, KEN_WORKED[:3] + ["Redo: 11+5=16, 16*2=33, 32-3=29. Answer: 29"])
    assert label.steps[3].kind == "arithmetic"
    assert (label.first_error, label.final_correct, label.repaired) == (3, True, False)


def test_an_unfinished_transcript():
    label = label_transcript(KEN, KEN_WORKED[:2])
    assert len(label.steps) == 2 and label.first_error is None
    assert not label.final_correct and not label.repaired
    assert label_transcript(KEN, []).steps == ()
    with pytest.raises(ValueError):
        label_transcript(KEN, KEN_WORKED + ["one more"])


def test_garbage_never_raises():
    fixed = ["", " ", "\n\n", "Answer:", "Answer: -", "Answer: +7", "=====", "1+=2", "/0=0", "5/0=1",
             "Redo: 4/0=0. Answer: 29", "9" * 500, "-" * 200 + "1", "+-*/" * 50, "Ünïcödé ✓ 11 +5", "11 + + 5",
             "Answer: 99999999999999999999999999"]
    rng = random.Random(0)
    alphabet = "0123456789+-*/= .,:;Answer Steps Redo\n"
    fuzz = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(300)]
    for text in fixed + fuzz:
        for problem in (KEN, MIA, ADA):
            label = label_transcript(problem, [text] * 4)
            assert len(label.steps) == 4
            for step in label.steps:
                assert step.correct == (step.kind is None)
                assert step.kind is None or step.kind in ERROR_KINDS[step.agent]
    assert final_answer("Answer: +7") == 7 and final_answer("Answer: -3 ... Answer: 5") == 5
    assert final_answer(None) is None


def test_reference_transcripts_are_labelled_correct():
    # the labeller agrees with the team's reference outputs on generated problems
    from masprm.worlds.toy.transcripts import reference_outputs

    rng = random.Random(1)
    for problem in islice(iter_split("sft"), 80):
        outputs = reference_outputs(problem, rng)
        label = label_transcript(problem, [outputs[i] for i in range(4)])
        assert label.first_error is None and label.final_correct, (problem, outputs, label)


def test_summarize_counts():
    labels = [
        label_transcript(KEN, KEN_WORKED),
        label_transcript(KEN, KEN_WORKED[:2] + ["Steps: 11+5=16, 16*2=30, then 30-3=27. Answer: 27",
                                                KEN_WORKED[3]]),
        label_transcript(MIA, ["8 7 4", "8 +7 /2", "Answer: 7", "Answer: 7"]),
        label_transcript(KEN, KEN_WORKED[:1]),
    ]
    summary = summarize(labels)
    assert summary["transcripts"] == 4
    assert summary["correct"] == 2            # the full correct one and the unfinished one
    assert summary["final_correct"] == 2
    assert summary["repaired"] == 1
    assert summary["unfinished"] == 1
    assert summary["first_error"] == {"Reader": 1, "Planner": 0, "Solver": 1, "Verifier": 0}
    assert summary["error_kinds"]["Reader"]["distractor"] == 1
    assert summary["error_kinds"]["Planner"]["distractor"] == 1
    assert summary["error_kinds"]["Solver"] == {"no_answer": 0, "guess": 1, "arithmetic": 1, "wrong_plan": 0,
                                                "answer_mismatch": 0}
    assert summary["error_kinds"]["Verifier"]["missed"] == 1
    assert list(summary["error_kinds"]) == list(AGENTS)
    assert summarize([])["transcripts"] == 0
