"""The policy's decode loop (issue 56): the per-token sampling work, host reads per step, and the static-cache
and compiled decode modes against the eager loop.

Sampling itself (keyed streams, top-k/top-p, reproducibility): test_policy.py.
"""

from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch")

from masprm.models.chat import stream_seed  # noqa: E402
from masprm.models.loading import ModelOptions  # noqa: E402
from masprm.models.policy import HFPolicy, RowSampler, pick_token  # noqa: E402
from masprm.models.static_decode import LENGTH_STEP, StaticDecoder, length_bucket, row_bucket  # noqa: E402

PROMPTS = [[{"role": "user", "content": "What is 12+7?"}],
           [{"role": "system", "content": "You are a careful solver. Show the steps."},
            {"role": "user", "content": "Tom has 23 apples and gives 7 to Mary. Then he buys 12 more. How many now?"}],
           [{"role": "user", "content": "Hi"}]]
KEYS = [(42, i, 1, 0) for i in range(len(PROMPTS))]


def qwen_like(policy: HFPolicy, eos_bias: float = 0.0) -> HFPolicy:
    """Qwen2.5's checkpoint warps (repetition penalty 1.1, top-k 20), and with eos_bias an output bias that
    makes the end-of-turn token likely, so rows stop at different steps."""
    policy.model.generation_config.top_k, policy.model.generation_config.repetition_penalty = 20, 1.1
    if eos_bias:
        old = policy.model.get_output_embeddings()
        head = torch.nn.Linear(old.in_features, old.out_features, bias=True)
        with torch.no_grad():
            head.weight.copy_(old.weight)
            head.bias.zero_()
            head.bias[policy.tokenizer.convert_tokens_to_ids("<|im_end|>")] = eos_bias
        policy.model.lm_head = head
    return policy


def policy_in(tiny_model_dir, decode: str, **kwargs) -> HFPolicy:
    return HFPolicy(str(tiny_model_dir), ModelOptions(device_map="cpu", decode=decode), **kwargs)


# -- the sampling step ----------------------------------------------------------


def vocabulary_wide_step(logits, seen_mask, penalty, temperature, top_p, top_k, seeds, step):
    """Reference: the loop's step before issue 56, three passes over the vocabulary for the penalty."""
    logits = torch.where(seen_mask, torch.where(logits < 0, logits * penalty, logits / penalty), logits)
    if temperature <= 0:
        return logits.argmax(-1)
    return pick_token(logits / temperature, top_p, top_k, seeds, step)


@pytest.mark.parametrize("top_k,temperature", [(20, 0.7), (0, 1.3), (20, 0.0)])
def test_the_penalty_on_seen_ids_samples_the_tokens_of_the_vocabulary_wide_form(top_k, temperature):
    gen = torch.Generator().manual_seed(3)
    rows, vocab, steps = 6, 64, 12   # a small vocabulary: seen tokens are often among the top ones
    # prompts of different lengths, with repeated tokens (scattered twice: must stay harmless)
    prompts = [torch.randint(0, vocab, (n,), generator=gen).tolist() + [7, 7] for n in (3, 9, 1, 30, 5, 12)]
    seeds = torch.tensor([stream_seed((5, r)) for r in range(rows)])
    sampler = RowSampler(prompts, steps, temperature=temperature, top_p=0.9, top_k=top_k, penalty=1.1,
                         seeds=seeds)
    seen = torch.zeros(rows, vocab, dtype=torch.bool)
    for r, row in enumerate(prompts):
        seen[r, row] = True
    differs = 0
    for step in range(steps):
        # scale 8: the penalty moves logits across the top-k cut; both signs, so both branches run
        logits = torch.randn(rows, vocab, generator=gen) * 8
        want = vocabulary_wide_step(logits.clone(), seen, 1.1, temperature, 0.9, top_k, seeds, step)
        without_penalty = vocabulary_wide_step(logits.clone(), torch.zeros_like(seen), 1.1, temperature, 0.9,
                                               top_k, seeds, step)
        got = sampler.pick(logits.clone(), step)
        assert torch.equal(got, want)
        differs += int((want != without_penalty).sum())
        sampler.saw(got, step)
        seen[torch.arange(rows), got] = True
    assert differs > 0   # the penalty changed some draws, so the comparison above could fail


