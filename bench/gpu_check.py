"""In-process parts of bench/gpu_check.sh: build local models and data, check the CUDA paths, time generation.

    python bench/gpu_check.py setup WORK     tiny + larger random models, GSM8K-style data, preference pairs
    python bench/gpu_check.py device         torch build, GPUs, capability, the precision rule, Triton's compiler
    python bench/gpu_check.py policy WORK    4-bit policy on CUDA, compile keeps logits_to_keep, log-prob error
    python bench/gpu_check.py qlora WORK     a 4-bit q/k/v bias stays fp32 and trains at lr 1e-5 (bf16 compute)
    python bench/gpu_check.py throughput WORK   batched generation tokens/s: eager vs compiled, bf16 vs 4-bit

Everything is built locally; nothing is downloaded. Each command exits 1 on a failed check.
GPU_CHECK_DEVICE=cpu runs the model checks on the CPU, to try the script itself on a machine without a GPU.
"""

import sys
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

import functools  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import os  # noqa: E402

import torch  # noqa: E402

DEVICE = os.environ.get("GPU_CHECK_DEVICE", "cuda:0")
ON_CUDA = DEVICE.startswith("cuda")

GSM8K_ROWS = [
    {"question": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "3 + 4 = 7\n#### 7"},
    {"question": "A box holds 6 pens. How many pens are in 2 boxes?", "answer": "6 * 2 = 12\n#### 12"},
    {"question": "Ann had 9 cards and gave away 5. How many are left?", "answer": "9 - 5 = 4\n#### 4"},
    {"question": "Sam reads 4 pages a day for 5 days. How many pages?", "answer": "4 * 5 = 20\n#### 20"},
]
LARGER = dict(hidden_size=1024, num_layers=8, num_heads=16, num_kv_heads=4, intermediate_size=2816,
              vocab_size=1024)  # ~0.1B parameters: enough work per step for a GPU timing to mean something
PROMPTS = [[{"role": "system", "content": "You are the solver."}, {"role": "user", "content": row["question"]}]
           for row in GSM8K_ROWS]


def check(ok: bool, what: str) -> bool:
    print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    return ok


def setup(work: Path) -> bool:
    from masprm.models.tiny import build_tiny_model
    from test_trainer import ppm_record

    work.mkdir(parents=True, exist_ok=True)
    build_tiny_model(work / "tiny", seed=0)
    build_tiny_model(work / "larger", seed=0, **LARGER)
    (work / "gsm8k.jsonl").write_text("".join(json.dumps(r) + "\n" for r in GSM8K_ROWS), encoding="utf-8")
    rng = random.Random(0)
    (work / "pairs.jsonl").write_text("".join(json.dumps(ppm_record(rng)) + "\n" for _ in range(120)),
                                      encoding="utf-8")
    config = Path("configs/gsm8k.yaml").read_text(encoding="utf-8")
    (work / "configs").mkdir(exist_ok=True)
    (work / "configs" / "gsm8k.yaml").write_text(config, encoding="utf-8")
    print(f"  models, data and pairs in {work}")
    return True


def device() -> bool:
    from masprm.models.loading import choose_dtype

    print(f"  torch {torch.__version__}, CUDA build {torch.version.cuda}, "
          f"cuda available {torch.cuda.is_available()}, {torch.cuda.device_count()} GPU(s)")
    if not check(torch.cuda.is_available(), "CUDA is available"):
        return False
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
        print(f"  cuda:{i} {torch.cuda.get_device_name(i)}, capability {torch.cuda.get_device_capability(i)}, "
              f"{free / 2**30:.1f} of {total / 2**30:.1f} GiB free")
    print(f"  precision rule on cuda:0 -> {choose_dtype('cuda:0')}")
    compiler = shutil.which("cc") or shutil.which("gcc")
    return check(compiler is not None, f"a C compiler for Triton ({compiler})")


