"""The routed-turn contract of the handoff team.

Each turn the active speaker must emit exactly four fields, in this order:

    SPEAKER: <its own role>
    RECIPIENT: <another role, or FINAL>
    MESSAGE: <text>
    CURRENT_ANSWER: <text>

``parse_turn`` enforces the contract strictly (the original's main branch);
``parse_turn_lenient`` is its newer branch's reading (``--handoff_parser lenient``):
SPEAKER, RECIPIENT and MESSAGE must open the text in that order, CURRENT_ANSWER
is optional (the last one wins, repeated labels before it stay in the message;
without one the message is the answer), and a recipient of none, end or stop
means FINAL. ``PARSERS`` names both. ``fallback_turn`` builds the turn used when
no proposal of a turn parses, so a run always moves on. Pure Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

FINAL = "FINAL"
FIELDS = ("SPEAKER", "RECIPIENT", "MESSAGE", "CURRENT_ANSWER")

# A field label starts a line; labels are matched case-insensitively, like role names.
_FIELD_RE = re.compile(r"(?im)^[ \t]*(SPEAKER|RECIPIENT|MESSAGE|CURRENT_ANSWER)[ \t]*:[ \t]*")


def role_key(name: str) -> str:
    """Roles compare case- and whitespace-insensitively: ' number  THEORIST ' == 'Number Theorist'."""
    return " ".join(str(name).split()).casefold()


class ParseError(ValueError):
    """A proposal that breaks the routed-turn contract; the message says how."""


@dataclass(frozen=True)
class RoutedTurn:
    speaker: str
    recipient: str          # a role name as spelled in the config, or FINAL
    message: str
    current_answer: str
    raw: str = ""           # the policy's text this turn came from
    parsed: bool = True     # False for a fallback turn

    @property
    def is_final(self) -> bool:
        return self.recipient == FINAL

    def render(self) -> str:
        return (f"SPEAKER: {self.speaker}\n"
                f"RECIPIENT: {self.recipient}\n"
                f"MESSAGE: {self.message}\n"
                f"CURRENT_ANSWER: {self.current_answer}")


def split_fields(text: str) -> list[tuple[str, str]]:
    """(FIELD, value) for every field label in the text, in order of appearance."""
    matches = list(_FIELD_RE.finditer(text))
    out = []
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        out.append((m.group(1).upper(), text[m.end():end].strip()))
    return out


def parse_turn(text: str, *, speaker: str, roles: Sequence[str], permitted: Sequence[str],
               allow_final: bool) -> RoutedTurn:
    """Parse one proposal of the active ``speaker``; raise ParseError if it breaks the contract.

    ``roles`` are all role names of the team; ``permitted`` the recipients this
    turn may address (role names and possibly FINAL). Names in the result are
    canonical (as spelled in ``roles``), whatever case or spacing the text used.
    """
    raw = (text or "").strip()
    first = _FIELD_RE.search(raw)
    if first is None:
        raise ParseError("no SPEAKER/RECIPIENT/MESSAGE/CURRENT_ANSWER fields")
    if raw[:first.start()].strip():
        raise ParseError("text before the SPEAKER field")
    fields = split_fields(raw)
    names = tuple(name for name, _ in fields)
    if names != FIELDS:
        raise ParseError(f"fields must be {', '.join(FIELDS)} once each in that order, got {', '.join(names)}")
    return _checked_turn(dict(fields), speaker=speaker, roles=roles, permitted=permitted,
                         allow_final=allow_final, raw=raw, final_words=(FINAL,))


LENIENT_FINAL_WORDS = (FINAL, "none", "end", "stop")   # recipients the newer branch reads as FINAL


def parse_turn_lenient(text: str, *, speaker: str, roles: Sequence[str], permitted: Sequence[str],
                       allow_final: bool) -> RoutedTurn:
    """The newer branch's reading of a proposal (module docstring); raise ParseError if it still fails."""
    raw = (text or "").strip()
    matches = list(_FIELD_RE.finditer(raw))
    if not matches or raw[:matches[0].start()].strip():
        raise ParseError("the text must start with the SPEAKER field")
    if [m.group(1).upper() for m in matches[:3]] != list(FIELDS[:3]):
        raise ParseError(f"the text must open with {', '.join(FIELDS[:3])} in that order")
    spoke, to, said = matches[:3]
    answers = [m for m in matches[3:] if m.group(1).upper() == "CURRENT_ANSWER"]
    message_end = answers[-1].start() if answers else len(raw)
    message = raw[said.end():message_end].strip()
    values = {"SPEAKER": raw[spoke.end():to.start()].strip(), "RECIPIENT": raw[to.end():said.start()].strip(),
              "MESSAGE": message, "CURRENT_ANSWER": raw[answers[-1].end():].strip() if answers else message}
    return _checked_turn(values, speaker=speaker, roles=roles, permitted=permitted, allow_final=allow_final,
                         raw=raw, final_words=LENIENT_FINAL_WORDS)