def test_the_finite_check_reads_the_reduced_values_with_the_promise_of_the_full_one():
    """Refused exactly when a row's largest logit is not finite: NaN anywhere, +inf anywhere, or -inf for every
    token; a -inf among finite logits (a masked token) is fine."""
    seeds = torch.tensor([stream_seed((1, r)) for r in range(2)])
    cases = {"nan at a seen token": (0, 2, float("nan"), True), "+inf": (1, 9, float("inf"), True),
             "one -inf": (0, 5, float("-inf"), False)}
    for temperature in (0.7, 0.0):
        for top_k in (3, 0):
            for name, (row, token, value, refused) in cases.items():
                sampler = RowSampler([[2, 4], [1]], 4, temperature=temperature, top_p=0.9, top_k=top_k, penalty=1.1,
                                     seeds=seeds)
                logits = torch.randn(2, 12)
                logits[row, token] = value
                sampler.pick(logits, 0)
                assert bool(sampler.bad) is refused, (name, temperature, top_k)
            sampler = RowSampler([[2], [1]], 4, temperature=temperature, top_p=0.9, top_k=top_k, penalty=1.0,
                                 seeds=seeds)
            logits = torch.randn(2, 12)
            logits[1] = float("-inf")
            sampler.pick(logits, 0)
            assert bool(sampler.bad), ("all -inf", temperature, top_k)


# -- host reads per step --------------------------------------------------------

HOST_READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero", "numpy")


@contextlib.contextmanager
def counting_host_reads():
    """Counts the tensor methods that copy a value to the host (a device sync on a GPU)."""
    count = [0]
    originals = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def counted(original):
        def method(self, *args, **kwargs):
            count[0] += 1
            return original(self, *args, **kwargs)
        return method

    for name, original in originals.items():
        setattr(torch.Tensor, name, counted(original))
    try:
        yield count
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


@pytest.mark.parametrize("decode", ["eager", "static"])
def test_a_decode_step_reads_the_device_once(tiny_model_dir, decode):
    """The reads of a call of 16 steps minus those of a call of 8 (same prompts, no row stops) are the
    8 extra steps' reads: at most one each (the stop check with the finite flag); before issue 56, three."""
    policy = qwen_like(policy_in(tiny_model_dir, decode))
    policy.stop_ids = {10 ** 6}   # a token no row samples: every call runs all its steps
    reads = {}
    for steps in (8, 16):
        policy.sample(PROMPTS, 2, temperature=0.7, top_p=0.95, max_new_tokens=steps, keys=KEYS)   # warm
        with counting_host_reads() as count:
            result = policy.sample(PROMPTS, 2, temperature=0.7, top_p=0.95, max_new_tokens=steps, keys=KEYS)
        assert all(g.new_tokens == steps for gens in result for g in gens)
        reads[steps] = count[0]
    assert reads[16] - reads[8] <= 8
    assert reads[8] > 0   # the counter sees the loop's reads (the final tolist at least)


# -- static cache and compiled steps --------------------------------------------


def test_buckets():
    assert [row_bucket(n) for n in (1, 2, 3, 4, 5, 64, 65, 256)] == [1, 2, 4, 4, 8, 64, 128, 256]
    assert [length_bucket(n) for n in (1, LENGTH_STEP, LENGTH_STEP + 1)] == [LENGTH_STEP, LENGTH_STEP,
                                                                              2 * LENGTH_STEP]


