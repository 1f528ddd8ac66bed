"""Training data for the scorer (SPEC §7): read and check records, tokenise, collate.

A record of stage 2 becomes token ids plus the positions whose logit is
trained:

- ppm: one pair of texts, ``prompt + steps + SEP`` for the chosen and the
  rejected branch; the score is the logit at the last separator.
- prm: one text with a label in [-1, 1] on every step's separator.
- orm: like prm, but trained on the last step's label only; evaluated on
  every separator, each labelled with the final outcome.

Tokenisation is shared with the scorer loader (``TextEncoder``), so a text
is tokenised and cut exactly the same way in training and at inference (ppm:
the whole text; prm/orm: prompt and steps separately, as TRL's PRM trainer),
always keeping the end, so the last separator survives.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from masprm.checks import read_utf8
from masprm.cli import UsageError
from masprm.io import iter_jsonl
from masprm.pairs import ppm_texts
from masprm.state_text import StepText, join_steps

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
    """(train, eval) indices exactly as `datasets.Dataset.train_test_split(test_size=fraction, seed=seed)`.

    The eval part is ceil(fraction * n) rows; both parts keep the order of the
    seeded numpy permutation, so the original's held-out membership (and
    training order before sampling) is reproduced.
    """
    if n < 2:
        raise UsageError(f"need at least 2 usable records for a train/eval split, got {n}")
    n_eval = math.ceil(fraction * n)
    order = np.random.default_rng(seed).permutation(n).tolist()
    return order[n_eval:], order[:n_eval]


# --------------------------------------------------------------------------- tokenisation


def score_position(ids: Sequence[int], sep_id: int) -> int:
    """Index of the last separator, or of the last token when there is none."""
    for i in range(len(ids) - 1, -1, -1):
        if ids[i] == sep_id:
            return i
    return len(ids) - 1


@dataclass
class TextEncoder:
    """Token ids of scorer texts, built the same way in training and at inference.

    ``whole`` (ppm): the text is tokenised in one piece with the tokenizer's
    special tokens (a BOS where it has one) and cut from the left to
    ``max_length``, as the original ppm trainer did.

    ``steps`` (prm/orm): as TRL's PRM trainer, the prompt and every step are
    tokenised separately and joined, each step followed by the separator's
    ids; a BOS is prepended to the prompt when the tokenizer has one; the
    prompt is cut to its last ``max_prompt_length`` tokens, then the whole
    sequence to its last ``max_length`` tokens (so the last separator survives).
    """

    tokenizer: Any
    sep_id: int
    max_length: int = 2048
    max_prompt_length: int = 0  # <= 0: no separate cut of the prompt part (steps style only)
    style: str = "whole"        # "whole" (ppm) or "steps" (prm/orm)

    def encode_whole(self, texts: Sequence[str]) -> list[list[int]]:
        tok = self.tokenizer
        side = tok.truncation_side
        tok.truncation_side = "left"  # keep the end: the last separator carries the score
        try:
            enc = tok(list(texts), add_special_tokens=True, truncation=True, max_length=self.max_length)
        finally:
            tok.truncation_side = side
        return [list(ids) for ids in enc["input_ids"]]

    def encode_steps(self, prompt: str, steps: Sequence[str]) -> tuple[list[int], list[int]]:
        """(ids, label positions): the positions are the last token of every surviving step chunk."""
        tok = self.tokenizer
        prompt_ids = list(tok(prompt, add_special_tokens=False)["input_ids"]) if prompt else []
        if tok.bos_token_id is not None:
            prompt_ids = [tok.bos_token_id] + prompt_ids
        if self.max_prompt_length > 0:
            prompt_ids = prompt_ids[-self.max_prompt_length:]
        step_ids = tok(list(steps), add_special_tokens=False)["input_ids"] if steps else []
        ids, ends = list(prompt_ids), []
        for chunk in step_ids:
            ids.extend(chunk)
            ids.append(self.sep_id)
            ends.append(len(ids) - 1)
        cut = max(0, len(ids) - self.max_length)
        return ids[cut:], [e - cut for e in ends if e >= cut]

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Inference: a StepText is tokenised in parts in the steps style; anything else whole."""
        if self.style != "steps":
            return self.encode_whole(texts)
        return [self.encode_steps(t.prompt, t.steps)[0] if isinstance(t, StepText) else self.encode_whole([t])[0]
                for t in texts]


