"""HFPolicy on the tiny model: sampling, teacher-forced log-probs, 4-bit and compiled paths.

Loading errors, model flags, dtypes and devices: test_model_loading.py.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from masprm.models import loading  # noqa: E402
from masprm.models.loading import ModelOptions, load_causal_lm  # noqa: E402
from masprm.models.policy import HFPolicy  # noqa: E402

SHORT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 12+7?"}]
LONG = [{"role": "system", "content": "You are a careful solver. Show the steps."},
        {"role": "user", "content": "Tom has 23 apples and gives 7 to Mary. Then he buys 12 more. How many now?"}]
NO_SYSTEM = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return HFPolicy(str(tiny_model_dir), ModelOptions(device_map="cpu"))


@pytest.fixture
def eos_biased_policy(tiny_model_dir):
    """The tiny model with an output bias that makes the end-of-turn token likely (~1 in 10 steps),
    so samples stop at varied lengths."""
    policy = HFPolicy(str(tiny_model_dir), ModelOptions(device_map="cpu"))
    old = policy.model.get_output_embeddings()
    head = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    with torch.no_grad():
        head.weight.copy_(old.weight)
        head.bias.zero_()
        head.bias[im_end(policy)] = 4.0
    policy.model.lm_head = head
    return policy


def im_end(policy) -> int:
    return policy.tokenizer.convert_tokens_to_ids("<|im_end|>")


def chat_ids(tokenizer, messages):
    """Independent reference: the chat template tokenised in one go."""
    return tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)["input_ids"]


def manual_logprob(policy, messages, completion) -> float:
    """Token by token, one un-batched full-model forward per completion token.

    The original scores the completion's own tokens only (no end-of-turn token)."""
    tok = policy.tokenizer
    prompt = list(chat_ids(tok, messages))
    target = tok(completion, add_special_tokens=False)["input_ids"]
    total = 0.0
    with torch.no_grad():
        for j, token in enumerate(target):
            prefix = torch.tensor([prompt + target[:j]])
            logits = policy.model(input_ids=prefix).logits[0, -1].double()
            total += torch.log_softmax(logits, dim=-1)[token].item()
    return total


# -- sampling ------------------------------------------------------------------


def replay_row(policy, messages, seed, *, temperature, top_p, max_new_tokens):
    """Independent reference for one row: no batch, no padding, no KV cache, one full forward per token."""
    from masprm.models.policy import pick_token

    ids = list(chat_ids(policy.tokenizer, messages))
    seeds = torch.tensor([seed])
    new = []
    with torch.no_grad():
        for step in range(max_new_tokens):
            logits = policy.model(input_ids=torch.tensor([ids + new])).logits[:, -1, :].float()
            token = int(pick_token(logits / temperature, top_p, 0, seeds, step)[0])
            new.append(token)
            if token in policy.stop_ids:
                break
    return new


def test_each_row_samples_what_a_cache_free_replay_of_its_own_stream_samples(eos_biased_policy):
    from masprm.models.policy import stream_seed

    policy = eos_biased_policy
    prompts, keys = [SHORT, LONG, NO_SYSTEM], [(42, 0, 1, 0), (42, 0, 1, 1), (42, 3, 2, 0)]
    result = policy.sample(prompts, 4, temperature=1.0, top_p=0.95, max_new_tokens=12, keys=keys)
    assert [len(gens) for gens in result] == [4, 4, 4]
    lengths = set()
    for messages, key, gens in zip(prompts, keys, result):
        for k, gen in enumerate(gens):
            new = replay_row(policy, messages, stream_seed((*key, k)), temperature=1.0, top_p=0.95,
                             max_new_tokens=12)
            assert gen.prompt_tokens == len(chat_ids(policy.tokenizer, messages))
            assert gen.new_tokens == len(new) <= 12   # up to and including the end-of-turn token
            assert gen.text == policy.tokenizer.decode(new, skip_special_tokens=True).strip()
            assert "<|im_end|>" not in gen.text
            lengths.add(gen.new_tokens)
    assert len(lengths) > 2  # stops at varied lengths, so the counting was exercised
    assert len({g.text for g in result[0]}) > 1   # the n samples of a prompt differ


