"""`HFPolicy`: the agents' language model on a Hugging Face causal LM.

- Prompts, completions, stop ids and decoded generations are `ChatTokens`'
  (`masprm.models.chat`), shared with the other generation backends.
- `sample` decodes all prompts' rows together (left padding, a KV cache, one
  forward per new token), split into calls of at most `max_batch_tokens`
  padded tokens (prompt + new tokens). Each row samples from its own random
  stream (Gumbel-max with noise hashed from the row's key, the step and the
  token id), so a row's tokens do not depend on which rows share the call:
  with the same weights, device and dtype they differ only where float
  rounding of another padding width flips a near tie. Sampling applies the
  checkpoint's `repetition_penalty` and `top_k` (from its generation config),
  then the temperature and top-p given here, in `generate`'s order (`RowSampler`: the penalty on each
  row's seen ids, top-k before any sort, one host read per step).
- How a step runs is the policy's decode mode (`--decode`, `ModelOptions.decode`): `eager` grows a
  dynamic KV cache (`EagerSteps`; the CPU default), `static` and `graphs` run on a bucketed static cache,
  `graphs` with the step compiled, CUDA graphs on a GPU (`masprm.models.static_decode`; the default on
  one CUDA device with compiling on). Every mode samples with the same code and streams.
- `logprob` is one teacher-forced forward over all (prompt, completion) pairs
  (right padding, so every real token keeps its unpadded positions). The
  completion is tokenised with `add_special_tokens=False` and only its own
  tokens are scored, as in the original (no end-of-turn token is appended,
  so every log-prob baseline compares with the original's). Log-probs
  come from the output embedding applied to the gathered completion positions
  (Qwen2/Llama-style heads; a model that post-processes its logits, e.g.
  Gemma 2's soft-capping, would need that step added here).
- `reseed(seed)` seeds torch's (and CUDA's) global RNG, which names the
  streams of a call made without keys, so such calls are reproducible too.
"""

from __future__ import annotations

from typing import Sequence

import torch

from masprm.interfaces import LogProb, Messages
from masprm.models.chat import STREAM_PRIME as _P, ChatTokens, sampling_warps, stream_seed
from masprm.models.loading import ModelOptions, cache_argument, load_causal_lm, load_tokenizer
from masprm.models.model_checks import check_finite_outputs
from masprm.models.options import DECODE_MODES
from masprm.models.static_decode import StaticDecoder, default_compiler, full_attention_only

# Per-row random streams: a counter-based hash of (stream seed, step, token id) gives each
# candidate token its own uniform draw, so a row's sample is the same in any batch
# (_P is a prime; every product below stays inside int64).


def _mix(x: torch.Tensor, multiplier: int) -> torch.Tensor:
    x = (x * multiplier) % _P
    return x ^ (x >> 13)


def uniform_noise(seeds: torch.Tensor, step: int, tokens: torch.Tensor) -> torch.Tensor:
    """U(0, 1) per (row, candidate token): seeds is (rows, 2), tokens (rows, k) token ids."""
    x = (seeds[:, :1] + tokens * 7919 + step * 104729) % _P
    x = _mix(_mix(x, 48271), 69621)
    x = _mix((x + seeds[:, 1:]) % _P, 16807)
    x = _mix(x ^ tokens, 39373) % _P
    return (x.double() + 0.5) / _P


def candidates(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, token ids) of each row's candidates, best first: its top k (a partial selection, no sort of
    the vocabulary), or every token sorted when top_k is 0. NaN ranks first, so values[:, 0] is non-finite
    exactly when the row's largest logit is (NaN, +inf, or -inf for every token)."""
    if top_k > 0:
        return logits.topk(min(top_k, logits.shape[-1]), dim=-1)
    return logits.sort(dim=-1, descending=True)


def draw(values: torch.Tensor, tokens: torch.Tensor, top_p: float, seeds: torch.Tensor, step: int) -> torch.Tensor:
    """A sample per row from softmax(values) over its candidates cut to top-p, from the row's own stream.

    Gumbel-max: the argmax of log-prob + Gumbel noise is a draw from the
    distribution; the noise of a token comes from the row's own stream.
    """
    probs = values.softmax(-1)
    keep = (probs.cumsum(-1) - probs) < top_p   # the mass before a token: keep while under top_p
    keep[:, 0] = True
    gumbel = -torch.log(-torch.log(uniform_noise(seeds, step, tokens)))
    score = torch.where(keep, values.double() + gumbel, torch.tensor(float("-inf"), dtype=torch.double))
    return tokens.gather(1, score.argmax(-1, keepdim=True))[:, 0]


