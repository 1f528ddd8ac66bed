"""The policy's decode loop against `generate` and a bare loop: ms per decode step and new tokens/s (issue 56).

Configurations, all on the same model object and the same prompts, timed interleaved (every configuration
once per repeat, in turn), medians over the repeats:

    A          HFPolicy.sample, --decode eager (the CPU default: a dynamic KV cache)
    A-static   HFPolicy.sample, --decode static (a bucketed static KV cache, eager forward)       CPU
    A-graphs   HFPolicy.sample, --decode graphs (the static cache's step as a CUDA graph)        CUDA
    B          transformers' generate (do_sample with the same warps)
    C          a bare loop: forward on a dynamic cache, the penalty by gather/scatter on the seen tokens,
               temperature, top-k, top-p, multinomial; no stop check
    C-static   C's sampling on the policy's static-cache step (eager on CPU, the same CUDA graphs as
               A-graphs on CUDA: the two differ only in the sampling around the step)
    A-before   with --before FILE: HFPolicy.sample of another version's policy.py (e.g. `git show
               REV:src/masprm/models/policy.py > FILE`), on the same model

A decode step's time is (time of a call with T new tokens - time of a call with 1) / (T - 1): the prefill
and the first token cancel. new tok/s is rows / that time. No row stops early (the policy's stop ids are
replaced by an id no model samples; `generate` gets min_new_tokens). Sampling as Qwen2.5's generation
config and stage 1: repetition penalty 1.1, top-k 20, temperature 0.7, top-p 0.95.

On a CPU the model is a random Qwen2 with 28 layers of tiny width (hidden 64), so the model's own arithmetic
is small and the loop's per-step work shows; vocabularies 512 (the toy's) and 151,646 (Qwen2.5's after the
tokenizer resize); one thread. On CUDA it is Qwen2.5-1.5B-Instruct's shape in bf16 (random weights, the
151,646-token vocabulary), beside the bandwidth floor docs/gpu.md computes; the graph configurations run at
the largest row count only (each new bucket compiles, tens of seconds).

    python bench/bench_decode.py                 # CPU: rows 1, 16, 64, 256 (a quarter of an hour on 2 cores)
    python bench/bench_decode.py --quick         # CPU: rows 1 and 16, 6 new tokens, 2 repeats (about a minute)
    python bench/bench_decode.py --device cuda   # the GPU check's `decode` step (bench/gpu_plan.py)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from masprm.cli import ArgumentParser, run_cli
from masprm.models.loading import ModelOptions
from masprm.models.policy import HFPolicy
from masprm.models.static_decode import StaticDecoder, default_compiler
from masprm.models.tiny import build_tiny_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_realsize import GPU_WORKLOAD, QWEN25_15B_INSTRUCT, decode_floor_tokens_per_s  # noqa: E402

TEMPERATURE, TOP_P, TOP_K, PENALTY = 0.7, 0.95, 20, 1.1
QWEN_VOCAB = 151646   # Qwen2.5's tokenizer length: the policy resizes its 151,936 embedding rows to it
SAMPLES = 4           # samples per prompt (stage 1's candidates), so rows = prompts x 4 from 4 rows on


def prompts_for(rows: int, filler: int) -> tuple[list, int]:
    """(chat prompts, samples per prompt) of a call of `rows` rows: distinct questions, lengths varying by row
    (left padding), `filler` words of system prompt to set the length."""
    n = SAMPLES if rows >= SAMPLES else 1
    words = "first add the numbers then check the total and write the answer".split()
    prompts = []
    for i in range(rows // n):
        system = " ".join(words[j % len(words)] for j in range(filler + 3 * (i % 5)))
        prompts.append([{"role": "system", "content": system},
                        {"role": "user", "content": f"Tom has {i + 3} apples and buys {2 * i + 1} more. How many?"}])
    return prompts, n


def build_model(template, vocab: int, device: torch.device, realsize: bool):
    """A random Qwen2 causal LM: the template's tiny shape (CPU) or Qwen2.5-1.5B's (CUDA, bf16), `vocab` rows."""
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    base = template.config
    shape = dict(QWEN25_15B_INSTRUCT) if realsize else dict(
        hidden_size=base.hidden_size, num_hidden_layers=base.num_hidden_layers,
        num_attention_heads=base.num_attention_heads, num_key_value_heads=base.num_key_value_heads,
        intermediate_size=base.intermediate_size, tie_word_embeddings=True)
    shape.update(vocab_size=vocab, eos_token_id=base.eos_token_id, pad_token_id=base.pad_token_id,
                 bos_token_id=None)
    config = Qwen2Config(**shape)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    model = model.to(torch.bfloat16 if realsize else torch.float32).eval()
    model.generation_config = GenerationConfig(eos_token_id=base.eos_token_id, pad_token_id=base.pad_token_id,
                                               do_sample=True, top_k=TOP_K, repetition_penalty=PENALTY)
    return model


class Bench:
    """The configurations' calls on one policy (whose model is swapped per vocabulary) and one prompt set."""

    def __init__(self, policy: HFPolicy, static: StaticDecoder, prompts: list, n: int):
        self.policy, self.static, self.prompts, self.n = policy, static, prompts, n
        self.keys = [(7, i) for i in range(len(prompts))]
        rows = [policy.prompt_ids(p) for p in prompts for _ in range(n)]
        self.ids, self.mask = policy._padded(rows, left=True)
        distinct = [policy.prompt_ids(p) for p in prompts]
        self.distinct_ids, self.distinct_mask = policy._padded(distinct, left=True)
        # seen tokens for the penalty: each row's prompt, its first token standing in for the padding
        width = self.ids.shape[1]
        self.seen = torch.tensor([row[:1] * (width - len(row)) + row for row in rows], device=policy.device)

    def a(self, decoder: StaticDecoder | None, policy=None):
        policy = policy or self.policy

        def call(steps: int):
            policy._static = decoder
            return policy.sample(self.prompts, self.n, temperature=TEMPERATURE, top_p=TOP_P, max_new_tokens=steps,
                                 keys=self.keys)
        return call

    def b(self, steps: int):
        out = self.policy.model.generate(
            input_ids=self.distinct_ids, attention_mask=self.distinct_mask, do_sample=True, temperature=TEMPERATURE,
            top_p=TOP_P, top_k=TOP_K, repetition_penalty=PENALTY, max_new_tokens=steps, min_new_tokens=steps,
            num_return_sequences=self.n, pad_token_id=self.policy.pad_id)
        return out.tolist()

    def c(self, static: bool):
        return lambda steps: self.bare(steps, static)

    @torch.no_grad()
    def bare(self, steps: int, static: bool) -> list:
        """C: prefill every row, then per step the forward and plain sampling (no stop check, no keyed noise)."""
        model, mask = self.policy.model, self.mask
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        arg = self.static.cache_arg   # transformers' name of the KV-cache argument (5.17: past_key_values)
        out = model(input_ids=self.ids, attention_mask=mask, position_ids=positions, use_cache=True,
                    logits_to_keep=1)
        logits, positions = out.logits[:, -1, :], positions[:, -1:]
        if static:
            following = self.static.begin(getattr(out, arg), torch.arange(len(self.ids)), mask, positions, steps)
            forward = following.next
        else:
            cache = getattr(out, arg)

            def forward(token):
                nonlocal cache, mask, positions
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
                positions = positions + 1
                step = model(input_ids=token[:, None], attention_mask=mask, position_ids=positions, use_cache=True,
                             logits_to_keep=1, **{arg: cache})
                cache = getattr(step, arg)
                return step.logits[:, -1, :]

        seen, tokens = self.seen, []
        for step in range(steps):
            token = bare_pick(logits.float(), seen)
            tokens.append(token)
            if step == steps - 1:
                break
            seen = torch.cat([seen, token[:, None]], dim=1)
            logits = forward(token)
        return torch.stack(tokens, dim=1).tolist()


