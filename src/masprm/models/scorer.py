"""Trained scorers at inference: load an adapter folder, score state texts.

    scorer = load_scorer("checkpoints/MASPRM-GSM8K-1.5B")
    scorer.score_batch(["question" + "step 1" + "</step>", ...])  # -> values in [-1, 1]

A folder from `src/train/trainer.py` holds a LoRA adapter (or a full model),
the tokenizer with the separator and ``masprm_scorer.json``; a folder with
neither adapter nor model uses its newest ``checkpoint-*``. Texts are
tokenised, cut and scored exactly as in training (`masprm.models.text_encoder.TextEncoder`;
a prm/orm/traj scorer tokenises a `StepText`'s prompt and steps separately): the
end of the text is kept, and the value is tanh of the logit at the last
separator (or at the last token when there is none), times the folder's
``logit_scale``: a logit trained with BCE (prm, orm) is served as tanh(z / 2) =
2 sigmoid(z) - 1, the value it was trained to predict (the original serves
tanh(z); docs/differences.md). A trajectory-level scorer
(``objective: traj`` in its metadata) values a text by its training aggregate
instead: 2A - 1, A the aggregate (``masprm.models.step_agg``, the recorded
``step_agg``) of the step probabilities at every separator that survives the cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
from peft import PeftModel

from masprm.errors import ModelError, first_line
from masprm.models.adapters import fit_embeddings_to_adapter
from masprm.models.loading import (ModelOptions, choose_dtype, load_tokenizer, peft_alias_warning_silenced,
                                   resolve_device, scorer_options)
from masprm.models.model_checks import check_finite_outputs
from masprm.models.step_agg import log_aggregate
from masprm.scorer_folder import ScorerFolder, read_scorer_folder
from masprm.scorer_meta import DEFAULT_SOFTMIN_TEMPERATURE, logit_scale, text_style, training_of
from masprm.models.text_encoder import TextEncoder, pad_right, score_position
from masprm.models.token_scorer import load_token_scorer, separator_token_id
from masprm.state_text import DEFAULT_SEPARATOR


@dataclass
class HFScorer:
    """A `Scorer`: tanh(scale * logit at the last separator) per text, one padded forward per batch."""

    model: Any
    encoder: TextEncoder
    separator: str
    pad_id: int
    batch_size: int = 16
    scale: float = 1.0    # the read-out's factor on the logit (scorer_meta.logit_scale)
    tokens_seen: int = 0  # cumulative tokens fed to the model (usage accounting)
    last_tokens: list[int] = field(default_factory=list)  # tokens of each text of the last call
    setting: str = "prm_dir"   # the flag of the folder it came from, and the folder, for error lines
    source: str = ""

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def count_tokens(self, text: str) -> int:
        """Tokens this scorer would see for a text, before truncation (handoff context budgets)."""
        return len(self.encoder.tokenizer(text, add_special_tokens=False)["input_ids"])

    @torch.inference_mode()
    def score_batch(self, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        ids = [x or [self.pad_id] for x in self.encoder.encode(texts)]  # an empty text still gets a row
        self.last_tokens = [len(x) for x in ids]   # per text, so a shared batch is counted per example
        self.tokens_seen += sum(self.last_tokens)
        # Batch texts of similar length together to cut padding; results go back in input order.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        scores = [0.0] * len(ids)
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            # float64 from here on: float32 tanh is exactly 1.0 from |logit| >= 9.011, so two confident
            # candidates would tie and the search would pick by position, not by the scorer.
            input_ids, attention_mask = pad_right([ids[i] for i in rows], self.pad_id)
            logits = self.model(input_ids=input_ids.to(self.device),
                                attention_mask=attention_mask.to(self.device)).logits[..., 0].double()
            for i, v in zip(rows, self.row_values(logits, [ids[i] for i in rows])):
                scores[i] = v
        check_finite_outputs(scores, self.setting, self.source, "a value")   # never rank by NaN
        return scores

    def row_values(self, logits: torch.Tensor, rows: list[list[int]]) -> list[float]:
        """The value of each row: tanh(scale * its logit at its last separator) (its last token without one)."""
        at = torch.tensor([score_position(ids, self.encoder.sep_id) for ids in rows], device=logits.device)
        return torch.tanh(self.scale * logits[torch.arange(len(rows), device=logits.device), at]).tolist()


@dataclass
class TrajScorer(HFScorer):
    """A trajectory-level scorer: 2A - 1, A the aggregate of the step probabilities at every separator."""

    step_agg: str = "min"
    softmin_temperature: float = DEFAULT_SOFTMIN_TEMPERATURE

    def row_values(self, logits: torch.Tensor, rows: list[list[int]]) -> list[float]:
        steps = [[i for i, t in enumerate(ids) if t == self.encoder.sep_id] or [len(ids) - 1] for ids in rows]
        positions = torch.zeros((len(rows), max(map(len, steps))), dtype=torch.long, device=logits.device)
        mask = torch.zeros_like(positions, dtype=torch.bool)
        for r, at in enumerate(steps):
            positions[r, :len(at)] = torch.tensor(at, device=logits.device)
            mask[r, :len(at)] = True
        log_a, _ = log_aggregate(logits.gather(1, positions), mask, self.step_agg, self.softmin_temperature)
        return (2 * log_a.exp() - 1).tolist()


# --------------------------------------------------------------------------- finding the weights


def resolve_scorer_folder(path: str | Path, setting: str = "prm_dir",
                          record: ScorerFolder | None = None) -> Path:
    """The folder itself when it holds an adapter or a model, else its newest checkpoint-*."""
    record = record or read_scorer_folder(path)
    if not record.path.is_dir():
        raise ModelError(f"{setting} {path}: no such folder", setting=setting)
    if record.target is None:
        raise ModelError(f"{setting} {path}: no adapter (adapter_config.json), model (config.json) "
                         "or checkpoint-* folder in it", setting=setting)
    return record.target


def adapter_base_model(record: ScorerFolder, base_model_id: str | None, setting: str) -> str:
    """The base model to load the adapter on: as given, else the one the adapter (or its record) names."""
    if base_model_id:
        return base_model_id
    if record.adapter_error:
        raise ModelError(f"{setting} {record.target}: {record.adapter_error}", setting=setting)
    if not record.base_model:
        raise ModelError(f"{setting} {record.target}: the adapter does not name its base model; pass the base "
                         "model id", setting=setting)
    return record.base_model


# --------------------------------------------------------------------------- loading


def load_scorer(path: str | Path, base_model_id: str | None = None, options: ModelOptions | None = None,
                max_length: int | None = None, batch_size: int = 16, *, setting: str = "prm_dir",
                record: ScorerFolder | None = None) -> HFScorer:
    """Load a trained scorer in eval mode.

    `options=None` means `scorer_options(ModelOptions())`: a 4-bit NF4 base on
    CUDA, fp32 on CPU; `options.load_in_4bit` quantises on CPU too.
    `max_length=None` is the training run's --max-length (2048 if unknown).
    `setting` names the scorer's setting (its folder's flag) in error messages.
    `record` is the folder as stage 4 already read it (``masprm.scorer_folder``); None reads it here.
    """
    if options is None:
        options = scorer_options(ModelOptions())
    record = record.at(Path(path).expanduser()) if record is not None else read_scorer_folder(path)
    folder = resolve_scorer_folder(path, setting, record)
    if record.meta_error:
        raise ModelError(f"{setting} {path}: {record.meta_error}", setting=setting)
    meta = record.meta
    is_adapter = record.is_adapter
    base = adapter_base_model(record, base_model_id, setting) if is_adapter else str(folder)
    has_tokenizer = (folder / "tokenizer_config.json").is_file()
    tokenizer = load_tokenizer(str(folder) if has_tokenizer else base, options.trust_remote_code,
                               padding_side="right", setting=setting)
    separator = meta.get("separator", DEFAULT_SEPARATOR)
    sep_id = separator_token_id(tokenizer, separator)  # already there when the tokenizer was saved with it

    device = resolve_device(options.device_map)
    quantized = options.load_in_4bit
    place = (device.index or 0) if device.type == "cuda" else "cpu"
    model = load_token_scorer(base, n_tokens=len(tokenizer), load_in_4bit=quantized,
                              dtype=choose_dtype(device, options.dtype), device_map={"": place},
                              attn_impl=options.attn_impl, trust_remote_code=options.trust_remote_code,
                              pad_token_id=tokenizer.pad_token_id, setting=setting)
    if is_adapter:
        fit_embeddings_to_adapter(model, folder, len(tokenizer), setting)   # either embedding convention
        try:
            with peft_alias_warning_silenced():
                model = PeftModel.from_pretrained(model, str(folder))
        except (RuntimeError, ValueError, KeyError, OSError) as err:  # e.g. shapes of another base model
            raise ModelError(f"{setting} {folder}: the adapter does not fit base model {base}: "
                             f"{first_line(err)}", setting=setting) from None
    if not quantized:
        model.to(device)
    model.eval()
    # Tokenised as in training: prompt and steps apart (stepwise objectives) or the whole text (pairwise).
    style = text_style(meta, folder, setting)
    encoder = TextEncoder(tokenizer, sep_id, max_length=max_length or meta.get("max_length", 2048),
                          max_prompt_length=meta.get("max_prompt_length", 0) if style == "steps" else 0,
                          style=style)
    training = training_of(meta)
    if training.get("objective") == "traj":
        return TrajScorer(model, encoder, separator, pad_id=tokenizer.pad_token_id, batch_size=batch_size,
                          setting=setting, source=str(path),
                          step_agg=training["step_agg"], softmin_temperature=training["softmin_temperature"])
    return HFScorer(model, encoder, separator, pad_id=tokenizer.pad_token_id, batch_size=batch_size,
                    scale=logit_scale(meta), setting=setting, source=str(path))
