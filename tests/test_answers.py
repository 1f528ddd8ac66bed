"""Answer checking: the table of cases the whole pipeline's rewards rest on."""

from __future__ import annotations


import pytest

from masprm.answers import (
    answers_equal,
    clean_number_text,
    extract_letter,
    extract_number,
    is_correct,
    normalize_number,
)

# (prediction, gold, expected is_correct)
CASES = [
    # plain numbers and the "answer:" marker
    ("Answer: 72", "72", True),
    ("The answer is 72.", "72", True),
    ("answer: 71", "72", False),
    ("**Answer:** 42", "42", True),
    ("Final Answer: 18", "18", True),
    ("ANSWER = 9", "9", True),
    # the marker wins over the last number in the text
    ("Answer: 15. Check: 15 - 5 = 10", "15", True),
    ("Answer: 15. Check: 15 - 5 = 10", "10", False),
    # deviation from the original: the first number is not the answer
    ("12 ... so the answer is 13", "12", False),
    ("12 ... so the answer is 13", "13", True),
    ("First 12 apples, then 13 more makes 25", "12", False),
    # commas, dollars, units
    ("The total is $1,200.", "1200", True),
    ("Answer: $1,200", "$1,200", True),
    ("answer: 1,000,000", "1000000", True),
    ("answer: 18 dollars", "18", True),
    ("Answer: 5 apples", "5", True),
    ("She pays $ 30 in total", "30", True),
    ("They are 3,4 and 5", "5", True),          # "3,4" is a list, not 34
    # decimals and tolerance
    ("Answer: 0.5", "0.50", True),
    ("Answer: 2.0000001", "2", True),
    ("Answer: 2.001", "2", False),
    ("Answer: 1000000.5", "1000000", True),    # the tolerance is relative: 1e-6 * max(1, |gold|)
    ("Answer: 1000002", "1000000", False),
    # fractions
    ("So 3/4 of them", "0.75", True),
    ("Answer: 3/4", "3/4", True),
    ("Answer: 6/8", "3/4", True),
    ("\\boxed{\\frac{3}{4}}", "0.75", True),
    ("The answer is $\\dfrac{5}{8}$", "5/8", True),
    ("Answer: 1/3", "0.333333333", True),
    # percentages
    ("Answer: 25%", "0.25", True),
    ("Answer: 25%", "25", True),             # GSM8K writes percentages as bare numbers
    ("Answer: 0.25", "25%", True),
    ("Answer: 25", "25%", True),
    ("Answer: 30%", "25", False),
    # negatives
    ("x = -5", "-5", True),
    ("Answer: -5", "5", False),
    ("5-3 = 2", "2", True),                  # a subtraction, not a negative three
    ("The temperature is \u22123 degrees", "-3", True),
    # \boxed{}
    ("\\boxed{5}. Check: 5*2=10", "5", True),
    ("We get \\boxed{2} then \\boxed{7}", "7", True),
    ("\\boxed{\\$30}", "30", True),
    # multiple-choice letters
    ("Final Answer: B", "B", True),
    ("Final Answer: **B**", "B", True),
    ("**Final Answer:** C", "C", True),
    ("**Final Answer: D**", "D", True),
    ("The final answer is A", "A", True),
    ("final answer is: (c)", "C", True),
    ("Final answer - (D)", "D", True),
    ("Final answer \u2013 B", "B", True),
    ("The correct answer is (B) because ...", "B", True),
    ("Final Answer: $\\boxed{C}$", "C", True),
    ("B", "B", True),
    ("(b)", "B", True),
    ("**C.**", "C", True),
    ("Option D is right; A and B are traps.", "D", True),   # first standalone letter
    ("Option D is right; A and B are traps.", "A", False),
    ("I compared A and C. Final Answer: C", "C", True),      # the phrase beats the first letter
    ("Debater 1's final answer: A. Debater 2's final answer: B. Final Answer: B", "B", True),
    ("Final Answer: Both are fine", "B", False),             # "Both" is not the letter B
    ("the final answer is definitely wrong", "D", False),
    ("Final Answer: C", "b", False),
    ("no letter at all", "A", False),
    # lowercase letters: b-d as in the original (which upper-cased the text); the article "a" is no answer
    ("I think b", "B", True),
    ("the answer is c.", "C", True),
    ("Final Answer: d", "D", True),
    ("I'd go with b", "B", True),                          # the "d" of "I'd" is no letter
    ("I think a good choice is C", "C", True),             # the original answered A (the article)
    ("I think a good choice is C", "A", False),
    ("(a) is right", "A", True),
    ("a", "A", True),
    # text fallback (no number on one side)
    ("\\boxed{x^2+1}", "x^2+1", True),
    ("$x^2 + 1$", "x^2+1", True),
    ("seventy-two", "72", False),
    # missing gold is never correct
    ("Answer: 72", None, False),
    ("Answer: 72", "", False),
    ("", "", False),
    (None, "5", False),
]


