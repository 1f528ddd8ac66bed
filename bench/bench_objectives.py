"""The related work's objectives: what reusing work already done saves, old path against new in one run.

On the tiny Qwen2 model built locally (CPU by default), each row times the
same work done the old way and the new way, one after the other, and prints
the ratio old / new (above 1: the new path is faster):

    implicit train   `--mode implicit` trained for --epochs epochs on --records step records, pi_ref's
                     log-probs re-run on every batch (old) or read once per record (new); the whole
                     run (loading, tokenising, saving included), its training loop, and its loss alone (forwards)

    python bench/bench_objectives.py [--threads N] [--records R] [--epochs E] [--repeats K]
"""

import itertools
import json
import pathlib
import random
import tempfile

import torch

import masprm.train.implicit as implicit
from masprm.cli import ArgumentParser, run_cli
from masprm.models.tiny import build_tiny_model
from masprm.train import TrainConfig, train_scorer
from masprm.train.objectives import OBJECTIVES
from _timing import timed  # (bench/ is on the path when run as a script)


def step_records(n: int, seed: int = 0) -> list[dict]:
    """Two-step transcripts whose last step states a verdict; the labels follow it."""
    rng = random.Random(seed)
    records = []
    for q in range(n):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        y = rng.choice([-1.0, 1.0])
        records.append({"prompt": f"Q: {a} plus {b}? ", "completions": [f"{a} + {b} = {a + b}.",
                        f"VERDICT: {'CORRECT' if y > 0 else 'INCORRECT'}"], "labels": [0.3 * y, y],
                        "meta": {"question": f"q{q % (n // 2)}"}})
    return records


class RecomputedReference(implicit.ImplicitTrainer):
    """The old path: pi_ref re-run on every batch of every epoch."""

    def cached_reference(self, model, ids, mask):
        return implicit.reference_log_probs(model, ids, mask)


def trainer(mode: str, folder: pathlib.Path, model: pathlib.Path, data: pathlib.Path, epochs: int,
            loops: list[float]):
    """A function that trains `mode` into a new folder each call; it appends the training loop's seconds
    (transformers' train_runtime: no loading, tokenising or saving) to `loops`."""
    runs = itertools.count()

    def train():
        result = train_scorer(TrainConfig(mode=mode, data_file=str(data), output_dir=str(folder / f"{mode}_{next(runs)}"),
                                 model_id=str(model), epochs=epochs, train_batch_size=8, grad_accum=1, lora_r=8,
                                 lora_dropout=0.0, eval_steps=10_000, progress=False, seed=0))
        loops.append(next(log["train_runtime"] for log in result.trainer.state.log_history if "train_runtime" in log))
        return result
    return train


def implicit_train(folder: pathlib.Path, model: pathlib.Path, data: pathlib.Path, args) -> list[tuple[float, float]]:
    """(old, new) seconds of the whole run, of its training loop, and of the loss alone (the forwards, no
    backward) over the batches of every epoch."""
    objective, loops = OBJECTIVES["implicit"], []
    train = trainer("implicit", folder, model, data, args.epochs, loops)
    kept = objective.trainer_cls
    try:
        objective.trainer_cls = RecomputedReference
        old = timed(train, args.repeats)
        old_loop = sum(loops[1:]) / args.repeats   # the first call warms up
    finally:
        objective.trainer_cls = kept
    loops.clear()
    new = timed(train, args.repeats)
    result = train()
    fitted, model = result.trainer, result.trainer.model
    collate = implicit.ImplicitCollator(fitted.processing_class.pad_token_id)
    batches = [collate(result.train_examples[i:i + 8]) for i in range(0, len(result.train_examples), 8)]

    def loss_reads():
        with torch.no_grad():
            for _ in range(args.epochs):
                for batch in batches:
                    fitted.loss_and_predictions(model, batch)
    new_loss = timed(loss_reads, args.repeats)   # the cache holds every record from here on
    fitted.cached_reference = implicit.reference_log_probs
    return [(old, new), (old_loop, sum(loops[1:-1]) / args.repeats), (timed(loss_reads, args.repeats), new_loss)]


def main() -> int:
    parser = ArgumentParser(description="Old path against new for the related work's objectives, on the tiny model.")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: shared machine)")
    parser.add_argument("--records", type=int, default=64, help="step records trained on")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        model = build_tiny_model(folder / "base", seed=0)
        data = folder / "steps.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in step_records(args.records)), encoding="utf-8")
        print(f"{args.records} records, {args.epochs} epochs, {torch.get_num_threads()} thread(s)")
        print(f"{'case':<22} | {'old s':>7} | {'new s':>7} | {'old / new':>9}")
        for name, case in (("implicit train", implicit_train),):
            for part, (old, new) in zip(("whole run", "loop", "loss"), case(folder, model, data, args)):
                print(f"{name + ', ' + part:<22} | {old:>7.2f} | {new:>7.2f} | {old / new:>9.2f}")
    return 0


if __name__ == "__main__":
    run_cli(main)