# --------------------------------------------------------------------------- examples
#
# An example is a dict of plain lists (ids, positions, targets) plus its
# texts, so the eval set can be re-scored by the scorer loader.


def build_pair_examples(records: Sequence[dict], encoder: TextEncoder, sep: str,
                        source: str = "") -> tuple[list[dict], int]:
    """ppm examples and the number of records skipped (chosen == rejected)."""
    pairs = [ppm_texts(rec, sep) for rec in records if rec["chosen_actions"] != rec["rejected_actions"]]
    pos_ids = encoder.encode_whole([p for p, _ in pairs])
    neg_ids = encoder.encode_whole([n for _, n in pairs])
    examples = [
        {"pos_text": pos, "neg_text": neg, "pos_ids": pi, "neg_ids": ni,
         "pos_index": score_position(pi, encoder.sep_id), "neg_index": score_position(ni, encoder.sep_id),
         "pos_has_sep": encoder.sep_id in pi, "neg_has_sep": encoder.sep_id in ni}
        for (pos, neg), pi, ni in zip(pairs, pos_ids, neg_ids)
    ]
    return examples, len(records) - len(examples)


def check_labels_on_separators(ids: Sequence[int], positions: Sequence[int], sep_id: int, where: str,
                               sep: str) -> None:
    """Every label sits on a separator and every separator carries a label (the original's check)."""
    n_seps = sum(1 for t in ids if t == sep_id)
    if n_seps != len(positions) or any(ids[p] != sep_id for p in positions):
        raise UsageError(f"{where}: the step separator {sep!r} also occurs inside the prompt or a step "
                         f"({n_seps} separator tokens for {len(positions)} labels), so labels would not sit "
                         "on the step ends; use a separator that never occurs in the text, e.g. </step>")


def build_step_examples(records: Sequence[dict], encoder: TextEncoder, sep: str, last_only: bool = False,
                        source: str = "") -> tuple[list[dict], int]:
    """prm examples (every step labelled) or orm (`last_only`: the last step, with the final label).

    Each example also carries ``eval_positions``/``eval_targets``: for orm
    every surviving separator labelled with the final outcome, as the
    original's ORM evaluation did; for prm the same as the training labels.
    """
    examples = []
    for n, rec in enumerate(records):
        ids, positions = encoder.encode_steps(rec["prompt"], rec["completions"])
        labels = [float(y) for y in rec["labels"]]
        check_labels_on_separators(ids, positions, encoder.sep_id, f"{source}: record {n + 1}".lstrip(": "), sep)
        # Truncation drops early steps: the surviving separators carry the last labels.
        targets = labels[len(labels) - len(positions):]
        if last_only:
            train_pos, train_y = positions[-1:], labels[-1:]
            eval_pos, eval_y = positions, labels[-1:] * len(positions)
        else:
            train_pos, train_y = eval_pos, eval_y = positions, targets
        examples.append({"text": join_steps(rec["prompt"], rec["completions"], sep), "input_ids": ids,
                         "positions": train_pos, "targets": train_y,
                         "eval_positions": eval_pos, "eval_targets": eval_y})
    return examples, 0


def eval_view(example: dict) -> dict:
    """The example as evaluation sees it (orm: every separator with the final outcome)."""
    if "eval_positions" not in example:
        return example
    return {**example, "positions": example["eval_positions"], "targets": example["eval_targets"]}


EXAMPLE_BUILDERS: dict[str, Callable[..., tuple[list[dict], int]]] = {
    "ppm": build_pair_examples,
    "prm": build_step_examples,
    "orm": lambda records, encoder, sep, **kw: build_step_examples(records, encoder, sep, last_only=True, **kw),
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