def _checked_turn(values: dict[str, str], *, speaker: str, roles: Sequence[str], permitted: Sequence[str],
                  allow_final: bool, raw: str, final_words: Sequence[str]) -> RoutedTurn:
    """The checks both parsers share: the speaker, a known and permitted recipient, non-empty texts."""
    canonical = {role_key(r): r for r in roles}
    if role_key(values["SPEAKER"]) != role_key(speaker):
        raise ParseError(f"speaker {values['SPEAKER']!r} is not the active role {speaker!r}")

    said = values["RECIPIENT"]
    if role_key(said) in {role_key(w) for w in final_words}:
        if not allow_final:
            raise ParseError("FINAL is not allowed yet")
        recipient = FINAL
    elif role_key(said) in canonical:
        recipient = canonical[role_key(said)]
    else:
        raise ParseError(f"unknown recipient {said!r}")
    if role_key(recipient) not in {role_key(p) for p in permitted}:
        raise ParseError(f"recipient {recipient!r} is not permitted this turn")

    for name in ("MESSAGE", "CURRENT_ANSWER"):
        if not values[name]:
            raise ParseError(f"{name} is empty")
    return RoutedTurn(canonical.get(role_key(speaker), speaker), recipient, values["MESSAGE"],
                      values["CURRENT_ANSWER"], raw=raw)


PARSERS = {"strict": parse_turn, "lenient": parse_turn_lenient}   # --handoff_parser


# The fallback salvages the first raw text the way the original code did: CURRENT_ANSWER is
# the rest of its label's line (the next non-blank line when that is empty), MESSAGE runs from
# its label to a CURRENT_ANSWER label or the end of the text. Labels may be anywhere in the text.
_FALLBACK_ANSWER = re.compile(r"^\s*CURRENT_ANSWER\s*:\s*(.+?)\s*$", re.I | re.M | re.S)
_FALLBACK_MESSAGE = re.compile(r"^\s*MESSAGE\s*:\s*(.*?)(?=^\s*CURRENT_ANSWER\s*:|\Z)", re.I | re.M | re.S)
NO_ANSWER = "UNKNOWN"                 # the previous answer on turn 1
NO_MESSAGE = "(no valid structured proposal was generated)"


def fallback_turn(text: str, *, speaker: str, recipient: str, previous_answer: str | None) -> RoutedTurn:
    """The turn used when no proposal parses: salvage what the first raw text offers.

    CURRENT_ANSWER comes from the text's first CURRENT_ANSWER label, else it is
    the previous turn's answer ("UNKNOWN" on the first turn); MESSAGE comes from
    the first MESSAGE label, else it is the whole raw text.
    """
    raw = (text or "").strip()
    previous = previous_answer or NO_ANSWER
    answer_match = _FALLBACK_ANSWER.search(raw)
    answer = answer_match.group(1).strip() if answer_match else ""
    message_match = _FALLBACK_MESSAGE.search(raw)
    message = message_match.group(1).strip() if message_match else raw
    return RoutedTurn(speaker, recipient, message or NO_MESSAGE, answer or previous, raw=raw, parsed=False)
