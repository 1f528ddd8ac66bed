"""Stage 3: train a MASPRM (ppm), a per-step PRM (prm) or an ORM (orm) scorer.

    python src/train/trainer.py --mode ppm --data_dir results/ppm_pairs_<run>.jsonl \\
        --model-id Qwen/Qwen2.5-1.5B-Instruct --output-dir checkpoints/MASPRM-GSM8K-1.5B

Writes a LoRA adapter (or, with --no-lora, the full model), the tokenizer with
the step separator, masprm_scorer.json and a model card (README.md) into
--output-dir; --push_to_hub uploads them (docs/sharing.md). Every flag, its
default and its help live in ``masprm.train.config.TrainConfig``.
"""

import sys

from masprm.cli import ArgumentParser, run_cli
from masprm.config import add_config_args, config_from_args
from masprm.train import TrainConfig, train_scorer
from masprm.train.hub import HubUploadError
from masprm.log import RESULT, get_logger

log = get_logger(__name__)


def build_parser() -> ArgumentParser:
    p = ArgumentParser(description="Train a LoRA scorer on stage-2 preference pairs (ppm) or step labels (prm/orm).")
    add_config_args(p, TrainConfig)
    return p


def main(argv: list[str] | None = None) -> int:
    cfg = config_from_args(TrainConfig, build_parser().parse_args(argv))
    try:
        result = train_scorer(cfg)
    except HubUploadError as err:   # trained and saved; only the upload failed (offline, no login, ...)
        print(f"{sys.argv[0].rsplit('/', 1)[-1]}: error: {err}", file=sys.stderr)
        return 1
    shown = {k: round(v, 4) for k, v in result.metrics.items() if isinstance(v, float)}
    if result.trainer.is_world_process_zero():  # once, also under torchrun
        log.info(f"saved {cfg.mode} scorer to {result.output_dir} | eval {shown}", extra=RESULT)
    return 0


def cli() -> None:
    """The console script (pyproject.toml) and the checkout's script: one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