@pytest.mark.parametrize("prediction,gold,expected", CASES)
def test_is_correct_table(prediction, gold, expected):
    assert is_correct(prediction, gold) is expected


def test_table_is_large_enough():
    assert len(CASES) >= 40


def test_numeric_gold_values_accepted_as_numbers():
    assert is_correct("Answer: 72", 72)
    assert is_correct("Answer: 2.5", 2.5)
    assert not is_correct("Answer: 3", 2.5)


@pytest.mark.parametrize("text,value", [
    ("72", 72.0), ("$1,200", 1200.0), ("3/4", 0.75), ("12%", 0.12), ("-5", -5.0),
    ("18 dollars", 18.0), ("5 cm.", 5.0), ("25 percent", 0.25), ("\\frac{1}{2}", 0.5),
    ("-\\frac{1}{2}", -0.5), ("\\dfrac{9}{4}", 2.25), ("\\frac14", 0.25), ("10^\\circ", 10.0),
    ("5\\text{ cm}", 5.0), ("1{,}000", 1000.0), ("\\$18.90", 18.9), ("25\\%", 0.25), (".5", 0.5),
    ("+7", 7.0), ("2\\frac{1}{2}", 2.5), ("-3\\dfrac{3}{4}", -3.75),   # mixed numbers (the original: 21, -3)
    # not numbers: these must not be misread (the original read "2\sqrt{3}" as 23)
    ("2\\sqrt{3}", None), ("\\pi", None), ("(3,4)", None), ("3,4", None), ("x=5", None),
    ("5 million", None), ("0.\\overline{3}", None), ("1/0", None), ("", None), (None, None),
])
def test_normalize_number(text, value):
    got = normalize_number(text)
    assert got == pytest.approx(value) if value is not None else got is None


def test_clean_number_text_keeps_exact_forms():
    assert clean_number_text("\\frac{3}{4}") == "3/4"
    assert clean_number_text("$1,200") == "1200"
    assert clean_number_text("25\\%") == "25%"
    assert clean_number_text("-\\dfrac{5}{8}") == "-5/8"


@pytest.mark.parametrize("text,value", [
    ("Answer: 3 apples. Earlier I had 7.", 3.0),
    ("I had 7, then 3 more: 10", 10.0),
    ("no numbers here", None),
    ("It costs $4.50.", 4.5),
    ("\\boxed{12} and later 99", 12.0),
    ("Answer: x is unknown; 4 remain", 4.0),   # an unreadable marker falls through
])
def test_extract_number(text, value):
    assert extract_number(text) == value


@pytest.mark.parametrize("text,letter", [
    ("Final Answer: A", "A"), ("final answer: (b)", "B"), ("The answer is D.", "D"),
    ("  c  ", "C"), ("[A]", "A"), ("I pick C over A", "C"), ("a cat and a dog", None),
    ("Answer A is wrong, the right one is B", "A"),  # no phrase: first standalone letter
    ("", None), (None, None),
])
def test_extract_letter(text, letter):
    assert extract_letter(text) == letter


@pytest.mark.parametrize("a,b,expected", [
    ("Answer: 72", "so we get 72.0", True),
    ("Answer: 1,200", "$1200", True),
    ("Answer: 3/4", "0.75", True),
    ("Answer: 72", "Answer: 73", False),
    ("Final Answer: B", "The reasoning uses 3 steps. Final Answer: B", True),
    ("Final Answer: B", "Final Answer: C", False),
    ("B", "(B)", True),
    ("\\boxed{x+1}", "x + 1", True),
    ("\\boxed{x+1}", "x + 2", False),
])
def test_answers_equal(a, b, expected):
    assert answers_equal(a, b) is expected
    assert answers_equal(b, a) is expected
