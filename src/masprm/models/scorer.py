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
tanh(z); docs/differences.md), and a scorer trained with ``--calibrate`` applies the
Platt scaling recorded in its metadata to that value (``masprm.calibration``). A trajectory-level scorer
(``objective: traj`` in its metadata) values a text by its training aggregate
instead: 2A - 1, A the aggregate (``masprm.models.step_agg``, the recorded
``step_agg``) of the step probabilities at every separator that survives the cut.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
from peft import PeftModel

from masprm.errors import ModelError, first_line
from masprm.log import get_logger
from masprm.models.adapters import fit_embeddings_to_adapter
from masprm.models.loading import (ModelOptions, choose_dtype, load_tokenizer, peft_alias_warning_silenced,
                                   resolve_device, scorer_options)
from masprm.models.model_checks import check_finite_outputs
from masprm.models.step_agg import log_aggregate
from masprm.models.step_read import read_logits
from masprm.scorer_folder import ScorerFolder, read_scorer_folder
from masprm.scorer_formats import OWN, choose_format, head_of
from masprm.calibration import calibrated_value
from masprm.scorer_meta import (CAUSAL_LM_OBJECTIVES, DEFAULT_SOFTMIN_TEMPERATURE, head_read_of, logit_scale,
                                platt_of, text_style, training_of)
from masprm.models.text_encoder import TextEncoder, pad_right, score_position
from masprm.models.bidirectional import read_streams, two_streams
from masprm.models.generative_verifier import (QUESTION, answer_ids, question_ids, question_tokens,
                                               verdict_log_probs, verdict_rows, verdict_score)
from masprm.models.implicit_reward import encode_step_tokens, step_rewards, token_log_probs
from masprm.models.token_scorer import load_causal_lm, load_token_scorer, separator_token_id
from masprm.state_text import DEFAULT_SEPARATOR, StepText

log = get_logger(__name__)


@dataclass
class HFScorer:
    """A `Scorer`: tanh(scale * logit at the last separator) per text, one padded forward per batch."""

    model: Any
    encoder: TextEncoder
    separator: str
    pad_id: int
    batch_size: int = 16
    scale: float = 1.0    # the read-out's factor on the logit (scorer_meta.logit_scale)
    platt: tuple[float, float] | None = None   # Platt scaling (a, b) fitted by --calibrate (scorer_meta.platt_of)
    head_read: str = "step_end"   # where the head reads a step (masprm.models.step_read, scorer_meta.head_read_of)
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
        encoded = self.encode_rows(texts)
        ids = [x for x, _ in encoded]
        self.last_tokens = [self.tokens_fed(row) for row in encoded]   # per text: a shared batch counts per example
        self.tokens_seen += sum(self.last_tokens)
        # Batch texts of similar length together to cut padding; results go back in input order.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        scores = [0.0] * len(ids)
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            input_ids, attention_mask = pad_right([ids[i] for i in rows], self.pad_id)
            values = self.batch_values(input_ids.to(self.device), attention_mask.to(self.device),
                                       [encoded[i] for i in rows])
            for i, v in zip(rows, values):
                scores[i] = v
        check_finite_outputs(scores, self.setting, self.source, "a value")   # never rank by NaN
        if self.platt is not None:
            scores = [calibrated_value(v, *self.platt) for v in scores]
        return scores

    def encode_rows(self, texts: Sequence[str]) -> list[tuple[list[int], Any]]:
        """Each text's token ids (an empty text still gets a row) and what `batch_values` needs besides."""
        return [(x or [self.pad_id], None) for x in self.encoder.encode(texts)]

    def tokens_fed(self, row: tuple[list[int], Any]) -> int:
        """The tokens the model reads for one `encode_rows` row (usage accounting)."""
        return len(row[0])

    def batch_values(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     rows: list[tuple[list[int], Any]]) -> list[float]:
        # float64 from here on: float32 tanh is exactly 1.0 from |logit| >= 9.011, so two confident
        # candidates would tie and the search would pick by position, not by the scorer.
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits[..., 0].double()
        return self.row_values(logits, [ids for ids, _ in rows])

    def row_values(self, logits: torch.Tensor, rows: list[list[int]]) -> list[float]:
        """The value of each row: tanh(scale * its logit at its last separator) (its last token without one), the
        logit read as the head reads a step (`head_read`)."""
        at = torch.tensor([score_position(ids, self.encoder.sep_id) for ids in rows], device=logits.device)
        if self.head_read != "step_end":
            ids, _ = pad_right(rows, self.pad_id)
            read = read_logits(logits, ids.to(logits.device), at[:, None], self.encoder.sep_id, self.head_read)
            return torch.tanh(self.scale * read[:, 0]).tolist()
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


