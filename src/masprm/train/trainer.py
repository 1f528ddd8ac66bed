"""Stage 3: train a scorer with transformers `Trainer` + peft.

    records  -> examples (token ids + scored positions)      the objective's module (pairwise.py / stepwise.py)
    base LM  -> token-classification head (+ separator, LoRA/QLoRA)   models/token_scorer.py, lora.py
    Trainer subclass, eval metrics, best model kept           the objective, scorer_trainer.py, metrics.py

The output folder holds the adapter (or the full model without LoRA), the
tokenizer with the separator, and ``masprm_scorer.json``; the scorer loader
(`masprm.models.scorer.load_scorer`) reads it directly. Nothing here names an
objective: what differs between them is the objective's record
(``masprm.train.objectives``).
"""

from __future__ import annotations

from functools import partial

import importlib.util
import math
import os
import pickle
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masprm.checks import check_local_model, check_output_dir
from masprm.errors import ConfigError, DataError, first_line
from masprm.io import honour_umask, writing_into
from masprm.log import get_logger
from masprm.outputs import file_snapshot, library_output
from masprm.models.model_checks import check_model_serves, model_context
from masprm.objective_facts import OBJECTIVE_FACTS
from masprm.run_folder import announce_holder, locked_folder
from masprm.calibration import fit_from_values, unfittable
from masprm.scorer_meta import SCORER_META_FILE, platt_of, read_scorer_meta, write_scorer_meta
from masprm.train.card import base_license, write_model_card
from masprm.train.config import TrainConfig, recorded_settings
from masprm.train.cache import cached_examples
from masprm.train.checkpoints import (check_not_finished, check_same_data, checkpoints, data_record,
                                     resume_checkpoint)
from masprm.train.data import eval_view, label_scheme_of, load_records, split_eval, split_eval_by_group
from masprm.train.hub import check_hub_model_id, push_scorer
from masprm.train.objectives import OBJECTIVES, Objective
from masprm.train.tracking import check_trackers_start
from masprm.train.warm_start import check_warm_start

log = get_logger(__name__)

# torch/transformers, and the modules that import them, are imported inside the functions that use
# them, so `--help`, flag errors and config checks stay instant (masprm.train imports this module).


@dataclass
class TrainResult:
    trainer: Any                  # the objective's Trainer, holding the best model
    train_examples: list[dict]
    eval_examples: list[dict]
    metrics: dict[str, float]     # eval metrics of the saved model
    output_dir: Path


def _log(cfg: TrainConfig, message: str) -> None:
    if cfg.progress and _world_rank() == 0:   # data parallel: the first process speaks for all
        log.info(message)


def _bar(cfg: TrainConfig) -> bool:
    """transformers' progress bar: only on a terminal (a log file gets ``ProgressLines``), and never ``--quiet``."""
    return cfg.progress and sys.stderr.isatty()


def _world_rank() -> int:
    """This process's rank under torchrun / accelerate launch (0 for a plain launch)."""
    return int(os.environ.get("RANK", "0") or 0)


def _world_size() -> int:
    """Data-parallel processes: torchrun / accelerate launch set WORLD_SIZE, a plain launch is one."""
    return max(1, int(os.environ.get("WORLD_SIZE", "1") or 1))


def _update_steps(n_train: int, cfg: TrainConfig) -> int:
    """Optimizer steps of the whole run (as transformers counts them; each process sees 1/world of the data)."""
    if cfg.max_steps > 0:
        return cfg.max_steps
    batches = math.ceil(math.ceil(n_train / _world_size()) / cfg.train_batch_size)
    return max(1, math.ceil(cfg.epochs * max(1, math.ceil(batches / cfg.grad_accum))))


def _data_parallel(args) -> str:
    """' on 2 processes (effective batch 2 x 4 x 4 = 32)' under torchrun / accelerate launch, else ''."""
    world = args.world_size
    if world <= 1:
        return ""
    effective = world * args.per_device_train_batch_size * args.gradient_accumulation_steps
    return (f" on {world} processes (effective batch {world} x {args.per_device_train_batch_size} x "
            f"{args.gradient_accumulation_steps} = {effective})")


