"""Public scorer formats at inference (``masprm.scorer_formats``): a TRL reward model and the step-tag PRMs.

    scorer = load_scorer("exports/trl-rm", setting="orm_dir")   # detected as trl_reward
    scorer.score_batch([StepText("Q?", ["step 1", "step 2"])])    # -> values in [-1, 1]

Both read the project's scorer text (``masprm.state_text``) as one string,
tokenised whole as their own trainers tokenise it, and cut from the left to
``max_length`` (default 2048) so that its end survives:

- ``RewardScorer`` (``trl_reward``): the text ``prompt + step_1 + </step> + ...``
  plus the tokenizer's EOS, as ``RewardTrainer`` appends it to its preference
  rows; the reward r is the model's own pooled logit (at its last token that is
  not padding, where ``RewardTrainer`` trained it), served as
  2 sigmoid(r) - 1 = tanh(r / 2): twice the Bradley-Terry probability that the
  transcript beats one of reward 0, minus one;
- ``TagScorer`` (``step_tag_classifier``, ``causal_lm_good_bad``): the steps
  joined by the format's step tag, ``prompt + step_1 + TAG + step_2 + TAG``; the
  value is 2p - 1, p the softmax over two columns of the logits at the last tag:
  (the good label, the other) of a two-label token classifier, or the good and
  the bad token of a causal LM's next-token logits, which gives
  p = P(good) / (P(good) + P(bad)). A text without a tag is read at its last token.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Sequence

import torch

from masprm.errors import ModelError
from masprm.models.loading import ModelOptions, load_tokenizer
from masprm.models.scorer import HFScorer, load_weights
from masprm.models.text_encoder import TextEncoder, score_position
from masprm.models.token_scorer import load_head_model
from masprm.scorer_folder import ScorerFolder
from masprm.scorer_formats import SCORER_FORMATS
from masprm.state_text import DEFAULT_SEPARATOR, StepText


@dataclass
class PublicScorer(HFScorer):
    """A public format's text: the project's scorer text with this scorer's separator, plus ``suffix``."""

    suffix: str = ""

    def encode_rows(self, texts: Sequence[str]) -> list[tuple[list[int], Any]]:
        whole = [(StepText(t.prompt, t.steps, self.separator) if isinstance(t, StepText) else t) + self.suffix
                 for t in texts]
        return [(ids or [self.pad_id], None) for ids in self.encoder.encode_whole([str(t) for t in whole])]


@dataclass
class RewardScorer(PublicScorer):
    """A TRL reward model: tanh(r / 2), r its reward of the text plus EOS (see the module docstring)."""

    def batch_values(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     rows: list[tuple[list[int], Any]]) -> list[float]:
        reward = self.model(input_ids=input_ids, attention_mask=attention_mask).logits[:, 0].double()
        return torch.tanh(reward / 2).tolist()


@dataclass
class TagScorer(PublicScorer):
    """A step-tag PRM: 2 softmax(logits[last tag, columns])[0] - 1 (see the module docstring)."""

    columns: tuple[int, int] = (1, 0)   # (good, bad): labels of a classifier, token ids of a causal LM

    def encode_rows(self, texts: Sequence[str]) -> list[tuple[list[int], Any]]:
        rows = super().encode_rows(texts)
        for text, (ids, _) in zip(texts, rows):
            if isinstance(text, StepText) and text.steps and self.encoder.sep_id not in ids:
                raise ModelError(f"{self.setting} {self.source}: the step tag {self.separator!r} does not survive "
                                 f"tokenisation in the text (its tokenizer merges it with its neighbours); pass "
                                 "`step_tag` with a tag the tokenizer keeps whole", setting=self.setting)
        return rows

    def batch_values(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     rows: list[tuple[list[int], Any]]) -> list[float]:
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
        at = torch.tensor([score_position(ids, self.encoder.sep_id) for ids, _ in rows], device=logits.device)
        pair = logits[torch.arange(len(rows), device=logits.device), at][:, list(self.columns)].double()
        return (2 * torch.softmax(pair, dim=-1)[:, 0] - 1).tolist()


def one_token(tokenizer, token: str, flag: str, setting: str, source: str) -> int:
    """The id of ``token`` as one token of the scorer's own vocabulary; a token it splits is one line naming ``flag``
    (a public scorer's vocabulary is never grown: its head knows only the tokens it was trained with)."""
    if token in tokenizer.get_vocab():
        return tokenizer.convert_tokens_to_ids(token)
    ids = tokenizer(token, add_special_tokens=False)["input_ids"]
    if len(ids) == 1:
        return ids[0]
    raise ModelError(f"{setting} {source}: {flag} {token!r} is not a token of this scorer's tokenizer (it is "
                     f"{len(ids)} tokens); pass `{flag}` with the token the scorer was trained with", setting=setting)


def format_tokens(record: ScorerFolder, tokenizer, *, setting: str, source: str) -> tuple[int, tuple[int, int]]:
    """(the step tag's id, the (good, bad) columns) a TagScorer reads, each token checked against the tokenizer
    (stage 4 calls it before any model loads)."""
    fmt, chosen = SCORER_FORMATS[record.scorer_format], record.format_options
    tag = one_token(tokenizer, chosen["step_tag"], "step_tag", setting, source)
    if fmt.model == "causal_lm":
        return tag, tuple(one_token(tokenizer, chosen[key], key, setting, source) for key in ("good_token", "bad_token"))
    return tag, (chosen["good_label"], 1 - chosen["good_label"])


def public_scorer(record: ScorerFolder, base: str, tokenizer, options: ModelOptions, max_length: int | None,
                  batch_size: int, *, setting: str, source: str) -> HFScorer:
    """The scorer of a folder in a public format (``record.scorer_format``), its model loaded as saved (no
    token added, no embedding resized)."""
    fmt = SCORER_FORMATS[record.scorer_format]
    reward = fmt.model == "sequence_classification"
    tag, columns = (-1, (0, 0)) if reward else format_tokens(record, tokenizer, setting=setting, source=source)
    model = load_weights(partial(load_head_model, fmt.model, fmt.num_labels), record, base, options, None,
                         n_tokenizer=len(tokenizer), setting=setting)
    text_config = model.config.get_text_config()
    if text_config.pad_token_id is None:   # the sequence classifier pools at the last token that is not padding
        text_config.pad_token_id = tokenizer.pad_token_id
    common = dict(pad_id=text_config.pad_token_id, batch_size=batch_size, setting=setting, source=source)
    encoder = TextEncoder(tokenizer, tag, max_length=max_length or 2048)
    if reward:
        return RewardScorer(model, encoder, DEFAULT_SEPARATOR, suffix=tokenizer.eos_token or "", **common)
    return TagScorer(model, encoder, record.format_options["step_tag"], columns=columns, **common)


def check_format_tokens(record: ScorerFolder, base: str | None, options: ModelOptions, setting: str) -> None:
    """A step-tag format's tokens checked against the scorer's tokenizer before any model loads (stage 4)."""
    if SCORER_FORMATS[record.scorer_format].model not in ("token_classification", "causal_lm"):
        return
    folder = record.target
    has_tokenizer = (folder / "tokenizer_config.json").is_file()
    tokenizer = load_tokenizer(str(folder) if has_tokenizer or not base else base, options.trust_remote_code,
                               setting=setting)
    format_tokens(record, tokenizer, setting=setting, source=str(record.path))
