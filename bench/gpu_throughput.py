"""The real-size throughput steps of the GPU check, and the model they measure.

    rs-sample  HFPolicy.sample at 16, 64 and 256 rows (tokens/s, rows per call, peak memory)
    rs-score   HFScorer.score_batch (transcripts/s), bf16, and 4-bit when bitsandbytes is there
    rs-train   one ppm optimizer step through train_scorer (QLoRA with bitsandbytes, else LoRA)

The model has Qwen2.5-1.5B-Instruct's shape with random weights (bench/gpu_realsize.py), built by the
setup step with a tokenizer of Qwen's size. Each step appends its rows to WORK/throughput.jsonl and
prints them as a table. On the CPU (GPU_CHECK_DEVICE=cpu) the same code runs at toy size.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import string
import time
from pathlib import Path

import torch

from gpu_realsize import (CPU_WORKLOAD, GPU_WORKLOAD, QWEN25_15B_INSTRUCT_SAMPLING, ROWS_FILE, Workload,
                          decode_floor_tokens_per_s, throughput_table)

DEVICE = os.environ.get("GPU_CHECK_DEVICE", "cuda:0")
ON_CUDA = DEVICE.startswith("cuda")

# Filler words: with the real-size tokenizer each " xy" is one token, so text lengths are easy to aim at.
WORDS = [a + b for a in string.ascii_lowercase for b in string.ascii_lowercase]
FIRST_SYMBOLS = "\u0120" + string.ascii_lowercase  # byte-level space ('Ġ'), then the letters


def have(package: str) -> bool:
    """Importable here (bench/gpu_hide makes packages named in GPU_CHECK_HIDE look absent)."""
    return importlib.util.find_spec(package) is not None


def sync() -> None:
    if ON_CUDA:
        torch.cuda.synchronize()


def reset_peak() -> None:
    if ON_CUDA:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_gib() -> float | None:
    return torch.cuda.max_memory_allocated() / 2 ** 30 if ON_CUDA else None


def workload(cpu: bool) -> Workload:
    return CPU_WORKLOAD if cpu else GPU_WORKLOAD


def dtype_name() -> str:
    """The real-size model's dtype: bf16 on the GPU (the issue's setting), fp32 on a CPU (its fast path)."""
    return "bfloat16" if ON_CUDA else "float32"


# --------------------------------------------------------------------------- text of a given length


def text_of(tokenizer, rng: random.Random, tokens: int) -> str:
    """Filler text of about `tokens` tokens (cut to that many, then decoded)."""
    words = " ".join(rng.choice(WORDS) for _ in range(tokens))
    ids = tokenizer(words, add_special_tokens=False)["input_ids"][:tokens]
    return tokenizer.decode(ids)


def ppm_record(tokenizer, rng: random.Random, tokens: int) -> dict:
    """A stage-2 preference pair whose texts are about `tokens` long: a prompt and three steps, the last
    one differing (a verdict word in front, so the pair is not identical)."""
    prompt, step = int(tokens * 0.4), int(tokens * 0.2)
    shared = [text_of(tokenizer, rng, step) for _ in range(2)]
    last = text_of(tokenizer, rng, step)
    return {"prompt": text_of(tokenizer, rng, prompt),
            "chosen_actions": shared + ["CORRECT " + last], "rejected_actions": shared + ["INCORRECT " + last]}


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


# --------------------------------------------------------------------------- the real-size model


def synthetic_tokenizer(regular: int):
    """A byte-level BPE tokenizer with `regular` ordinary tokens and no training: the 256 byte symbols,
    then merges of two symbols, then of three, until the count is reached; the special tokens and the
    chat template are the tiny model's (ChatML), placed after the ordinary tokens as in Qwen2.

    The pre-tokenisation is the one masprm.models.tiny uses (Qwen2's), which AutoTokenizer rebuilds
    when it loads a qwen2 folder. The byte-level space and the letters come first, so a word ' xy'
    of two letters is a single token once three-symbol merges exist (the real-size vocabulary).
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from masprm.models.tiny import CHAT_TEMPLATE, IM_END, PAD_TOKEN, QWEN2_SPLIT_REGEX, SPECIAL_TOKENS

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet(),
                      key=lambda c: (FIRST_SYMBOLS.find(c) if c in FIRST_SYMBOLS else len(FIRST_SYMBOLS), c))
    vocab = {symbol: i for i, symbol in enumerate(alphabet)}
    merges: list[tuple[str, str]] = []
    prefixes = list(alphabet)
    while len(vocab) < regular:
        grown = []
        for left in prefixes:
            for right in alphabet:
                if len(vocab) >= regular:
                    break
                merges.append((left, right))
                vocab[left + right] = len(vocab)
                grown.append(left + right)
        prefixes = grown
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(SPECIAL_TOKENS)
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=IM_END, pad_token=PAD_TOKEN,
                                   chat_template=CHAT_TEMPLATE, clean_up_tokenization_spaces=False,
                                   model_max_length=32768)


