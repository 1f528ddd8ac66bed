"""Training data for the scorer (SPEC §7): read and check records, tokenise, collate.

A record of stage 2 becomes token ids plus the positions whose logit is
trained:

- ppm: one pair of texts, ``prompt + steps + SEP`` for the chosen and the
  rejected branch; the score is the logit at the last separator.
- prm: one text with a label in [-1, 1] on every step's separator.
- orm: like prm, but only the last step's label is used.

Tokenisation is shared with the scorer loader (``TextEncoder``), so a text
is cut and scored exactly the same way in training and at inference: the
prompt part is first cut to ``max_prompt_length`` tokens (keeping its end),
then the whole text to ``max_length`` tokens, keeping the end, so the last
separator always survives.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

from masprm.checks import read_utf8
from masprm.cli import UsageError
from masprm.io import iter_jsonl
from masprm.pairs import ppm_texts
from masprm.state_text import join_steps

EVAL_FRACTION = 0.04


# --------------------------------------------------------------------------- reading records


def _iter_records(path: Path) -> Iterator[tuple[str, dict]]:
    """Yield (where, record): a JSON list/object file, else JSONL (line numbers in `where`)."""
    if path.suffix == ".json":
        try:
            data = json.loads(read_utf8(path, "data file (--data_dir)"))
        except json.JSONDecodeError:
            data = None  # not one JSON document: read it as JSONL below
        if isinstance(data, dict):
            data = [data]
        if isinstance(data, list):
            for i, rec in enumerate(data):
                if not isinstance(rec, dict):
                    raise UsageError(f"{path}: record {i}: expected a JSON object, got {type(rec).__name__}")
                yield f"{path}: record {i}", rec
            return
    for lineno, rec in iter_jsonl(path):
        yield f"{path}:{lineno}", rec


def _check_str_list(where: str, rec: dict, key: str) -> None:
    value = rec.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(s, str) for s in value):
        raise UsageError(f"{where}: field {key!r} must be a non-empty list of strings")


def _check_record(where: str, rec: dict, mode: str) -> None:
    needed = ("prompt", "chosen_actions", "rejected_actions") if mode == "ppm" else ("prompt", "completions", "labels")
    missing = [k for k in needed if k not in rec]
    if missing:
        raise UsageError(f"{where}: missing field(s) {', '.join(missing)} for --mode {mode} "
                         f"(a {mode} record needs {', '.join(needed)})")
    if not isinstance(rec["prompt"], str):
        raise UsageError(f"{where}: field 'prompt' must be a string")
    if mode == "ppm":
        _check_str_list(where, rec, "chosen_actions")
        _check_str_list(where, rec, "rejected_actions")
        if len(rec["chosen_actions"]) != len(rec["rejected_actions"]):
            raise UsageError(f"{where}: chosen_actions and rejected_actions must have the same number of steps")
        return
    _check_str_list(where, rec, "completions")
    labels = rec["labels"]
    if not isinstance(labels, list) or len(labels) != len(rec["completions"]):
        raise UsageError(f"{where}: field 'labels' must be a list with one number per completion")
    for y in labels:
        if isinstance(y, bool) or not isinstance(y, (int, float)) or not math.isfinite(y) or abs(y) > 1.0 + 1e-6:
            raise UsageError(f"{where}: label {y!r} is not a number in [-1, 1]")


def load_records(path: str | Path, mode: str) -> list[dict]:
    """All records of a stage-2 file, checked for the fields `mode` needs."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{path}: is a folder; --data_dir expects a JSON or JSONL file")
    if not path.is_file():
        raise UsageError(f"{path}: file not found (--data_dir)")
    records = []
    for where, rec in _iter_records(path):
        _check_record(where, rec, mode)
        records.append(rec)
    if not records:
        raise UsageError(f"{path}: no records (the file is empty)")
    return records


def usable_records(records: Sequence[dict], mode: str) -> int:
    """Records that give a training example: a ppm pair needs chosen and rejected steps that differ."""
    if mode != "ppm":
        return len(records)
    return sum(1 for rec in records if rec["chosen_actions"] != rec["rejected_actions"])


# --------------------------------------------------------------------------- eval split


def split_eval(n: int, seed: int, fraction: float = EVAL_FRACTION) -> tuple[list[int], list[int]]:
    """Seeded (train, eval) index split; the eval part is `fraction` of n, at least 1."""
    if n < 2:
        raise UsageError(f"need at least 2 usable records for a train/eval split, got {n}")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    n_eval = min(n - 1, max(1, round(fraction * n)))
    return sorted(order[n_eval:]), sorted(order[:n_eval])


# --------------------------------------------------------------------------- tokenisation


def score_position(ids: Sequence[int], sep_id: int) -> int:
    """Index of the last separator, or of the last token when there is none."""
    for i in range(len(ids) - 1, -1, -1):
        if ids[i] == sep_id:
            return i
    return len(ids) - 1