@dataclass
class ImplicitScorer(HFScorer):
    """An implicit PRM (``--mode implicit``): the causal LM with its adapter against itself without it.

    A (partial) transcript's value is tanh(q / 2), q = beta * the log-likelihood ratio of its steps'
    tokens so far (the prompt and the separators left out); a text that is not split into steps counts
    whole as one step.
    """

    beta: float = 0.05

    def encode_rows(self, texts: Sequence[str]) -> list[tuple[list[int], Any]]:
        rows = []
        for text in texts:
            if isinstance(text, StepText):
                ids, steps = encode_step_tokens(self.encoder, text.prompt, text.steps)
            else:
                ids = self.encoder.encode_whole([text])[0]
                steps = [0] * len(ids)
            rows.append((ids, steps) if ids else ([self.pad_id], [-1]))
        return rows

    def batch_values(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     rows: list[tuple[list[int], Any]]) -> list[float]:
        token_steps = torch.full_like(input_ids, -1)
        for r, (_, steps) in enumerate(rows):
            token_steps[r, :len(steps)] = torch.tensor(steps)
        logp = token_log_probs(self.model(input_ids=input_ids, attention_mask=attention_mask).logits, input_ids)
        with self.model.disable_adapter():   # pi_ref: the base policy
            ref = token_log_probs(self.model(input_ids=input_ids, attention_mask=attention_mask).logits, input_ids)
        q = step_rewards(logp, ref, token_steps, self.beta).sum(dim=1)
        return torch.tanh(q / 2).tolist()


@dataclass
class GenerativeScorer(HFScorer):
    """A generative verifier (``--mode gorm`` / ``gprm``): P(yes) - P(no) after the fixed question."""

    @functools.cached_property
    def words(self) -> tuple[list[int], list[list[int]]]:
        """The question's and the answers' token ids, tokenised once."""
        return question_tokens(self.encoder.tokenizer), answer_ids(self.encoder.tokenizer)

    def encode_rows(self, texts: Sequence[str]) -> list[tuple[list[int], Any]]:
        return [(question_ids(self.encoder, t.prompt, t.steps, self.words[0]) if isinstance(t, StepText)
                 else self.encoder.encode_whole([t + QUESTION])[0], None) for t in texts]

    def batch_values(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     rows: list[tuple[list[int], Any]]) -> list[float]:
        batch = verdict_rows([r for r, _ in rows], self.words[1], self.pad_id)
        batch = {k: v.to(self.device) for k, v in batch.items()}
        logits = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        return verdict_score(verdict_log_probs(logits, batch)).tolist()


@dataclass
class EnsembleScorer(HFScorer):
    """An ensemble of value heads (``--mode ensemble``): the heads' mean read-out, 2 mean(sigmoid(z_h)) - 1,
    at the last separator; ``last_spread`` holds each text's spread (the std of the heads' probabilities)."""

    last_spread: list[float] = field(default_factory=list)

    def score_batch(self, texts: Sequence[str]) -> list[float]:
        self.spread_of: dict[int, float] = {}
        values = super().score_batch(texts)
        self.last_spread = [self.spread_of[i] for i in range(len(texts))]
        return values

    def encode_rows(self, texts: Sequence[str]) -> list[tuple[list[int], Any]]:
        return [(ids, i) for i, (ids, _) in enumerate(super().encode_rows(texts))]   # the text's index rides along

    def batch_values(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     rows: list[tuple[list[int], Any]]) -> list[float]:
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits.double()
        at = torch.tensor([score_position(ids, self.encoder.sep_id) for ids, _ in rows], device=logits.device)
        probs = torch.sigmoid(logits[torch.arange(len(rows), device=logits.device), at])   # (rows, heads)
        for (_, i), spread in zip(rows, probs.std(dim=-1, unbiased=False).tolist()):
            self.spread_of[i] = spread
        return (2 * probs.mean(dim=-1) - 1).tolist()