def test_a_row_does_not_depend_on_its_batch_or_on_splitting(tiny_model_dir, policy):
    args = dict(temperature=0.8, top_p=0.9, max_new_tokens=10)
    prompts, keys = [SHORT, LONG, NO_SYSTEM, LONG], [(1, i, 1, 0) for i in range(4)]
    together = policy.sample(prompts, 3, keys=keys, **args)
    alone = [policy.sample([p], 3, keys=[k], **args)[0] for p, k in zip(prompts, keys)]
    small = HFPolicy(str(tiny_model_dir), ModelOptions(device_map="cpu"), max_batch_tokens=60)
    assert len(small._batches([(small.prompt_ids(p), [0] * 10) for p in prompts for _ in range(3)])) > 3
    assert together == alone == small.sample(prompts, 3, keys=keys, **args)
    assert together[1] != together[3]   # the same prompt under another key: another stream


def test_top_k_and_top_p_keep_what_generates_warpers_keep():
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    from masprm.models.policy import pick_token

    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 40, generator=gen) * 2
    for top_k, top_p in ((0, 0.9), (5, 0.9), (0, 0.3), (12, 1.0)):
        warped = logits.clone()
        if top_k:
            warped = TopKLogitsWarper(top_k)(None, warped)
        warped = TopPLogitsWarper(top_p)(None, warped)
        allowed = [set(torch.nonzero(torch.isfinite(row)).flatten().tolist()) for row in warped]
        picked = [set() for _ in range(6)]
        for stream in range(300):   # many streams reach every kept token and never another one
            seeds = torch.tensor([[stream, 7]] * 6)
            for row, token in enumerate(pick_token(logits, top_p, top_k, seeds, 0).tolist()):
                picked[row].add(token)
        assert all(p <= a for p, a in zip(picked, allowed))   # never a token the warpers remove
        assert sum(map(len, picked)) >= 0.9 * sum(map(len, allowed))   # and (nearly) all they keep


def test_gumbel_draws_follow_the_softmax():
    from masprm.models.policy import pick_token

    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(4000, 1)
    seeds = torch.stack([torch.arange(4000), torch.full((4000,), 11)], dim=1)
    counts = torch.bincount(pick_token(logits, 1.0, 0, seeds, 3), minlength=4).double() / 4000
    assert torch.allclose(counts, logits[0].softmax(-1).double(), atol=0.025)


def test_sample_is_reproducible_after_reseed(policy):
    args = dict(temperature=1.0, top_p=0.9, max_new_tokens=10)
    policy.reseed(7)
    first = policy.sample([SHORT, LONG], 3, **args)
    second = policy.sample([SHORT, LONG], 3, **args)
    policy.reseed(7)
    assert policy.sample([SHORT, LONG], 3, **args) == first
    assert policy.sample([SHORT, LONG], 3, **args) == second
    policy.reseed(8)
    assert policy.sample([SHORT, LONG], 3, **args) != first
    assert len({g.text for g in first[0]}) > 1  # samples differ within one call


def test_greedy_gives_n_identical_samples(policy):
    result = policy.sample([SHORT], 3, temperature=0.0, top_p=1.0, max_new_tokens=6)
    assert len(result[0]) == 3 and len({g.text for g in result[0]}) == 1


def test_empty_inputs(policy):
    assert policy.sample([], 3, temperature=0.7, top_p=0.9, max_new_tokens=5) == []
    no_budget = policy.sample([SHORT], 2, temperature=0.7, top_p=0.9, max_new_tokens=0)
    assert [(g.text, g.new_tokens) for g in no_budget[0]] == [("", 0), ("", 0)]
    assert no_budget[0][0].prompt_tokens == len(chat_ids(policy.tokenizer, SHORT))