def pick_token(logits: torch.Tensor, top_p: float, top_k: int, seeds: torch.Tensor, step: int) -> torch.Tensor:
    """A sample from softmax(logits) cut to top-k, then to top-p (as `generate` warps), per row."""
    return draw(*candidates(logits, top_k), top_p, seeds, step)


class RowSampler:
    """The per-token work of a decode step, for all rows: the repetition penalty on each row's seen tokens,
    temperature, top-k, top-p and the keyed draw (`generate`'s order), greedy at temperature <= 0.

    The penalty gathers the logits of a row's seen tokens (prompt and sampled so far, kept as ids, a row's
    first token repeated as padding: scattering one value twice is harmless), rescales them and scatters them
    back, rather than passing over the whole vocabulary three times; the values and the float operations on
    them are those of a vocabulary-wide `where`, so the tokens are the same to the bit. `bad` is a device
    flag, true when a row's largest logit is not finite, read with the step's stop check (one host read).
    """

    def __init__(self, prompts: list[list[int]], max_new_tokens: int, *, temperature: float, top_p: float,
                 top_k: int, penalty: float, seeds: torch.Tensor):
        self.temperature, self.top_p, self.top_k, self.seeds = temperature, top_p, top_k, seeds
        self.penalty = None if penalty == 1.0 else penalty
        self.seen: torch.Tensor | None = None
        self.bad = torch.zeros((), dtype=torch.bool, device=seeds.device)
        if self.penalty is not None:
            self.width = max(len(row) for row in prompts)
            ids = [row + row[:1] * (self.width + max_new_tokens - len(row)) for row in prompts]
            self.seen = torch.tensor(ids, dtype=torch.long, device=seeds.device)

    def pick(self, logits: torch.Tensor, step: int) -> torch.Tensor:
        """The rows' tokens at decode step `step` (0-based) from their next-token logits, which it overwrites
        (the penalty and temperature in place: no copy of the vocabulary-wide tensor)."""
        logits = logits.float()
        if self.seen is not None:
            ids = self.seen[:, :self.width + step].to(logits.device)
            seen = logits.gather(1, ids)
            logits.scatter_(1, ids, torch.where(seen < 0, seen * self.penalty, seen / self.penalty))
        if self.temperature <= 0:
            token = logits.argmax(-1)
            top = logits.gather(1, token[:, None])[:, 0]
        else:
            # over the whole vocabulary, before top-k, as `generate`: dividing only the top k would keep other
            # tokens where the division rounds two logits to one value at the cut
            values, tokens = candidates(logits.div_(self.temperature), self.top_k)
            top = values[:, 0]
            token = draw(values, tokens, self.top_p, self.seeds.to(values.device), step)
        self.bad = ~torch.isfinite(top).all()
        return token

    def saw(self, tokens: torch.Tensor, step: int) -> None:
        """Record the rows' tokens of step `step` among their seen tokens."""
        if self.seen is not None:
            self.seen[:, self.width + step] = tokens


class EagerSteps:
    """The eager loop's decode steps (`--decode eager`): a dynamic KV cache grown by one position per token.

    transformers reads a 2D attention mask on the host at every step (to skip it when no row is padded); the
    padding is known here before decoding starts, so a step passes no mask when no row is padded and, where
    the model takes one (SDPA attention, full-attention layers only), the 4D mask transformers would build
    when some are: the same mask, without the host read.
    """

    def __init__(self, model, cache_arg: str, cache, attention_mask: torch.Tensor, positions: torch.Tensor,
                 padded: bool):
        self.model, self.cache_arg, self.cache = model, cache_arg, cache
        self.attention_mask, self.positions, self.padded = attention_mask, positions, padded
        self.prepared = model.config._attn_implementation == "sdpa" and full_attention_only(model)

    def next(self, tokens: torch.Tensor) -> torch.Tensor:
        self.attention_mask = torch.cat([self.attention_mask, torch.ones_like(self.attention_mask[:, :1])], dim=1)
        self.positions = self.positions + 1
        mask = self.attention_mask
        if self.prepared:   # a decode step's query sees every cached position: the causal part is all true
            mask = mask.bool()[:, None, None, :] if self.padded else None
        result = self.model(input_ids=tokens[:, None], attention_mask=mask, position_ids=self.positions,
                            use_cache=True, logits_to_keep=1, **{self.cache_arg: self.cache})
        self.cache = getattr(result, self.cache_arg)
        return result.logits[:, -1, :]