@dataclass
class BiprmScorer(HFScorer):
    """A bidirectional scorer (``--mode biprm``): a finished transcript read in order and reversed, the two
    streams' scores fused by the learned gate, served as tanh(z / 2) = 2 sigmoid(z) - 1. BiPRM scores known
    trajectories, so a text with fewer steps than the shortest training transcript is refused."""

    min_steps: int = 1

    def encode_rows(self, texts: Sequence[str]) -> list[tuple[list[int], Any]]:
        rows = []
        for text in texts:
            steps = text.steps if isinstance(text, StepText) else []
            if len(steps) < self.min_steps:
                raise ModelError(f"{self.setting} {self.source}: a biprm scorer re-ranks finished transcripts, and "
                                 f"this one has {len(steps)} step(s) where its training transcripts had at least "
                                 f"{self.min_steps} (use it with best-of-N --step_agg last)", setting=self.setting)
            rows.append(two_streams(self.encoder, text.prompt, steps))
        return rows

    def tokens_fed(self, row: tuple[list[int], Any]) -> int:
        return len(row[0]) + len(row[1])   # both streams are read

    def batch_values(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     rows: list[tuple[list[int], Any]]) -> list[float]:
        both = [f for f, _ in rows] + [b for _, b in rows]
        ids, mask = pad_right(both, self.pad_id)
        index = torch.tensor([score_position(r, self.encoder.sep_id) for r in both], device=self.device)
        logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits.double()
        return torch.tanh(read_streams(logits, index) / 2).tolist()


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
                record: ScorerFolder | None = None, merge: bool = True) -> HFScorer:
    """Load a trained scorer in eval mode.

    `options=None` means `scorer_options(ModelOptions())`: a 4-bit NF4 base on
    CUDA, fp32 on CPU; `options.load_in_4bit` quantises on CPU too.
    `max_length=None` is the training run's --max-length (2048 if unknown).
    `setting` names the scorer's setting (its folder's flag) in error messages.
    `record` is the folder as stage 4 already read it (``masprm.scorer_folder``), in the format it chose;
    None reads it here and reads it in the format it shows (``masprm.scorer_formats``). A public format
    loads through ``masprm.models.public_scorers``. `merge=False` keeps a LoRA adapter apart from its base
    (`load_weights`; bench/bench_scorer.py measures what merging saves).
    """
    if options is None:
        options = scorer_options(ModelOptions())
    record = record.at(Path(path).expanduser()) if record is not None else read_scorer_folder(path)
    record = choose_format(record, setting=setting)
    folder = resolve_scorer_folder(path, setting, record)
    if record.meta_error:
        raise ModelError(f"{setting} {path}: {record.meta_error}", setting=setting)
    meta = record.meta
    is_adapter = record.is_adapter
    base = adapter_base_model(record, base_model_id, setting) if is_adapter else str(folder)
    has_tokenizer = (folder / "tokenizer_config.json").is_file()
    tokenizer = load_tokenizer(str(folder) if has_tokenizer else base, options.trust_remote_code,
                               padding_side="right", setting=setting)
    if record.scorer_format != OWN:
        from masprm.models.public_scorers import public_scorer   # its scorers build on the ones above
        return public_scorer(record, base, tokenizer, options, max_length, batch_size, setting=setting,
                             source=str(path))
    separator = meta.get("separator", DEFAULT_SEPARATOR)
    sep_id = separator_token_id(tokenizer, separator)  # already there when the tokenizer was saved with it

    training = training_of(meta)
    implicit = training.get("objective") == "implicit"
    causal = training.get("objective") in CAUSAL_LM_OBJECTIVES
    if implicit and not is_adapter:
        raise ModelError(f"{setting} {folder}: an implicit PRM needs its LoRA adapter (its reference is the base "
                         "model without it), and the folder holds a full model", setting=setting)
    heads = {} if causal else {"heads": head_of(record)[1]}
    model = load_weights(load_causal_lm if causal else load_token_scorer, record, base, options, len(tokenizer),
                         pad_token_id=tokenizer.pad_token_id, setting=setting, merge=merge and not implicit, **heads)
    # Tokenised as in training: prompt and steps apart (stepwise objectives) or the whole text (pairwise).
    style = text_style(meta, folder, setting)
    encoder = TextEncoder(tokenizer, sep_id, max_length=max_length or meta.get("max_length", 2048),
                          max_prompt_length=meta.get("max_prompt_length", 0) if style == "steps" else 0,
                          style=style)
    if implicit:
        return ImplicitScorer(model, encoder, separator, pad_id=tokenizer.pad_token_id, batch_size=batch_size,
                              setting=setting, source=str(path), beta=training["implicit_beta"])
    if causal:
        return GenerativeScorer(model, encoder, separator, pad_id=tokenizer.pad_token_id, batch_size=batch_size,
                                setting=setting, source=str(path))
    if training.get("objective") == "biprm":
        return BiprmScorer(model, encoder, separator, pad_id=tokenizer.pad_token_id, batch_size=batch_size,
                           setting=setting, source=str(path), min_steps=int(meta.get("biprm_min_steps", 1)))
    if training.get("objective") == "ensemble":
        return EnsembleScorer(model, encoder, separator, pad_id=tokenizer.pad_token_id, batch_size=batch_size,
                              setting=setting, source=str(path))
    if training.get("objective") == "traj":
        return TrajScorer(model, encoder, separator, pad_id=tokenizer.pad_token_id, batch_size=batch_size,
                          setting=setting, source=str(path),
                          step_agg=training["step_agg"], softmin_temperature=training["softmin_temperature"])
    return HFScorer(model, encoder, separator, pad_id=tokenizer.pad_token_id, batch_size=batch_size,
                    scale=logit_scale(meta), platt=platt_of(meta, warn=lambda line: log.warning("%s: %s", path, line)),
                    head_read=head_read_of(meta),
                    setting=setting, source=str(path))


