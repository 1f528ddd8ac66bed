"""How each benchmark's row gives a question and a gold answer.

A gold answer is a clean number ("72", "3/4", "25%") or a letter A-D; a row whose
gold cannot be read gives None (and is skipped by the selection). Multiple-choice
questions list their options as "A. ...", "B. ...", one per line, after the question.
Pure Python.
"""

from __future__ import annotations

import random
import re
from typing import Any, Mapping, Sequence

from masprm.answers import LETTERS, clean_number_text, format_number, last_boxed

Row = Mapping[str, Any]



def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def raw_text(value: Any) -> str:
    """A field as stored: the original passed these questions and options to the agents unstripped."""
    return "" if value is None else str(value)


def number_gold(value: Any) -> str | None:
    """A gold number from a stored value: numbers as they are, strings through the answer normaliser."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return format_number(value) if value == value else None  # NaN is not an answer
    return clean_number_text(str(value))


def _lettered(question: str, options: Sequence[Any]) -> list[str]:
    return ([question] if question else []) + [f"{LETTERS[i]}. {raw_text(o)}" for i, o in enumerate(options[:4])]


def _index_letter(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return LETTERS[value] if isinstance(value, int) and 0 <= value < 4 else None


def _first_present(row: Row, keys: Sequence[str]) -> Any:
    """The first of these fields that is present and not null (0 is a value, not a miss)."""
    for k in keys:
        if row.get(k) is not None:
            return row[k]
    return None


def gsm8k_gold(row: Row) -> str | None:
    m = re.search(r"####\s*([^\n]+)", _text(row.get("answer")))
    return clean_number_text(m.group(1)) if m else None


def math_gold(row: Row) -> str | None:
    boxed = last_boxed(_text(row.get("solution")))
    return None if boxed is None else clean_number_text(boxed)


def math_level(row: Row) -> int | None:
    m = re.search(r"\d+", _text(row.get("level")))
    return int(m.group(0)) if m else None


def _mmlu_options(row: Row) -> list[Any]:
    options = _first_present(row, ("choices", "options"))
    if isinstance(options, Mapping):
        options = options.get("text")
    return list(options) if options else []


def mmlu_question(row: Row) -> str:
    options = _mmlu_options(row)
    if len(options) < 2:
        return ""
    lines = _lettered(_text(row.get("question")), options)
    return "\n".join(lines) + "\nAnswer with a single letter (A, B, C, or D) only."


def mmlu_gold(row: Row) -> str | None:
    """The correct letter from an int index, a letter, or the text of the correct option."""
    answer = _first_present(row, ("answer", "target", "label"))
    if isinstance(answer, int):
        return _index_letter(answer)
    if not isinstance(answer, str) or not answer.strip():
        return None
    s = answer.strip()
    if len(s) == 1 and s.upper() in LETTERS:
        return s.upper()

    def norm(x: Any) -> str:
        return re.sub(r"\s+", " ", str(x)).strip().lower()

    for i, option in enumerate(_mmlu_options(row)[:4]):
        if norm(option) == norm(s):
            return LETTERS[i]
    if s.isdigit():
        return _index_letter(s)
    m = re.match(r"\(?([A-D])[).:]", s)
    return m.group(1) if m else None


def logiqa_question(row: Row) -> str:
    lines = []
    if _text(row.get("context")):
        lines.append(f"Context: {_text(row.get('context'))}")
    query = _text(_first_present(row, ("query", "question")))
    if query:
        lines.append(f"Question: {query}")
    options = list(row.get("options") or [])
    return "\n".join(lines + _lettered("", options)) if options else ""


def logiqa_gold(row: Row) -> str | None:
    letter = _index_letter(row.get("correct_option"))
    if letter:
        return letter
    label = row.get("label")
    if isinstance(label, str) and label.strip().upper() in LETTERS and len(label.strip()) == 1:
        return label.strip().upper()
    return _index_letter(label)


GPQA_OPTION_FIELDS = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def gpqa_permutation(row: Row) -> list[int]:
    """Where each option goes: seeded by the record id (or the question), the same on every run."""
    record = _first_present(row, ("Record ID", "Record_ID", "Question")) or ""
    order = [0, 1, 2, 3]
    random.Random(sum(ord(c) for c in str(record))).shuffle(order)
    return order


def gpqa_question(row: Row) -> str:
    options = [raw_text(row.get(f)) for f in GPQA_OPTION_FIELDS]
    return "\n".join(_lettered(_text(row.get("Question")), [options[i] for i in gpqa_permutation(row)]))


def gpqa_gold(row: Row) -> str | None:
    if not _text(row.get("Correct Answer")):
        return None
    return LETTERS[gpqa_permutation(row).index(0)]  # option 0 is the correct one before permuting


def aqua_gold(row: Row) -> str | None:
    key = _text(row.get("correct")).upper()
    options = list(row.get("options") or [])
    if len(key) != 1 or key not in "ABCDE" or "ABCDE".index(key) >= len(options):
        return None
    return clean_number_text(re.sub(r"^\s*\(?[A-E]\)\s*", "", str(options["ABCDE".index(key)])))


def any_gold(value: Any) -> str | None:
    """The gold answer of a dataset given by hub id or path (``--answer_field``): a stored number; text with
    GSM8K's ``#### N`` or a ``\\boxed{N}`` read there; a lone option letter A-E; else the text as a plain number.
    None when it is none of these (the row is skipped)."""
    if not isinstance(value, str):
        return number_gold(value)
    text = value.strip()
    if len(text) == 1 and text.upper() in "ABCDE":
        return text.upper()
    marked = re.search(r"####\s*([^\n]+)", text)
    if marked:
        return clean_number_text(marked.group(1))
    boxed = last_boxed(text)
    return clean_number_text(boxed if boxed is not None else text)


def svamp_question(row: Row) -> str:
    return f"{raw_text(row.get('Body'))} {raw_text(row.get('Question'))}"