class HFPolicy(ChatTokens):
    """Implements `masprm.interfaces.Policy` on a local folder or hub id."""

    def __init__(self, model_id: str, options: ModelOptions = ModelOptions(), *, setting: str = "model_id",
                 prompt_cache_size: int = 4096, max_batch_tokens: int = 262144):
        tokenizer = load_tokenizer(model_id, options.trust_remote_code, setting=setting)
        self.model = load_causal_lm(model_id, options, setting=setting, n_tokens=len(tokenizer))
        super().__init__(model_id, tokenizer, self.model.generation_config, prompt_cache_size)
        self.setting = setting
        self.device = self.model.device
        self.pad_id = self.tokenizer.pad_token_id
        self.max_batch_tokens = max_batch_tokens  # padded tokens per call: bigger calls are split
        self._cache_arg = cache_argument(self.model)
        if self.model.generation_config.pad_token_id is None:
            self.model.generation_config.pad_token_id = self.pad_id
        self.decode = decode_mode(options, self.model)
        self._static = None if self.decode == "eager" else StaticDecoder(
            self.model, compiler=default_compiler(self.device) if self.decode == "graphs" else None)

    # -- prompts --------------------------------------------------------------

    def _padded(self, rows: list[list[int]], left: bool) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            span = slice(width - len(row), width) if left else slice(0, len(row))
            ids[i, span] = torch.tensor(row, dtype=torch.long)
            mask[i, span] = 1
        return ids.to(self.device), mask.to(self.device)

    # -- Policy API -----------------------------------------------------------

    def reseed(self, seed: int) -> None:
        torch.manual_seed(seed)  # seeds the CPU generator and every CUDA device's

    def _fresh_key(self) -> tuple[int, ...]:
        """A stream key for a call without keys: from torch's global RNG, so `reseed` makes calls repeat."""
        return tuple(torch.randint(0, 2 ** 31 - 1, (2,)).tolist())

    @torch.no_grad()
    def _sample_streams(self, streams: list[tuple[list[int], tuple[int, ...]]], temperature: float, top_p: float,
                        max_new_tokens: int) -> list[list[int]]:
        """The tokens of each (prompt ids, stream key) row: padded calls under max_batch_tokens."""
        seqs = [(row, stream_seed(key)) for row, key in streams]
        new: list[list[int]] = [[] for _ in seqs]
        for batch in self._batches([(row, [0] * max_new_tokens) for row, _ in seqs]):
            for i, tokens in zip(batch, self._decode([seqs[i] for i in batch], temperature, top_p, max_new_tokens)):
                new[i] = tokens
        return new

    def _decode(self, seqs: list[tuple[list[int], tuple[int, int]]], temperature: float, top_p: float,
                max_new_tokens: int) -> list[list[int]]:
        """Sampled tokens of each (prompt, stream seed) row, one forward per new token (KV cache).

        The n samples of one prompt share its prefill: each distinct prompt is
        encoded once and its KV cache (and first logits) copied to its rows, so
        a call of n samples per prompt reads each prompt once, not n times.
        A step reads the device once: whether every row has stopped, with
        whether a row's logits were not finite (then refused in one line).
        """
        rows = len(seqs)
        distinct: dict[tuple[int, ...], int] = {}
        owner = [distinct.setdefault(tuple(row), len(distinct)) for row, _ in seqs]
        input_ids, attention_mask = self._padded([list(row) for row in distinct], left=True)
        positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        result = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                            use_cache=True, logits_to_keep=1, **{self._cache_arg: None})
        logits = result.logits[:, -1, :]
        index = torch.tensor(owner)   # a CPU index selects rows on any device (layers may sit on several GPUs)
        padded = len({len(row) for row in distinct}) > 1
        steps = self._steps(getattr(result, self._cache_arg), index, attention_mask, positions[:, -1:],
                            max_new_tokens, padded)
        if len(distinct) < rows:   # each prompt's first logits to its sample rows
            logits = logits[index.to(logits.device)]
        top_k, penalty = sampling_warps(self.model.generation_config)
        seeds = torch.tensor([seed for _, seed in seqs], dtype=torch.long, device=self.device)
        sampler = RowSampler([list(row) for row, _ in seqs], max_new_tokens, temperature=temperature, top_p=top_p,
                             top_k=top_k, penalty=penalty, seeds=seeds)
        stop = torch.tensor(sorted(self.stop_ids), device=self.device)
        done = torch.zeros(rows, dtype=torch.bool, device=self.device)
        out = torch.full((rows, max_new_tokens), self.pad_id, dtype=torch.long, device=self.device)
        for step in range(max_new_tokens):
            token = sampler.pick(logits, step).to(self.device)
            token = torch.where(done, torch.full_like(token, self.pad_id), token)
            out[:, step] = token
            done |= torch.isin(token, stop)
            bad, finished = torch.stack([sampler.bad.to(self.device), done.all()]).tolist()   # the one host read
            if bad:
                check_finite_outputs([float("nan")], self.setting, self.model_id, f"logits (new token {step + 1})")
            if finished or step == max_new_tokens - 1:
                break
            sampler.saw(token, step)
            logits = steps.next(token)
        return out.tolist()

    def _steps(self, cache, index: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor,
               max_new_tokens: int, padded: bool):
        """The decode steps after a prefill, in the policy's decode mode (`DECODE_MODES`)."""
        if self._static is not None:
            return self._static.begin(cache, index, attention_mask, positions, max_new_tokens)
        if len(index) > attention_mask.shape[0]:   # copy each prompt's state to its sample rows
            cache.batch_select_indices(index)
            attention_mask, positions = attention_mask[index], positions[index]
        return EagerSteps(self.model, self._cache_arg, cache, attention_mask, positions, padded)

    @torch.no_grad()
    def logprob(self, requests: Sequence[tuple[Messages, str]]) -> list[LogProb]:
        """Sum of completion-token log-probs under teacher forcing, one padded forward per batch."""
        pairs = [(self.prompt_ids(messages), self.completion_ids(completion)) for messages, completion in requests]
        results: list[LogProb | None] = [None] * len(pairs)
        for batch in self._batches(pairs):
            sums = self._completion_logprobs([pairs[i] for i in batch])
            for i, total in zip(batch, sums):
                prompt, completion = pairs[i]
                results[i] = LogProb(logprob=total, prompt_tokens=len(prompt), completion_tokens=len(completion))
        return results  # type: ignore[return-value]

    def _batches(self, pairs: list[tuple[list[int], list[int]]]) -> list[list[int]]:
        """Indices grouped, longest first, so each padded batch stays under max_batch_tokens."""
        lengths = [len(prompt) + len(completion) for prompt, completion in pairs]
        batches: list[list[int]] = []
        for i in sorted(range(len(pairs)), key=lambda i: -lengths[i]):
            # the batch's first index is its longest row, so its padded size is rows x that length
            if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= self.max_batch_tokens:
                batches[-1].append(i)
            else:
                batches.append([i])
        return batches

    def _completion_logprobs(self, pairs: list[tuple[list[int], list[int]]]) -> list[float]:
        rows = [prompt + completion for prompt, completion in pairs]
        input_ids, attention_mask = self._padded(rows, left=False)
        hidden = self.model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask,
                                          use_cache=False).last_hidden_state
        # Token t of the completion is predicted from position t - 1; gather only those positions,
        # so the vocabulary projection never sees the prompt or the padding.
        batch_idx, pos_idx, targets, owner = [], [], [], []
        for i, (prompt, completion) in enumerate(pairs):
            for j, token in enumerate(completion):
                batch_idx.append(i)
                pos_idx.append(len(prompt) + j - 1)
                targets.append(token)
                owner.append(i)
        sums = [0.0] * len(pairs)
        if not targets:
            return sums
        # With device_map="auto" over several GPUs the hidden states live on the last GPU, not on
        # self.device (the first, where inputs go): index where they are, project where the head is.
        at = hidden.device
        selected = hidden[torch.tensor(batch_idx, device=at), torch.tensor(pos_idx, device=at)]
        head = self.model.get_output_embeddings()
        logits = head(selected.to(head.weight.device)).float()
        token_logprobs = torch.log_softmax(logits, dim=-1)
        picked = token_logprobs[torch.arange(len(targets), device=logits.device),
                                torch.tensor(targets, device=logits.device)].tolist()
        for i, value in zip(owner, picked):
            sums[i] += value
        return sums   # checked finite where every backend's are (masprm.models.backends.CheckedPolicy)


def decode_mode(options: ModelOptions, model) -> str:
    """The decode loop a policy runs (`DECODE_MODES`): "auto" is eager (graphs is asked for by name until a GPU
    run has checked it: `DECODE_MODES`' comment); a static cache needs full-attention layers only (else eager, warned)."""
    from masprm.errors import ConfigError
    from masprm.models.loading import warn_once

    if options.decode not in DECODE_MODES:
        raise ConfigError(f"decode {options.decode!r}: expected one of {', '.join(DECODE_MODES)}", setting="decode")
    mode = options.decode
    if mode == "auto":
        mode = "eager"
    if mode != "eager" and not full_attention_only(model):
        warn_once(f"--decode {mode}: the model has sliding-window layers, which the static cache does not "
                  "take here; decoding eagerly")
        mode = "eager"
    return mode


def load(model_id: str, options: ModelOptions, flags, *, setting: str = "model_id",
         max_batch_tokens: int | None = None) -> HFPolicy:
    """The "hf" generation backend's loader (`masprm.models.backends`): flags carry no option it reads."""
    extra = {"max_batch_tokens": max_batch_tokens} if max_batch_tokens else {}
    return HFPolicy(model_id, options, setting=setting, **extra)
