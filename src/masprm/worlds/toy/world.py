"""The toy world's facts, spelt once: its build (`WORLD`, `masprm.worlds.World`) and what the demo and the lab's
commands need of it (`RUN`, `masprm.worlds.runs.WorldRun`). `masprm.worlds` registers every folder that holds
a module like this one, so a world is one folder. Its measured seconds per command: costs.yaml beside it."""

from __future__ import annotations

from typing import Iterator, Sequence

from masprm.graph import MASGraph
from masprm.worlds import StepTruth, Turn, World
from masprm.worlds.runs import WorldRun
from masprm.worlds.toy import oracle, steplabel, transcripts
from masprm.worlds.toy.task import TOY, Problem


def _turns(problems: Sequence[Problem], graph: MASGraph, seed: int, noise: float) -> Iterator[Turn]:
    if noise:
        raise ValueError("the toy world's SFT targets take no noise (target_noise is a toy_deep setting)")
    return transcripts.training_turns(problems, graph, seed)


def _test_size() -> int:
    return TOY.size("test")


WORLD = World("toy", TOY, "configs/toy.yaml", "artifacts/toy", "toy/shipped_policy",
              ("toy/task.py", "toy/transcripts.py", "train_policy.py"), transcripts.check_graph,
              transcripts.reference_outputs, transcripts.corpus_lines, _turns, ("train", "test"),
              StepTruth("toy", TOY, steplabel.label_transcript, oracle.story_of, steplabel.ERROR_KINDS),
              dataset="masprm.worlds.toy.task:load_toy", text_fields=("question",),
              step_oracle="masprm.worlds.toy.oracle:toy_step_oracle")

# The demo's world: `make demo`, `make lab` (every path and command as before the worlds had records).
RUN = WorldRun("toy", "configs/toy.yaml", (), (), 400, 5, _test_size, "results/train_seed_{seed}")
