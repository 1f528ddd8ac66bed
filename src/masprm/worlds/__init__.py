"""The toy worlds, one record each: what a build needs to train, ship and describe a world's policy.

    WORLDS["toy"]        the toy world (masprm.worlds.toy.task, configs/toy.yaml), the demo's
    WORLDS["toy_deep"]   the deep toy world (masprm.worlds.toy_deep.task, configs/toy_deep.yaml)

A world names its generated task, its team config, its build folder, its shipped policy folder, the
toy modules whose code trains its policy (the build fingerprint: `masprm.worlds.build`), the
functions that write its reference transcripts and its step truth (`StepTruth`: what the step and
label benchmarks judge messages with). Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from masprm.graph import MASGraph
from masprm.registry import Registry
from masprm.worlds.toy_deep import data as deep_data, label as deep_label, task as deep_task
from masprm.worlds.toy import oracle, steplabel, transcripts
from masprm.worlds.toy.task import TOY, Problem, TaskWorld

TOY_CODE = Path(__file__).resolve().parent
Turn = tuple[int, list[dict[str, str]], str]   # (agent, chat messages, target output)


@dataclass(frozen=True)
class StepTruth:
    """A world's step truth as the benchmarks read it (`masprm.instruments.stepbench`, `masprm.instruments.labelbench`)."""

    oracle: str                       # its step oracle (--step_oracle, `masprm.search.oracles.STEP_ORACLES`)
    task: TaskWorld                   # the splits searched (the dataset's: toy_deep's test split sized by power)
    label: Callable[[Problem, Sequence[str]], steplabel.TranscriptLabel]   # (problem, messages) -> step labels
    story_of: Callable[[str], Problem]                                     # question -> its problem
    error_kinds: dict[str, tuple[str, ...]]                                # agent -> its error kinds, team order

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(self.error_kinds)


@dataclass(frozen=True)
class World:
    name: str
    task: TaskWorld
    config: str                       # the team the policy learns to play
    out: str                          # the build's default folder
    shipped: str                      # the shipped policy's folder name in masprm/toy/
    sources: tuple[str, ...]          # the toy modules whose code trains the policy (build fingerprint)
    check_graph: Callable[[MASGraph], None]                     # ValueError for another team
    reference_outputs: Callable[..., dict[int, str]]            # (problem, rng) -> agent -> output
    corpus_lines: Callable[[Iterable[Problem], MASGraph], Iterator[str]]
    training_turns: Callable[[Sequence[Problem], MASGraph, int, float], Iterator[Turn]]   # (.., seed, noise)
    data_splits: tuple[str, ...]      # the splits written as GSM8K-schema JSONL
    truth: StepTruth | None = None    # its step truth (every registered world has one)
    policy_defaults: tuple[tuple[str, object], ...] = ()   # PolicySpec settings of the world's default build

    @property
    def shipped_dir(self) -> Path:
        return TOY_CODE / self.shipped

    def fill_defaults(self, settings: object, **more: str) -> None:
        """A toy tool's frozen settings: each of `policy`, `mas_config` (and `more`: name -> value) left None
        becomes the world's own (its build's policy, its team), never another world's."""
        for name, value in {"policy": f"{self.out}/policy", "mas_config": self.config, **more}.items():
            if getattr(settings, name) is None:
                object.__setattr__(settings, name, value)   # frozen dataclasses: set once, in __post_init__


def _toy_turns(problems: Sequence[Problem], graph: MASGraph, seed: int, noise: float) -> Iterator[Turn]:
    if noise:
        raise ValueError("the toy world's SFT targets take no noise (target_noise is a toy_deep setting)")
    return transcripts.training_turns(problems, graph, seed)


WORLDS: Registry[World] = Registry("toy world")
WORLDS.register("toy", World("toy", TOY, "configs/toy.yaml", "artifacts/toy", "toy/shipped_policy",
                             ("toy/task.py", "toy/transcripts.py", "train_policy.py"), transcripts.check_graph,
                             transcripts.reference_outputs, transcripts.corpus_lines, _toy_turns, ("train", "test"),
                             StepTruth("toy", TOY, steplabel.label_transcript, oracle.story_of, steplabel.ERROR_KINDS)))
WORLDS.register("toy_deep", World("toy_deep", deep_task.deep_world(), "configs/toy_deep.yaml", "artifacts/toy_deep",
                                  "toy_deep/shipped_policy",
                                  ("toy/task.py", "toy/transcripts.py", "train_policy.py", "toy_deep/task.py"),
                                  deep_task.check_graph, deep_task.reference_outputs, deep_task.corpus_lines,
                                  deep_task.training_turns, ("dev", "train"),
                                  StepTruth("toy_deep", deep_data.TOY_DEEP, deep_label.label_transcript,
                                            deep_label.story_of, deep_label.error_kinds()),
                                  (("target_noise", deep_task.TARGET_NOISE), ("n_problems", 12000), ("steps", 8000))))
