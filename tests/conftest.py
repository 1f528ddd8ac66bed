"""Shared test fixtures: a tiny local model and a scriptable fake policy.

The machine is shared, so torch gets one thread and models stay tiny.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Callable, Sequence

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no network here: fail fast instead of retrying for ~25 s
# The scripts the tests start as subprocesses import this checkout's package, installed (make setup) or not.
_SRC = str(Path(__file__).resolve().parents[1] / "src")
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC, os.environ.get("PYTHONPATH", "")) if p)
try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # the pure core's tests run without torch
    torch = None

from masprm.interfaces import Generation, LogProb, Messages


@pytest.fixture(autouse=True)
def _flags_of_this_test_only():
    """A command parses its flags once per process, and its error lines name settings by the flags it parsed
    (masprm.cli.PARSED_FLAGS); in one test process each test starts with none, as a fresh command does."""
    from masprm.cli import PARSED_FLAGS

    PARSED_FLAGS.clear()
    yield
    PARSED_FLAGS.clear()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A random-init Qwen2 causal LM + ChatML tokenizer folder, built once per session."""
    from masprm.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"), seed=0)


@pytest.fixture(scope="session")
def tiny_scorer_dir(tiny_model_dir, tmp_path_factory):
    """The tiny policy saved as an untrained full-model scorer that holds its head (`untrained_scorer`)."""
    from masprm.models.tiny import untrained_scorer

    return untrained_scorer(tiny_model_dir, tmp_path_factory.mktemp("tiny_scorer") / "scorer")


class FakePolicy:
    """A `Policy` whose outputs a test scripts.

    `respond(messages, k, rng) -> str` gives the k-th sample for a prompt;
    `score(messages, completion) -> float` gives a log-prob (default: -len).
    Token counts are word counts. Every call is recorded in `calls`. A call
    with keys gives each prompt its own `random.Random` named by its key.
    """

    def __init__(self, respond: Callable[[Messages, int, random.Random], str],
                 score: Callable[[Messages, str], float] | None = None):
        self.respond = respond
        self.score = score or (lambda messages, completion: -float(len(completion)))
        self.rng = random.Random(0)
        self.calls: list[tuple[str, int]] = []  # ("sample", n prompts) / ("logprob", n requests)
        self.keys: list = []                      # each sample call's random-stream keys

    def reseed(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def sample(self, prompts: Sequence[Messages], n: int, *, temperature: float = 1.0,
               top_p: float = 1.0, max_new_tokens: int = 64, keys=None) -> list[list[Generation]]:
        self.calls.append(("sample", len(prompts)))
        self.keys.append(None if keys is None else list(keys))
        out = []
        for i, messages in enumerate(prompts):
            prompt_tokens = sum(len(m["content"].split()) for m in messages)
            # A keyed prompt draws from its own stream, as HFPolicy's rows do.
            rng = self.rng if keys is None else random.Random(repr(tuple(keys[i])))
            texts = [self.respond(messages, k, rng) for k in range(n)]
            out.append([Generation(t, prompt_tokens, len(t.split())) for t in texts])
        return out

    def logprob(self, requests: Sequence[tuple[Messages, str]]) -> list[LogProb]:
        self.calls.append(("logprob", len(requests)))
        return [LogProb(self.score(m, c), sum(len(x["content"].split()) for x in m), len(c.split()))
                for m, c in requests]


@pytest.fixture
def fake_policy():
    """Factory: `fake_policy(respond, score=None) -> FakePolicy`."""
    return FakePolicy


@pytest.fixture(scope="module")
def prm_dir(tmp_path_factory, tiny_model_dir):
    """A ppm adapter trained for a step by src/train/trainer.py (built once per session)."""
    from helpers_cli import trained_adapter
    return trained_adapter(tmp_path_factory, tiny_model_dir)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder laid out like the repo: configs/gsm8k.yaml (short outputs, so tests are quick) and data."""
    from helpers_cli import make_workdir
    return make_workdir(tmp_path)