@dataclass
class TextEncoder:
    """Token ids of scorer texts, cut the same way in training and at inference."""

    tokenizer: Any
    sep_id: int
    max_length: int = 2048
    max_prompt_length: int = 0  # <= 0: no separate cut of the prompt part

    def encode(self, texts: Sequence[str], prompt_chars: Sequence[int] | None = None) -> list[list[int]]:
        """Ids of each text; `prompt_chars[i]` is the length of text i's prompt (for the prompt cut)."""
        cut_prompt = prompt_chars is not None and self.max_prompt_length > 0
        enc = self.tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=cut_prompt)
        out = []
        for i, ids in enumerate(enc["input_ids"]):
            if cut_prompt:
                n_prompt = sum(1 for start, _ in enc["offset_mapping"][i] if start < prompt_chars[i])
                if n_prompt > self.max_prompt_length:
                    ids = ids[n_prompt - self.max_prompt_length:]
            out.append(list(ids[-self.max_length:]))
        return out


# --------------------------------------------------------------------------- examples
#
# An example is a dict of plain lists (ids, positions, targets) plus its
# texts, so the eval set can be re-scored by the scorer loader.


def build_pair_examples(records: Sequence[dict], encoder: TextEncoder, sep: str) -> tuple[list[dict], int]:
    """ppm examples and the number of records skipped (chosen == rejected)."""
    pairs, prompt_chars = [], []
    for rec in records:
        if rec["chosen_actions"] == rec["rejected_actions"]:
            continue  # nothing to prefer
        pairs.append(ppm_texts(rec, sep))
        prompt_chars.append(len(rec["prompt"]))
    pos_ids = encoder.encode([p for p, _ in pairs], prompt_chars)
    neg_ids = encoder.encode([n for _, n in pairs], prompt_chars)
    examples = [
        {"pos_text": pos, "neg_text": neg, "pos_ids": pi, "neg_ids": ni,
         "pos_index": score_position(pi, encoder.sep_id), "neg_index": score_position(ni, encoder.sep_id),
         "pos_has_sep": encoder.sep_id in pi, "neg_has_sep": encoder.sep_id in ni}
        for (pos, neg), pi, ni in zip(pairs, pos_ids, neg_ids)
    ]
    return examples, len(records) - len(examples)


def build_step_examples(records: Sequence[dict], encoder: TextEncoder, sep: str,
                        last_only: bool = False) -> tuple[list[dict], int]:
    """prm (every step labelled) or orm (`last_only`) examples; nothing is skipped."""
    texts = [join_steps(rec["prompt"], rec["completions"], sep) for rec in records]
    all_ids = encoder.encode(texts, [len(rec["prompt"]) for rec in records])
    examples = []
    for rec, text, ids in zip(records, texts, all_ids):
        labels = [float(y) for y in rec["labels"]]
        positions = [i for i, t in enumerate(ids) if t == encoder.sep_id] or [len(ids) - 1]
        # Truncation drops early steps: pair separators and labels from the end.
        k = 1 if last_only else min(len(positions), len(labels))
        examples.append({"text": text, "input_ids": ids, "positions": positions[-k:], "targets": labels[-k:]})
    return examples, 0


EXAMPLE_BUILDERS: dict[str, Callable[..., tuple[list[dict], int]]] = {
    "ppm": build_pair_examples,
    "prm": build_step_examples,
    "orm": lambda records, encoder, sep: build_step_examples(records, encoder, sep, last_only=True),
}


# --------------------------------------------------------------------------- collators


def pad_right(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask), padded on the right so every row keeps positions 0..len-1."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


@dataclass
class PairCollator:
    """Chosen rows first, then rejected rows, in one padded batch."""

    pad_id: int

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = pad_right([it["pos_ids"] for it in items] + [it["neg_ids"] for it in items],
                                              self.pad_id)
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "score_index": torch.tensor([it["pos_index"] for it in items] + [it["neg_index"] for it in items]),
            "has_separator": torch.tensor([it["pos_has_sep"] for it in items] + [it["neg_has_sep"] for it in items]),
        }


@dataclass
class StepCollator:
    """Texts with their labelled separator positions (padded, with a mask)."""

    pad_id: int

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = pad_right([it["input_ids"] for it in items], self.pad_id)
        width = max(len(it["positions"]) for it in items)
        positions = torch.zeros((len(items), width), dtype=torch.long)
        targets = torch.zeros((len(items), width), dtype=torch.float32)
        target_mask = torch.zeros((len(items), width), dtype=torch.bool)
        for i, it in enumerate(items):
            n = len(it["positions"])
            positions[i, :n] = torch.tensor(it["positions"])
            targets[i, :n] = torch.tensor(it["targets"])
            target_mask[i, :n] = True
        return {"input_ids": input_ids, "attention_mask": attention_mask,
                "target_positions": positions, "target_values": targets, "target_mask": target_mask}


COLLATORS = {"ppm": PairCollator, "prm": StepCollator, "orm": StepCollator}
