"""`VLLMPolicy`: the agents' language model on a vLLM engine (the "vllm" generation backend).

It runs in vLLM's own environment (docs/backends.md: `make setup-vllm`), which
pins its own torch and transformers. What the engine asks of a policy, as the
HF backend (`masprm.models.policy`) does it:

- Prompts, completions, stop ids and decoded generations are `ChatTokens`'
  (`masprm.models.chat`): the same token ids go to the engine as to the HF
  loop, and generation stops on the same ids (vLLM's own EOS rules are off).
- `sample`: sample k of prompt i is one engine request seeded from the stream
  ``(*keys[i], k)``, so what a prompt samples does not depend on the other
  prompts of the call by its seed (see docs/backends.md for what the batch
  can still change). The checkpoint's top-k and repetition penalty apply, then
  the temperature and top-p given. temperature <= 0 is greedy: one request per
  prompt, repeated n times. vLLM's sampler is not the HF loop's Gumbel-max, so
  sampled texts differ between backends; greedy tokens agree (tests).
- `logprob`: the engine's prompt log-probs of prompt + completion, summed
  over the completion's tokens (log-softmax of the raw logits).
- One engine per process and engine settings, started on first use and kept
  for every example, condition and seed; prefix caching on unless
  `--no_prefix_caching`. Inside a Ray actor the engine's memory share is the
  actor's GPU fraction of the default 0.9 unless `--gpu_memory_utilization`
  is given.

`check` refuses what vLLM cannot serve in one line before anything loads.
Importing this module imports neither torch nor vLLM.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from typing import Any, Sequence

from masprm.errors import ConfigError, ModelError
from masprm.interfaces import LogProb, Messages
from masprm.io import read_json
from masprm.models.chat import ChatTokens, sampling_warps, stream_seed

DEFAULT_MEMORY_SHARE = 0.9   # vLLM's own default share of a GPU's memory
_ENGINES: dict[tuple, Any] = {}   # this process's engines by (model, engine settings)


# --------------------------------------------------------------------------- checks before loading


def head_size(model_id: str) -> int | None:
    """The attention head size a local model folder's config.json gives (None: not a folder, or not said)."""
    path = Path(model_id) / "config.json"
    if not path.is_file():
        return None
    config = read_json(path)   # a broken config.json: one line naming it, not a traceback
    if not isinstance(config, dict):
        raise ModelError(f"{path}: not a JSON object")
    config = config.get("text_config", config)
    if config.get("head_dim"):
        return int(config["head_dim"])
    heads, hidden = config.get("num_attention_heads"), config.get("hidden_size")
    return hidden // heads if heads and hidden else None


def check(model_id: str, options: Any, flags: Any, setting: str = "model_id") -> None:
    """One line and no loading for what the vllm backend cannot serve (``options``: `ModelOptions`)."""
    if importlib.util.find_spec("vllm") is None:
        raise ConfigError(f"backend vllm: vLLM is not installed in this Python ({sys.executable}); build its "
                          "environment with `make setup-vllm` and run the stage with .venv-vllm/bin/python "
                          "(docs/backends.md)", setting="backend")
    if (Path(model_id) / "adapter_config.json").is_file():
        raise ModelError(f"{model_id} is a LoRA adapter: the vllm backend serves full policies only "
                         "(merge the adapter, or use --backend hf)", setting=setting)
    if options.attn_impl != "sdpa":
        raise ConfigError(f"attn_impl {options.attn_impl} is the hf backend's: vLLM chooses its own attention",
                          setting="attn_impl")
    if options.decode != "auto":
        raise ConfigError(f"decode {options.decode} is the hf backend's: vLLM runs its own decode loop "
                          "(--enforce_eager turns its CUDA graphs off)", setting="decode")
    if options.device_map not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"device_map {options.device_map}: vLLM places the model itself (pick GPUs with "
                          "CUDA_VISIBLE_DEVICES and `tensor_parallel_size`)", setting="device_map")
    platform = _platform()
    if options.load_in_4bit:
        from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
        if "bitsandbytes" not in QUANTIZATION_METHODS:
            raise ConfigError(f"load_in_4bit: this vLLM ({_version()}) has no bitsandbytes quantisation; use a "
                              "pre-quantised (AWQ/GPTQ) checkpoint, or --backend hf", setting="load_in_4bit")
        if options.quant_type != "nf4":
            raise ConfigError("load_in_4bit with the vllm backend quantises to NF4 (vLLM's in-flight "
                              "bitsandbytes): add `bnb_4bit_quant_type` nf4", setting="load_in_4bit")
    size = head_size(model_id)
    supported = _supported_head_sizes(platform)
    if size is not None and supported and size not in supported:
        raise ModelError(f"{model_id}: head size {size} is not one vLLM's {platform} attention has "
                         f"({', '.join(map(str, supported))}); use --backend hf", setting=setting)


