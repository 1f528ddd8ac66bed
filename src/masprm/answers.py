"""Answer checking: is a team's final text right for a gold answer?

Three rules, in order:

1. Numbers. The prediction's number is the last ``answer: <number>`` (also
   ``answer is``/``answer =``, bold markers allowed), else the last
   ``\\boxed{}`` that holds a number, else the last number in the text. A
   number may carry ``$``, thousands commas, a trailing unit word, be a
   fraction ``a/b`` (or LaTeX ``\\frac{a}{b}``) or a percentage ``N%``
   (= N/100). The gold is read the same way. Equal within a relative 1e-6;
   when only one side was written as a percentage, its bare number also
   counts ("25%" is right for GSM8K's gold 25).
2. Letters. If the gold is one letter A-D, compare it with the predicted
   letter (see ``extract_letter``).
3. Text. Only when no number could be read from one side, compare the
   normalised strings (``\\boxed{}`` and ``$`` removed; fractions as fractions).

The original research code then compared the prediction's *first* number
with the gold, so "12 ... so the answer is 13" counted as right for gold 12;
here it does not.

Pure Python: no torch import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

REL_TOL = 1e-6
LETTERS = "ABCD"

# --------------------------------------------------------------------------- reading one number

# Words after a number that name what is counted ("18 dollars"): dropped.
# Words that change its value ("5 million", "2 pi") make it unreadable instead.
_VALUE_WORDS = {"hundred", "thousand", "million", "billion", "trillion", "dozen", "pi", "half",
                "quarter", "third", "thirds", "fourths", "squared", "cubed"}
# LaTeX that only formats a number; any other command (\sqrt, \pi, ...) means "not a number".
_LATEX_FORMATTING = re.compile(r"\\(?:left|right|displaystyle|textstyle|!|,|;|:| )")
_LATEX_TEXT = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox|mathbf)\s*\{([^{}]*)\}")
_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*([-+]?\s*\d+)\s*\}\s*\{\s*([-+]?\s*\d+)\s*\}")
# A whole number written right before a fraction is a mixed number: 2\frac{1}{2} is 5/2, not 21/2.
_LATEX_MIXED = re.compile(r"(?<![\d.])(\d+)\s*\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}")
_LATEX_FRAC_DIGITS = re.compile(r"\\[dt]?frac\s*(\d)\s*(\d)")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ|°")
_TRAILING_WORDS = re.compile(r"(?:\s+[A-Za-z][A-Za-z.]*)+$")
_GROUPED = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_DECIMAL = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)")
_FRACTION = re.compile(r"-?\d+/-?\d+")


@dataclass(frozen=True)
class Number:
    """A number read from text: its value, whether it was written as a percentage, its clean text."""

    value: float
    percent: bool
    text: str


def boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every ``\\boxed{...}`` / ``\\fbox{...}``, braces balanced."""
    spans = []
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            spans.append((m.start(), i, text[m.end():i - 1]))
    return spans


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in a text, or None."""
    spans = boxed_spans(text)
    return spans[-1][2] if spans else None


def _unbox(text: str) -> str:
    """Replace each ``\\boxed{X}`` by X (outermost boxes; nested ones are unboxed in turn)."""
    while True:
        spans = boxed_spans(text)
        if not spans:
            return text
        out, last = [], 0
        for start, end, content in spans:
            if start < last:  # a box inside a box already replaced in this pass
                continue
            out.append(text[last:start] + content)
            last = end
        text = "".join(out) + text[last:]


def _plain_latex(text: str) -> str:
    """LaTeX that can appear around a number, rewritten as plain text."""
    text = text.replace("\u2212", "-")
    text = _unbox(text)
    text = _LATEX_MIXED.sub(lambda m: f"{int(m.group(1)) * int(m.group(3)) + int(m.group(2))}/{m.group(3)}", text)
    text = _LATEX_FRAC.sub(lambda m: f"{m.group(1)}/{m.group(2)}".replace(" ", ""), text)
    text = _LATEX_FRAC_DIGITS.sub(r"\1/\2", text)
    text = _LATEX_TEXT.sub(r" \1", text)
    text = _DEGREES.sub("", text)
    text = text.replace("\\%", "%").replace("\\$", "$").replace("{,}", ",")
    text = re.sub(r"\\[()\[\]]", " ", text)
    return _LATEX_FORMATTING.sub("", text)


def read_number(text: str | None) -> Number | None:
    """Parse a string that *is* a number (gold answers, extracted tokens); None if it is not one."""
    if text is None:
        return None
    s = _plain_latex(str(text)).strip()
    if re.search(r"\\[A-Za-z]", s):
        return None
    s = s.replace("{", "").replace("}", "").replace("$", "").replace("**", "").strip()
    s = s.rstrip(".").strip()
    words = _TRAILING_WORDS.search(s)
    if words:
        found = {w.strip(".").lower() for w in words.group(0).split()}
        if found & _VALUE_WORDS:
            return None
        s = s[:words.start()] + ("%" if found & {"percent", "per"} else "")
    s = re.sub(r"\s+", "", s).lstrip("+")
    percent = s.endswith("%")
    s = s.rstrip("%")
    if "," in s:
        if not _GROUPED.fullmatch(s):
            return None
        s = s.replace(",", "")
    if _DECIMAL.fullmatch(s):
        value = float(s)
    elif _FRACTION.fullmatch(s):
        num, den = s.split("/")
        if int(den) == 0:
            return None
        value = float(Fraction(int(num), int(den)))
    else:
        return None
    return Number(value / 100.0 if percent else value, percent, s + ("%" if percent else ""))


def normalize_number(text: str | None) -> float | None:
    """The value of a string that is a number: ``$1,200`` -> 1200, ``3/4`` -> 0.75, ``12%`` -> 0.12."""
    number = read_number(text)
    return None if number is None else number.value


def clean_number_text(text: str | None) -> str | None:
    """A number written plainly (``\\$1,200`` -> ``1200``, ``\\frac{3}{4}`` -> ``3/4``); None if not a number."""
    number = read_number(text)
    return None if number is None else number.text


def format_number(value: float | int) -> str:
    """A stored numeric value as text: whole numbers without ``.0``."""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


# --------------------------------------------------------------------------- finding the number in free text

_INT = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)"
_UNSIGNED = rf"(?:{_INT}(?:\.\d+)?|\.\d+)"
_SIGN = r"(?:(?<![\w.)\]])-\s?)?"  # a minus sign, but not the one in "5-3"
_NUMBER = rf"{_SIGN}\$?\s?{_SIGN}{_UNSIGNED}(?:\s?/\s?{_INT})?(?:\s?%)?"
_NUMBER_RE = re.compile(_NUMBER)
_ANSWER_RE = re.compile(
    rf"(?i:answer)\s*(?:\*\*)?\s*(?:(?i:is)\b\s*:?|[:=])\s*(?:\*\*)?\s*\$*\s*({_NUMBER})"
)


def _read_prediction_number(text: str | None) -> Number | None:
    if not text:
        return None
    text = str(text)
    plain = _plain_latex(text)
    marked = _ANSWER_RE.findall(plain)
    if marked:  # only the last marker counts; an unreadable one falls through to the rules below
        number = read_number(marked[-1])
        if number is not None:
            return number
    for _, _, content in reversed(boxed_spans(text)):
        number = read_number(content)
        if number is not None:
            return number
    for token in reversed(_NUMBER_RE.findall(plain)):
        number = read_number(token)
        if number is not None:
            return number
    return None


def extract_number(text: str | None) -> float | None:
    """The number a text answers with (rule 1 above), or None."""
    number = _read_prediction_number(text)
    return None if number is None else number.value


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL_TOL * max(1.0, abs(a), abs(b))


def _numbers_match(pred: Number, gold: Number) -> bool:
    if abs(pred.value - gold.value) <= REL_TOL * max(1.0, abs(gold.value)):
        return True
    # "25%" against a gold of 25 (GSM8K writes percentages as bare numbers), and the reverse.
    if pred.percent and not gold.percent:
        return _close(pred.value * 100.0, gold.value)
    if gold.percent and not pred.percent:
        return _close(pred.value, gold.value * 100.0)
    return False


# --------------------------------------------------------------------------- multiple-choice letters

# A lowercase b-d is a letter as in the original (which upper-cased the text); a lowercase
# "a" only in parentheses or alone, since in a sentence it is the English article.
_LETTER = r"(?:([A-D]|[b-d])|\(([a-d])\))"
_FINAL_LETTER_RE = re.compile(
    r"(?:(?i:final\s*answer)\s*(?:\*\*)?\s*(?:(?i:is)\b\s*:?|[:\-\u2013\u2014])?"
    r"|(?i:answer)\s*(?:\*\*)?\s*(?:(?i:is)\b\s*:?|[:\-\u2013\u2014]))"
    rf"\s*(?:\*\*)?\s*(?i:option\s*)?[(\[]?\s*{_LETTER}\s*[)\]]?(?:\*\*)?(?![A-Za-z0-9])"
)
_LONE_LETTER_RE = re.compile(r"[(\[]?\s*([A-Da-d])\s*[)\]]?\.?")
# Not after an apostrophe: the "d" of "I'd" is no answer.
_FIRST_LETTER_RE = re.compile(r"(?<!['\u2019])\b([A-D]|[b-d])\b|\(([a-d])\)")


def _letter_markup_removed(text: str) -> str:
    text = _LATEX_TEXT.sub(r"\1", _unbox(text))
    return text.replace("$", "")


def _final_phrase_letter(text: str) -> str | None:
    matches = _FINAL_LETTER_RE.findall(_letter_markup_removed(text))
    if not matches:
        return None
    upper, lower = matches[-1]  # the last stated final answer is the one the agent settled on
    return (upper or lower).upper()


def extract_letter(text: str | None) -> str | None:
    """The option letter A-D a text answers with, or None.

    First a "final answer" / "answer is" phrase followed by a letter (bold
    markers, a colon/dash or "is", parentheses tolerated; the last such
    phrase wins), else a text that is only one letter, else the first
    standalone A-D or lowercase b-d ("I think b" answers B; "a" in a
    sentence is the article, not option A).
    """
    if not text:
        return None
    text = str(text)
    letter = _final_phrase_letter(text)
    if letter:
        return letter
    plain = _letter_markup_removed(text).replace("*", "").strip()
    lone = _LONE_LETTER_RE.fullmatch(plain)
    if lone:
        return lone.group(1).upper()
    first = _FIRST_LETTER_RE.search(plain)
    return (first.group(1) or first.group(2)).upper() if first else None


def _is_letter(gold: str) -> bool:
    return len(gold) == 1 and gold.upper() in LETTERS


def looks_like_letter_answer(gold: str) -> bool:
    """A multiple-choice gold answer: one of the letters A-D."""
    return _is_letter(str(gold).strip())


# --------------------------------------------------------------------------- text fallback


def _normalize_text(text: str) -> str:
    text = _letter_markup_removed(text)
    text = re.sub(r"\\(?:left|right)", "", text)
    return re.sub(r"\s+", "", text).rstrip(".").lower()


def _texts_equal(a: str, b: str) -> bool:
    na, nb = _normalize_text(a), _normalize_text(b)
    try:
        return Fraction(na) == Fraction(nb)
    except (ValueError, ZeroDivisionError):
        return na == nb


# --------------------------------------------------------------------------- public checks


def is_correct(prediction: str | None, gold: str | float | int | None) -> bool:
    """Whether a final answer text matches the gold answer. A missing gold is never correct."""
    if gold is None:
        return False
    gold = str(gold).strip()
    if not gold:
        return False
    prediction = "" if prediction is None else str(prediction)
    gold_number = _read_prediction_number(gold)
    pred_number = _read_prediction_number(prediction)
    if gold_number is not None and pred_number is not None:
        return _numbers_match(pred_number, gold_number)
    if _is_letter(gold):
        return extract_letter(prediction) == gold.upper()
    return _texts_equal(prediction, gold)


def answers_equal(a: str | None, b: str | None) -> bool:
    """Whether two predicted answers say the same thing (voters group answers with this).

    Stated final letters decide first (multiple choice), then numbers (within
    the tolerance), then letters read leniently, then normalised text.
    """
    a = "" if a is None else str(a)
    b = "" if b is None else str(b)
    la, lb = _final_phrase_letter(a), _final_phrase_letter(b)
    if la and lb:
        return la == lb
    na, nb = _read_prediction_number(a), _read_prediction_number(b)
    if na is not None and nb is not None:
        return _close(na.value, nb.value)
    if na is None and nb is None:
        la, lb = extract_letter(a), extract_letter(b)
        if la and lb:
            return la == lb
    return _texts_equal(a, b)
