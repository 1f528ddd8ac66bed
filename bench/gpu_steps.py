"""The in-process steps of the GPU check (bench/gpu_check.py runs each in its own process, with a time limit).

    python bench/gpu_steps.py STEP WORK [--cpu]

    setup      the machine (torch build, GPUs, precision rule, C compiler); tiny model, GSM8K-style data,
               preference pairs and the real-size random Qwen2.5-1.5B folder, all built locally
    compile    torch.compile on the policy's forward: no fallback to eager, and HFPolicy.sample's
               logits_to_keep / position_ids reach the compiled forward
    bnb        4-bit policy (log-probs against the unquantised model, sampling) and QLoRA's fp32 biases
    rs-sample, rs-score, rs-train   the real-size throughput steps (bench/gpu_throughput.py)

--cpu runs the same code on the CPU at toy size (GPU_CHECK_DEVICE is then 'cpu'). Exit 1 on a failed check.
"""

from __future__ import annotations

import functools
import json
import random
import shutil
import sys
import time
import warnings
from pathlib import Path

import torch

# run as a script (python bench/gpu_steps.py), so bench/ is first on the import path
from gpu_throughput import (DEVICE, ON_CUDA, build_realsize, ppm_record, rs_sample, rs_score,  # noqa: E402
                            rs_train, workload, write_jsonl)

REPO = Path(__file__).resolve().parents[1]

GSM8K_ROWS = [
    {"question": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "3 + 4 = 7\n#### 7"},
    {"question": "A box holds 6 pens. How many pens are in 2 boxes?", "answer": "6 * 2 = 12\n#### 12"},
    {"question": "Ann had 9 cards and gave away 5. How many are left?", "answer": "9 - 5 = 4\n#### 4"},
    {"question": "Sam reads 4 pages a day for 5 days. How many pages?", "answer": "4 * 5 = 20\n#### 20"},
]
PROMPTS = [[{"role": "system", "content": "You are the solver."}, {"role": "user", "content": row["question"]}]
           for row in GSM8K_ROWS]


def check(ok: bool, what: str) -> bool:
    print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
    return ok


# --------------------------------------------------------------------------- steps


def setup(work: Path, cpu: bool) -> bool:
    from masprm.models.loading import choose_dtype, load_tokenizer
    from masprm.models.tiny import build_tiny_model

    ok = True
    print(f"  torch {torch.__version__}, CUDA build {torch.version.cuda}, cuda available {torch.cuda.is_available()}, "
          f"{torch.cuda.device_count()} GPU(s); running on {DEVICE}")
    if ON_CUDA:
        if not check(torch.cuda.is_available(), "CUDA is available"):
            return False
        for i in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(i)
            print(f"  cuda:{i} {torch.cuda.get_device_name(i)}, capability {torch.cuda.get_device_capability(i)}, "
                  f"{free / 2**30:.1f} of {total / 2**30:.1f} GiB free")
        print(f"  precision rule on cuda:0 -> {choose_dtype('cuda:0')}")
        compiler = shutil.which("cc") or shutil.which("gcc")
        ok &= check(compiler is not None, f"a C compiler for Triton ({compiler})")

    work.mkdir(parents=True, exist_ok=True)
    (work / "machine.json").write_text(json.dumps({"gpus": torch.cuda.device_count() if ON_CUDA else 0}))
    build_tiny_model(work / "tiny", seed=0)
    tiny_tokenizer = load_tokenizer(str(work / "tiny"))
    rng = random.Random(0)
    write_jsonl(work / "gsm8k.jsonl", GSM8K_ROWS)
    write_jsonl(work / "pairs.jsonl", [ppm_record(tiny_tokenizer, rng, rng.randint(24, 60)) for _ in range(120)])
    (work / "configs").mkdir(exist_ok=True)
    shutil.copy(REPO / "configs" / "gsm8k.yaml", work / "configs" / "gsm8k.yaml")
    print(f"  tiny model, GSM8K rows and preference pairs in {work}")

    load = workload(cpu)
    build_realsize(work / "realsize", load)
    tokenizer = load_tokenizer(str(work / "realsize"))  # as every stage loads it: through AutoTokenizer
    lo, hi = load.text_tokens
    pairs = [ppm_record(tokenizer, rng, rng.randint(lo, hi)) for _ in range(load.train_pairs)]
    write_jsonl(work / "realsize-pairs.jsonl", pairs)
    chat = tokenizer.apply_chat_template(PROMPTS[0], tokenize=False, add_generation_prompt=True)
    ids = tokenizer([chat, pairs[0]["prompt"]], add_special_tokens=False)["input_ids"]
    words = len(pairs[0]["prompt"].split())
    ok &= check(len(tokenizer) == load.regular_tokens + 3 and max(max(row) for row in ids) < load.shape["vocab_size"],
                f"real-size tokenizer reloads with {len(tokenizer)} tokens, ids below the vocabulary "
                f"({load.shape['vocab_size']}); {words} filler words are {len(ids[1])} tokens")
    return ok


