"""A tiny Qwen2-architecture causal LM and tokenizer, built locally in seconds.

Tests, benchmarks and the toy world need a real Hugging Face model folder
(weights, config, tokenizer with a chat template) that loads through exactly
the same code path as a hub model, without any network access. This module
trains a small byte-level BPE tokenizer on a built-in corpus and saves a
randomly initialised `Qwen2ForCausalLM` next to it.

    PYTHONPATH=src python -m masprm.models.tiny OUT_DIR [--seed 0]
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from masprm.cli import ArgumentParser, run_cli
from masprm.checks import check_seeds
from masprm.config import add_config_args, arg, config_from_args, require, require_each
from masprm.outputs import library_output
from masprm.paths import PathText

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"  # ends every chat turn, so it is also the EOS token
SPECIAL_TOKENS = [PAD_TOKEN, IM_START, IM_END]
# Qwen2's pre-tokenizer split: words with one leading non-letter, single digits, punctuation runs.
QWEN2_SPLIT_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
                     r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

# ChatML, as used by Qwen2 instruct models (without Qwen's default system prompt).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# ---------------------------------------------------------------------------
# Default corpus: varied English, arithmetic, multiple choice, role prompts.

_SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "You are a careful assistant who solves math word problems step by step.",
    "Read the question and list the numbers it mentions.",
    "Plan the operations needed to answer the question.",
    "Compute the result and state the final answer.",
    "Check the solution and say whether it is correct or incorrect.",
    "Answer with a single letter (A, B, C, or D) only.",
    "Which of the following statements is true?",
    "Tom has some apples and gives a few of them to his sister.",
    "A shop sells pencils in boxes; each box costs the same amount.",
    "Mary walks to school every morning and takes the bus home.",
    "How many marbles does she have left at the end of the day?",
    "If a train travels at a constant speed, how far does it go?",
    "The farmer plants rows of corn and rows of beans in his field.",
    "Let's think about this problem carefully before answering.",
    "First, find the total. Then, subtract what was spent.",
    "The verifier reads the solver's work and looks for mistakes.",
    "The judge compares both arguments and picks the stronger one.",
    "Each agent receives messages from its parents in the graph.",
    "So the answer is the number we computed in the last step.",
    "Context: All birds can fly. Penguins are birds.",
    "Question: What can we conclude from the context above?",
    "She bought three notebooks, two pens, and one eraser.",
    "There are twelve months in a year and seven days in a week.",
    "He saved money for weeks, then spent half of it on a book.",
    "Is the reasoning above correct? Explain briefly, then decide.",
    "Numbers: the question mentions these quantities, in order.",
    "Multiply the price by the quantity, then add the tax.",
    "The ratio of boys to girls in the class is given.",
    "What percentage of the students passed the exam?",
    "Write the final answer on its own line.",
    "Agents talk to each other by sending short messages.",
]

_NAMES = ["Tom", "Mary", "Ali", "Sara", "Ben", "Lena", "Omar", "Ivy", "Ken", "Zoe"]
_ITEMS = ["apples", "books", "coins", "eggs", "cards", "pens", "cakes", "shells", "toys", "stamps"]
_VERBS = [("buys", "+"), ("finds", "+"), ("gets", "+"), ("loses", "-"), ("gives away", "-"), ("eats", "-")]
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def default_corpus(n_lines: int = 400, seed: int = 0) -> list[str]:
    """A few hundred deterministic lines covering what prompts and outputs look like."""
    rng = random.Random(seed)
    lines = list(_SENTENCES)
    while len(lines) < n_lines:
        kind = rng.randrange(6)
        a, b = rng.randint(0, 99), rng.randint(1, 20)
        if kind == 0:  # bare arithmetic
            op = rng.choice("+-*")
            lines.append(f"{a} {op} {b} = {_OPS[op](a, b)}")
        elif kind == 1:  # a word problem with its worked answer
            name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
            verb, op = rng.choice(_VERBS)
            lines.append(f"{name} has {a} {item} and {verb} {b}. How many {item} does {name} have now? "
                         f"{a} {op} {b} = {_OPS[op](a, b)}. Answer: {_OPS[op](a, b)}")
        elif kind == 2:  # multiple choice
            letter = rng.choice("ABCD")
            options = " ".join(f"{c}. {rng.choice(_ITEMS)}" for c in "ABCD")
            lines.append(f"Which one is it? {options} Final Answer: {letter}")
        elif kind == 3:  # verdicts and step separators
            verdict = rng.choice(["CORRECT", "INCORRECT", "AGREE", "DISAGREE"])
            lines.append(f"Step {rng.randint(1, 9)}: {a} + {b} = {a + b}</step>VERDICT: {verdict}")
        elif kind == 4:  # gold-answer style and punctuation
            lines.append(f"#### {a * b} (so: {a} x {b}; about {a / b:.2f} each!)")
        else:
            lines.append(" ".join(rng.sample(_SENTENCES, 2)))
    return lines


# ---------------------------------------------------------------------------
# Tokenizer


def build_tokenizer(corpus: Iterable[str] | None = None, vocab_size: int = 512):
    """Byte-level BPE trained on `corpus`, digits split one per token, ChatML template.

    The pre-tokenisation is Qwen2's own (NFC, its split regex where every digit
    is a piece of its own, byte-level without a prefix space): `AutoTokenizer`
    loads a qwen2 folder as `Qwen2Tokenizer`, which rebuilds exactly this
    pipeline, so the saved tokenizer encodes as the built one does.
    decode(encode(s)) == s for any NFC text.
    """
    backend = Tokenizer(models.BPE())
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = list(corpus) if corpus is not None else default_corpus()
    backend.train_from_iterator(lines, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=2048,
    )


# ---------------------------------------------------------------------------
# Model


def random_qwen2(tokenizer, *, hidden_size: int, intermediate_size: int, num_layers: int, num_heads: int,
                 num_kv_heads: int, max_position_embeddings: int):
    """A randomly initialised fp32 Qwen2 causal LM for ``tokenizer`` (tied embeddings, no BOS), drawn from the
    global torch RNG; it stops at ``<|im_end|>`` (or the tokenizer's EOS) and pads with the pad token (or EOS)."""
    eos_id = tokenizer.convert_tokens_to_ids(IM_END) if IM_END in tokenizer.get_vocab() else tokenizer.eos_token_id
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_id
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=intermediate_size,
                         num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=num_kv_heads,
                         max_position_embeddings=max_position_embeddings, tie_word_embeddings=True,
                         eos_token_id=eos_id, pad_token_id=pad_id, bos_token_id=None, dtype="float32")
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id)
    return model