def load_weights(loader, record: ScorerFolder, base: str, options: ModelOptions, n_tokens: int | None, *,
                 setting: str, n_tokenizer: int | None = None, merge: bool = True, **kwargs):
    """The scorer's model on its device in eval mode: ``loader`` (``masprm.models.token_scorer``) on ``base``,
    its embeddings resized to ``n_tokens`` (None: as saved), and the folder's adapter on top, merged into the
    base's weights when ``merge`` and the base is not 4-bit (the implicit PRM keeps it apart: its reference
    is the base without it)."""
    device = resolve_device(options.device_map)
    quantized = options.load_in_4bit
    place = (device.index or 0) if device.type == "cuda" else "cpu"
    model = loader(base, n_tokens=n_tokens, load_in_4bit=quantized, dtype=choose_dtype(device, options.dtype),
                   device_map={"": place}, attn_impl=options.attn_impl, trust_remote_code=options.trust_remote_code,
                   setting=setting, **kwargs)
    if record.is_adapter:
        folder = record.target
        fit_embeddings_to_adapter(model, folder, n_tokenizer or n_tokens or 0, setting)   # either embedding convention
        try:
            with peft_alias_warning_silenced():
                model = PeftModel.from_pretrained(model, str(folder))
        except (RuntimeError, ValueError, KeyError, OSError) as err:  # e.g. shapes of another base model
            raise ModelError(f"{setting} {folder}: the adapter does not fit base model {base}: "
                             f"{first_line(err)}", setting=setting) from None
        if merge and not quantized:
            # W + BA once instead of two extra matmuls and peft's wrappers in every layer of every forward: a
            # search scores hundreds of texts per question (MCTS + mc+prm on toy_deep: 22% fewer CPU seconds;
            # values equal to about 1e-6, bench/bench_scorer.py)
            model = model.merge_and_unload()
    if not quantized:
        model.to(device)
    return model.eval()