def compile_check(work: Path, cpu: bool) -> bool:
    """What try_compile does on CUDA, with a spy: the forward HFPolicy.sample calls must be the compiled one."""
    from masprm.models import loading
    from masprm.models.loading import ModelOptions
    from masprm.models.policy import HFPolicy

    seen: list[list[str]] = []
    real_compile = torch.compile

    def spying_compile(fn, **kwargs):
        # On a CPU only trace (backend eager): inductor would take minutes there, and try_compile skips it.
        compiled = real_compile(fn, **kwargs, **({} if ON_CUDA else {"backend": "eager"}))

        @functools.wraps(fn)
        def call(*args, **kw):
            seen.append(sorted(kw))
            return compiled(*args, **kw)
        return call

    policy = HFPolicy(str(work / "tiny"), ModelOptions(device_map=DEVICE, compile=False))
    eager = [[g.text for g in gens] for gens in policy.sample(PROMPTS, 3, temperature=0.7, top_p=0.95,
                                                              max_new_tokens=16, keys=[(0, i) for i in range(4)])]
    loading.compile_with_fallback(policy.model, spying_compile)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = [[g.text for g in gens] for gens in policy.sample(
            PROMPTS, 3, temperature=0.7, top_p=0.95, max_new_tokens=16, keys=[(0, i) for i in range(4)])]
    first = time.perf_counter() - start
    start = time.perf_counter()
    policy.sample(PROMPTS, 3, temperature=0.7, top_p=0.95, max_new_tokens=16, keys=[(0, i) for i in range(4)])
    again = time.perf_counter() - start
    failures = [str(w.message) for w in caught if "torch.compile failed" in str(w.message)]
    ok = check(not failures, f"torch.compile ran without falling back (first call {first:.1f} s incl. compiling, "
                             f"then {again:.2f} s){': ' + failures[0] if failures else ''}")
    ok &= check(bool(seen) and all("logits_to_keep" in s and "position_ids" in s for s in seen),
                f"HFPolicy.sample's {len(seen)} forwards went through the compiled forward with logits_to_keep "
                f"and position_ids ({seen[:1]})")
    same = sum(a == b for a, b in zip(eager, compiled))
    print(f"  compiled vs eager samples: {same} of {len(eager)} prompts identical (rounding may flip near ties)")
    return ok


def bnb_checks(work: Path, cpu: bool) -> bool:
    """The 4-bit paths: policy log-probs close to the unquantised model's, sampling, fp32 QLoRA biases."""
    from masprm.models.loading import ModelOptions
    from masprm.models.policy import HFPolicy
    from masprm.models.token_scorer import load_token_scorer
    from masprm.train.lora import attach_lora

    ok = True
    full = HFPolicy(str(work / "tiny"), ModelOptions(device_map=DEVICE))
    quantized = HFPolicy(str(work / "tiny"), ModelOptions(device_map=DEVICE, load_in_4bit=True))
    layer = quantized.model.model.layers[0].self_attn.q_proj
    ok &= check(type(layer).__name__ == "Linear4bit" and layer.weight.device.type == torch.device(DEVICE).type,
                f"--load_in_4bit on {DEVICE}: {type(layer).__name__} on {layer.weight.device}, "
                f"compute {layer.compute_dtype}")
    requests = [(p, "The answer is 7.") for p in PROMPTS]
    a = [r.logprob for r in quantized.logprob(requests)]
    scored = full.logprob(requests)
    worst = max(abs(x - r.logprob) / r.completion_tokens for x, r in zip(a, scored))
    ok &= check(worst <= 0.05, f"4-bit vs {full.model.dtype} log-probs: at most {worst:.4f} nats per token")
    samples = quantized.sample(PROMPTS, 3, temperature=0.7, top_p=0.95, max_new_tokens=16)
    ok &= check(all(len(s) == 3 for s in samples), f"4-bit sampling on {DEVICE}")
    del full, quantized

    model = load_token_scorer(str(work / "tiny"), load_in_4bit=True, dtype=torch.bfloat16)
    model = attach_lora(model, r=4, alpha=8, dropout=0.0, quantized=True)
    layer = model.base_model.model.model.layers[0].self_attn.q_proj.base_layer
    with torch.no_grad():
        layer.bias.fill_(1.0)  # the size of real q/k/v biases, where bf16's spacing is 2 ** -7
    before = layer.bias.detach().clone()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5, weight_decay=0.0)
    model.train()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]], device=layer.weight.device)
    with torch.autocast(layer.weight.device.type, dtype=torch.bfloat16):
        model(input_ids=ids).logits.float().sum().backward()
    optimizer.step()
    moved = (layer.bias.detach() - before).abs().max().item()
    ok &= check(layer.bias.dtype == torch.float32 and abs(moved - 1e-5) < 1e-6,
                f"QLoRA q_proj bias on {layer.weight.device}: {layer.bias.dtype}, moved {moved:.2e} at lr 1e-5")
    return ok


STEPS = {"setup": setup, "compile": compile_check, "bnb": bnb_checks, "rs-sample": rs_sample,
         "rs-score": rs_score, "rs-train": rs_train}


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--cpu"]
    if len(args) != 2 or args[0] not in STEPS:
        print(f"usage: gpu_steps.py {{{','.join(STEPS)}}} WORK [--cpu]", file=sys.stderr)
        return 2
    if ON_CUDA == ("--cpu" in argv):
        print(f"gpu_steps.py: GPU_CHECK_DEVICE={DEVICE} does not match {'--cpu' if '--cpu' in argv else 'a GPU run'}",
              file=sys.stderr)
        return 2
    return 0 if STEPS[args[0]](Path(args[1]), "--cpu" in argv) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
