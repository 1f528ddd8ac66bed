"""The real-size throughput step of the GPU check: model shape, workload sizes and the result table.

Pure Python (no torch import), so the plan, the sizes and the table can be tested anywhere.

The model is Qwen2.5-1.5B-Instruct's architecture with random weights: the values below are that
model's published configuration, written here once; nothing is downloaded. The vocabulary matters
for the measurement: the policy's output projection is 1536 x 151936 per sampled token, and the
scorer trains a full copy of the token embeddings (``masprm.train.lora.modules_to_save``), so the
tokenizer built for it has Qwen's size too (151,643 ordinary tokens, then the special tokens at
Qwen's ids 151643-151645).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

# Qwen2.5-1.5B-Instruct's config.json, architecture fields only.
QWEN25_15B_INSTRUCT = {
    "hidden_size": 1536,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "intermediate_size": 8960,
    "vocab_size": 151936,
    "rope_theta": 1_000_000.0,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
    "use_sliding_window": False,
    "max_window_layers": 21,
    "attention_dropout": 0.0,
}
# Ordinary (non-special) tokens of Qwen2's tokenizer; the embedding matrix has 293 rows more.
QWEN_REGULAR_TOKENS = 151643
# Its generation_config.json's sampling settings. HFPolicy applies the checkpoint's repetition penalty
# (a vocabulary-wide mask per row and step) and top-k, so they are part of what sampling costs.
QWEN25_15B_INSTRUCT_SAMPLING = {"repetition_penalty": 1.1, "top_k": 20, "top_p": 0.8, "temperature": 0.7}

# The same architecture at toy size, for --cpu dry runs: every code path, seconds instead of minutes.
TOY_SHAPE = {**QWEN25_15B_INSTRUCT, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 4096}

# Device-to-device copy bandwidth of an H200 as measured on this workplace's machines (read + write
# bytes per second; /work/.library/device/KINDS.md): the ceiling for the decode-step floor below.
H200_COPY_BYTES_PER_S = 4.3e12


@dataclass(frozen=True)
class Workload:
    """What the real-size step runs: one set for the GPU, a scaled-down one for --cpu."""

    shape: dict
    regular_tokens: int
    sample_rows: tuple[int, ...] = (16, 64, 256)  # rows in one HFPolicy.sample call
    samples_per_prompt: int = 4                  # n of each sample request (rows / n distinct prompts)
    prompt_tokens: tuple[int, int] = (192, 320)   # chat prompt length range (uniform)
    new_tokens: int = 128                        # sampled per row (a random model rarely stops early)
    score_texts: int = 256                       # transcripts per scorer measurement
    score_batches: tuple[int, ...] = (16, 64)    # HFScorer.batch_size (16 is the project's default)
    text_tokens: tuple[int, int] = (384, 896)    # scorer transcript / ppm text length range
    train_pairs: int = 150                       # ppm records (4% held out for evaluation)
    train_batch: int = 8                         # the trainer's defaults: 8 pairs x 16 accumulation
    grad_accum: int = 16
    lora_r: int = 256
    max_length: int = 1024
    notes: list[str] = field(default_factory=list)

    @property
    def params(self) -> int:
        """Parameters of the causal LM (tied embeddings counted once)."""
        s = self.shape
        h, inter, layers = s["hidden_size"], s["intermediate_size"], s["num_hidden_layers"]
        kv = s["num_key_value_heads"] * h // s["num_attention_heads"]
        attention = 2 * h * h + 2 * h * kv + h + 2 * kv   # q, o; k, v; q/k/v biases
        per_layer = attention + 3 * h * inter + 2 * h     # MLP; two RMSNorms
        head = 0 if s["tie_word_embeddings"] else s["vocab_size"] * h
        return s["vocab_size"] * h + layers * per_layer + h + head

    def kv_bytes_per_token(self, bytes_per_value: int = 2) -> int:
        """KV-cache bytes one token of one row holds over all layers."""
        s = self.shape
        head_dim = s["hidden_size"] // s["num_attention_heads"]
        return s["num_hidden_layers"] * 2 * s["num_key_value_heads"] * head_dim * bytes_per_value


GPU_WORKLOAD = Workload(QWEN25_15B_INSTRUCT, QWEN_REGULAR_TOKENS)
CPU_WORKLOAD = Workload(TOY_SHAPE, TOY_SHAPE["vocab_size"] - (QWEN25_15B_INSTRUCT["vocab_size"] - QWEN_REGULAR_TOKENS),
                        prompt_tokens=(32, 64), new_tokens=16, score_texts=64, text_tokens=(48, 112),
                        train_pairs=40, train_batch=2, grad_accum=4, lora_r=8, max_length=256)


def decode_floor_tokens_per_s(workload: Workload, rows: int, context: float,
                              bytes_per_s: float = H200_COPY_BYTES_PER_S) -> float:
    """Upper bound on sampled tokens/s: each decode step reads every bf16 weight and each row's KV cache once.

    ``context`` is the mean cached length per row during decoding. Compute, sampling and the cache's
    own copies are left out, so no implementation on that card can beat this figure.
    """
    step_bytes = 2 * workload.params + rows * context * workload.kv_bytes_per_token()
    return rows / (step_bytes / bytes_per_s)


# --------------------------------------------------------------------------- the table

ROWS_FILE = "throughput.jsonl"   # in WORK: the real-size steps append their rows, the runner prints them


def read_rows(work: Path) -> list[dict]:
    path = work / ROWS_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def keep_earlier_rows(work: Path, device: str) -> int:
    """Mark the throughput rows an earlier run in WORK measured on this device as earlier (rows of the
    other device go), so call 2, run right after call 1 in the same folder, reports one table with
    both calls' rows; returns how many were kept."""
    rows = [dict(r, earlier=True) for r in read_rows(work) if r.get("device") == device]
    (work / ROWS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return len(rows)


def latest_rows(rows: list[dict]) -> list[dict]:
    """The rows without the earlier ones measured again in this run (same step and setting)."""
    now = {(r.get("step"), r.get("setting")) for r in rows if not r.get("earlier")}
    return [r for r in rows if not (r.get("earlier") and (r.get("step"), r.get("setting")) in now)]



COLUMNS = [  # (key, header, format)
    ("what", "measurement", "{}"),
    ("setting", "setting", "{}"),
    ("rows_per_call", "rows/call", "{:.0f}"),
    ("tokens_per_s", "tokens/s", "{:,.0f}"),
    ("items_per_s", "items/s", "{:,.1f}"),
    ("seconds", "s", "{:.2f}"),
    ("peak_gib", "peak GiB", "{:.1f}"),
    ("floor_tokens_per_s", "floor tok/s", "{:,.0f}"),
]


def throughput_table(rows: list[dict], title: str = "") -> str:
    """Aligned text table of throughput rows; a missing value is '-'.

    A row holds ``what`` and ``setting`` and any of: ``rows_per_call``, ``tokens_per_s``,
    ``items_per_s`` with ``item`` (its unit: rows, transcripts, pairs), ``seconds`` (per call or
    step), ``peak_gib`` and ``floor_tokens_per_s`` (the decode bound, GPU sampling rows only).
    """
    def cell(row: dict, key: str, fmt: str) -> str:
        value = row.get(key)
        if value is None:
            return "-"
        text = fmt.format(value)
        return f"{text} {row['item']}" if key == "items_per_s" and row.get("item") else text

    cells = [[header for _, header, _ in COLUMNS]] + [[cell(r, key, fmt) for key, _, fmt in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    # text columns left-aligned, numbers right-aligned
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
             for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(([title] if title else []) + lines)
