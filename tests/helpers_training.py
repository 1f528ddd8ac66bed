"""Synthetic stage-2 records and tiny scorer training for the scorer tests.

Pair records (``ppm_record``) and step records (``step_record``) whose labels follow a verdict word
the model can learn, records written as JSONL, the ``TrainConfig`` of a quick run on the tiny model
(``config``), a scorer trained for a couple of steps on step records (``train_tiny``) and the first
eval example collated for a forward pass (``first_eval_batch``). Use it for tests of the training
objectives, the trainer and scorer folders.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from masprm.train import TrainConfig


def ppm_record(rng: random.Random) -> dict:
    """The chosen step opens with CORRECT, the rejected one with INCORRECT; the rest is shared noise.

    The deciding word sits several tokens before the separator, so the head
    has to attend back to it.
    """
    a, b = rng.randint(1, 40), rng.randint(1, 40)
    tail = f"{a} + {b} = {a + b + rng.choice([0, 1])}."
    return {"prompt": f"Q: {a} plus {b}? ",
            "chosen_actions": ["Read.", f"CORRECT {tail}"],
            "rejected_actions": ["Read.", f"INCORRECT {tail}"],
            "meta": {"ignored": True}}


def step_record(rng: random.Random) -> dict:
    """Labels follow the verdict word of the last step (earlier step: a weaker echo)."""
    a, b = rng.randint(1, 40), rng.randint(1, 40)
    y = rng.choice([-1.0, 1.0])
    word = "CORRECT" if y > 0 else "INCORRECT"
    return {"prompt": f"Q: {a} plus {b}? ", "completions": [f"{a} + {b}.", f"VERDICT: {word}"],
            "labels": [0.3 * y, y]}


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def train_tiny(tmp: Path, model: Path, mode: str, seed: int, scheme: str = "mc", **overrides):
    """A scorer of `mode` trained (two optimizer steps unless `overrides` say) on 16 scripted step records of `scheme`."""
    from masprm.train import train_scorer

    rng = random.Random(seed)
    records = [{**step_record(rng), "meta": {"label_scheme": scheme}} for _ in range(16)]
    return train_scorer(config(tmp, write_jsonl(tmp / "s.jsonl", records), model, mode,
                               **{"max_steps": 2, "eval_steps": 2, **overrides}))


def first_eval_batch(result, collator) -> tuple[dict, Any, dict]:
    """(the first eval example, the trainer in eval mode, that example collated on the model's device)."""
    example, trainer = result.eval_examples[0], result.trainer
    trainer.model.eval()
    return example, trainer, {k: v.to(trainer.model.device) for k, v in collator(0)([example]).items()}


def config(tmp: Path, data: Path, model: Path, mode: str, **overrides) -> TrainConfig:
    settings = dict(mode=mode, data_file=str(data), output_dir=str(tmp / f"out_{mode}"), model_id=str(model),
                    lr=3e-3, train_batch_size=8, grad_accum=1, lora_r=8, lora_alpha=16, lora_dropout=0.0,
                    max_length=64, max_prompt_length=32, logging_steps=1, progress=False)
    settings.update(overrides)
    return TrainConfig(**settings)