def test_the_static_cache_samples_what_the_eager_loop_samples(tiny_model_dir):
    """Same keys, same tokens: left padding (prompts of 9 to 40 tokens), n samples sharing a prefill, rows
    that stop early (the end-of-turn bias), penalty and top-k, greedy; and the rows padded up to the bucket
    (3 prompts x 3 = 9 rows run as 16) change nothing."""
    eager = qwen_like(policy_in(tiny_model_dir, "eager"), eos_bias=3.0)
    static = qwen_like(policy_in(tiny_model_dir, "static"), eos_bias=3.0)
    assert static.decode == "static" and eager._static is None
    lengths = set()
    for temperature, top_p in ((0.7, 0.95), (1.2, 1.0), (0.0, 1.0)):
        want = eager.sample(PROMPTS, 3, temperature=temperature, top_p=top_p, max_new_tokens=24, keys=KEYS)
        assert static.sample(PROMPTS, 3, temperature=temperature, top_p=top_p, max_new_tokens=24, keys=KEYS) == want
        lengths |= {g.new_tokens for gens in want for g in gens}
    assert len(lengths) > 2   # rows stopped at different steps
    buckets = static._static.counts.buckets
    static.sample(PROMPTS[:2], 5, temperature=0.7, top_p=0.95, max_new_tokens=24, keys=KEYS[:2])   # 10 rows -> 16
    assert static._static.counts.buckets == buckets   # the same bucket: its cache is reused


def test_a_call_split_by_max_batch_tokens_decodes_the_same_on_the_static_cache(tiny_model_dir):
    whole = qwen_like(policy_in(tiny_model_dir, "eager"))
    split = qwen_like(policy_in(tiny_model_dir, "static", max_batch_tokens=80))
    args = dict(temperature=0.8, top_p=0.9, max_new_tokens=12, keys=KEYS)
    assert split.sample(PROMPTS, 3, **args) == whole.sample(PROMPTS, 3, **args)


def counting_compiler(compiled: list):
    """torch.compile with dynamo only (backend "eager": traced, not lowered; inductor takes minutes on a CPU),
    counting the graphs it is handed."""
    def backend(graph, example_inputs):
        compiled.append(graph)
        return graph.forward

    return lambda fn: torch.compile(fn, backend=backend, dynamic=False)


@pytest.mark.slow
def test_the_compiled_step_samples_the_same_and_compiles_once_per_bucket(tiny_model_dir):
    eager = qwen_like(policy_in(tiny_model_dir, "eager"))
    policy = qwen_like(policy_in(tiny_model_dir, "eager"))
    graphs: list = []
    policy._static = StaticDecoder(policy.model, compiler=counting_compiler(graphs))
    args = dict(temperature=0.7, top_p=0.95, max_new_tokens=10)
    assert policy.sample(PROMPTS, 2, keys=KEYS, **args) == eager.sample(PROMPTS, 2, keys=KEYS, **args)
    first = len(graphs)
    assert first >= 1 and policy._static.counts.compiles == first
    # the same bucket again (6 rows under other keys, then 2 prompts x 4 = 8 rows: both run as 8): nothing compiles
    policy.sample(PROMPTS, 2, keys=[(7, i) for i in range(3)], **args)
    policy.sample(PROMPTS[:2], 4, keys=KEYS[:2], **args)
    assert len(graphs) == first and policy._static.counts.compiles == first
    policy.sample(PROMPTS[:2], 2, keys=KEYS[:2], **args)   # 4 rows: another bucket, another graph
    assert len(graphs) > first and policy._static.counts.compiles == len(graphs)


def test_decode_modes_resolve_and_refuse(tiny_model_dir):
    from masprm.errors import ConfigError
    from masprm.models.options import ModelFlags

    assert policy_in(tiny_model_dir, "auto").decode == "eager"   # the CPU default: eager
    assert ModelFlags(decode="static").options().decode == "static"
    with pytest.raises(ConfigError, match="decode 'cudagraph': expected one of auto, eager, static, graphs"):
        policy_in(tiny_model_dir, "cudagraph")


# -- the benchmark --------------------------------------------------------------


@pytest.mark.slow
def test_the_decode_benchmark_quick_mode_runs_every_cpu_configuration():
    """bench/bench_decode.py --quick on a 2-layer model, one small cell: a smoke test, nothing timed."""
    import subprocess
    import sys

    from helpers import REPO

    result = subprocess.run([sys.executable, str(REPO / "bench/bench_decode.py"), "--quick", "--layers", "2",
                             "--rows", "4", "--vocab", "512", "--new_tokens", "3", "--repeats", "1"],
                            capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    configs = [line.split()[2] for line in result.stdout.splitlines() if line.startswith("    512     4 ")]
    assert configs == ["A", "B", "C", "A-static", "C-static"]
    assert result.stdout.rstrip().endswith("bench_decode: done")
