"""Stage 3's progress where no bar can show it: a line every ``--logging_steps`` optimizer steps.

transformers' own bar redraws one line with carriage returns, which a log file
keeps as one growing line; a run whose output is not a terminal (the demo's and
the lab's trainings, a cluster job) gets instead, each time the trainer logs its
loss,

    [progress] train step 40/480 (8%), loss 0.6931, 1m 12s so far, about 13m 12s left

(``masprm.progress.step_progress_line``). Printing is all it does: no setting,
seed or number of the training depends on it.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from transformers import TrainerCallback

from masprm.progress import step_progress_line


class ProgressLines(TrainerCallback):
    """Writes a progress line through `write` at each logged training loss (on the first process only)."""

    def __init__(self, write: Callable[[str], Any]):
        self.write = write
        self.started = time.monotonic()
        self.first_step = 0

    def on_train_begin(self, args, state, control, **kwargs):
        # a resumed run starts at its checkpoint's step: the time left is paced by the steps this run makes
        self.started, self.first_step = time.monotonic(), state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or "loss" not in (logs or {}):
            return   # an evaluation's metrics, or another data-parallel process
        self.write(step_progress_line("train", state.global_step, state.max_steps, time.monotonic() - self.started,
                                      state.global_step - self.first_step, {"loss": logs["loss"]}))
