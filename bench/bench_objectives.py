"""The related work's objectives: what reusing work already done saves, old path against new in one run.

On the tiny Qwen2 model built locally (CPU by default), each row times the
same work done the old way and the new way, one after the other, and prints
the ratio old / new (above 1: the new path is faster):

    implicit train   `--mode implicit` trained for --epochs epochs on --records step records, pi_ref's
                     log-probs re-run on every batch (old) or read once per record (new); the whole
                     run (loading, tokenising, saving included), its training loop, and its loss alone (forwards)
    verdict read     gORM/gPRM's P(yes), P(no) of every record's transcript in batches of 16, with answers
                     of one token each (the first tokens of " yes" and " no": the tiny tokenizer splits
                     them): a row per answer (old) or one row per transcript (new)
    biprm encode     BiPRM's two streams of every transcript: each stream tokenised whole (old) or the
                     parts tokenised once and laid out twice (new)
    implicit encode  the implicit scorer's tokens and each token's step: the steps tokenised again to
                     count them (old) or once (new)
    folder read      stage 4's record of a trained scorer folder (x200) with its format chosen: read for the
                     checks and again for the models (old) or once (new)

    python bench/bench_objectives.py [--threads N] [--records R] [--epochs E] [--repeats K]
"""

import itertools
import json
import pathlib
import random
import tempfile

import torch

import masprm.train.implicit as implicit
from masprm.models.bidirectional import two_streams
from masprm.models.generative_verifier import (answer_ids, answer_log_probs, answer_rows, question_ids,
                                               question_tokens, verdict_log_probs, verdict_rows)
from masprm.models.implicit_reward import encode_step_tokens, step_of_tokens
from masprm.models.loading import load_tokenizer
from masprm.models.text_encoder import TextEncoder
from masprm.models.token_scorer import load_causal_lm, separator_token_id
from masprm.roles import ROLES
from masprm.scorer_folder import read_scorer_folder
from masprm.scorer_formats import ScorerFormatFlags, choose_format
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
        out = folder / f"{mode}_{next(runs)}"
        result = train_scorer(TrainConfig(mode=mode, data_file=str(data), output_dir=str(out), model_id=str(model),
                                          epochs=epochs, train_batch_size=8, grad_accum=1, lora_r=8, lora_dropout=0.0,
                                          eval_steps=10_000, progress=False, seed=0))
        history = result.trainer.state.log_history
        loops.append(next(log["train_runtime"] for log in history if "train_runtime" in log))
        return result
    return train


def implicit_train(folder: pathlib.Path, model: pathlib.Path, data: pathlib.Path,
                   args) -> list[tuple[str, float, float]]:
    """(row, old, new) seconds of the whole run, of its training loop, and of the loss alone (the forwards, no
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
    return [("implicit train, whole run", old, new),
            ("implicit train, loop", old_loop, sum(loops[1:-1]) / args.repeats),
            ("implicit train, loss", timed(loss_reads, args.repeats), new_loss)]


def tiny_encoder(model: pathlib.Path) -> TextEncoder:
    tokenizer = load_tokenizer(str(model), False, padding_side="right", setting="model_id")
    return TextEncoder(tokenizer, separator_token_id(tokenizer, "</step>"), 512, 0, style="steps")


def encodings(folder: pathlib.Path, model: pathlib.Path, data: pathlib.Path,
              args) -> list[tuple[str, float, float]]:
    """(row, old, new) seconds to tokenise every transcript (x20) for BiPRM and for the implicit scorer."""
    encoder, records = tiny_encoder(model), step_records(args.records) * 20

    def old_streams():
        for r in records:
            steps = r["completions"]
            encoder.encode_steps(r["prompt"], steps)[0], encoder.encode_steps(r["prompt"], steps[::-1])[0]

    def old_token_steps():
        for r in records:
            ids, _ = encoder.encode_steps(r["prompt"], r["completions"])
            chunks = encoder.tokenizer(r["completions"], add_special_tokens=False)["input_ids"]
            step_of_tokens(ids, encoder.sep_id, sum(len(c) + 1 for c in chunks))
    return [("biprm encode", timed(old_streams, args.repeats),
             timed(lambda: [two_streams(encoder, r["prompt"], r["completions"]) for r in records], args.repeats)),
            ("implicit encode", timed(old_token_steps, args.repeats),
             timed(lambda: [encode_step_tokens(encoder, r["prompt"], r["completions"]) for r in records],
                   args.repeats))]


def folder_read(folder: pathlib.Path, model: pathlib.Path, data: pathlib.Path,
                args) -> list[tuple[str, float, float]]:
    """(row, old, new) seconds to read the implicit scorer trained above as stage 4 does, 200 times."""
    def read(times: int):
        def reads():
            for _ in range(200 * times):
                choose_format(read_scorer_folder(folder / "implicit_0"), ScorerFormatFlags(), ROLES["masprm"])
        return reads
    return [("folder read", timed(read(2), args.repeats), timed(read(1), args.repeats))]


def verdict_read(folder: pathlib.Path, model: pathlib.Path, data: pathlib.Path,
                 args) -> list[tuple[str, float, float]]:
    """(row, old, new) seconds to read both answers' log-probs after every transcript."""
    encoder = tiny_encoder(model)
    tokenizer = encoder.tokenizer
    lm = load_causal_lm(str(model), n_tokens=len(tokenizer), pad_token_id=tokenizer.pad_token_id).eval()
    asked = question_tokens(tokenizer)
    contexts = [question_ids(encoder, r["prompt"], r["completions"], asked) for r in step_records(args.records)]
    answers, pad = [a[:1] for a in answer_ids(tokenizer)], tokenizer.pad_token_id
    batches = [contexts[i:i + 16] for i in range(0, len(contexts), 16)]

    @torch.no_grad()
    def old():
        for batch in batches:
            ids, mask, at = answer_rows(batch, answers, pad)
            answer_log_probs(lm(input_ids=ids, attention_mask=mask).logits, ids, at)

    @torch.no_grad()
    def new():
        for batch in batches:
            rows = verdict_rows(batch, answers, pad)
            verdict_log_probs(lm(input_ids=rows["input_ids"], attention_mask=rows["attention_mask"]).logits, rows)
    return [("verdict read", timed(old, args.repeats), timed(new, args.repeats))]


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
        print(f"{'case':<26} | {'old s':>7} | {'new s':>7} | {'old / new':>9}")
        for case in (implicit_train, verdict_read, encodings, folder_read):
            for label, old, new in case(folder, model, data, args):
                print(f"{label:<26} | {old:>7.3f} | {new:>7.3f} | {old / new:>9.2f}")
    return 0


if __name__ == "__main__":
    run_cli(main)
