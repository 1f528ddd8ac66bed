"""Stage 3: train a MASPRM (ppm), a per-step PRM (prm) or an ORM (orm) scorer (SPEC §7).

    python src/train/trainer.py --mode ppm --data_dir results/ppm_pairs_<run>.jsonl \\
        --model-id Qwen/Qwen2.5-1.5B-Instruct --output-dir checkpoints/MASPRM-GSM8K-1.5B

Writes a LoRA adapter (or, with --no-lora, the full model), the tokenizer with
the step separator and masprm_scorer.json into --output-dir.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import argparse  # noqa: E402

from masprm.cli import ArgumentParser, run_cli  # noqa: E402
from masprm.state_text import DEFAULT_SEPARATOR  # noqa: E402
from masprm.train import DEFAULT_BASE_MODEL, LOSSES, MODES, TrainConfig, train_scorer  # noqa: E402


def build_parser() -> ArgumentParser:
    p = ArgumentParser(description="Train a LoRA scorer on stage-2 preference pairs (ppm) or step labels (prm/orm).")
    p.add_argument("--mode", required=True, choices=MODES,
                   help="ppm: Bradley-Terry pairs; prm: a value per step; orm: the final outcome only")
    p.add_argument("--data_dir", "--data-dir", "--data_file", dest="data_file", required=True,
                   help="JSON/JSONL file from src/train/preprocess_data.py")
    p.add_argument("--model-id", "--model_id", dest="model_id", default=DEFAULT_BASE_MODEL,
                   help="base model (hub id or local folder)")
    p.add_argument("--output-dir", "--output_dir", dest="output_dir", required=True)
    p.add_argument("--epochs", type=float, default=10.0, help="training epochs (default: 10)")
    p.add_argument("--max-steps", type=int, default=-1, help="optimizer steps; > 0 overrides --epochs")
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--train-batch-size", type=int, default=8)
    p.add_argument("--eval-batch-size", type=int, default=None, help="default: --train-batch-size")
    p.add_argument("--grad-accum", type=int, default=16)
    p.add_argument("--eval-steps", type=int, default=200,
                   help="optimizer steps between evaluations (default: 200); the best evaluated checkpoint is "
                        "kept, and a run shorter than this keeps its final weights")
    p.add_argument("--save-steps", type=int, default=None,
                   help="optimizer steps between checkpoints, a multiple of --eval-steps (default: --eval-steps)")
    p.add_argument("--save-total-limit", type=int, default=2)
    p.add_argument("--logging-steps", type=int, default=10)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--max-length", type=int, default=2048, help="tokens per text; the start is cut first")
    p.add_argument("--max-prompt-length", type=int, default=768,
                   help="tokens kept of the prompt part (its end); 0 = no separate limit")
    p.add_argument("--step-separator", dest="separator", default=DEFAULT_SEPARATOR)
    p.add_argument("--ensure-step-token", action=argparse.BooleanOptionalAction, default=True,
                   help="add a <...> separator the tokenizer lacks as a special token (default: on)")
    p.add_argument("--loss", choices=LOSSES, default="bce", help="prm/orm loss (ppm always uses Bradley-Terry)")
    p.add_argument("--huber-beta", type=float, default=0.1)
    p.add_argument("--lora-r", type=int, default=256)
    p.add_argument("--lora-alpha", type=float, default=32)
    p.add_argument("--lora-dropout", type=float, default=0.05,
                   help="LoRA dropout for --mode ppm (default: 0.05); prm/orm train with every dropout off")
    p.add_argument("--no-lora", dest="lora", action="store_false", help="full fine-tune instead of LoRA")
    p.add_argument("--load-in-4bit", action=argparse.BooleanOptionalAction, default=None,
                   help="QLoRA 4-bit NF4 base (default: on with CUDA, off on CPU)")
    p.add_argument("--attn-impl", "--attn_impl", dest="attn_impl", default="sdpa")
    p.add_argument("--trust-remote-code", "--trust_remote_code", dest="trust_remote_code", action="store_true",
                   help="allow the base model's own code from the hub")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --output-dir")
    p.add_argument("--hub-logs", dest="hub_logs", action=argparse.BooleanOptionalAction, default=True,
                   help="write TensorBoard logs to --output-dir/runs (default: on, as in the original)")
    p.add_argument("--quiet", dest="progress", action="store_false", help="no progress bar or log lines")
    return p


def main() -> int:
    args = build_parser().parse_args()
    result = train_scorer(TrainConfig(**vars(args)))
    shown = {k: round(v, 4) for k, v in result.metrics.items() if isinstance(v, float)}
    if result.trainer.is_world_process_zero():  # once, also under torchrun
        print(f"saved {args.mode} scorer to {result.output_dir} | eval {shown}")
    return 0


if __name__ == "__main__":
    run_cli(main)