def _precision(quantized: bool) -> dict[str, Any]:
    """Mixed precision and optimizer: 8-bit AdamW for QLoRA on CUDA, plain fp32 AdamW on CPU."""
    import torch

    from masprm.models.loading import choose_dtype

    if not torch.cuda.is_available():
        return {"optim": "adamw_torch"}
    bf16 = choose_dtype("cuda") == torch.bfloat16
    return {"optim": "paged_adamw_8bit" if quantized else "adamw_torch", "bf16": bf16, "fp16": not bf16}


def _report_to(cfg: TrainConfig) -> list[str] | str:
    """transformers' report_to: --report_to as given (checked), else TensorBoard unless --no-hub-logs."""
    if cfg.report_to:
        return _checked_report_to(cfg.report_to)
    if not cfg.hub_logs:
        return "none"
    if importlib.util.find_spec("tensorboard") is None:
        _log(cfg, "tensorboard is not installed, so no training logs are written "
                  "(pip install -r requirements.txt)")
        return "none"
    return ["tensorboard"]


def _checked_report_to(names: list[str]) -> list[str] | str:
    """A name transformers does not know, or whose package is not installed, is refused before training."""
    from transformers.integrations.integration_utils import (INTEGRATION_TO_CALLBACK,   # heavy: transformers
                                                             get_available_reporting_integrations)

    if names == ["none"]:
        return "none"
    if names == ["all"]:
        check_trackers_start(get_available_reporting_integrations())
        return "all"
    unknown = [n for n in names if n not in INTEGRATION_TO_CALLBACK]
    if unknown:
        raise ConfigError(f"report_to {' '.join(unknown)}: not one of transformers' integrations (all, none, "
                          f"{', '.join(INTEGRATION_TO_CALLBACK)})", setting="report_to")
    missing = [n for n in names if n not in get_available_reporting_integrations()]
    if missing:
        raise ConfigError(f"report_to {' '.join(missing)}: its package is not installed (pip install "
                          f"{' '.join(missing)})", setting="report_to")
    check_trackers_start(names)
    return list(names)


def _one_gpu_per_process(args) -> None:
    """A plain `python` launch on a multi-GPU node trains on one GPU, and says so.

    transformers would otherwise multiply the batch by the visible GPUs: split
    over them by DataParallel, or (a 4-bit base is never replicated) all of it
    on GPU 0, and the run's step schedule would no longer be the one asked for.
    Data parallel training is torchrun / accelerate launch (README).
    """
    if args.n_gpu > 1:
        log.warning(f"training on 1 of the {args.n_gpu} visible GPUs; for data parallel training launch with "
                    f"torchrun --nproc_per_node {args.n_gpu} -m masprm.stages.train ... (src/train/trainer.py in a "
                    "checkout; docs/pipeline.md, Stage 3)")
        args._n_gpu = 1  # what Trainer itself does for a model spread over GPUs


def _resume_checkpoint(cfg: TrainConfig, out: Path) -> str | None:
    if cfg.resume:
        check_same_data(out, cfg.data_file)
    check_not_finished(out, resume=cfg.resume, overwrite=cfg.overwrite)
    if cfg.resume:
        last = resume_checkpoint(out, lambda line: _log(cfg, line))
        if last is None:
            _log(cfg, f"resuming: no checkpoint in {out}; starting from scratch")
        return str(last) if last else None
    found = checkpoints(out) if out.is_dir() else []
    if found:
        raise ConfigError(f"output_dir {out} already holds checkpoints ({found[-1].name}); "
                          "pass `resume` to continue that run or choose another folder", setting="output_dir")
    return None


def _check_fits_context(cfg: TrainConfig) -> None:
    """`max_length` is at most the base model's context (when its config gives one); checked before the output
    folder is made. A longer one would let a text through to positions the model never had, in training and
    again at inference, where the scorer cuts its texts to the `max_length` it records."""
    context = model_context(cfg.model_id, "model_id", cfg.trust_remote_code)
    if context is not None and cfg.max_length > context:
        raise ConfigError(f"max_length {cfg.max_length}: more than the context of {cfg.model_id} ({context} "
                          f"tokens); pass `max_length` {context} or less", setting="max_length")


