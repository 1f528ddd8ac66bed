"""The dataset fixtures (tests/fixtures/datasets: a few rows in each hub schema) and how tests read them.

``fixture(name)`` is a fixture file's path as a data_file; ``rows_of(name)`` its raw rows; ``by_source``
a loader's examples by their row in the file. Use it for tests of the dataset loaders.
"""

from __future__ import annotations

import json
from pathlib import Path

from masprm.data import Example, LoadedData

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"


def fixture(name: str) -> str:
    return str(FIXTURES / name)


def rows_of(name: str) -> list[dict]:
    path = FIXTURES / name
    if path.suffix == ".json":
        return json.loads(path.read_text())
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def by_source(loaded: LoadedData) -> dict[int, Example]:
    return {e.meta["source_index"]: e for e in loaded.examples}
