"""Latency of HFPolicy.sample / .logprob on tiny Qwen2 models (CPU by default).

For each model size: `sample` with n=3 and n=15 over 1 and 5 prompts (30 new
tokens, no early stop), and `logprob` over the same numbers of pairs. Prints ms
per call, generated (or scored) tokens per second, and, for sampling, how much
of a decoding step is `generate`'s own overhead: the same number of steps run
as a bare KV-cached forward loop gives the model's share.

    python bench/bench_policy.py [--threads N] [--repeats R] [--new_tokens T]
"""

import pathlib
import tempfile

import torch

from masprm.cli import ArgumentParser, run_cli
from masprm.models.loading import ModelOptions
from masprm.models.policy import HFPolicy
from masprm.models.tiny import build_tiny_model
from _timing import timed  # (bench/ is on the path when run as a script)

SIZES = {  # name -> build_tiny_model arguments
    "tiny (h64, 2 layers)": dict(hidden_size=64, num_layers=2, intermediate_size=128),
    "toy-sized (h160, 4 layers)": dict(hidden_size=160, num_layers=4, num_heads=4, num_kv_heads=2,
                                       intermediate_size=384, vocab_size=1024),
}
SYSTEM = "You are the solver. Compute each step, then give 'Answer: N'."
QUESTIONS = [
    "Tom has 23 apples and gives 7 to Mary. Then he buys 12 more. How many apples does he have?",
    "A box holds 6 pens. Sara buys 4 boxes and loses 5 pens. How many pens are left?",
    "Ben reads 15 pages a day for 3 days, then 9 pages. How many pages did he read?",
    "Ivy had 50 coins, spent 18 and found 6. How many coins does she have now?",
    "Omar plants 8 rows of 7 trees and 5 more trees. How many trees are there?",
]
PROMPTS = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}] for q in QUESTIONS]
COMPLETION = "23 - 7 = 16. 16 + 12 = 28. Answer: 28"


@torch.no_grad()
def bare_decode(policy: HFPolicy, prompts, n: int, steps: int) -> None:
    """The same work as sample() without generate(): prefill, then KV-cached steps, plain sampling."""
    rows = [policy.prompt_ids(p) for p in prompts for _ in range(n)]
    ids, mask = policy._padded(rows, left=True)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = policy.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
    cache, next_pos = out.cache, positions[:, -1:] + 1
    for _ in range(steps):
        probs = torch.softmax(out.logits[:, -1].float() / 0.7, dim=-1)
        token = torch.multinomial(probs, 1)
        mask = torch.cat([mask, torch.ones_like(token)], dim=1)
        out = policy.model(input_ids=token, attention_mask=mask, position_ids=next_pos,
                           cache=cache, use_cache=True)
        cache, next_pos = out.cache, next_pos + 1


def bench_model(name: str, model_dir: str, repeats: int, new_tokens: int) -> None:
    policy = HFPolicy(model_dir, ModelOptions(device_map="cpu", compile=False))
    policy.reseed(0)
    print(f"\n{name}: {sum(p.numel() for p in policy.model.parameters()) / 1e3:.0f}K parameters")
    print(f"{'call':<28}{'ms/call':>9}{'tok/s':>9}{'ms/step':>9}{'bare ms/step':>14}{'overhead':>10}")
    for prompts_count in (1, 5):
        prompts = PROMPTS[:prompts_count]
        for n in (3, 15):
            # an EOS-free run (min_new_tokens): every row decodes exactly new_tokens steps
            ids, mask = policy._padded([policy.prompt_ids(p) for p in prompts], left=True)
            sample = lambda: policy.model.generate(  # noqa: E731
                input_ids=ids, attention_mask=mask, do_sample=True, temperature=0.7, top_p=0.95,
                max_new_tokens=new_tokens, min_new_tokens=new_tokens, num_return_sequences=n,
                pad_token_id=policy.pad_id)
            via_api = timed(lambda: policy.sample(prompts, n, temperature=0.7, top_p=0.95,
                                                  max_new_tokens=new_tokens), repeats)
            full = timed(sample, repeats)
            bare = timed(lambda: bare_decode(policy, prompts, n, new_tokens), repeats)
            tokens = prompts_count * n * new_tokens
            print(f"{f'sample {prompts_count}p x n={n}':<28}{via_api * 1e3:>9.1f}{tokens / full:>9.0f}"
                  f"{full / new_tokens * 1e3:>9.2f}{bare / new_tokens * 1e3:>14.2f}{1 - bare / full:>9.0%}")
    for pairs_count in (3, 15):
        requests = [(PROMPTS[i % len(PROMPTS)], COMPLETION) for i in range(pairs_count)]
        seconds = timed(lambda: policy.logprob(requests), repeats)
        tokens = sum(r.prompt_tokens + r.completion_tokens for r in policy.logprob(requests))
        print(f"{f'logprob {pairs_count} pairs':<28}{seconds * 1e3:>9.1f}{tokens / seconds:>9.0f}")


def main() -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own choice)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--new_tokens", type=int, default=30)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device cpu, "
          f"{args.new_tokens} new tokens per sample, mean of {args.repeats} calls")
    print("ms/call is policy.sample (may stop early at EOS); tok/s, ms/step and overhead use an EOS-free "
          "generate of exactly that many steps; overhead = share of generate time not spent in a bare "
          "KV-cached forward loop doing the same steps")
    with tempfile.TemporaryDirectory() as tmp:
        for name, sizes in SIZES.items():
            model_dir = build_tiny_model(pathlib.Path(tmp) / name.split()[0], seed=0, **sizes)
            bench_model(name, str(model_dir), args.repeats, args.new_tokens)
    return 0


if __name__ == "__main__":
    run_cli(main)
