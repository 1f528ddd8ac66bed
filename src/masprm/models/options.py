"""How a model is loaded (`ModelOptions`) and the shared model-loading flags that set it (`ModelFlags`).

Stages 1 and 4 take the same model flags:
`--device_map --load_in_4bit --bnb_4bit_quant_type --attn_impl --no_compile --trust_remote_code --dtype --decode`.
Pure Python (no torch import): a stage's flags and their errors need no model library.
"""

from __future__ import annotations

from dataclasses import dataclass

from masprm.config import Needs, arg

POLICY_DTYPES = ("float16", "bfloat16", "float32")
QUANT_TYPES = ("fp4", "nf4")   # bitsandbytes' 4-bit formats; fp4 is its default, which the original's policy used
SCORER_PRECISIONS = ("auto", "4bit", "bf16", "fp16", "fp32")   # a scorer's own precision (`scorer_options`)
# How the policy's decode loop runs (masprm.models.policy, masprm.models.static_decode): "auto" is eager on every
# device for now: graphs has run on a CPU only (same tokens as eager there), and becomes auto's choice on CUDA only
# once a GPU run has shown it gives the eager loop's tokens and its speed (the GPU check's decode step).
DECODE_MODES = ("auto", "eager", "static", "graphs")
# graphs compiles the decode step: contradicting --no_compile, it is refused rather than silently compiled
NEEDS_COMPILE = Needs("compiling for graphs (drop `no_compile`; eager and static compile nothing)",
                      lambda s: getattr(s, "decode", "auto") != "graphs" or not getattr(s, "no_compile", False))


@dataclass(frozen=True)
class ModelOptions:
    """How to load a model. `device_map="auto"` means CUDA when available, else CPU."""

    device_map: str = "auto"
    load_in_4bit: bool = False
    attn_impl: str = "sdpa"
    compile: bool = False
    trust_remote_code: bool = False
    dtype: str | None = None  # None: the caller's default (policy: float16 on CUDA, as the original), else `choose_dtype`'s rule
    quant_type: str = "fp4"   # the 4-bit format of load_in_4bit (scorers: nf4, see scorer_options)
    decode: str = "auto"      # the policy's decode loop: one of DECODE_MODES


@dataclass(frozen=True)
class ModelFlags:
    """The model-loading flags of stages 1 and 4: `ModelOptions` as the command line spells it (compiling on)."""

    device_map: str = arg(ModelOptions.device_map, flags=("--device_map",),
                          help="'auto' (CUDA when available, else CPU), 'cpu', 'cuda' or 'cuda:N' (default: auto)")
    load_in_4bit: bool = arg(False, flags=("--load_in_4bit",),
                             help="load weights in 4-bit with bitsandbytes (on CUDA, and on CPU with fp32 compute)")
    bnb_4bit_quant_type: str = arg(ModelOptions.quant_type, flags=("--bnb_4bit_quant_type",), choices=QUANT_TYPES,
                                   help="the 4-bit format of --load_in_4bit: fp4 (default: bitsandbytes' own, as "
                                        "the original's policy) or nf4")
    attn_impl: str = arg(ModelOptions.attn_impl, flags=("--attn_impl",),
                         help="attention implementation: sdpa, eager, flash_attention_2, ... (default: sdpa)")
    no_compile: bool = arg(False, flags=("--no_compile",),
                           help="do not torch.compile the model (compiling is attempted otherwise)")
    trust_remote_code: bool = arg(False, flags=("--trust_remote_code",),
                                  help="allow model repositories to run their own code (off by default)")
    dtype: str | None = arg(None, flags=("--dtype",), choices=POLICY_DTYPES,
                            help="weights (and 4-bit compute) dtype (default: float16 on CUDA, as the original; "
                                 "float32 on CPU)")
    decode: str = arg(ModelOptions.decode, flags=("--decode",), choices=DECODE_MODES, needs=NEEDS_COMPILE,
                      help="how the policy decodes: eager (a dynamic KV cache, one eager forward per token), "
                           "static (a static KV cache, bucketed by rows and length), graphs (the static cache's "
                           "step under torch.compile(mode='reduce-overhead'): CUDA graphs on a GPU); default auto: "
                           "eager until a GPU run has checked graphs (docs/performance.md)")

    def options(self) -> ModelOptions:
        return ModelOptions(device_map=self.device_map, load_in_4bit=self.load_in_4bit, attn_impl=self.attn_impl,
                            compile=not self.no_compile, trust_remote_code=self.trust_remote_code, dtype=self.dtype,
                            quant_type=self.bnb_4bit_quant_type, decode=self.decode)
