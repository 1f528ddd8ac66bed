"""TQDM_DISABLE silences the stage bars even where the code asks for a bar explicitly."""

from __future__ import annotations

import io

import pytest

from masprm.parallel import map_examples
from masprm.progress import progress_bar


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
