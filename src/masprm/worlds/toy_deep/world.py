"""The deep toy world's facts, spelt once: its build (`WORLD`, `masprm.worlds.World`) and what the demo and the
lab's commands need of it (`RUN`, `masprm.worlds.runs.WorldRun`). `masprm.worlds` registers every folder that
holds a module like this one, so a world is one folder. Its measured seconds per command: costs.yaml beside it."""

from __future__ import annotations

from masprm.worlds import StepTruth, World
from masprm.worlds.runs import WorldRun
from masprm.worlds.toy_deep import data, label, task


def _test_size() -> int:
    return data.TOY_DEEP.size("test")   # sized by the dev pilot's power computation (data.DEV_POWER)


WORLD = World("toy_deep", task.deep_world(), "configs/toy_deep.yaml", "artifacts/toy_deep", "toy_deep/shipped_policy",
              ("toy/task.py", "toy/transcripts.py", "train_policy.py", "toy_deep/task.py"),
              task.check_graph, task.reference_outputs, task.corpus_lines, task.training_turns, ("dev", "train"),
              StepTruth("toy_deep", data.TOY_DEEP, label.label_transcript, label.story_of, label.error_kinds()),
              (("target_noise", task.TARGET_NOISE), ("n_problems", 12000), ("steps", 8000)),
              dataset="masprm.worlds.toy_deep.data:load_toy_deep", text_fields=("question",),
              step_oracle="masprm.worlds.toy_deep.label:deep_step_oracle",
              # about 2.3 times the policy's compute a token (docs/learnability.md, the amendment before C7)
              scorer_backbone=(("hidden_size", 128), ("num_layers", 4), ("num_heads", 4), ("num_kv_heads", 2),
                               ("intermediate_size", 384)),
              scorer_shipped="toy_deep/shipped_scorer")

RUN = WorldRun(
    "toy_deep", "configs/toy_deep.yaml", ("--world", "toy_deep"), ("--step_oracle", "toy_deep"), 400, 9, _test_size,
    "results/toy_deep_train_seed_{seed}", "docs/preregistration.md",
    # --calibrate: the demo's MASPRM and ORM are the lab's seed-42 rows, calibrated like its other seeds' rows
    demo_scorer_flags=("--calibrate",), pilot=True,
    # MCTS with progressive widening (--pw_k 3, alpha 0.5): the option the world was chosen with (docs/toy_world.md)
    mcts_flags=("--pw_k", "3"),
    # 9 agents and 27 samples per simulation: 128 examples together search 1.38x faster than the toy world's
    # 32 (MCTS + mc+prm on 128 dev questions, 2-core CPU, 126 s against 91 s, the records byte-identical)
    eval_batch=128)
