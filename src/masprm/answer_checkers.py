"""How a final answer is judged against the gold one (``--answer_checker``): one registry.

    original      the original's rule (``masprm.answers.is_correct``): the answer markers, multiple-choice
                  letters, numbers within a relative tolerance, normalised text (the default)
    math_verify   a pair written in LaTeX (an expression, a set, a radical, a power: a backslash, ^ or
                  { in either) goes to ``math_verify.verify`` (the `math-verify` package, pinned in
                  requirements.txt), which compares them symbolically; letters, plain answers with their
                  markers and numbers with their tolerance keep the original rule

For LaTeX-answer datasets (competition_math): the original's rule misses
``\\boxed{\\sqrt{8}}`` against ``2\\sqrt{2}``, ``\\boxed{3, 5}`` against ``5, 3`` and
``\\boxed{10^{3}}`` against ``1000``; math-verify alone misses the project's markers,
letters and tolerances (docs/differences.md has the counts). math-verify is imported
only when its checker is used. Pure Python.
"""

from __future__ import annotations

from typing import Callable

from masprm.answers import is_correct, last_boxed, looks_like_letter_answer
from masprm.errors import ConfigError
from masprm.registry import Registry

Checker = Callable[[str | None, str | float | int | None], bool]

ANSWER_CHECKERS: Registry[Checker] = Registry("answer checker")
ANSWER_CHECKERS.register("original", is_correct)
DEFAULT_CHECKER = "original"
CHECKER_HELP = ("how a final answer is graded: original (the original's rule, default) or math_verify (LaTeX "
                "expressions compared by math-verify; letters, markers and tolerances as the original)")
LATEX_MARKS = ("\\", "^", "{")   # an answer written in LaTeX (\sqrt, 10^3, \boxed{...}) is an expression


def check_checker(name: str, setting: str = "answer_checker") -> None:
    """Before any work: math_verify needs its package (the `math` extra), the others nothing."""
    import importlib.util

    if name == "math_verify" and importlib.util.find_spec("math_verify") is None:
        raise ConfigError(f"{setting} math_verify needs the math-verify package: pip install 'masprm[math]' "
                          "(or pip install math-verify)", setting=setting)


def checker_record(name: str) -> dict[str, str]:
    """What a run records of its checker: nothing for the default, so runs without the flag keep their
    recorded settings and fingerprints."""
    return {} if name == DEFAULT_CHECKER else {"answer_checker": name}


def _as_math(text: str) -> str:
    """A gold or answer text as math-verify reads LaTeX: inside $...$ unless it is already delimited or boxed."""
    text = text.strip()
    return text if text.startswith("$") or "\\boxed" in text or "\\(" in text or "\\[" in text else f"${text}$"


@ANSWER_CHECKERS.register("math_verify")
def math_verify_correct(prediction: str | None, gold: str | float | int | None) -> bool:
    """The original's rule for letters and plain answers; math-verify for a pair written in LaTeX."""
    if gold is None or not str(gold).strip() or not prediction:
        return is_correct(prediction, gold)
    gold, prediction = str(gold), str(prediction)
    latex = any(mark in text for text in (gold, prediction) for mark in LATEX_MARKS)
    if looks_like_letter_answer(gold) or not latex:
        return is_correct(prediction, gold)   # markers, letters and tolerances: the original rule's job
    from math_verify import parse, verify   # optional until used

    try:
        boxed = last_boxed(prediction)   # the last \boxed{} is the answer, as the original rule reads it
        parsed_gold = parse(_as_math(gold))
        parsed = parse(f"${boxed}$" if boxed is not None else _as_math(prediction))
    except Exception:   # noqa: BLE001 - math-verify could not read them: the original rule decides
        return is_correct(prediction, gold)
    if not parsed_gold or not parsed:
        return is_correct(prediction, gold)
    return bool(verify(parsed_gold, parsed))