def _write_meta(cfg: TrainConfig, objective: Objective, out: Path, **extra: Any) -> None:
    meta = {"mode": cfg.mode, "objective": cfg.mode, **objective.meta(cfg),
            "separator": cfg.separator, "base_model_id": cfg.model_id, "data": data_record(cfg.data_file),
            "max_length": cfg.max_length, "max_prompt_length": cfg.max_prompt_length,
            "text_style": objective.text_style, "lora": cfg.lora, "settings": recorded_settings(cfg), **extra}
    write_scorer_meta(out, meta)


def train_scorer(cfg: TrainConfig, callbacks: list | None = None) -> TrainResult:
    """Train, keep the best model by the objective's eval metric, save it to cfg.output_dir.

    The output folder is locked for the run (one training per folder), and a full disk while
    writing it is one OutputError line that says what was kept.
    """
    kept = f"the checkpoints already saved in {cfg.output_dir} are intact (`resume` continues from the newest)"
    with ExitStack() as held, writing_into(cfg.output_dir, "output_dir", kept):
        return _train_scorer(cfg, callbacks, held)


@dataclass
class _Inputs:
    """What the checks before the output folder settle: the objective, its records and the base model's terms."""
    objective: Objective
    records: list[dict]
    attn_kernel: str                  # the attention kernel the base model is loaded with
    warm_start: dict[str, Any]        # the warm start's record for the metadata ({} without init_adapter_dir)


@dataclass
class _Examples:
    """The tokenizer (with the separator) and the tokenised records, split into train and eval."""
    tokenizer: Any
    sep_id: int
    new_token_ids: list[int]          # the separator, when it had to be added
    train: list[dict]
    eval: list[dict]
    from_cache: bool


def _check_settings(cfg: TrainConfig) -> None:
    """The settings alone: their own checks, and the hub repository's name when one is given."""
    cfg.validate()
    if cfg.hub_model_id:
        check_hub_model_id(cfg.hub_model_id)


def _usable_records(cfg: TrainConfig, objective: Objective) -> list[dict]:
    """The data file's records, refused unless at least 2 of them can train (one is held out)."""
    records = load_records(cfg.data_file, cfg.mode)
    usable = objective.usable(records)
    if usable < 2:
        others = " (the others have identical chosen and rejected steps)" if usable < len(records) else ""
        raise DataError(f"{cfg.data_file} (`data_file`): {usable} usable record(s) of {len(records)}{others}"
                        "; training needs at least 2 (one is held out for evaluation)", setting="data_file")
    return records


def _check_before_loading(cfg: TrainConfig) -> tuple[str, dict[str, Any]]:
    """(attention kernel, warm start record): output folder, base model and warm start checked, no model loaded."""
    check_output_dir(cfg.output_dir, "output_dir", inputs={"model_id": cfg.model_id, "data_file": cfg.data_file,
                                                          "init_adapter_dir": cfg.init_adapter_dir})
    check_local_model(cfg.model_id, "model_id")
    from masprm.models.loading import resolve_attn_impl

    attn_kernel = resolve_attn_impl(cfg.attn_impl)
    check_model_serves(cfg.model_id, "model_id", attn_impl=attn_kernel, trust_remote_code=cfg.trust_remote_code)
    _check_fits_context(cfg)
    warm_start = check_warm_start(cfg) if cfg.init_adapter_dir else {}   # against the checked base
    return attn_kernel, warm_start


def _claim_output(cfg: TrainConfig, held: ExitStack) -> tuple[Path, list[str] | str, str | None]:
    """(output folder, report_to, checkpoint to resume from): the trackers checked, the folder locked and read."""
    report_to = _report_to(cfg)
    out = Path(cfg.output_dir)
    if _world_rank() == 0:   # one training per folder; under torchrun rank 0 holds it for all
        held.enter_context(locked_folder(out, "output_dir"))
        announce_holder(out)
    return out, report_to, _resume_checkpoint(cfg, out)