def build_realsize(out: Path, load: Workload) -> None:
    """Random weights of the workload's shape in the run's dtype, with the synthetic tokenizer, in `out`.

    Reused when `out` already holds this build (a second call on a warm machine).
    """
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from masprm.models.tiny import IM_END, PAD_TOKEN

    stamp = {"shape": load.shape, "regular_tokens": load.regular_tokens, "dtype": dtype_name(),
             "sampling": QWEN25_15B_INSTRUCT_SAMPLING}
    if (out / "gpu_check_build.json").is_file() and json.loads((out / "gpu_check_build.json").read_text()) == stamp:
        print(f"  real-size model already built in {out}")
        return
    start = time.perf_counter()
    tokenizer = synthetic_tokenizer(load.regular_tokens)
    # Qwen2's ids: <|im_end|> ends a turn, <|endoftext|> is BOS, padding and a second stop token
    eos, text_end = tokenizer.convert_tokens_to_ids(IM_END), tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    config = Qwen2Config(**load.shape, eos_token_id=eos, pad_token_id=text_end, bos_token_id=text_end)
    torch.manual_seed(0)
    with torch.device(DEVICE):  # initialise on the GPU: seconds instead of a minute on the CPU
        model = Qwen2ForCausalLM._from_config(config, dtype=getattr(torch, dtype_name()))
    model.generation_config = GenerationConfig(eos_token_id=[eos, text_end], pad_token_id=text_end,
                                               bos_token_id=text_end, do_sample=True,
                                               **QWEN25_15B_INSTRUCT_SAMPLING)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "gpu_check_build.json").write_text(json.dumps(stamp), encoding="utf-8")
    n = sum(p.numel() for p in model.parameters())
    print(f"  real-size model: {n:,} parameters (computed from the shape: {load.params:,}), "
          f"{len(tokenizer)} tokens, {dtype_name()}, built in {time.perf_counter() - start:.1f} s")


# --------------------------------------------------------------------------- steps


def record(work: Path, rows: list[dict], title: str) -> None:
    """Print the rows as a table and append them to WORK/throughput.jsonl for the check's summary."""
    with open(work / ROWS_FILE, "a", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps({**row, "device": "cuda" if ON_CUDA else "cpu"}) + "\n")
    print(throughput_table(rows, title))


