"""Every setting of a scorer training run: the one home of stage 3's flags, defaults and help.

``src/train/trainer.py`` builds its command line from ``TrainConfig``
(``masprm.config.add_config_args``); the library takes the same dataclass.
``validate`` raises ``ConfigError`` naming the setting (the CLI shows its flag).
Pure Python: no torch import.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from masprm.checks import check_seed
from masprm.config import Needs, arg
from masprm.paths import PathText
from masprm.errors import ConfigError
from masprm.scorer_meta import DEFAULT_SOFTMIN_TEMPERATURE, HEAD_READS, TRAJ_AGGS
from masprm.state_text import DEFAULT_SEPARATOR
from masprm.objective_facts import objective_modes
from masprm.train.objectives import EVAL_SPLITS, LOSSES, MODES

CALIBRATED_MODES = objective_modes(calibratable=True)   # the objectives whose eval predictions --calibrate can fit on
PPM_BEST_METRICS = ("loss", "pair_acc")   # --ppm-best-metric: main's rule first (the default)
# A scorer holds out whole training questions to pick its checkpoint (masprm.train.data.split_eval_by_group):
# a command that trains scorers on N questions of its own trees needs two at least, said before any tree is grown.
MIN_TRAIN_QUESTIONS = 2
TRAIN_QUESTIONS_RULE = (f"must be at least {MIN_TRAIN_QUESTIONS} (each scorer holds out whole training "
                        "questions to pick its checkpoint)")


def needs_mode(*modes: str) -> Needs:
    """A flag that only these objectives read (given with another --mode it would do nothing)."""
    return Needs(f"`mode` {' or '.join(modes)} (no other objective reads it)",
                 lambda s: getattr(s, "mode", None) in modes)


# A flag of an option that is off without another (given alone it would do nothing).
NEEDS_HUBER = Needs("`loss` huber (the other losses have no transition point)",
                    lambda s: getattr(s, "loss", None) == "huber")
NEEDS_SOFTMIN = Needs("`mode` traj with `step_agg` softmin (no other aggregation has a temperature)",
                      lambda s: getattr(s, "mode", None) == "traj" and getattr(s, "step_agg", None) == "softmin")
NEEDS_LORA = Needs("LoRA (drop --no-lora)", lambda s: getattr(s, "lora", True))
NEEDS_PUSH = Needs("`push_to_hub` (nothing is uploaded without it)", lambda s: getattr(s, "push_to_hub", False))
HEAD_READ_MODES = ("prm", "orm")          # the stepwise objectives, whose head reads a value per step
# Settings added after scorers first recorded theirs, left out of masprm_scorer.json at these values (the
# original's): a default training writes the record it wrote before they existed, byte for byte.
UNRECORDED_DEFAULTS = {"head_read": HEAD_READS[0]}
# Settings that change what a training shows, never what it learns: left out of masprm_scorer.json, whose bytes are
# part of the folder's content hash, so that a --quiet training and a verbose one give a scorer of one identity
# (and stage 4 the same fingerprints for the same weights).
DISPLAY_SETTINGS = ("progress", "logging_steps", "report_to", "hub_logs")

DEFAULT_BASE_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"
# The original trainer's defaults: the stage-2 file its preprocessing wrote for its GSM8K run folder
# (results/gsm8k_res_train_Qwen_Qwen2.5-1.5B-Instruct, whose ".5B-Instruct" its file naming took for a suffix)
# and its output folder.
DEFAULT_DATA_FILE = "results/prm_samples_gsm8k_res_train_Qwen_Qwen2.5-1.jsonl"
DEFAULT_OUTPUT_DIR = "checkpoints/Qwen2.5-1.5B-RM"


@dataclass
class TrainConfig:
    """A training run; the defaults are the original trainer's."""

    mode: str = arg("prm", choices=MODES,
                    help="ppm: Bradley-Terry pairs; prm: a value per step (default); orm: the final outcome only; "
                         "traj, pqm, implicit, gorm, gprm, ensemble, biprm: the related work's objectives "
                         "(docs/scorer_lab.md)")
    data_file: PathText = arg(DEFAULT_DATA_FILE, flags=("--data_dir", "--data-dir", "--data_file"),
                         help=f"JSON/JSONL file from masprm-preprocess (src/train/preprocess_data.py) (default: {DEFAULT_DATA_FILE})")
    output_dir: PathText = arg(DEFAULT_OUTPUT_DIR, flags=("--output-dir", "--output_dir"),
                          help=f"where the scorer is written (default: {DEFAULT_OUTPUT_DIR})")
    model_id: str = arg(DEFAULT_BASE_MODEL, flags=("--model-id", "--model_id"),
                        help="base model (hub id or local folder)")
    epochs: float = arg(10.0, help="training epochs (default: 10)")
    max_steps: int = arg(-1, help="optimizer steps; > 0 overrides --epochs")
    lr: float = arg(1e-5, help="peak learning rate of the cosine schedule (default: 1e-5)")
    train_batch_size: int = arg(8, help="examples per device per forward pass (default: 8; halved on out-of-memory)")
    eval_batch_size: int | None = arg(None, help="default: --train-batch-size")
    grad_accum: int = arg(16, help="forward passes per optimizer step (default: 16)")
    eval_steps: int = arg(200, help="optimizer steps between evaluations (default: 200); the best evaluated "
                                    "checkpoint is kept, and a run shorter than this keeps its final weights")
    save_steps: int | None = arg(None, help="optimizer steps between checkpoints, a multiple of --eval-steps "
                                            "(default: --eval-steps)")
    save_total_limit: int = arg(2, help="checkpoints kept in --output-dir besides the best one (default: 2)")
    logging_steps: int = arg(10, help="optimizer steps between logged losses, and between progress lines where the "
                                      "output is no terminal (default: 10)")
    seed: int = arg(42, help="seed of the eval split, data order, new weights and dropout (default: 42)")
    calibrate: bool = arg(False, help="fit Platt scaling of the read-out on the eval split (held-out training "
                                      "questions) and record it in masprm_scorer.json, which the scorer then "
                                      "applies (prm, orm, ppm; default: off)")
    eval_split_by: str = arg("question", choices=EVAL_SPLITS,
                             help="hold out whole questions (default) or single records for checkpoint selection")
    max_length: int = arg(2048, help="tokens per text; the start is cut first")
    max_prompt_length: int = arg(768, help="tokens kept of the prompt part (its end); 0 = no separate limit")
    separator: str = arg(DEFAULT_SEPARATOR, flags=("--step-separator",),
                         help=f"text that ends every step; the score is read at its last occurrence "
                              f"(default: {DEFAULT_SEPARATOR})")
    ensure_step_token: bool = arg(True, help="add a <...> separator the tokenizer lacks as a special token "
                                             "(default: on)")
    loss: str = arg("bce", choices=LOSSES, needs=needs_mode("prm", "orm"),
                    help="prm/orm loss (ppm always uses Bradley-Terry)")
    huber_beta: float = arg(0.1, needs=NEEDS_HUBER, help="transition point of --loss huber (default: 0.1)")
    step_agg: str = arg("min", flags=("--agg",), choices=TRAJ_AGGS, needs=needs_mode("traj"),
                        help="--mode traj (a transcript's aggregated step scores against its final outcome): "
                             "how the step scores are aggregated (default: min)")
    softmin_temperature: float = arg(DEFAULT_SOFTMIN_TEMPERATURE, needs=NEEDS_SOFTMIN,
                                     help="traj --agg softmin: the temperature T of the weights softmax(-p / T) "
                                          f"(default: {DEFAULT_SOFTMIN_TEMPERATURE:g})")
    pqm_margin: float = arg(4.0, needs=needs_mode("pqm"),
                            help="--mode pqm: the margin ζ by which every step before a transcript's first "
                                 "error is ranked above the wrong ones (default: 4, the PQM authors')")
    implicit_beta: float = arg(0.05, needs=needs_mode("implicit"),
                               help="--mode implicit: beta of the process reward beta * log(pi_theta / "
                                    "pi_ref) (default: 0.05, PRIME's)")
    ensemble_heads: int = arg(4, needs=needs_mode("ensemble"),
                              help="--mode ensemble: value heads on the one LoRA trunk (default: 4)")
    ensemble_std: float = arg(0.05, needs=needs_mode("ensemble"),
                              help="--mode ensemble: a step's label is trusted (left out of the loss) when "
                                   "the heads' probabilities spread (std) by at most this and their mean is "
                                   "confident (--ensemble-confidence) (default: 0.05)")
    ensemble_confidence: float = arg(0.9, needs=needs_mode("ensemble"),
                                     help="--mode ensemble: the confidence max(p, 1 - p) of the heads' mean "
                                          "that a trusted step needs (default: 0.9)")
    lora_r: int = arg(256, needs=NEEDS_LORA, help="LoRA rank (default: 256)")
    head_read: str = arg(HEAD_READS[0], choices=HEAD_READS,
                         help="--mode prm / orm: where the value head reads a step: step_end, at its separator "
                              "(default, the original's), or step_mean, the mean of the head's token logits over "
                              "the step's tokens (after the separator before it, the question with the first step); "
                              "recorded in masprm_scorer.json, so the scorer reads steps the same way when served")
    lora_alpha: float = arg(32, needs=NEEDS_LORA, help="LoRA scaling alpha (default: 32)")
    lora_dropout: float = arg(0.05, needs=NEEDS_LORA,
                              help="LoRA dropout for --mode ppm (default: 0.05); prm/orm train with every "
                                   "dropout off")
    lora: bool = arg(True, flags=("--no-lora",), action="store_false", help="full fine-tune instead of LoRA")
    load_in_4bit: bool | None = arg(None, help="QLoRA 4-bit NF4 base (default: on with CUDA, off on CPU)")
    attn_impl: str = arg("sdpa", flags=("--attn-impl", "--attn_impl"),
                         help="attention implementation passed to transformers: sdpa (default), eager, "
                              "flash_attention_2, ..., or auto (flash_attention_2 when flash-attn is installed "
                              "and the GPU is Ampere or newer, else sdpa); the kernel used is recorded in "
                              "masprm_scorer.json")
    ppm_best_metric: str = arg("loss", choices=PPM_BEST_METRICS, needs=needs_mode("ppm"),
                               help="--mode ppm: the eval metric that picks the checkpoint kept: loss (default, "
                                    "the original's main branch) or pair_acc (its newer branch)")
    weight_decay: float = arg(0.0, help="AdamW weight decay (default: 0, the original's main branch; its newer "
                                        "branch uses 0.01)")
    init_adapter_dir: PathText | None = arg(None, flags=("--init-adapter-dir", "--init_adapter_dir"),
                                           help="start from the LoRA adapter in this folder instead of a new one "
                                                "(its base model must be --model-id; --lora-* must agree with it; "
                                                "checked whole before the output folder is made)")
    train_new_token_only: bool = arg(False, flags=("--train-new-token-only",),
                                     help="train only the added separator's embedding row (peft's trainable "
                                          "token indices) instead of a full trainable copy of the embeddings")
    trust_remote_code: bool = arg(False, flags=("--trust-remote-code", "--trust_remote_code"),
                                  help="allow the base model's own code from the hub")
    overwrite: bool = arg(False, help="train over a finished scorer in --output-dir (refused without it)")
    resume: bool = arg(False, help="continue from the newest checkpoint in --output-dir")
    hub_logs: bool = arg(True, help="write TensorBoard logs to --output-dir/runs (default: on, as in the original); "
                                    "--no-hub-logs is --report_to none")
    report_to: list[str] | None = arg(None, flags=("--report_to", "--report-to"), nargs="+", metavar="NAME",
                                      help="where training logs go, as transformers' report_to: tensorboard, wandb, "
                                           "mlflow, ..., all or none (default: tensorboard, or none with "
                                           "--no-hub-logs)")
    push_to_hub: bool = arg(False, flags=("--push_to_hub", "--push-to-hub"),
                            help="upload the finished scorer folder (no checkpoints) to the Hugging Face Hub "
                                 "as --hub_model_id")
    hub_model_id: str | None = arg(None, flags=("--hub_model_id", "--hub-model-id"),
                                   help="hub repository of the scorer, 'user/name' or 'org/name'; named in its "
                                        "model card (needed by --push_to_hub)")
    hub_private_repo: bool = arg(False, flags=("--hub_private_repo", "--hub-private-repo"), needs=NEEDS_PUSH,
                                 help="create the hub repository as private (--push_to_hub)")
    progress: bool = arg(True, flags=("--quiet",), action="store_false", help="no progress bar or log lines")

    def validate(self) -> None:
        def need(ok: bool, setting: str, rule: str) -> None:
            if not ok:
                raise ConfigError(f"{setting} {rule}, got {getattr(self, setting)!r}", setting=setting)

        need(self.mode in MODES, "mode", f"must be one of {', '.join(MODES)}")
        if self.calibrate and self.mode not in CALIBRATED_MODES:
            raise ConfigError(f"calibrate is built for --mode {', '.join(CALIBRATED_MODES)} only, got --mode "
                              f"{self.mode}", setting="calibrate")
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
        need(self.ppm_best_metric in PPM_BEST_METRICS, "ppm_best_metric", f"must be one of {', '.join(PPM_BEST_METRICS)}")
        need(self.ppm_best_metric == "loss" or self.mode == "ppm", "ppm_best_metric",
             "applies to --mode ppm only (the other objectives keep their own metric)")
        need(math.isfinite(self.weight_decay) and self.weight_decay >= 0, "weight_decay", "must be a finite number >= 0")
        need(self.init_adapter_dir != "", "init_adapter_dir", "must name a folder (an empty value would train "
                                                               "from scratch)")
        if (self.init_adapter_dir or self.train_new_token_only) and not self.lora:
            setting = "init_adapter_dir" if self.init_adapter_dir else "train_new_token_only"
            raise ConfigError(f"{setting} needs LoRA (it is about a LoRA adapter); drop --no-lora", setting=setting)
        need(math.isfinite(self.pqm_margin) and self.pqm_margin >= 0, "pqm_margin", "must be a finite number >= 0")
        need(self.ensemble_heads >= 2, "ensemble_heads", "must be at least 2")
        need(math.isfinite(self.ensemble_std) and self.ensemble_std >= 0, "ensemble_std", "must be a number >= 0")
        need(0.5 <= self.ensemble_confidence <= 1, "ensemble_confidence", "must be in [0.5, 1]")
        need(math.isfinite(self.implicit_beta) and self.implicit_beta > 0, "implicit_beta",
             "must be a finite number > 0")
        if self.mode == "implicit" and not self.lora:
            raise ConfigError("mode implicit needs LoRA: its reference policy is the base model read with the "
                              "adapter disabled", setting="lora")
        need(self.step_agg in TRAJ_AGGS, "step_agg", f"must be one of {', '.join(TRAJ_AGGS)}")
        need(self.head_read in HEAD_READS, "head_read", f"must be one of {', '.join(HEAD_READS)}")
        if self.head_read != HEAD_READS[0] and self.mode not in HEAD_READ_MODES:
            raise ConfigError(f"head_read {self.head_read} is built for --mode {' and '.join(HEAD_READ_MODES)} (a "
                              f"value per step at its separator), got --mode {self.mode}", setting="head_read")
        need(math.isfinite(self.softmin_temperature) and self.softmin_temperature > 0, "softmin_temperature",
             "must be a finite number > 0")
        if self.load_in_4bit and not self.lora:
            raise ConfigError("load_in_4bit needs LoRA: a 4-bit base cannot be fully fine-tuned (train with LoRA)",
                              setting="load_in_4bit")
        if self.report_to and not self.hub_logs and self.report_to != ["none"]:
            raise ConfigError(f"report_to {' '.join(self.report_to)} contradicts --no-hub-logs (which means "
                              "report_to none); give one of them", setting="report_to")
        if self.push_to_hub and not self.hub_model_id:
            raise ConfigError("push_to_hub needs `hub_model_id` (the repository, 'user/name')", setting="push_to_hub")
        if self.eval_steps and self.save_steps and self.save_steps % self.eval_steps:
            raise ConfigError(f"save_steps ({self.save_steps}) must be a multiple of eval_steps ({self.eval_steps}) "
                              "so the best checkpoint can be kept", setting="save_steps")


def recorded_settings(cfg: TrainConfig) -> dict:
    """The settings masprm_scorer.json records: every field, less the display settings and those of
    UNRECORDED_DEFAULTS at that value."""
    return {name: value for name, value in asdict(cfg).items() if name not in DISPLAY_SETTINGS
            and (name not in UNRECORDED_DEFAULTS or value != UNRECORDED_DEFAULTS[name])}