def _examples(cfg: TrainConfig, inputs: _Inputs, out: Path) -> _Examples:
    """The records tokenised (from the folder's cache when it matches) and split into train and eval."""
    from transformers import set_seed

    from masprm.models import token_scorer
    from masprm.models.loading import load_tokenizer
    from masprm.models.text_encoder import TextEncoder   # imports torch

    set_seed(cfg.seed)  # the new score head and separator embedding are drawn from it
    tokenizer = load_tokenizer(cfg.model_id, cfg.trust_remote_code, padding_side="right", setting="model_id")
    n_base_tokens = len(tokenizer)
    sep_id = token_scorer.separator_token_id(tokenizer, cfg.separator, add_if_missing=cfg.ensure_step_token)
    new_token_ids = list(range(n_base_tokens, len(tokenizer)))
    encoder = TextEncoder(tokenizer, sep_id, cfg.max_length, cfg.max_prompt_length,
                          style=inputs.objective.text_style)
    records = inputs.records
    examples, skipped, from_cache = cached_examples(cfg, records, encoder, out, write=_world_rank() == 0)
    if skipped:
        _log(cfg, f"skipped {skipped} of {len(records)} records whose chosen and rejected steps are identical")
    if cfg.eval_split_by == "question":
        train_idx, eval_idx = split_eval_by_group([e["group"] for e in examples], cfg.seed)
    else:   # the original's split over records
        train_idx, eval_idx = split_eval(len(examples), cfg.seed)
    return _Examples(tokenizer, sep_id, new_token_ids, train=[examples[i] for i in train_idx],
                     eval=[eval_view(examples[i]) for i in eval_idx], from_cache=from_cache)


def _model(cfg: TrainConfig, inputs: _Inputs, data: _Examples) -> tuple[Any, bool]:
    """(model, quantized): the base with the objective's head, the warm start's embeddings, LoRA and dropout."""
    import torch

    from masprm.models import token_scorer
    from masprm.models.adapters import fit_embeddings_to_adapter
    from masprm.models.loading import resolve_device
    from masprm.train.lora import attach_lora, disable_dropout

    objective, tokenizer = inputs.objective, data.tokenizer
    resolve_device("auto")  # a CUDA build that sees no GPU says so instead of silently training in fp32 on CPU
    quantized = cfg.lora and (torch.cuda.is_available() if cfg.load_in_4bit is None else cfg.load_in_4bit)
    causal = OBJECTIVE_FACTS[cfg.mode].causal_lm
    load = token_scorer.load_causal_lm if causal else partial(token_scorer.load_token_scorer,
                                                              heads=objective.heads(cfg))
    model = load(cfg.model_id, n_tokens=len(tokenizer), load_in_4bit=quantized, attn_impl=inputs.attn_kernel,
                 trust_remote_code=cfg.trust_remote_code, pad_token_id=tokenizer.pad_token_id)
    if cfg.init_adapter_dir:
        fit_embeddings_to_adapter(model, cfg.init_adapter_dir, len(tokenizer), "init_adapter_dir")
    if cfg.lora:
        model = attach_lora(model, r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout,
                            quantized=quantized, init_adapter_dir=cfg.init_adapter_dir,
                            new_token_ids=data.new_token_ids if cfg.train_new_token_only else None,
                            reference_kept=causal)
    if not objective.keep_dropout:
        disable_dropout(model)  # the original's prm/orm went through TRL's PRM trainer (disable_dropout=True)
    return model, quantized