def _platform() -> str:
    from vllm.platforms import current_platform
    return "CPU" if current_platform.is_cpu() else str(current_platform.device_name or "GPU")


def _supported_head_sizes(platform: str) -> list[int]:
    """The head sizes vLLM's CPU attention has ([] elsewhere: the GPU kernels take the common ones)."""
    if platform != "CPU":
        return []
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
    return list(CPUAttentionBackend.get_supported_head_sizes())


def _version() -> str:
    import vllm
    return vllm.__version__


# --------------------------------------------------------------------------- the engine


def memory_share(given: float | None, gpu_fraction: float | None) -> float:
    """The engine's share of GPU memory: as given, else the default times the Ray actor's GPU fraction."""
    if given is not None:
        return given
    return DEFAULT_MEMORY_SHARE * min(1.0, gpu_fraction) if gpu_fraction else DEFAULT_MEMORY_SHARE


def _actor_gpu_fraction() -> float | None:
    """The GPU share Ray gave this actor (None outside Ray)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return ray.get_runtime_context().get_assigned_resources().get("GPU")


def engine_args(model_id: str, options: Any, flags: Any) -> dict:
    """vLLM's `LLM(...)` keyword arguments for these loading options and engine flags."""
    cpu = _platform() == "CPU"
    args = {"model": model_id, "tokenizer": model_id, "seed": 0,
            "dtype": options.dtype or ("float32" if cpu else "float16"),   # the hf backend's defaults
            "enable_prefix_caching": not flags.no_prefix_caching,
            "tensor_parallel_size": flags.tensor_parallel_size, "enforce_eager": flags.enforce_eager,
            "trust_remote_code": options.trust_remote_code}
    if not cpu:   # the CPU build sizes its KV cache by $VLLM_CPU_KVCACHE_SPACE instead
        args["gpu_memory_utilization"] = memory_share(flags.gpu_memory_utilization, _actor_gpu_fraction())
    else:
        # vLLM's CPU worker cannot rewind a seeded request's generator after a partial (chunked) prefill
        # ("CPU Generator does not use offset": the engine dies), so prompts are prefilled whole, with a
        # step budget that holds the longest one.
        length = flags.max_model_len or _context_length(model_id, options.trust_remote_code)
        args.update(enable_chunked_prefill=False, max_num_batched_tokens=max(length or 0, 4096))
    if flags.max_model_len is not None:
        args["max_model_len"] = flags.max_model_len
    if options.load_in_4bit:
        args["quantization"] = "bitsandbytes"
    return args


def _context_length(model_id: str, trust_remote_code: bool) -> int | None:
    from transformers import AutoConfig
    config = AutoConfig.from_pretrained(model_id, trust_remote_code=trust_remote_code).get_text_config()
    return getattr(config, "max_position_embeddings", None)


def engine(model_id: str, options: Any, flags: Any) -> Any:
    """This process's engine for these settings, started on first use."""
    args = engine_args(model_id, options, flags)
    key = tuple(sorted(args.items()))
    if key not in _ENGINES:
        from vllm import LLM   # imports torch and vLLM: only once a policy is asked for
        _ENGINES[key] = LLM(**args)
    return _ENGINES[key]


def _generation_config(model_id: str, trust_remote_code: bool) -> Any:
    """The checkpoint's generation config, as the HF backend's model carries it."""
    from transformers import AutoConfig, GenerationConfig
    try:
        return GenerationConfig.from_pretrained(model_id)
    except OSError:   # no generation_config.json: the model config's fields, as transformers derives them
        return GenerationConfig.from_model_config(AutoConfig.from_pretrained(model_id,
                                                                             trust_remote_code=trust_remote_code))