def build_tiny_model(out_dir, *, tokenizer=None, corpus: Iterable[str] | None = None,
                     vocab_size: int = 512, hidden_size: int = 64, num_layers: int = 2,
                     num_heads: int = 4, num_kv_heads: int = 2, intermediate_size: int = 128,
                     max_position_embeddings: int = 2048, seed: int = 0) -> Path:
    """Write a randomly initialised Qwen2ForCausalLM + tokenizer to `out_dir`; return it.

    Deterministic for a seed, and leaves the caller's global torch RNG untouched.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if tokenizer is None:
        tokenizer = build_tokenizer(corpus, vocab_size=vocab_size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = random_qwen2(tokenizer, hidden_size=hidden_size, intermediate_size=intermediate_size,
                             num_layers=num_layers, num_heads=num_heads, num_kv_heads=num_kv_heads,
                             max_position_embeddings=max_position_embeddings)
    with library_output(out) as saving:   # new inodes, renamed into place once all are written
        model.save_pretrained(saving, safe_serialization=True)
        tokenizer.save_pretrained(saving)
    return out


def untrained_scorer(policy_dir, out_dir, seed: int = 0) -> Path:
    """Copy a policy folder to `out_dir` as an untrained full-model scorer; return it.

    The copy holds a one-output token-classification head of small seeded random weights in its weights file, as
    a merged export holds one: a folder without a head is refused, since it would be scored by one made up at
    load time. Tests use it where any working scorer will do.
    """
    from safetensors.torch import load_file, save_file

    out = Path(out_dir)
    shutil.copytree(policy_dir, out)
    config = json.loads((out / "config.json").read_text())
    config.update(architectures=["Qwen2ForTokenClassification"], id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0})
    (out / "config.json").write_text(json.dumps(config))
    state = load_file(str(out / "model.safetensors"))
    generator = torch.Generator().manual_seed(seed)
    state["score.weight"] = torch.randn(1, config["hidden_size"], generator=generator) * 0.02
    state["score.bias"] = torch.zeros(1)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


@dataclass(frozen=True)
class TinyArgs:
    out_dir: PathText = arg(positional=True, help="folder to write (created if missing)")
    seed: int = arg(0, flags=("--seed",), help="seed of the random weights (default: 0)")
    vocab_size: int = arg(512, flags=("--vocab_size",), help="tokenizer and embedding size (default: 512)")
    hidden_size: int = arg(64, flags=("--hidden_size",), help="hidden width, a multiple of --num_heads (default: 64)")
    num_layers: int = arg(2, flags=("--num_layers",), help="transformer layers (default: 2)")
    num_heads: int = arg(4, flags=("--num_heads",),
                         help="attention heads (default: 4, head size 16; vLLM's CPU attention needs head size "
                              "32 or more: --num_heads 2)")
    num_kv_heads: int = arg(2, flags=("--num_kv_heads",), help="key/value heads, dividing --num_heads (default: 2)")

    def __post_init__(self) -> None:
        check_seeds(self)
        require_each(self, ("hidden_size", "num_layers", "num_heads", "num_kv_heads"), lambda v: v >= 1,
                     "must be at least 1")
        require(self.hidden_size % self.num_heads == 0, "num_heads",
                f"num_heads {self.num_heads} must divide `hidden_size` {self.hidden_size}")
        require(self.num_heads % self.num_kv_heads == 0, "num_kv_heads",
                f"num_kv_heads {self.num_kv_heads} must divide `num_heads` {self.num_heads}")


def main() -> int:
    parser = ArgumentParser(description="Build a tiny random Qwen2 model + tokenizer into OUT_DIR.")
    add_config_args(parser, TinyArgs)
    args = config_from_args(TinyArgs, parser.parse_args())
    out = build_tiny_model(args.out_dir, seed=args.seed, vocab_size=args.vocab_size,
                           hidden_size=args.hidden_size, num_layers=args.num_layers, num_heads=args.num_heads,
                           num_kv_heads=args.num_kv_heads)
    size_kb = sum(p.stat().st_size for p in out.iterdir() if p.is_file()) / 1024
    print(f"wrote tiny model to {out} ({size_kb:.0f} KB)")
    return 0


if __name__ == "__main__":
    run_cli(main)
