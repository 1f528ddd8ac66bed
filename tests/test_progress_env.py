"""TQDM_DISABLE silences the stage bars even where the code asks for a bar explicitly; the progress lines a log file gets instead."""

from __future__ import annotations

import io

import pytest

from masprm.parallel import map_examples
from masprm.progress import duration, progress_bar, step_progress_line


def drawn(monkeypatch, value: str | None, **kwargs) -> str:
    if value is None:
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
    else:
        monkeypatch.setenv("TQDM_DISABLE", value)
    out = io.StringIO()
    for _ in progress_bar(range(3), file=out, desc="work", **kwargs):
        pass
    return out.getvalue()


@pytest.mark.parametrize("value, shown", [(None, True), ("", True), ("0", True), ("false", True), ("1", False),
                                          ("true", False), ("yes", False)])
def test_the_variable_decides_for_a_bar_that_is_on(monkeypatch, value, shown):
    assert ("work" in drawn(monkeypatch, value)) is shown


def test_a_bar_switched_off_stays_off_and_a_terminal_only_bar_skips_a_file(monkeypatch):
    assert drawn(monkeypatch, None, enabled=False) == ""
    assert drawn(monkeypatch, None, terminal_only=True) == ""   # a StringIO is not a terminal


def test_stage_bars_of_the_worker_pool_honour_it(monkeypatch, capsys):
    def run():
        list(map_examples(lambda: None, lambda state, item: item, [1, 2, 3], desc="examples"))
        return capsys.readouterr().err

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert "examples" in run()
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert run() == ""


def test_a_progress_line_says_the_step_the_values_and_the_time_left_at_the_runs_own_pace():
    # 40 of 480 steps in 72 s: 1.8 s a step, 440 steps left = 792 s = 13m 12s
    assert step_progress_line("train", 40, 480, 72.0, 40, {"loss": 0.693147}) == (
        "[progress] train step 40/480 (8%), loss 0.6931, 1m 12s so far, about 13m 12s left")
    # resumed at step 200: the 60 s of this run paced 40 steps (1.5 s a step), 240 left = 360 s
    assert step_progress_line("train", 240, 480, 60.0, 40, {}).endswith("1m 00s so far, about 6m 00s left")
    assert step_progress_line("train", 0, 0, 1.0, 0, {}) == "[progress] train step 0/0, 1s so far"   # no total: no share
    assert [duration(s) for s in (0, 42.4, 187, 3725)] == ["0s", "42s", "3m 07s", "1h 02m"]


def test_the_trainers_progress_lines_count_its_own_steps(monkeypatch):
    from types import SimpleNamespace

    from masprm.train import progress_lines

    clock = iter([0.0, 100.0, 130.0])   # made at 0 s, the run starts at 100 s, its log at step 30 comes at 130 s
    monkeypatch.setattr(progress_lines.time, "monotonic", lambda: next(clock))
    written = []
    lines = progress_lines.ProgressLines(written.append)
    state = SimpleNamespace(global_step=10, max_steps=110, is_world_process_zero=True)   # resumed at step 10
    lines.on_train_begin(None, state, None)
    state.global_step = 30
    lines.on_log(None, state, None, logs={"eval_loss": 0.3})        # an evaluation: no line
    lines.on_log(None, state, None, logs={"loss": 0.5, "learning_rate": 1e-3})
    # 20 steps in 30 s: 1.5 s a step, 80 left = 120 s
    assert written == ["[progress] train step 30/110 (27%), loss 0.5, 30s so far, about 2m 00s left"]
