"""Train the toy world's tiny policy: a small Qwen2 model that plays all four agents of configs/toy.yaml.

A byte-level BPE tokenizer with a ChatML chat template is trained on the toy
corpus (``masprm.models.tiny.build_tokenizer``), with the whole numbers
0..99 added as single tokens: one arithmetic fact ``11-9=2`` is then a table
lookup the model can learn in minutes, where digit-by-digit arithmetic
would take hours of CPU. A randomly initialised Qwen2 causal LM is trained
with a plain torch loop on two kinds of batches:

- the reference team transcripts: the loss covers the agent's output and
  its end-of-turn token (as in chat SFT), plus the prompt at a small weight,
  which teaches the model to read the stories much faster; the two agents
  that read the story (Reader, Planner) get their turns twice per epoch;
- every ``drill_every``-th batch, short arithmetic drills (``11-9=`` -> ``2``)
  drawn from the same problems, the way a model meets arithmetic in
  pre-training.

The result is an ordinary model folder, loadable by ``--model_id`` /
``--gen_model_id`` / ``--prm_base_model_id`` like any hub model. The
budget is deliberately small (a few CPU minutes): the model learns the
roles and formats, usually gets worked arithmetic right, and still makes
mistakes of its own for search to find.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import Callable, Sequence

import torch
from tqdm import tqdm

from masprm.graph import MASGraph
from masprm.models.tiny import IM_END, build_tokenizer, random_qwen2
from masprm.worlds.toy.task import Problem
from masprm.worlds.toy.transcripts import worked_steps
from masprm.worlds import WORLDS, World

NUMBER_TOKENS = 100  # "0" .. "99" are single tokens

Example = tuple[list[int], int]  # token ids, index where the loss-bearing output starts


@dataclass(frozen=True)
class PolicySpec:
    """Everything that defines the trained policy (also its cache key)."""

    vocab_size: int = 640
    hidden_size: int = 96
    num_layers: int = 3
    num_heads: int = 6
    num_kv_heads: int = 2
    intermediate_size: int = 288
    steps: int = 3000
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 100
    weight_decay: float = 0.01
    prompt_loss_weight: float = 0.25  # the prompt's share of the loss, relative to the output
    turn_repeats: tuple[int, ...] = (2, 2, 1, 1)  # copies of each agent's turns per epoch (reading is the hard part)
    drill_every: int = 3              # every n-th batch is an arithmetic drill (0: none)
    drill_batch_size: int = 128
    n_problems: int = 24000
    seed: int = 0
    target_noise: float = 0.0         # share of SFT transcripts with an early mistake the team follows (toy_deep)


# --------------------------------------------------------------------------- data


def build_policy_tokenizer(problems: Sequence[Problem], graph: MASGraph, vocab_size: int, world: World | None = None):
    tokenizer = build_tokenizer((world or WORLDS["toy"]).corpus_lines(problems, graph), vocab_size=vocab_size)
    tokenizer.add_tokens([str(i) for i in range(NUMBER_TOKENS)])
    return tokenizer


def encode_turns(tokenizer, turns: Sequence[tuple[list[dict], str]]) -> list[Example]:
    """Token ids of prompt + output + end-of-turn, and where the output starts."""
    eos = tokenizer.convert_tokens_to_ids(IM_END)
    prompts = tokenizer.apply_chat_template([m for m, _ in turns], add_generation_prompt=True, tokenize=False)
    # Batch encoding runs in the Rust tokenizer. Prompt and output are encoded
    # separately, exactly as at generation time, where the output follows the prompt's tokens.
    p_ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    o_ids = tokenizer([o for _, o in turns], add_special_tokens=False)["input_ids"]
    return [(p + o + [eos], len(p)) for p, o in zip(p_ids, o_ids)]


class Drill:
    """Arithmetic facts from the worked solutions of the training problems: ``a op n=`` -> ``b``."""

    def __init__(self, tokenizer, problems: Sequence[Problem]):
        facts = sorted({step for p in problems for step in worked_steps(p)})
        self.examples = []
        for a, op, n, b in facts:
            prompt = tokenizer(f"{a}{op}{n}=", add_special_tokens=False)["input_ids"]
            self.examples.append((prompt + tokenizer(str(b), add_special_tokens=False)["input_ids"], len(prompt)))
        counts: dict[tuple, int] = {}
        for p in problems:  # draw facts as often as the solutions use them
            for step in worked_steps(p):
                counts[step] = counts.get(step, 0) + 1
        self.weights = [counts[f] for f in facts]

    def batch(self, rng: random.Random, size: int) -> list[Example]:
        return rng.choices(self.examples, weights=self.weights, k=size)


def length_buckets(examples: list[Example], batch_size: int, rng: random.Random) -> list[list[Example]]:
    """One epoch of batches of similar prompt length (little padding), in random order.

    Sorting by the prompt, not the whole text, keeps the two solver styles (short
    and long outputs) mixed in every batch, so no batch pulls the style choice one way.
    """
    order = list(range(len(examples)))
    rng.shuffle(order)
    chunk = batch_size * 50  # sort within large random chunks, then cut into batches
    batches = []
    for lo in range(0, len(order), chunk):
        part = sorted(order[lo:lo + chunk], key=lambda i: examples[i][1])
        batches += [[examples[i] for i in part[k:k + batch_size]] for k in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


def make_batch(items: list[Example], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded input ids, attention mask, and labels (-100 outside the outputs)."""
    width = max(len(ids) for ids, _ in items)
    input_ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    labels = torch.full((len(items), width), -100, dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    for row, (ids, start) in enumerate(items):
        input_ids[row, :len(ids)] = torch.tensor(ids)
        labels[row, start:len(ids)] = torch.tensor(ids[start:])
        mask[row, :len(ids)] = 1
    return input_ids, mask, labels


# --------------------------------------------------------------------------- model and loss


def build_model(spec: PolicySpec, tokenizer):
    return random_qwen2(tokenizer, hidden_size=spec.hidden_size, intermediate_size=spec.intermediate_size,
                        num_layers=spec.num_layers, num_heads=spec.num_heads, num_kv_heads=spec.num_kv_heads,
                        max_position_embeddings=1024)


def weighted_loss(model, input_ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor,
                  prompt_weight: float) -> torch.Tensor:
    """Next-token loss on the outputs, plus (down-weighted) on the prompt tokens."""
    if prompt_weight <= 0:
        return model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
    logits = model(input_ids=input_ids, attention_mask=mask).logits[:, :-1]
    weights = torch.where(labels[:, 1:] != -100, 1.0, prompt_weight) * mask[:, 1:]
    losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), input_ids[:, 1:], reduction="none")
    return (losses * weights).sum() / weights.sum()