def policy(work: Path) -> bool:
    from masprm.models import loading
    from masprm.models.loading import ModelOptions
    from masprm.models.policy import HFPolicy

    ok = True
    full = HFPolicy(str(work / "tiny"), ModelOptions(device_map=DEVICE))
    quantized = HFPolicy(str(work / "tiny"), ModelOptions(device_map=DEVICE, load_in_4bit=True))
    layer = quantized.model.model.layers[0].self_attn.q_proj
    ok &= check(type(layer).__name__ == "Linear4bit" and layer.weight.device.type == torch.device(DEVICE).type,
                f"--load_in_4bit on {DEVICE}: {type(layer).__name__} on {layer.weight.device}, "
                f"compute {layer.compute_dtype}")
    requests = [(p, "The answer is 7.") for p in PROMPTS]
    a = [r.logprob for r in quantized.logprob(requests)]
    b = [r.logprob for r in full.logprob(requests)]
    n = [r.completion_tokens for r in full.logprob(requests)]
    worst = max(abs(x - y) / k for x, y, k in zip(a, b, n))
    ok &= check(worst <= 0.05, f"4-bit vs {full.model.dtype} log-probs: at most {worst:.4f} nats per token")
    samples = quantized.sample(PROMPTS, 3, temperature=0.7, top_p=0.95, max_new_tokens=16)
    ok &= check(all(len(s) == 3 for s in samples), f"4-bit sampling on {DEVICE}")

    seen = []
    real_compile = torch.compile

    def spying_compile(fn, **kwargs):  # the real torch.compile, recording what generate passes
        compiled = real_compile(fn, **kwargs, **({} if ON_CUDA else {"backend": "eager"}))  # CPU: trace only

        @functools.wraps(fn)
        def call(*args, **kw):
            seen.append(sorted(kw))
            return compiled(*args, **kw)
        return call

    model = loading.load_causal_lm(str(work / "tiny"), ModelOptions(device_map=DEVICE, compile=False))
    start = time.perf_counter()
    loading.compile_with_fallback(model, spying_compile)
    ids = torch.tensor([[5, 6, 7, 8]], device=DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False,
                       pad_token_id=0)
    failures = [str(w.message) for w in caught if "torch.compile failed" in str(w.message)]
    ok &= check(not failures, f"torch.compile ran without falling back ({time.perf_counter() - start:.1f} s "
                              f"incl. compiling){': ' + failures[0] if failures else ''}")
    ok &= check(bool(seen) and "logits_to_keep" in seen[0] and "position_ids" in seen[0],
                f"generate passes logits_to_keep and position_ids through the compiled forward ({seen[:1]})")
    return ok


def qlora(work: Path) -> bool:
    from masprm.models.token_scorer import load_token_scorer
    from masprm.train.lora import attach_lora

    model = load_token_scorer(str(work / "tiny"), load_in_4bit=True, dtype=torch.bfloat16)
    model = attach_lora(model, r=4, alpha=8, dropout=0.0, quantized=True)
    layer = model.base_model.model.model.layers[0].self_attn.q_proj.base_layer
    with torch.no_grad():
        layer.bias.fill_(1.0)
    before = layer.bias.detach().clone()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5, weight_decay=0.0)
    model.train()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]], device=layer.weight.device)
    with torch.autocast(layer.weight.device.type, dtype=torch.bfloat16):
        model(input_ids=ids).logits.float().sum().backward()
    optimizer.step()
    moved = (layer.bias.detach() - before).abs().max().item()
    return check(layer.bias.dtype == torch.float32 and abs(moved - 1e-5) < 1e-6,
                 f"q_proj bias on {layer.weight.device}: {layer.bias.dtype}, moved {moved:.2e} at lr 1e-5")


def throughput(work: Path) -> bool:
    from masprm.models.loading import ModelOptions
    from masprm.models.policy import HFPolicy

    new_tokens, n = 64, 15  # SBS b1=3 x b2=5 rows per call
    print(f"  larger random model, {len(PROMPTS)} prompts x n={n}, {new_tokens} new tokens (no early stop)")
    for options in [ModelOptions(device_map=DEVICE), ModelOptions(device_map=DEVICE, load_in_4bit=True),
                    ModelOptions(device_map=DEVICE, compile=True)]:
        p = HFPolicy(str(work / "larger"), options)
        label = (f"4-bit ({p.model.dtype} compute)" if options.load_in_4bit else str(p.model.dtype)) + \
            (", compiled" if options.compile and ON_CUDA else ", eager")
        ids, mask = p._padded([p.prompt_ids(m) for m in PROMPTS], left=True)

        def run():
            p.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=0.7, top_p=0.95,
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens, num_return_sequences=n,
                             pad_token_id=p.pad_id)
            if ON_CUDA:
                torch.cuda.synchronize()

        start = time.perf_counter()
        run()  # warm-up (and compilation)
        first = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(3):
            run()
        seconds = (time.perf_counter() - start) / 3
        tokens = len(PROMPTS) * n * new_tokens
        peak = f", peak {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB" if ON_CUDA else ""
        print(f"  {label:<34} {tokens / seconds:>8.0f} tokens/s  ({seconds * 1e3:.0f} ms/call, first call "
              f"{first:.1f} s{peak})")
        del p
        if ON_CUDA:
            torch.cuda.empty_cache()
    return True


def main() -> int:
    command, *rest = sys.argv[1:] or ["device"]
    commands = {"setup": setup, "device": device, "policy": policy, "qlora": qlora, "throughput": throughput}
    if command not in commands:
        print(f"gpu_check.py: unknown command {command!r} (known: {', '.join(commands)})", file=sys.stderr)
        return 2
    ok = commands[command](*[Path(r) for r in rest])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
