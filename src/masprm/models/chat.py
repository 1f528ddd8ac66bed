"""`ChatTokens`: the token side every generation backend shares, so backends differ only in how they decode.

- A prompt is chat messages rendered with the tokenizer's chat template and
  `add_generation_prompt=True`, tokenised without extra special tokens (the
  template already carries them), kept in a bounded LRU cache: a prompt
  sampled and then scored is tokenised once.
- A completion is tokenised with `add_special_tokens=False`.
- Generation stops on the generation config's EOS ids, else the tokenizer's.
- A generation's `new_tokens` counts the sampled tokens up to and including
  the stop token; its text is decoded without special tokens and stripped.
- `sample` is the same for every backend but for how it decodes: the k-th
  sample of a prompt with key ``key`` draws from the stream ``(*key, k)``,
  which each backend's `_sample_streams` seeds its own sampler from;
  temperature <= 0 is greedy, one sequence per prompt repeated n times.

No torch import: the vLLM backend uses this in its own environment too.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, Sequence

from masprm.errors import ModelError
from masprm.interfaces import Generation, Messages

STREAM_PRIME = 2 ** 31 - 1   # stream seeds are two words below this prime (HFPolicy's noise hash multiplies them)


def stream_seed(key: Sequence[int]) -> tuple[int, int]:
    """Two 31-bit words naming a random stream, from any tuple of integers."""
    digest = hashlib.blake2b(repr(tuple(int(k) for k in key)).encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % STREAM_PRIME, (value >> 32) % STREAM_PRIME


def sampling_warps(generation_config: Any) -> tuple[int, float]:
    """(top_k, repetition_penalty) the checkpoint's generation config sets (0 and 1.0: none), applied by
    every backend before the temperature and top-p a call gives, as `generate` does."""
    penalty = generation_config.repetition_penalty
    return generation_config.top_k or 0, 1.0 if penalty in (None, 1.0) else float(penalty)


class ChatTokens:
    """Prompt and completion token ids, stop ids and decoded generations of one tokenizer."""

    def __init__(self, model_id: str, tokenizer: Any, generation_config: Any, prompt_cache_size: int = 4096):
        self.model_id = model_id
        self.tokenizer = tokenizer
        self.stop_ids = self._stop_ids(generation_config)
        self._prompt_cache: OrderedDict[tuple, list[int]] = OrderedDict()
        self._prompt_cache_size = prompt_cache_size

    def _stop_ids(self, generation_config: Any) -> set[int]:
        eos = generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        ids = {eos} if isinstance(eos, int) else set(eos or [])
        if not ids:
            raise ModelError(f"{self.model_id}: the model has no EOS token to end a turn with")
        return ids

    def prompt_ids(self, messages: Messages) -> list[int]:
        """Chat-template token ids of a prompt (ending with the assistant header), LRU-cached."""
        key = tuple((m["role"], m["content"]) for m in messages)
        ids = self._prompt_cache.get(key)
        if ids is not None:
            self._prompt_cache.move_to_end(key)
            return ids
        text = self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        self._prompt_cache[key] = ids
        if len(self._prompt_cache) > self._prompt_cache_size:
            self._prompt_cache.popitem(last=False)
        return ids

    def completion_ids(self, completion: str) -> list[int]:
        return self.tokenizer(completion, add_special_tokens=False)["input_ids"]

    def sample(self, prompts: Sequence[Messages], n: int, *, temperature: float = 1.0, top_p: float = 1.0,
               max_new_tokens: int = 512, keys: Sequence[Sequence[int]] | None = None) -> list[list[Generation]]:
        """n samples per prompt; result[i] holds prompt i's samples.

        Sample k of prompt i draws from its own random stream, named by
        ``(keys[i], k)``: what it samples does not depend on the other rows of
        the call. Without keys the streams are drawn from the backend's RNG
        (so `reseed` makes a sequence of calls reproducible). temperature <= 0
        means greedy decoding: one sequence per prompt, repeated n times.
        """
        if not prompts or n <= 0:
            return [[] for _ in prompts]
        rows = [self.prompt_ids(p) for p in prompts]
        if max_new_tokens <= 0:  # no budget left: empty turns
            return [[Generation("", len(row), 0)] * n for row in rows]
        greedy = temperature <= 0
        per_prompt = 1 if greedy else n
        if keys is None:
            keys = [self._fresh_key() for _ in rows]
        streams = [(row, (*key, k)) for row, key in zip(rows, keys) for k in range(per_prompt)]
        new = self._sample_streams(streams, temperature, top_p, max_new_tokens)
        results = []
        for i, prompt in enumerate(rows):
            gens = [self._generation(new[i * per_prompt + k], len(prompt)) for k in range(per_prompt)]
            results.append(gens * n if greedy else gens)
        return results

    def _fresh_key(self) -> tuple[int, ...]:
        """A stream key for a call made without keys (drawn from the backend's own RNG)."""
        raise NotImplementedError

    def _sample_streams(self, streams: list[tuple[list[int], tuple[int, ...]]], temperature: float, top_p: float,
                        max_new_tokens: int) -> list[list[int]]:
        """The new tokens of each (prompt ids, stream key) row, in order (padding after a stop is allowed)."""
        raise NotImplementedError

    def _generation(self, tokens: Sequence[int], prompt_tokens: int) -> Generation:
        # Rows that stopped early may be padded after their stop token; count up to and including it.
        length = next((j + 1 for j, t in enumerate(tokens) if t in self.stop_ids), len(tokens))
        text = self.tokenizer.decode(list(tokens[:length]), skip_special_tokens=True).strip()
        return Generation(text=text, prompt_tokens=prompt_tokens, new_tokens=length)