# -- log-probs -----------------------------------------------------------------


def test_logprob_matches_token_by_token_reference_in_a_mixed_batch(policy):
    requests = [
        (SHORT, "19"),
        (LONG, "Tom had 23 apples. 23 - 7 = 16, then 16 + 12 = 28. Answer: 28"),
        (SHORT, ""),
        (NO_SYSTEM, "Hello! How can I help you today?"),
        (LONG, "28"),
    ]
    batched = policy.logprob(requests)
    for (messages, completion), got in zip(requests, batched):
        expected = manual_logprob(policy, messages, completion)
        assert got.logprob == pytest.approx(expected, abs=1e-4)
        assert got.prompt_tokens == len(chat_ids(policy.tokenizer, messages))
        assert got.completion_tokens == len(policy.tokenizer(completion, add_special_tokens=False)["input_ids"])
    # Only the completion's own tokens are scored (the original's rule): an empty one costs nothing.
    assert (batched[2].logprob, batched[2].completion_tokens) == (0.0, 0)
    # the same pairs one at a time: padding must not change anything
    for request, got in zip(requests, batched):
        assert policy.logprob([request])[0].logprob == pytest.approx(got.logprob, abs=1e-4)


def test_logprob_split_into_small_batches_is_unchanged(tiny_model_dir, policy):
    requests = [(SHORT, "19"), (LONG, "16 + 12 = 28"), (NO_SYSTEM, "Hi"), (LONG, "")]
    small = HFPolicy(str(tiny_model_dir), ModelOptions(device_map="cpu"), max_batch_tokens=40)
    assert len(small._batches([(small.prompt_ids(m), small.completion_ids(c)) for m, c in requests])) > 1
    for a, b in zip(policy.logprob(requests), small.logprob(requests)):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-5)
        assert (a.prompt_tokens, a.completion_tokens) == (b.prompt_tokens, b.completion_tokens)


def test_prompt_cache_is_bounded_and_spares_retokenising(tiny_model_dir, monkeypatch):
    policy = HFPolicy(str(tiny_model_dir), ModelOptions(device_map="cpu"), prompt_cache_size=2)
    rendered = []
    real = policy.tokenizer.apply_chat_template
    monkeypatch.setattr(policy.tokenizer, "apply_chat_template",
                        lambda *a, **k: rendered.append(1) or real(*a, **k))
    policy.reseed(0)
    gen = policy.sample([SHORT], 1, temperature=1.0, top_p=1.0, max_new_tokens=4)[0][0]
    policy.logprob([(SHORT, gen.text)])
    assert len(rendered) == 1  # sampled, then scored: rendered and tokenised once
    policy.prompt_ids(LONG)
    policy.prompt_ids(NO_SYSTEM)  # evicts SHORT, the least recently used
    assert len(policy._prompt_cache) == 2
    policy.prompt_ids(SHORT)
    assert len(rendered) == 4


@pytest.mark.parametrize("quant_type", ["fp4", "nf4"])
def test_4bit_policy_runs_on_cpu_close_to_the_unquantised_model(tiny_model_dir, policy, quant_type):
    """--load_in_4bit on CPU loads FP4 (default) or NF4 weights (fp32 compute) and samples; log-probs stay
    close to fp32."""
    import bitsandbytes as bnb

    options = ModelOptions(device_map="cpu", load_in_4bit=True)
    if quant_type == "nf4":
        options = dataclasses.replace(options, quant_type="nf4")
    quantized = HFPolicy(str(tiny_model_dir), options)
    layer = quantized.model.model.layers[0].self_attn.q_proj
    assert isinstance(layer, bnb.nn.Linear4bit) and layer.weight.quant_state.quant_type == quant_type
    assert layer.compute_dtype == torch.float32 and quantized.model.is_loaded_in_4bit
    quantized.reseed(0)
    samples = quantized.sample([SHORT, LONG], n=2, temperature=0.7, top_p=0.95, max_new_tokens=8)
    assert [len(s) for s in samples] == [2, 2] and all(1 <= g.new_tokens <= 8 for s in samples for g in s)
    requests = [(SHORT, "19"), (LONG, "He has 28 apples now."), (NO_SYSTEM, "Hello there")]
    got = [r.logprob for r in quantized.logprob(requests)]
    reference = [r.logprob for r in policy.logprob(requests)]
    tokens = [r.completion_tokens for r in policy.logprob(requests)]
    # 4 bits round each weight to one of 16 levels: allow 0.05 nats per completion token (measured on this
    # model: at most 0.010 with NF4, 0.007 with FP4).
    for g, ref, n in zip(got, reference, tokens):
        assert g != ref and abs(g - ref) <= 0.05 * n