def _training_args(cfg: TrainConfig, objective: Objective, out: Path, report_to: list[str] | str,
                   quantized: bool) -> Any:
    """transformers' TrainingArguments of the run: schedule, evaluation, checkpoints, best model, precision."""
    import torch
    from transformers import TrainingArguments

    eval_steps = cfg.eval_steps
    best_metric, greater_is_better = objective.best(cfg)
    args = TrainingArguments(
        output_dir=str(out),
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps if cfg.max_steps > 0 else -1,
        learning_rate=cfg.lr,
        lr_scheduler_type="cosine",
        per_device_train_batch_size=cfg.train_batch_size,
        per_device_eval_batch_size=cfg.eval_batch_size or cfg.train_batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        auto_find_batch_size=True,     # halve the batch on out-of-memory (ScorerTrainer), as the original
        eval_strategy="steps",
        eval_steps=eval_steps,
        save_strategy="steps",
        save_steps=cfg.save_steps or eval_steps,
        save_total_limit=cfg.save_total_limit,
        logging_steps=cfg.logging_steps,
        load_best_model_at_end=True,   # a run shorter than eval_steps keeps its final weights
        metric_for_best_model=best_metric,
        greater_is_better=greater_is_better,
        weight_decay=cfg.weight_decay,
        train_sampling_strategy=objective.sampling,
        seed=cfg.seed,
        data_seed=cfg.seed,
        report_to=report_to,
        remove_unused_columns=False,   # the collators build exactly the tensors the loss needs
        label_names=[],                # labels live in objective-specific keys, handled by prediction_step
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
        disable_tqdm=not _bar(cfg),
        ddp_find_unused_parameters=False,  # torchrun: every trainable weight is used (DDP found none unused)
        # Under torchrun on CPUs accelerate starts gloo data parallelism only when told the run is on CPUs;
        # without it every process trained on all the data and wrote the same folder.
        use_cpu=_world_size() > 1 and not torch.cuda.is_available(),
        **_precision(quantized),
    )
    _one_gpu_per_process(args)
    return args


def _trainer(cfg: TrainConfig, objective: Objective, model: Any, data: _Examples, args: Any,
             callbacks: list | None) -> Any:
    """The objective's Trainer over the split, with the progress callbacks the output calls for."""
    from transformers import PrinterCallback

    trainer = objective.trainer_cls(
        model=model,
        args=args,
        data_collator=objective.collator(data.tokenizer.pad_token_id),
        train_dataset=data.train,
        eval_dataset=data.eval,
        processing_class=data.tokenizer,
        compute_metrics=objective.compute_metrics,
        callbacks=callbacks,
        **objective.trainer_kwargs(cfg),
    )
    if not _bar(cfg):
        trainer.remove_callback(PrinterCallback)  # it prints every log dict when the progress bar is off
    if cfg.progress and not _bar(cfg):   # a log file: a progress line at each logged loss instead of the bar
        from masprm.train.progress_lines import ProgressLines

        trainer.add_callback(ProgressLines(lambda line: _log(cfg, line)))
    return trainer


def _start_record(cfg: TrainConfig, inputs: _Inputs, trainer: Any, data: _Examples, out: Path,
                  quantized: bool) -> tuple[set[tuple[str, int]], dict[str, Any]]:
    """(the folder's files before the run, the metadata both records share): the run announced and recorded."""
    if trainer.is_world_process_zero():   # under torchrun only rank 0 writes files
        _log(cfg, f"{cfg.mode}: {len(data.train)} train / {len(data.eval)} eval examples "
                  f"({'tokenised data from the cache' if data.from_cache else 'tokenised'}), "
                  f"{_update_steps(len(data.train), cfg)} optimizer steps{_data_parallel(trainer.args)}, "
                  f"eval every {cfg.eval_steps}, "
                  f"{'QLoRA (4-bit base)' if quantized else 'LoRA' if cfg.lora else 'full fine-tune'}")
        out.mkdir(parents=True, exist_ok=True)
    before = file_snapshot(out)   # what the folder held: this run changes the mode of its own files only
    objective = inputs.objective
    scheme = {"label_scheme": label_scheme_of(inputs.records, objective.records),
              **objective.records_meta(inputs.records), "attn_kernel": inputs.attn_kernel, **inputs.warm_start}
    recorded = read_scorer_meta(out) if (out / SCORER_META_FILE).is_file() else {}
    finished = isinstance(recorded, dict) and recorded.get("status") == "completed"
    if trainer.is_world_process_zero() and not finished:
        # a finished scorer's record (and its weights) change only when this run finishes
        _write_meta(cfg, objective, out, status="training", **scheme)
    return before, scheme