# --------------------------------------------------------------------------- the policy


class VLLMPolicy(ChatTokens):
    """Implements `masprm.interfaces.Policy` on a vLLM engine."""

    def __init__(self, model_id: str, options: Any, flags: Any, *, setting: str = "model_id",
                 prompt_cache_size: int = 4096):
        from masprm.models.loading import load_tokenizer   # imports transformers
        check(model_id, options, flags, setting)
        tokenizer = load_tokenizer(model_id, options.trust_remote_code, setting=setting)
        config = _generation_config(model_id, options.trust_remote_code)
        super().__init__(model_id, tokenizer, config, prompt_cache_size)
        self.top_k, self.repetition_penalty = sampling_warps(config)
        self.llm = engine(model_id, options, flags)
        self._rng = random.Random(0)

    def reseed(self, seed: int) -> None:
        """Names the streams of calls made without keys."""
        self._rng = random.Random(seed)

    def _params(self, **values: Any) -> Any:
        from vllm import SamplingParams
        # Stops are ours (ChatTokens.stop_ids), not vLLM's EOS rules; text is decoded by ChatTokens.
        return SamplingParams(ignore_eos=True, stop_token_ids=sorted(self.stop_ids), detokenize=False, **values)

    def _run(self, rows: list[list[int]], params: list[Any]) -> list[Any]:
        from vllm.inputs import TokensPrompt
        return self.llm.generate([TokensPrompt(prompt_token_ids=row) for row in rows], params, use_tqdm=False)

    def _fresh_key(self) -> tuple[int, ...]:
        return (self._rng.randrange(2 ** 31 - 1), self._rng.randrange(2 ** 31 - 1))

    def _sample_streams(self, streams: list[tuple[list[int], tuple[int, ...]]], temperature: float, top_p: float,
                        max_new_tokens: int) -> list[list[int]]:
        """One engine request per (prompt ids, stream key) row, seeded from the key, in one engine call."""
        warps = {"max_tokens": max_new_tokens, "repetition_penalty": self.repetition_penalty}
        if temperature <= 0:
            params = [self._params(temperature=0.0, **warps) for _ in streams]
        else:
            params = [self._params(temperature=temperature, top_p=top_p, top_k=self.top_k or -1,
                                   seed=request_seed(key), **warps) for _, key in streams]
        return [list(out.outputs[0].token_ids) for out in self._run([row for row, _ in streams], params)]

    def logprob(self, requests: Sequence[tuple[Messages, str]]) -> list[LogProb]:
        """Sum of the completion tokens' log-probs (the engine's prompt log-probs), one engine call."""
        pairs = [(self.prompt_ids(messages), self.completion_ids(completion)) for messages, completion in requests]
        scored = [i for i, (_, completion) in enumerate(pairs) if completion]
        outputs = self._run([pairs[i][0] + pairs[i][1] for i in scored],
                            [self._params(temperature=0.0, max_tokens=1, prompt_logprobs=0) for _ in scored])
        sums = [0.0] * len(pairs)
        for i, output in zip(scored, outputs):
            prompt, completion = pairs[i]
            ids = prompt + completion
            sums[i] = sum(output.prompt_logprobs[pos][ids[pos]].logprob for pos in range(len(prompt), len(ids)))
        return [LogProb(logprob=total, prompt_tokens=len(prompt), completion_tokens=len(completion))
                for total, (prompt, completion) in zip(sums, pairs)]


def request_seed(key: Sequence[int]) -> int:
    """A vLLM request seed (a 62-bit integer) from the stream a key names."""
    high, low = stream_seed(key)
    return (high << 31) | low


def load(model_id: str, options: Any, flags: Any, *, setting: str = "model_id",
         max_batch_tokens: int | None = None) -> VLLMPolicy:
    """The "vllm" generation backend's loader (`masprm.models.backends`). The engine schedules its own
    batches, so ``max_batch_tokens`` (the hf loop's padded-call cap) has nothing to cap here."""
    return VLLMPolicy(model_id, options, flags, setting=setting)