def test_compile_failure_falls_back_to_eager(policy, monkeypatch):
    monkeypatch.setattr(loading, "_warned", set())
    model = policy.model
    eager = model.forward

    def broken_compiler(fn, dynamic):
        def compiled(*args, **kwargs):
            raise RuntimeError("inductor exploded\nlong details")
        return compiled

    try:
        loading.compile_with_fallback(model, broken_compiler)
        probe = torch.tensor([[5, 6, 7]])
        with pytest.warns(RuntimeWarning, match="torch.compile failed .*inductor exploded"):
            out = model(input_ids=probe).logits
        assert torch.allclose(out, eager(input_ids=probe).logits)
        assert model.forward == eager  # reverted for good
    finally:
        model.forward = eager


def test_compiled_forward_keeps_its_signature_so_generate_passes_logits_to_keep(tiny_model_dir):
    """Without it, prefill would compute logits for every prompt position instead of the last one."""
    import functools
    import inspect

    model = load_causal_lm(str(tiny_model_dir), ModelOptions(device_map="cpu", compile=False))
    seen = []

    def spying_compiler(fn, dynamic):  # like torch.compile: returns a wrapper with fn's signature
        @functools.wraps(fn)
        def compiled(*args, **kwargs):
            seen.append(kwargs)
            return fn(*args, **kwargs)
        return compiled

    loading.compile_with_fallback(model, spying_compiler)
    assert {"logits_to_keep", "position_ids"} <= set(inspect.signature(model.forward).parameters)
    model.generate(input_ids=torch.tensor([[5, 6, 7, 8]]), attention_mask=torch.ones(1, 4, dtype=torch.long),
                   max_new_tokens=2, do_sample=False, pad_token_id=0)
    assert seen and seen[0].get("logits_to_keep") == 1 and seen[0].get("position_ids") is not None
    # torch.compile's own wrapper keeps the signature too (compilation itself is lazy: nothing runs here).
    compiled = torch.compile(model.forward, dynamic=True)
    assert "logits_to_keep" in inspect.signature(compiled).parameters


def test_logprob_indexes_hidden_states_where_they_live(tiny_model_dir, policy, monkeypatch):
    """device_map="auto" over several GPUs: inputs go to the first GPU (policy.device), the last hidden
    state comes back on the last one. Emulated on CPU: policy.device names another device ("meta")
    while accelerate-style input placement keeps the rows where the model is."""
    requests = [(SHORT, "19"), (LONG, "He has 28 apples now.")]
    expected = [r.logprob for r in policy.logprob(requests)]
    split = HFPolicy(str(tiny_model_dir), ModelOptions(device_map="cpu"))
    on_cpu = SimpleNamespace(pad_id=split.pad_id, device=torch.device("cpu"))
    monkeypatch.setattr(split, "_padded", lambda rows, left: HFPolicy._padded(on_cpu, rows, left))
    split.device = torch.device("meta")
    assert [r.logprob for r in split.logprob(requests)] == pytest.approx(expected, abs=1e-5)