def bare_pick(logits: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
    """The bare loop's sampling: penalty on the seen ids, temperature, top-k, top-p, multinomial."""
    picked = logits.gather(1, seen)
    logits.scatter_(1, seen, torch.where(picked < 0, picked * PENALTY, picked / PENALTY))
    values, ids = logits.div_(TEMPERATURE).topk(TOP_K, dim=-1)   # in place: a new vocabulary-wide tensor per
    # step costs a CPU its page faults (measured: more than the division itself at 64 rows x 151,646)
    probs = values.softmax(-1)
    probs = probs.masked_fill(probs.cumsum(-1) - probs >= TOP_P, 0.0)
    return ids.gather(1, torch.multinomial(probs, 1))[:, 0]


def policy_class(path: str):
    """HFPolicy of another version's policy.py (loaded beside this one; it imports this checkout's masprm)."""
    import importlib.util

    if not Path(path).is_file():
        raise SystemExit(f"bench_decode: --before {path}: no such file")
    spec = importlib.util.spec_from_file_location("policy_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.HFPolicy


def measure(calls: dict, steps: int, repeats: int, device: torch.device) -> dict[str, float]:
    """Seconds per decode step of each call: medians of interleaved repeats of a T-token and a 1-token call."""
    def seconds(call, n: int) -> float:
        start = time.perf_counter()
        call(n)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    # Warm-up: allocations, a new bucket's cache, a step's compile, and on CUDA the graph's recording (cudagraph
    # trees run a new graph once before recording it, so two decode steps); the timed calls' bucket is the same
    # unless the longest prompt ends within `steps` of a multiple of 256.
    for call in calls.values():
        call(3)
    times: dict[str, dict[int, list[float]]] = {name: {steps: [], 1: []} for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            for n in (steps, 1):
                times[name][n].append(seconds(call, n))
    return {name: (statistics.median(t[steps]) - statistics.median(t[1])) / (steps - 1) for name, t in times.items()}


def main() -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda: the 1.5B shape in bf16 there")
    parser.add_argument("--quick", action="store_true", help="a short CPU run: rows 1 and 16, 6 new tokens, "
                                                              "2 repeats")
    parser.add_argument("--rows", type=int, nargs="+", default=None,
                        help="rows per call (default: 1 16 64 256; --quick: 1 16; cuda: 64 256)")
    parser.add_argument("--vocab", type=int, nargs="+", default=None,
                        help=f"vocabulary sizes (default: 512 {QWEN_VOCAB}; cuda: {QWEN_VOCAB})")
    parser.add_argument("--layers", type=int, default=28, help="layers of the CPU model (default 28, as Qwen2.5)")
    parser.add_argument("--new_tokens", type=int, default=None,
                        help="new tokens of a timed call (default: 12; --quick: 6; cuda: 16)")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repeats (default: 3; --quick: 2)")
    parser.add_argument("--graph_rows", type=int, nargs="+", default=None,
                        help="cuda: rows at which A-graphs and C-static run (default: the largest of --rows)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--configs", nargs="+", default=None, metavar="NAME",
                        help="time only these configurations (default: all that run on the device; C always runs, "
                             "as the ratios' base)")
    parser.add_argument("--before", default=None, metavar="FILE",
                        help="another version's masprm/models/policy.py, timed as A-before on the same model")
    args = parser.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here")
    if args.layers < 1:
        parser.error("--layers must be at least 1")
    torch.set_num_threads(args.threads)
    rows_list = args.rows or ([64, 256] if cuda else [1, 16] if args.quick else [1, 16, 64, 256])
    vocabs = args.vocab or ([QWEN_VOCAB] if cuda else [512, QWEN_VOCAB])
    steps = args.new_tokens or (16 if cuda else 6 if args.quick else 12)
    repeats = args.repeats or (2 if args.quick else 3)
    graph_rows = set(args.graph_rows or [max(rows_list)])
    if steps < 2 or repeats < 1 or min(rows_list) < 1 or min(vocabs) < 512:
        parser.error("--new_tokens must be >= 2, --repeats >= 1, --rows >= 1, --vocab >= 512")

    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    print(f"bench_decode: torch {torch.__version__}, {name}, {torch.get_num_threads()} thread(s); "
          f"{steps} new tokens per timed call, medians of {repeats} interleaved repeats")
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_tiny_model(Path(tmp) / "tiny", num_layers=args.layers, seed=0)
        options = ModelOptions(device_map=args.device, decode="eager", dtype="float32")
        policy = HFPolicy(str(folder), options)
        before = policy_class(args.before)(str(folder), options) if args.before else None
    for each in (policy, before):
        if each is not None:
            each.stop_ids = {-1}   # no row stops: every call decodes all its steps
    filler = 100 if cuda else 4   # prompts of 49 to 76 tokens on a CPU; on CUDA 249 to 277, near stage 1's
    header = f"{'vocab':>7} {'rows':>5} {'config':<9} {'ms/step':>9} {'new tok/s':>10} {'x C':>6}"
    if cuda:
        header += f" {'floor tok/s':>12}"
    print(header)
    for vocab in vocabs:
        policy.model = build_model(policy.model, vocab, device, realsize=cuda)
        if before is not None:
            before.model = policy.model
        static = StaticDecoder(policy.model, compiler=default_compiler(device) if cuda else None)
        for rows in rows_list:
            prompts, n = prompts_for(rows, filler)
            bench = Bench(policy, static, prompts, n)
            calls = {"A": bench.a(None), "B": bench.b, "C": bench.c(False)}
            if before is not None:
                calls["A-before"] = bench.a(None, before)
            if not cuda:
                calls["A-static"] = bench.a(static)
                calls["C-static"] = bench.c(True)
            elif rows in graph_rows:
                calls["A-graphs"] = bench.a(static)
                calls["C-static"] = bench.c(True)
            if args.configs:
                calls = {name: call for name, call in calls.items() if name in args.configs or name == "C"}
            per_step = measure(calls, steps, repeats, device)
            context = bench.ids.shape[1] + steps / 2
            for config, seconds in per_step.items():
                line = (f"{vocab:>7} {rows:>5} {config:<9} {seconds * 1e3:>9.2f} {rows / seconds:>10,.0f} "
                        f"{seconds / per_step['C']:>6.2f}")
                if cuda:
                    line += f" {decode_floor_tokens_per_s(GPU_WORKLOAD, rows, context):>12,.0f}"
                print(line, flush=True)
        print(f"static-cache step: {static.counts.buckets} buckets, {static.counts.compiles} compiles")
    print("bench_decode: done")
    return 0


if __name__ == "__main__":
    run_cli(main)
