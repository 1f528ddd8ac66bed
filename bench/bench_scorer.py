"""Throughput of HFScorer.score_batch on the tiny Qwen2 model (CPU by default).

Trains a one-step ppm adapter on the tiny model (the real save/load path),
loads it with `load_scorer`, and scores state texts of mixed length (a
question plus 1-5 steps) with batch sizes 1, 8 and 32. Prints texts/s and
tokens/s, and the same batches without the length sort, to show what sorting
by length saves in padding; then the same adapter kept apart from its base
(`load_scorer(merge=False)`) against merged into it (the default), as a ratio.

    python bench/bench_scorer.py [--threads N] [--texts T] [--repeats R]
"""

import pathlib
import json
import random
import tempfile
import torch

from masprm.cli import ArgumentParser, run_cli
from masprm.models.scorer import load_scorer
from masprm.models.tiny import build_tiny_model
from masprm.state_text import DEFAULT_SEPARATOR, join_steps
from masprm.train import TrainConfig, train_scorer
from _timing import timed  # (bench/ is on the path when run as a script)

STEP_TEMPLATES = [
    "Numbers: {a} and {b}.",
    "Plan: add {a} and {b}, then check the result against the question.",
    "Compute: {a} + {b} = {c}. So the answer is {c}.",
    "Check: the solver added {a} and {b} and got {c}; the reasoning is correct. VERDICT: CORRECT",
    "Answer: {c}",
]


def state_texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        question = f"Tom has {a} apples and buys {b} more. How many apples does he have now?"
        steps = [t.format(a=a, b=b, c=a + b) for t in STEP_TEMPLATES[: rng.randint(1, len(STEP_TEMPLATES))]]
        texts.append(join_steps(question, steps, DEFAULT_SEPARATOR))
    return texts


def make_scorer(folder: pathlib.Path):
    model = build_tiny_model(folder / "base", seed=0)
    rng = random.Random(0)
    pairs = folder / "pairs.jsonl"
    with open(pairs, "w", encoding="utf-8") as fh:
        for _ in range(8):
            a = rng.randint(1, 9)
            fh.write(json.dumps({"prompt": f"Q: {a}? ", "chosen_actions": [f"{a} ok"],
                                 "rejected_actions": [f"{a} no"]}) + "\n")
    train_scorer(TrainConfig(mode="ppm", data_file=str(pairs), output_dir=str(folder / "scorer"),
                             model_id=str(model), max_steps=1, grad_accum=1, lora_r=8, progress=False))
    return folder / "scorer"


def main() -> int:
    parser = ArgumentParser(description="Benchmark HFScorer.score_batch throughput on the tiny model.")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: shared machine)")
    parser.add_argument("--texts", type=int, default=64, help="texts per score_batch call")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        folder = make_scorer(pathlib.Path(tmp))
        scorer = load_scorer(folder)
        texts = state_texts(args.texts)
        n_tokens = sum(len(ids) for ids in scorer.encoder.encode(texts))
        print(f"{len(texts)} texts, {n_tokens / len(texts):.0f} tokens each on average, "
              f"{torch.get_num_threads()} thread(s), device {scorer.device}")
        print(f"{'batch':>5} | {'texts/s':>8} | {'tokens/s':>9} | {'unsorted texts/s':>16}")
        for batch_size in (1, 8, 32):
            scorer.batch_size = batch_size
            sorted_s = timed(lambda: scorer.score_batch(texts), args.repeats)
            # One call per chunk in input order: the same batches without the length sort.
            unsorted_s = timed(lambda: [scorer.score_batch(texts[i:i + batch_size])
                                        for i in range(0, len(texts), batch_size)], args.repeats)
            print(f"{batch_size:>5} | {len(texts) / sorted_s:>8.1f} | {n_tokens / sorted_s:>9.0f} | "
                  f"{len(texts) / unsorted_s:>16.1f}")
        apart = load_scorer(folder, merge=False)
        apart.batch_size = scorer.batch_size = 32
        merged_s, apart_s = (timed(lambda s=s: s.score_batch(texts), args.repeats) for s in (scorer, apart))
        print(f"batch 32: the adapter merged into its base {apart_s / merged_s:.2f}x the texts/s of it kept apart "
              f"({len(texts) / merged_s:.1f} against {len(texts) / apart_s:.1f})")
    return 0


if __name__ == "__main__":
    run_cli(main)
