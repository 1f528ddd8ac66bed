"""The generation backends side by side: the HF loop, vLLM with prefix caching and vLLM without, in one run.

A random-weight model of Qwen2.5-0.5B's body (24 layers, hidden 896, 14 heads of 64, 2 key/value heads,
MLP 4864; the tiny tokenizer's 512-token vocabulary in place of Qwen's 151,936), float32 on CPU, and two
workloads of 32 prompts each: a tree-shaped one (every prompt shares a 250-token system message, as the
agents' prompts of one search tree share the question and the earlier messages) and 32 unrelated prompts
(each its own 250-token system message). Each backend samples n candidates of up to T new tokens per prompt
with keyed streams. Reported per backend and workload: new tokens/s, CPU seconds (this process and its
children: vLLM's engine runs in its own), prompt tokens served from vLLM's prefix cache; start-up separately.

    .venv-vllm/bin/python bench/bench_backends.py [--n 1] [--new_tokens 24] [--layers 24] [--compile]

Runs in vLLM's environment (`make setup-vllm`); elsewhere it says so and exits 0 (so `make bench` passes).
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from masprm.cli import ArgumentParser, run_cli
from masprm.config import add_config_args, arg, config_from_args

QWEN05_BODY = dict(hidden_size=896, num_layers=24, num_heads=14, num_kv_heads=2, intermediate_size=4864)
PREFIX_TOKENS = 250
PROMPTS = 32


@dataclass(frozen=True)
class BenchArgs:
    n: int = arg(1, flags=("--n",), help="candidates per prompt (default: 1)")
    new_tokens: int = arg(24, flags=("--new_tokens",), help="most new tokens per candidate (default: 24)")
    compile: bool = arg(False, flags=("--compile",), help="let vLLM compile (start-up takes minutes longer)")
    layers: int = arg(24, flags=("--layers",), help="decoder layers (default: 24, Qwen2.5-0.5B's; fewer on a busy "
                                                     "machine, each as wide as 0.5B's)")


def cpu_seconds() -> float:
    """CPU time of this process and its live children (vLLM's engine core is a child process)."""
    import psutil
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def system_text(tokenizer, seed: int) -> str:
    """A system message of at least PREFIX_TOKENS tokens from the tiny corpus."""
    from masprm.models.tiny import default_corpus
    lines, text = default_corpus(n_lines=400, seed=seed)[32:], ""
    while len(tokenizer(text, add_special_tokens=False)["input_ids"]) < PREFIX_TOKENS:
        text += lines.pop(0) + " "
    return text


def workloads(tokenizer) -> dict[str, list]:
    questions = [f"Question {i}: Tom has {i + 3} apples and buys {2 * i + 1} more. How many now?"
                 for i in range(PROMPTS)]
    shared = system_text(tokenizer, seed=0)
    return {"tree (shared 250-token prefix)": [[{"role": "system", "content": shared},
                                                {"role": "user", "content": q}] for q in questions],
            "unrelated": [[{"role": "system", "content": system_text(tokenizer, seed=i + 1)},
                           {"role": "user", "content": q}] for i, q in enumerate(questions)]}


def measure(policy, prompts, args: BenchArgs, cached: list[int]) -> dict:
    keys = [(0, i, 1, 0) for i in range(len(prompts))]
    cached.clear()
    cpu, start = cpu_seconds(), time.perf_counter()
    gens = policy.sample(prompts, args.n, temperature=0.7, top_p=0.95, max_new_tokens=args.new_tokens, keys=keys)
    wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    new = sum(g.new_tokens for row in gens for g in row)
    prompt = sum(row[0].prompt_tokens for row in gens) * args.n
    return {"wall": wall, "cpu": cpu, "new": new, "rate": new / wall, "prompt": prompt,
            "cached": sum(cached) if cached else None}


def counting_cache_hits(policy, cached: list[int]) -> None:
    """Wrap the vLLM policy's engine call to add up the prompt tokens each request found in the cache."""
    run = policy._run

    def counted(rows, params):
        outputs = run(rows, params)
        cached.extend(o.num_cached_tokens or 0 for o in outputs)
        return outputs
    policy._run = counted


def main() -> int:
    parser = ArgumentParser(description="HF loop vs vLLM with and without prefix caching on a 0.5B-shaped model.")
    add_config_args(parser, BenchArgs)
    args = config_from_args(BenchArgs, parser.parse_args())
    if importlib.util.find_spec("vllm") is None:
        print("bench_backends: vLLM is not installed in this Python; run it with .venv-vllm/bin/python "
              "(make setup-vllm)")
        return 0
    from masprm.models.backends import BackendFlags, load_policy
    from masprm.models.options import ModelOptions
    from masprm.models.tiny import build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="bench-backends-"))
    model = str(build_tiny_model(work / "qwen05-shaped", seed=0, **{**QWEN05_BODY, "num_layers": args.layers}))
    options = ModelOptions(device_map="cpu")
    backends = {"hf loop": BackendFlags(),
                "vllm, prefix caching": BackendFlags(backend="vllm", enforce_eager=not args.compile),
                "vllm, no prefix caching": BackendFlags(backend="vllm", enforce_eager=not args.compile,
                                                        no_prefix_caching=True)}
    rows, cached = [], []
    for name, flags in backends.items():
        start = time.perf_counter()
        policy = load_policy(flags, model, options)
        startup = time.perf_counter() - start
        if flags.backend == "vllm":
            counting_cache_hits(policy, cached)
        print(f"{name}: start-up {startup:.0f} s", flush=True)
        for load, prompts in workloads(policy.tokenizer).items():
            result = measure(policy, prompts, args, cached)
            rows.append((name, load, startup, result))
            print(f"  {load}: {result}", flush=True)
        del policy
    print(f"\n{PROMPTS} prompts x {args.n} candidates x up to {args.new_tokens} new tokens, {args.layers} layers, "
          f"float32, CPU ({'compiled' if args.compile else 'eager'} vLLM)\n")
    print("| backend | workload | new tokens/s | wall s | CPU s | prompt tokens | from the prefix cache | start-up s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, load, startup, r in rows:
        cache = "-" if r["cached"] is None else f"{r['cached']:,}"
        print(f"| {name} | {load} | {r['rate']:.1f} | {r['wall']:.0f} | {r['cpu']:.0f} | {r['prompt']:,} | {cache} "
              f"| {startup:.0f} |")
    return 0


if __name__ == "__main__":   # vLLM starts its engine in a child process that imports this file again
    run_cli(main)
