"""`HFPolicy`: the agents' language model on a Hugging Face causal LM.

- Prompts are chat messages rendered with the tokenizer's chat template and
  `add_generation_prompt=True`, tokenised without extra special tokens (the
  template already carries them). Rendered-and-tokenised prompts are kept in a
  bounded LRU cache, so a prompt sampled and then scored is tokenised once.
- `sample` is one `generate` call over all prompts (left padding,
  `num_return_sequences=n`). A generation's `new_tokens` counts the sampled
  tokens up to and including the end-of-turn token; its text is decoded
  without special tokens and stripped. Sampling parameters not passed here
  (e.g. a checkpoint's `top_k` or `repetition_penalty`) come from the model's
  own generation config, as with a plain `generate` call.
- `logprob` is one teacher-forced forward over all (prompt, completion) pairs
  (right padding, so every real token keeps its unpadded positions). The
  completion is tokenised with `add_special_tokens=False` and only its own
  tokens are scored, as in the original (no end-of-turn token is appended,
  so every log-prob baseline compares with the original's). Log-probs
  come from the output embedding applied to the gathered completion positions
  (Qwen2/Llama-style heads; a model that post-processes its logits, e.g.
  Gemma 2's soft-capping, would need that step added here).
- `reseed(seed)` seeds torch's (and CUDA's) global RNG, which `generate`
  samples from, so a given sequence of calls is reproducible.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

import torch

from masprm.interfaces import Generation, LogProb, Messages
from masprm.models.loading import ModelOptions, load_causal_lm, load_tokenizer


class HFPolicy:
    """Implements `masprm.interfaces.Policy` on a local folder or hub id."""

    def __init__(self, model_id: str, options: ModelOptions = ModelOptions(), *, flag: str = "--model_id",
                 prompt_cache_size: int = 4096, max_batch_tokens: int = 65536):
        self.model_id = model_id
        self.tokenizer = load_tokenizer(model_id, options.trust_remote_code, flag=flag)
        self.model = load_causal_lm(model_id, options, flag=flag)
        self.device = self.model.device
        self.pad_id = self.tokenizer.pad_token_id
        self.stop_ids = self._stop_ids()
        self.max_batch_tokens = max_batch_tokens  # logprob: split bigger batches (results do not change)
        self._prompt_cache: OrderedDict[tuple, list[int]] = OrderedDict()
        self._prompt_cache_size = prompt_cache_size
        if self.model.generation_config.pad_token_id is None:
            self.model.generation_config.pad_token_id = self.pad_id

    # -- set-up ---------------------------------------------------------------

    def _stop_ids(self) -> set[int]:
        """Token ids generation stops on: the generation config's EOS ids, else the tokenizer's."""
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        ids = {eos} if isinstance(eos, int) else set(eos or [])
        if not ids:
            raise ValueError(f"{self.model_id}: the model has no EOS token to end a turn with")
        return ids

    # -- prompts --------------------------------------------------------------

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

    @torch.no_grad()
    def sample(self, prompts: Sequence[Messages], n: int, *, temperature: float = 1.0, top_p: float = 1.0,
               max_new_tokens: int = 512) -> list[list[Generation]]:
        """n samples per prompt from one `generate` call; result[i] holds prompt i's samples.

        temperature <= 0 means greedy decoding: one sequence per prompt, repeated n times.
        """
        if not prompts or n <= 0:
            return [[] for _ in prompts]
        rows = [self.prompt_ids(p) for p in prompts]
        if max_new_tokens <= 0:  # no budget left: empty turns
            return [[Generation("", len(row), 0)] * n for row in rows]
        input_ids, attention_mask = self._padded(rows, left=True)
        greedy = temperature <= 0
        sampling = dict(do_sample=False) if greedy else dict(do_sample=True, temperature=temperature, top_p=top_p)
        per_prompt = 1 if greedy else n
        out = self.model.generate(input_ids=input_ids, attention_mask=attention_mask,
                                  max_new_tokens=max_new_tokens, num_return_sequences=per_prompt,
                                  pad_token_id=self.pad_id, **sampling)
        new = out[:, input_ids.shape[1]:].tolist()
        results = []
        for i, prompt in enumerate(rows):
            gens = [self._generation(new[i * per_prompt + k], len(prompt)) for k in range(per_prompt)]
            results.append(gens * n if greedy else gens)
        return results

    def _generation(self, tokens: list[int], prompt_tokens: int) -> Generation:
        # Rows that stopped early are padded after their stop token; count up to and including it.
        length = next((j + 1 for j, t in enumerate(tokens) if t in self.stop_ids), len(tokens))
        text = self.tokenizer.decode(tokens[:length], skip_special_tokens=True).strip()
        return Generation(text=text, prompt_tokens=prompt_tokens, new_tokens=length)

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
        return sums
