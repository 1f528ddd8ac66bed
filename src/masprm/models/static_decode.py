"""Decode steps on a static KV cache, optionally compiled (CUDA graphs on a GPU): `HFPolicy`'s `--decode static`
and `--decode graphs`.

The eager loop (`--decode eager`) grows a dynamic KV cache by one position per new token, so every step has
new shapes and a GPU spends it launching kernels one by one. Here a call's rows and cache length are rounded
up to buckets (rows to a power of two, the length to a multiple of `LENGTH_STEP`) and the cache of each bucket
is allocated once (transformers' `StaticCache`) and kept: every step of every call of one bucket has the same
shapes and the same cache tensors, which is what lets `torch.compile(mode="reduce-overhead")` capture the step
as a CUDA graph once and replay it. The prompts' prefill runs eagerly on a dynamic cache (its shapes change
with every call) and is copied into the bucket's static cache.

Inside the step, left padding is the 2D attention mask over the whole cache length (ones on the prompt's
real tokens and on every position decoded so far); the rows added to reach the bucket repeat row 0's state
and their logits are dropped; rows that stopped early keep decoding the pad token as in the eager loop. Only
the model's forward is compiled: sampling stays in `HFPolicy` (the same code for every mode), so the keyed
per-row streams give the same tokens as the eager loop wherever the logits agree to the bit. The static
cache attends over the padded length, so its logits may differ from the eager loop's in the last bits, and a
token may then differ where two candidates were within that rounding (a near tie).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from masprm.log import get_logger
from masprm.models.loading import cache_argument, eager_fallback

log = get_logger(__name__)

LENGTH_STEP = 256   # cache lengths are rounded up to a multiple of this: a few graphs cover every call
RECOMPILE_LIMIT = 64   # graphs one step function may hold (torch's default, 8, is fewer than the buckets)


def row_bucket(rows: int) -> int:
    """The rows a call of `rows` rows runs with: the next power of two."""
    return 1 << max(rows - 1, 0).bit_length()


def length_bucket(tokens: int) -> int:
    """The cache length of a call needing `tokens` positions: the next multiple of LENGTH_STEP."""
    return -(-tokens // LENGTH_STEP) * LENGTH_STEP


def default_compiler(device: torch.device) -> Callable:
    """torch.compile for one step of fixed shapes: CUDA graphs on a GPU ("reduce-overhead"), inductor elsewhere."""
    import torch._dynamo.config as dynamo_config

    # Each bucket is another graph of the same function; past the limit torch would silently run eagerly.
    dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, RECOMPILE_LIMIT)
    mode = "reduce-overhead" if device.type == "cuda" else None
    return lambda fn: torch.compile(fn, mode=mode, dynamic=False)


def full_attention_only(model) -> bool:
    """Whether every layer of the model is plain full attention (a sliding-window layer's static cache fills
    differently from the prefill copy made here)."""
    types = getattr(model.config.get_text_config(decoder=True), "layer_types", None)
    return types is None or set(types) == {"full_attention"}


@dataclass
class DecodeCounts:
    """What `-v` logs: the step graphs compiled, and the buckets (rows, cache length) used so far."""

    compiles: int = 0
    buckets: int = 0


class StaticDecoder:
    """The static caches of one model, one per bucket, and its (optionally compiled) decode step."""

    def __init__(self, model, *, compiler: Callable | None = None):
        self.model = model
        # The uncompiled forward (loading.try_compile may have wrapped model.forward): only this step is compiled.
        self.forward = getattr(model, "eager_forward", model.forward)
        self.cache_arg = cache_argument(model)
        self.caches: dict[tuple[int, int], object] = {}
        self.counts = DecodeCounts()
        self.compiled = compiler is not None
        self.step = eager_fallback(self._step, compiler(self._step)) if compiler is not None else self._step

    def _step(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
              cache) -> torch.Tensor:
        out = self.forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                           use_cache=True, logits_to_keep=1, **{self.cache_arg: cache})
        return out.logits[:, -1, :]

    def _cache(self, rows: int, length: int, prefill) -> object:
        """The bucket's static cache, allocated on its first use (shapes, dtype and device from the prefill)."""
        from transformers import StaticCache

        cache = self.caches.get((rows, length))
        if cache is None:
            cache = StaticCache(config=self.model.config, max_cache_len=length)
            for layer, source in zip(cache.layers, prefill.layers):
                shape = (rows, source.keys.shape[1], 1, source.keys.shape[-1])
                layer.lazy_initialization(source.keys.new_empty(shape), source.values.new_empty(shape))
            self.caches[(rows, length)] = cache
            self.counts.buckets += 1
            log.debug(f"decode: a static KV cache for {rows} rows x {length} positions "
                      f"({self.counts.buckets} buckets so far)")
        return cache

    def begin(self, prefill, index: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor,
              max_new_tokens: int) -> "StaticSteps":
        """Steps continuing a prefill: `prefill` is its dynamic cache over the distinct prompts, `index` (CPU)
        the prompt of each row, `attention_mask` and `positions` (the last prompt position) per row."""
        rows, width = len(index), attention_mask.shape[1]
        bucket = row_bucket(rows)
        index = torch.cat([index, index[:1].expand(bucket - rows)])   # extra rows repeat row 0
        cache = self._cache(bucket, length_bucket(width + max_new_tokens), prefill)
        for layer, source in zip(cache.layers, prefill.layers):
            for static, dynamic in ((layer.keys, source.keys), (layer.values, source.values)):
                static[:, :, width:].zero_()   # no state of an earlier call (not even a NaN) reaches a masked position
                static[:, :, :width].copy_(dynamic[index.to(dynamic.device)])
            layer.cumulative_length.fill_(width)
        return StaticSteps(self, cache, rows, width, attention_mask[index.to(attention_mask.device)],
                           positions[index.to(positions.device)])


class StaticSteps:
    """One call's decode steps on a bucket's static cache: next(tokens) feeds the rows' new tokens, returns
    the next logits of the call's own rows."""

    def __init__(self, decoder: StaticDecoder, cache, rows: int, width: int, attention_mask: torch.Tensor,
                 positions: torch.Tensor):
        self.decoder, self.cache, self.rows, self.width = decoder, cache, rows, width
        bucket, length = attention_mask.shape[0], cache.layers[0].max_cache_len
        self.mask = attention_mask.new_zeros((bucket, length))
        self.mask[:, :width] = attention_mask
        self.positions = positions.clone()
        self.tokens = positions.new_zeros((bucket, 1))
        self.fed = 0

    def next(self, tokens: torch.Tensor) -> torch.Tensor:
        self.tokens[:self.rows, 0] = tokens
        self.mask[:, self.width + self.fed] = 1   # the position this step writes (its cache index)
        self.fed += 1
        self.positions += 1
        decoder = self.decoder
        if decoder.compiled and self.mask.device.type == "cuda":
            torch.compiler.cudagraph_mark_step_begin()   # the previous step's outputs are consumed
        from torch._dynamo.utils import counters

        before = counters["stats"]["unique_graphs"]
        logits = decoder.step(self.tokens, self.mask, self.positions, self.cache)
        compiled = counters["stats"]["unique_graphs"] - before
        if compiled:
            decoder.counts.compiles += compiled
            log.debug(f"decode: compiled the step for {self.mask.shape[0]} rows x {self.mask.shape[1]} positions "
                      f"({decoder.counts.compiles} compiles so far)")
        return logits[:self.rows]