def lr_at(spec: PolicySpec, step: int) -> float:
    """Linear warm-up, then cosine decay to 10%."""
    if step < spec.warmup:
        return spec.lr * (step + 1) / spec.warmup
    progress = (step - spec.warmup) / max(1, spec.steps - spec.warmup)
    return spec.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


# --------------------------------------------------------------------------- training


def train_policy(out_dir: str | Path, graph: MASGraph, spec: PolicySpec = PolicySpec(), *,
                 world: World | None = None, log: Callable[[str], None] = print) -> dict:
    """Train and save the policy of `world` (default: the toy world) into out_dir; returns training statistics."""
    started, cpu_started = time.time(), time.process_time()
    world = world or WORLDS["toy"]
    torch.manual_seed(spec.seed)
    rng = random.Random(spec.seed)
    problems = list(islice(world.task.iter_split("sft"), spec.n_problems))
    tokenizer = build_policy_tokenizer(problems, graph, spec.vocab_size, world)
    turns = list(world.training_turns(problems, graph, spec.seed, spec.target_noise))
    encoded = encode_turns(tokenizer, [(messages, output) for _, messages, output in turns])
    repeats = [spec.turn_repeats[agent] if agent < len(spec.turn_repeats) else 1 for agent, _, _ in turns]
    examples = [ex for ex, r in zip(encoded, repeats) for _ in range(r)]
    drill = Drill(tokenizer, problems)
    model = build_model(spec, tokenizer)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"policy: {n_params / 1e6:.2f}M parameters, {len(tokenizer)} tokens, {len(examples)} agent turns, "
        f"{len(drill.examples)} arithmetic facts")

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": spec.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=spec.lr, betas=(0.9, 0.98))
    batches: list[list[Example]] = []
    losses: list[float] = []
    model.train()
    bar = tqdm(range(spec.steps), desc="train policy", unit="step")
    for step in bar:
        if spec.drill_every and step % spec.drill_every == spec.drill_every - 1:
            batch = drill.batch(rng, spec.drill_batch_size)
        else:
            if not batches:  # a new epoch
                batches = length_buckets(examples, spec.batch_size, rng)
            batch = batches.pop()
        input_ids, mask, labels = make_batch(batch, tokenizer.pad_token_id)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(spec, step)
        loss = weighted_loss(model, input_ids, mask, labels, spec.prompt_loss_weight)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if step % 50 == 0 or step == spec.steps - 1:
            bar.set_postfix(loss=f"{sum(losses[-50:]) / len(losses[-50:]):.3f}")
    model.eval()

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    stats = {"spec": asdict(spec), "parameters": n_params, "final_loss": round(sum(losses[-50:]) / len(losses[-50:]), 4),
             "train_seconds": round(time.time() - started, 1),
             "train_cpu_seconds": round(time.process_time() - cpu_started, 1)}
    log(f"policy: final loss {stats['final_loss']:.3f} after {spec.steps} steps ({stats['train_seconds']} s)")
    return stats
