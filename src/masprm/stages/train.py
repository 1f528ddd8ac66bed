"""Stage 3: train a MASPRM (ppm), a per-step PRM (prm) or an ORM (orm) scorer.

    python src/train/trainer.py --mode ppm --data_dir results/ppm_pairs_<run>.jsonl \\
        --model-id Qwen/Qwen2.5-1.5B-Instruct --output-dir checkpoints/MASPRM-GSM8K-1.5B

Writes a LoRA adapter (or, with --no-lora, the full model), the tokenizer with
the step separator and masprm_scorer.json into --output-dir. Every flag, its
default and its help live in ``masprm.train.config.TrainConfig``.
"""

from masprm.cli import ArgumentParser, run_cli
from masprm.config import add_config_args, config_from_args
from masprm.train import TrainConfig, train_scorer


def build_parser() -> ArgumentParser:
    p = ArgumentParser(description="Train a LoRA scorer on stage-2 preference pairs (ppm) or step labels (prm/orm).")
    add_config_args(p, TrainConfig)
    return p


def main(argv: list[str] | None = None) -> int:
    cfg = config_from_args(TrainConfig, build_parser().parse_args(argv))
    result = train_scorer(cfg)
    shown = {k: round(v, 4) for k, v in result.metrics.items() if isinstance(v, float)}
    if result.trainer.is_world_process_zero():  # once, also under torchrun
        print(f"saved {cfg.mode} scorer to {result.output_dir} | eval {shown}")
    return 0


def cli() -> None:
    """The console script (pyproject.toml) and the checkout's script: one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
