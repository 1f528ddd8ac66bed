"""Every setting of a scorer training run: the one home of stage 3's flags, defaults and help.

``src/train/trainer.py`` builds its command line from ``TrainConfig``
(``masprm.config.add_config_args``); the library takes the same dataclass.
``validate`` raises ``ConfigError`` naming the setting (the CLI shows its flag).
Pure Python: no torch import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from masprm.checks import check_seed
from masprm.config import arg
from masprm.errors import ConfigError
from masprm.state_text import DEFAULT_SEPARATOR
from masprm.train.objectives import LOSSES, MODES

DEFAULT_BASE_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"


@dataclass
class TrainConfig:
    """A training run; the defaults are the original trainer's."""

    mode: str = arg(choices=MODES, help="ppm: Bradley-Terry pairs; prm: a value per step; orm: the final outcome only")
    data_file: str = arg(flags=("--data_dir", "--data-dir", "--data_file"),
                         help="JSON/JSONL file from src/train/preprocess_data.py")
    output_dir: str = arg(flags=("--output-dir", "--output_dir"))
    model_id: str = arg(DEFAULT_BASE_MODEL, flags=("--model-id", "--model_id"),
                        help="base model (hub id or local folder)")
    epochs: float = arg(10.0, help="training epochs (default: 10)")
    max_steps: int = arg(-1, help="optimizer steps; > 0 overrides --epochs")
    lr: float = arg(1e-5)
    train_batch_size: int = arg(8)
    eval_batch_size: int | None = arg(None, help="default: --train-batch-size")
    grad_accum: int = arg(16)
    eval_steps: int = arg(200, help="optimizer steps between evaluations (default: 200); the best evaluated "
                                    "checkpoint is kept, and a run shorter than this keeps its final weights")
    save_steps: int | None = arg(None, help="optimizer steps between checkpoints, a multiple of --eval-steps "
                                            "(default: --eval-steps)")
    save_total_limit: int = arg(2)
    logging_steps: int = arg(10)
    seed: int = arg(42)
    max_length: int = arg(2048, help="tokens per text; the start is cut first")
    max_prompt_length: int = arg(768, help="tokens kept of the prompt part (its end); 0 = no separate limit")
    separator: str = arg(DEFAULT_SEPARATOR, flags=("--step-separator",))
    ensure_step_token: bool = arg(True, help="add a <...> separator the tokenizer lacks as a special token "
                                             "(default: on)")
    loss: str = arg("bce", choices=LOSSES, help="prm/orm loss (ppm always uses Bradley-Terry)")
    huber_beta: float = arg(0.1)
    lora_r: int = arg(256)
    lora_alpha: float = arg(32)
    lora_dropout: float = arg(0.05, help="LoRA dropout for --mode ppm (default: 0.05); prm/orm train with every "
                                         "dropout off")
    lora: bool = arg(True, flags=("--no-lora",), action="store_false", help="full fine-tune instead of LoRA")
    load_in_4bit: bool | None = arg(None, help="QLoRA 4-bit NF4 base (default: on with CUDA, off on CPU)")
    attn_impl: str = arg("sdpa", flags=("--attn-impl", "--attn_impl"))
    trust_remote_code: bool = arg(False, flags=("--trust-remote-code", "--trust_remote_code"),
                                  help="allow the base model's own code from the hub")
    overwrite: bool = arg(False, help="train over a finished scorer in --output-dir (refused without it)")
    resume: bool = arg(False, help="continue from the newest checkpoint in --output-dir")
    hub_logs: bool = arg(True, help="write TensorBoard logs to --output-dir/runs (default: on, as in the original)")
    progress: bool = arg(True, flags=("--quiet",), action="store_false", help="no progress bar or log lines")

    def validate(self) -> None:
        def need(ok: bool, setting: str, rule: str) -> None:
            if not ok:
                raise ConfigError(f"{setting} {rule}, got {getattr(self, setting)!r}", setting=setting)

        need(self.mode in MODES, "mode", f"must be one of {', '.join(MODES)}")
        check_seed(self.seed)
        need(self.loss in LOSSES, "loss", f"must be one of {', '.join(LOSSES)}")
        for setting in ("epochs", "lr", "huber_beta", "lora_alpha", "lora_dropout"):
            need(math.isfinite(getattr(self, setting)), setting, "must be a finite number")
        need(self.epochs > 0, "epochs", "must be > 0")
        need(self.lr > 0, "lr", "must be > 0")
        for setting in ("train_batch_size", "grad_accum", "save_total_limit", "logging_steps", "lora_r",
                        "eval_batch_size", "eval_steps", "save_steps"):
            value = getattr(self, setting)
            need(value is None or value >= 1, setting, "must be >= 1")
        need(self.max_length >= 2, "max_length", "must be >= 2")
        need(self.max_prompt_length >= 0, "max_prompt_length", "must be >= 0")
        need(self.lora_alpha > 0, "lora_alpha", "must be > 0")
        need(0 <= self.lora_dropout < 1, "lora_dropout", "must be in [0, 1)")
        need(self.huber_beta > 0, "huber_beta", "must be > 0")
        if self.load_in_4bit and not self.lora:
            raise ConfigError("load_in_4bit needs LoRA: a 4-bit base cannot be fully fine-tuned (train with LoRA)",
                              setting="load_in_4bit")
        if self.eval_steps and self.save_steps and self.save_steps % self.eval_steps:
            raise ConfigError(f"save_steps ({self.save_steps}) must be a multiple of eval_steps ({self.eval_steps}) "
                              "so the best checkpoint can be kept", setting="save_steps")