def _fit(trainer: Any, out: Path, resume_from: str | None) -> None:
    """Train, from the checkpoint `resume_from` when given; a checkpoint torch refuses is one ConfigError."""
    try:
        trainer.train(resume_from_checkpoint=resume_from)
    except pickle.UnpicklingError as err:   # a checkpoint file torch's weights-only loader refuses
        if resume_from is None:
            raise
        raise ConfigError(f"output_dir {out}: {Path(resume_from).name} holds a file torch refuses to load "
                          f"({first_line(err, limit=200)}); move that checkpoint aside and resume again",
                          setting="output_dir") from None


def _evaluate(cfg: TrainConfig, objective: Objective, trainer: Any, data: _Examples) -> tuple[dict, dict]:
    """(eval metrics of the best model, its Platt record): the record is {} unless `calibrate` is set."""
    metrics = trainer.evaluate()  # the best model, now loaded
    platt = {}
    if cfg.calibrate:   # on the eval split: held-out training questions, never the test split
        found = trainer.predict(data.eval)
        values, targets = objective.calibration_pairs(found.predictions, found.label_ids)
        if problem := unfittable(targets):   # recorded as asked and not fitted (platt null): served uncalibrated
            log.warning(f"--calibrate: {problem}; no Platt scaling can be fitted, the scorer is served uncalibrated")
            platt = {"platt": None}
        else:
            platt = {"platt": fit_from_values(values, targets)}
            platt_of(platt, warn=log.warning)   # a fitted slope <= 0 is recorded and said now, not applied
    return metrics, platt


def _save(cfg: TrainConfig, objective: Objective, trainer: Any, data: _Examples, out: Path, *,
          before: set[tuple[str, int]], scheme: dict[str, Any], metrics: dict, platt: dict) -> None:
    """The model, the completed metadata and the model card written into `out` (and pushed when asked)."""
    with library_output(out) as saving:   # each file a new inode, renamed into place when all are written
        trainer.save_model(str(saving))   # adapter (or full model) + tokenizer with the separator (rank 0 only)
    timings = ("_runtime", "_per_second")  # wall-clock figures: kept out so one seed gives one file
    if trainer.is_world_process_zero():
        honour_umask(out, before=before)   # safetensors writes its files private (0600), checkpoints included
        _write_meta(cfg, objective, out, status="completed", **scheme, separator_id=data.sep_id,
                    eval_metrics={k: v for k, v in metrics.items() if not k.endswith(timings)},
                    train_examples=len(data.train), eval_examples=len(data.eval),
                    best_checkpoint=trainer.state.best_model_checkpoint, base_license=base_license(cfg.model_id),
                    **platt)
        write_model_card(out, hub_model_id=cfg.hub_model_id)   # replaces peft's empty template
        if cfg.push_to_hub:
            push_scorer(out, cfg.hub_model_id, private=cfg.hub_private_repo, log=lambda line: _log(cfg, line))


def _train_scorer(cfg: TrainConfig, callbacks: list | None, held: ExitStack) -> TrainResult:
    """train_scorer's run; `held` keeps the output folder's lock until it returns.

    The phases in order: bad data is refused before any model is read, and the output folder and base
    model are checked before the folder is locked or anything is written.
    """
    _check_settings(cfg)
    objective = OBJECTIVES[cfg.mode]
    records = _usable_records(cfg, objective)
    attn_kernel, warm_start = _check_before_loading(cfg)
    inputs = _Inputs(objective, records, attn_kernel, warm_start)
    out, report_to, resume_from = _claim_output(cfg, held)
    data = _examples(cfg, inputs, out)
    model, quantized = _model(cfg, inputs, data)
    args = _training_args(cfg, objective, out, report_to, quantized)
    trainer = _trainer(cfg, objective, model, data, args, callbacks)
    before, scheme = _start_record(cfg, inputs, trainer, data, out, quantized)
    _fit(trainer, out, resume_from)
    metrics, platt = _evaluate(cfg, objective, trainer, data)
    _save(cfg, objective, trainer, data, out, before=before, scheme=scheme, metrics=metrics, platt=platt)
    return TrainResult(trainer, data.train, data.eval, metrics, out)
