"""The declared differences from the original (docs/differences.md): the original's result on each example,
worked out by hand from its rules, next to this project's."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from masprm.answers import extract_letter, is_correct, normalize_number
from masprm.dataset_rows import math_gold
from masprm.handoff.protocol import NO_ANSWER, NO_MESSAGE, fallback_turn
from masprm.handoff.team import INSTRUCTION, user_content

from helpers import SEP
from helpers_training import config, step_record, write_jsonl

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"

# --------------------------------------------------------------------------- answer checking
# The original's check, in its order: (1) the number after the last "answer:" (a colon is needed; a
# trailing word is captured with it and spoils it unless it is dollars/units/...), else the text's last
# number, against the gold read the same way; (2) a gold letter against the letter of "final answer"
# followed by A-D (any case, even the first letter of a word), else a lone letter, else the first
# standalone A-D of the upper-cased text; (3) else the first number (or the text) of each side.

ANSWER_ROWS = [
    # rule, prediction, gold, the original's verdict, this project's
    ("'answer is' marks the answer",   # (1) no colon: last number 26; (3) first number 13
     "I computed 13 first. The answer is 20. Then 26.", "20", False, True),
    ("a boxed number beats a later number",   # (1) last number 15; (3) first number 5
     "Start with 5. So \\boxed{12}. Check: 12 + 3 = 15", "12", False, True),
    ("LaTeX \\frac is a fraction",   # (1) "\frac" after the colon: last number 8; (3) first number 6
     "Answer: \\frac{6}{8}", "0.75", False, True),
    ("... and not its denominator",   # (1) both sides' last number: 4 = 4
     "Final Answer: \\frac{1}{4}", "3/4", True, False),
    ("a trailing unit word is dropped",   # (1) captures "18 apples": unreadable; (3) first number 3
     "3 baskets of 6 apples. Answer: 18 apples", "18", False, True),
    ("the first number is no fallback",   # (1) last number 13; (3) first number 12 = 12
     "12 apples at first, so the answer is 13", "12", True, False),
    ("a fraction is not its last number",   # (1) last number 4 = 4
     "The answer is 3/4", "4", True, False),
    ("a letter after 'answer is' answers",   # (2) no "final answer": first standalone letter A
     "Option A is tempting, but the answer is B.", "B", False, True),
    ("'Final Answer: Based on ...' is not B",   # (2) "final answer" then the B of "Based"
     "Final Answer: Based on the analysis, C", "C", False, True),
    ("'Final answer: Definitely C' is not D",   # (2) "final answer" then the D of "Definitely"
     "Final answer: Definitely C", "C", False, True),
]


@pytest.mark.parametrize("rule,prediction,gold,original,ours", ANSWER_ROWS, ids=[r[0] for r in ANSWER_ROWS])
def test_answer_rules_that_differ_from_the_original(rule, prediction, gold, original, ours):
    assert original != ours   # every row is a declared difference
    assert is_correct(prediction, gold) is ours


def test_the_originals_letter_misreads_are_read_right():
    assert extract_letter("Final Answer: Based on the analysis, C") == "C"   # the original: B
    assert extract_letter("Final answer: Definitely C") == "C"               # the original: D


# --------------------------------------------------------------------------- competition_math golds
# The original's gold: the last \boxed{...} cut at its first "}", a content that is exactly \frac{a}{b}
# as a/b, else LaTeX commands deleted, then braces, then commas, then float() (a leading "$" and a few
# unit words dropped; "N%" as N/100).

GOLD_ROWS = [
    # boxed content, the original's gold, this project's
    ("\\frac{3}{4}", 3.0, "3/4"),           # cut at the first "}": "\frac{3" -> "{3" -> "3"
    ("5\\sqrt{2}", 52.0, None),              # "5\sqrt{2" -> "5{2" -> "52"
    ("1,2,3", 123.0, None),                 # commas deleted: "123"
    ("1011_2", 10112.0, None),              # float() reads "1011_2" as 10112
    ("2\\frac{1}{2}", 21.0, "5/2"),         # "2\frac{1" -> "21"
    ("\\$18.90", None, "18.90"),            # "\$18.90": the "$" rule wants a leading "$"
    ("10\\%", None, "10%"),                 # "10\%" ends in "%", but "10\" is no number
    ("3,\\!000", None, "3000"),             # "3\!000" after the commas go
    ("90^\\circ", None, "90"),              # "90^" after \circ goes
    ("5 \\text{ cm}", None, "5"),           # "5 \text{ cm" -> "5  cm": no unit rule for cm
    ("42", 42.0, "42"),
]


@pytest.mark.parametrize("content,original,ours", GOLD_ROWS, ids=[r[0] for r in GOLD_ROWS])
def test_competition_math_gold_against_the_originals(content, original, ours):
    assert math_gold({"solution": f"So the answer is $\\boxed{{{content}}}$."}) == ours


def gold_change(original: float | None, ours: str | None) -> str:
    value = None if ours is None else normalize_number(ours)
    if original is None:
        return "neither reads it" if value is None else "the original drops a valid gold"
    if value is None:
        return "the original reads a wrong number; not a number here"
    if original == pytest.approx(value):
        return "same"
    return "the original reads a wrong number; the right one here"


def test_gold_changes_on_the_representative_sample():
    # 200 MATH-style gold solutions written for this test (the split cannot be downloaded here), with the
    # original's gold of each worked out by its rule (above); docs/differences.md quotes these counts.
    rows = [json.loads(line) for line in (FIXTURES / "competition_math_gold_sample.jsonl").read_text().splitlines()]
    assert len(rows) == 200
    by_change: dict[str, Counter] = {}
    for row in rows:
        change = gold_change(row["original_gold"], math_gold(row))
        by_change.setdefault(change, Counter())[row["construct"]] += 1
    totals = {change: sum(c.values()) for change, c in by_change.items()}
    assert totals == {"same": 112, "the original reads a wrong number; the right one here": 33,
                      "the original reads a wrong number; not a number here": 19,
                      "the original drops a valid gold": 9, "neither reads it": 27}
    assert by_change["the original reads a wrong number; the right one here"] == {
        "frac": 22, "negative frac": 4, "dfrac": 4, "tfrac": 1, "thousands {,}": 1, "mixed number": 1}
    assert by_change["the original reads a wrong number; not a number here"] == {
        "radical": 11, "pi": 4, "tuple or list": 2, "base subscript": 2}
    assert by_change["the original drops a valid gold"] == {
        "dollars": 2, "percent": 1, "thousands \\!": 2, "degrees": 2, "unit text": 2}


# --------------------------------------------------------------------------- scorer truncation at inference


@pytest.fixture(scope="module")
def tokenizer_with_sep(tiny_model_dir):
    from masprm.models.loading import load_tokenizer
    from masprm.models.token_scorer import separator_token_id

    tok = load_tokenizer(str(tiny_model_dir), padding_side="right")
    return tok, separator_token_id(tok, SEP)


def test_a_long_text_is_scored_at_its_last_step_not_an_earlier_one(tokenizer_with_sep):
    from masprm.models.text_encoder import TextEncoder, score_position

    tok, sep = tokenizer_with_sep
    text = "Q: how many apples? " + "".join(f"step {k}: " + "count the apples again " * 6 + SEP for k in (1, 2, 3))
    ids = tok(text)["input_ids"]
    seps = [i for i, t in enumerate(ids) if t == sep]
    assert len(seps) == 3
    limit = seps[1] + 3   # room for two steps and a bit of the third
    # The original: the adapter's tokenizer truncates on the right (its left side is not saved), and the
    # score is read at the last separator among the first `limit` tokens: the second step's.
    kept = ids[:limit]
    original_at = max(i for i, t in enumerate(kept) if t == sep)
    assert original_at == seps[1]
    # Here the end is kept: the score is read at the last step's separator.
    ours = TextEncoder(tok, sep, max_length=limit, style="whole").encode([text])[0]
    assert ours == ids[-limit:]
    assert score_position(ours, sep) + len(ids) - limit == seps[2]   # the third separator of the text


def test_prm_scoring_cuts_the_prompt_as_training_did(tokenizer_with_sep):
    from masprm.models.text_encoder import TextEncoder
    from masprm.state_text import join_steps

    tok, sep = tokenizer_with_sep
    prompt = "Q: " + "a long question about apples and pears " * 70
    text = join_steps(prompt, ["step one", "step two"])
    prompt_tokens = len(tok(prompt, add_special_tokens=False)["input_ids"])
    assert 768 < prompt_tokens < 2048 - 20
    # The original tokenised the joined text whole up to 2048 tokens: the prompt was kept entire.
    original = tok(str(text), truncation=True, max_length=2048)["input_ids"]
    assert len(original) > 768 + 4
    ours = TextEncoder(tok, sep, max_length=2048, max_prompt_length=768, style="steps").encode([text])[0]
    steps = [len(tok(s, add_special_tokens=False)["input_ids"]) + 1 for s in ("step one", "step two")]
    assert len(ours) == 768 + sum(steps)   # the prompt's last 768 tokens, then the steps


def test_a_scorer_reads_its_limits_from_its_training_record(tmp_path, tiny_model_dir):
    from masprm.models.scorer import load_scorer
    from masprm.train import train_scorer

    data = write_jsonl(tmp_path / "steps.jsonl", [step_record(random.Random(i)) for i in range(12)])
    result = train_scorer(config(tmp_path, data, tiny_model_dir, "prm", max_steps=1, eval_steps=1,
                                 max_length=48, max_prompt_length=20))
    scorer = load_scorer(result.output_dir)
    # the original scored every text with max_length 2048 and no prompt cap
    assert (scorer.encoder.max_length, scorer.encoder.max_prompt_length) == (48, 20)


# --------------------------------------------------------------------------- handoff texts


def test_handoff_turn_layout_is_the_originals_with_this_projects_instruction():
    # The original's user content: four labelled parts joined by blank lines, then its instruction sentence.
    content = user_content("What is 6 * 7?", "Algebraist", [], ["Critic", "FINAL"])
    assert content == ("ORIGINAL QUESTION:\nWhat is 6 * 7?\n\nPRIVATE ROUTED HISTORY:\n(none)\n\n"
                       "ACTIVE SPEAKER: Algebraist\n\nPERMITTED RECIPIENTS: Critic, FINAL\n\n" + INSTRUCTION)
    # The original's fallback: MESSAGE from its label, else the raw text, else a fixed sentence (here this
    # project's own words); CURRENT_ANSWER from its label, else the previous turn's, else UNKNOWN.
    empty = fallback_turn("", speaker="Critic", recipient="Finalizer", previous_answer=None)
    assert (empty.message, empty.current_answer, empty.parsed) == (NO_MESSAGE, NO_ANSWER, False)
    assert NO_ANSWER == "UNKNOWN"
    prose = fallback_turn("I think it is 42.", speaker="Critic", recipient="Finalizer", previous_answer="40")
    assert (prose.message, prose.current_answer) == ("I think it is 42.", "40")