def rs_sample(work: Path, cpu: bool) -> bool:
    from masprm.models.loading import ModelOptions
    from masprm.models.policy import HFPolicy

    load = workload(cpu)
    policy = HFPolicy(str(work / "realsize"), ModelOptions(device_map=DEVICE, dtype=dtype_name(), compile=False))
    rows_per_call: list[int] = []
    decode = policy._decode

    def counting_decode(seqs, *args, **kwargs):  # one call of the model loop; sample() splits big requests
        rows_per_call.append(len(seqs))
        return decode(seqs, *args, **kwargs)

    policy._decode = counting_decode
    rng = random.Random(1)
    n = load.samples_per_prompt

    def prompts(count: int) -> list:
        return [[{"role": "system", "content": "You are the Solver. Follow the plan step by step."},
                 {"role": "user", "content": text_of(policy.tokenizer, rng, rng.randint(*load.prompt_tokens))}]
                for _ in range(count)]

    warm = time.perf_counter()
    policy.sample(prompts(4), n, temperature=0.7, top_p=0.95, max_new_tokens=8, keys=[(9, i) for i in range(4)])
    print(f"  warm-up call: {time.perf_counter() - warm:.1f} s")
    results = []
    for rows in load.sample_rows:
        batch = prompts(rows // n)
        context = sum(len(policy.prompt_ids(p)) for p in batch) / len(batch) + load.new_tokens / 2
        rows_per_call.clear()
        reset_peak()
        sync()
        start = time.perf_counter()
        gens = policy.sample(batch, n, temperature=0.7, top_p=0.95, max_new_tokens=load.new_tokens,
                             keys=[(rows, i) for i in range(len(batch))])
        sync()
        seconds = time.perf_counter() - start
        tokens = sum(g.new_tokens for row in gens for g in row)
        results.append({
            "step": "rs-sample", "what": "sample (HFPolicy.sample)",
            "setting": f"{rows} rows = {len(batch)} prompts x {n}, {load.new_tokens} new, {dtype_name()}, eager",
            "rows_per_call": sum(rows_per_call) / len(rows_per_call), "tokens_per_s": tokens / seconds,
            "items_per_s": rows / seconds, "item": "rows", "seconds": seconds, "peak_gib": peak_gib(),
            "floor_tokens_per_s": decode_floor_tokens_per_s(load, rows, context) if ON_CUDA else None})
    record(work, results, f"sampling on {DEVICE} ({load.params:,} parameters)")
    return all(r["tokens_per_s"] > 0 for r in results)


def rs_score(work: Path, cpu: bool) -> bool:
    from masprm.models.loading import ModelOptions
    from masprm.models.scorer import load_scorer
    from masprm.state_text import join_steps

    load = workload(cpu)
    precisions = [("bf16" if ON_CUDA else "fp32", ModelOptions(device_map=DEVICE, dtype=dtype_name()))]
    if have("bitsandbytes"):
        precisions.append(("4-bit NF4", ModelOptions(device_map=DEVICE, load_in_4bit=True, quant_type="nf4")))
    else:
        print("  SKIP 4-bit scorer: bitsandbytes is not installed")
    results = []
    for label, options in precisions:
        scorer = load_scorer(work / "realsize", options=options)
        rng = random.Random(2)
        tok = scorer.encoder.tokenizer
        texts = []
        for _ in range(load.score_texts):  # a question and three agent messages, each closed by the separator
            total = rng.randint(*load.text_tokens)
            texts.append(join_steps(text_of(tok, rng, int(total * 0.4)),
                                    [text_of(tok, rng, int(total * 0.2)) for _ in range(3)], scorer.separator))
        scorer.score_batch(texts[:load.score_batches[0]])  # warm-up
        for batch in load.score_batches:
            scorer.batch_size = batch
            reset_peak()
            sync()
            start = time.perf_counter()
            values = scorer.score_batch(texts)
            sync()
            seconds = time.perf_counter() - start
            ok = len(values) == len(texts) and all(-1 <= v <= 1 for v in values)
            results.append({
                "step": "rs-score", "what": "score (HFScorer.score_batch)",
                "setting": f"{len(texts)} transcripts, batch {batch}, {label}", "rows_per_call": batch,
                "tokens_per_s": sum(scorer.last_tokens) / seconds, "items_per_s": len(texts) / seconds,
                "item": "transcripts", "seconds": seconds, "peak_gib": peak_gib(), "ok": ok})
        del scorer
    record(work, results, f"scoring on {DEVICE}")
    return all(r["ok"] for r in results)


def rs_train(work: Path, cpu: bool) -> bool:
    from transformers import TrainerCallback

    from masprm.train import TrainConfig, train_scorer

    load = workload(cpu)
    quantized = have("bitsandbytes")

    class StepClock(TrainerCallback):
        """Times the optimizer step and each micro-batch in it (the device synchronised at each mark)."""

        def __init__(self):
            self.marks: list[tuple[str, float]] = []

        def mark(self, what: str) -> None:
            sync()
            self.marks.append((what, time.perf_counter()))

        def on_step_begin(self, *args, **kwargs):
            self.mark("begin")

        def on_substep_end(self, *args, **kwargs):
            self.mark("micro")

        def on_step_end(self, *args, **kwargs):
            self.mark("end")

    out = work / ("rs-qlora" if quantized else "rs-lora")
    shutil.rmtree(out, ignore_errors=True)  # a rerun in the same folder starts afresh
    cfg = TrainConfig(mode="ppm", data_file=str(work / "realsize-pairs.jsonl"), output_dir=str(out),
                      model_id=str(work / "realsize"), max_steps=1, train_batch_size=load.train_batch,
                      grad_accum=load.grad_accum, lora_r=load.lora_r, max_length=load.max_length,
                      load_in_4bit=quantized, hub_logs=False, progress=False)
    clock = StepClock()
    reset_peak()
    result = train_scorer(cfg, callbacks=[clock])
    # the marks of the step that ran to its end (an out-of-memory retry with a halved batch starts anew)
    begin = max(i for i, (what, _) in enumerate(clock.marks) if what == "begin")
    marks = dict(clock.marks[begin:])
    micro = [t for what, t in clock.marks[begin:] if what == "micro"]
    batch = getattr(result.trainer, "_train_batch_size", None) or load.train_batch
    pairs = batch * load.grad_accum
    mean_tokens = sum(len(e["pos_ids"]) + len(e["neg_ids"]) for e in result.train_examples) / \
        (2 * len(result.train_examples))
    if quantized:
        how = f"QLoRA r={load.lora_r} (NF4 base, {'bf16 compute, paged 8-bit AdamW' if ON_CUDA else 'fp32, CPU'})"
    else:
        how = (f"LoRA r={load.lora_r} (fp32 base, bf16 autocast, AdamW; no bitsandbytes)" if ON_CUDA
               else f"LoRA r={load.lora_r} (fp32, CPU)")
    step = marks["end"] - marks["begin"]
    rows = [{"step": "rs-train", "what": "ppm step (train_scorer)", "setting": f"{how}, first step",
             "rows_per_call": 2 * batch, "tokens_per_s": 2 * pairs * mean_tokens / step, "items_per_s": pairs / step,
             "item": "pairs", "seconds": step, "peak_gib": peak_gib()}]
    if len(micro) >= 1:  # steady state: micro-batches 2..accum and the optimizer update, scaled to a whole step
        steady = (marks["end"] - micro[0]) * load.grad_accum / (load.grad_accum - 1)
        rows.append({**rows[0], "setting": f"{how}, steady (micro-batches 2-{load.grad_accum})",
                     "tokens_per_s": 2 * pairs * mean_tokens / steady, "items_per_s": pairs / steady,
                     "seconds": steady})
    print(f"  {pairs} pairs per optimizer step ({batch} x {load.grad_accum}), texts of {mean_tokens:.0f} tokens "
          f"on average; eval loss {result.metrics.get('eval_loss', float('nan')):.4f}")
    record(work, rows, f"ppm training on {DEVICE}")
    return (out / "masprm_scorer.json").is_file()
