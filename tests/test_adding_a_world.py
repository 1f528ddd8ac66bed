"""Adding a world is adding its folder: a throwaway world package, found on `masprm.worlds.__path__`, reaches the
core's registries (its `--dataset` loader, its text fields, its `--step_oracle` labeller) and the worlds' own
(`WORLDS`, `WORLD_RUNS`) through the registries' providers, with no other file edited. It runs in a fresh
interpreter: the providers are asked once per process, and no registry of this one is touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

WORLD = '''
"""A throwaway world: the toy world's build, its own dataset, text fields and step labeller."""
import dataclasses

from masprm.worlds.runs import WorldRun
from masprm.worlds.toy.world import WORLD as TOY

WORLD = dataclasses.replace(TOY, name="tiny", truth=None, dataset="masprm.worlds.tiny.data:load_tiny",
                            text_fields=("question", "hint"), step_oracle="masprm.worlds.tiny.data:tiny_oracle")
RUN = WorldRun("tiny", "configs/toy.yaml", ("--world", "tiny"), ("--step_oracle", "tiny"), 2, 3, lambda: 2,
               "results/tiny_train_seed_{seed}")
'''

DATA = '''
from masprm.data import Example, LoadedData, check_fields

ROWS = [{"question": "1 + 1?", "hint": "add", "answer": "2"}, {"question": "2 + 3?", "hint": "add", "answer": "5"}]


def load_tiny(split, *, n=None, seed=42, data_file=None):
    check_fields(ROWS, ("question", "answer"), "tiny rows", "tiny")
    return LoadedData([Example(k, row["question"], row["answer"], {"dataset": "tiny"})
                       for k, row in enumerate(ROWS[:n])])


def tiny_oracle(question, messages):
    return [not message.startswith("wrong") for message in messages]
'''

PROBE = '''
import json, sys
import masprm.worlds
masprm.worlds.__path__.append(sys.argv[1])   # the folder the world lives in: nothing else names it

from masprm.data import DATASETS, TEXT_FIELDS, check_fields, dataset_names, load_examples
from masprm.errors import DataError
from masprm.search.oracles import STEP_ORACLES
from masprm.stages.evaluate import parse_command, resolve_defaults
from masprm.worlds import WORLDS
from masprm.worlds.runs import WORLD_RUNS

out = {"listed": [name for name in dataset_names() if name.startswith("t")],
       "oracles": STEP_ORACLES.names(), "worlds": WORLDS.names(), "runs": WORLD_RUNS.names(),
       "loader_imported_by_listing": "masprm.worlds.tiny.data" in sys.modules}
out["loaded"] = [e.question for e in load_examples("tiny", "test", n=1)]
out["loader_is_its_own"] = DATASETS["tiny"] is sys.modules["masprm.worlds.tiny.data"].load_tiny
out["text_fields"] = list(TEXT_FIELDS["tiny"])
try:
    check_fields([{"question": "q", "hint": 3}], (), "rows.jsonl", "tiny")
except DataError as err:
    out["error"] = str(err)
run, settings = parse_command(["--methods", "mcts_oracle_step", "--dataset", "tiny"])
out["step_oracle"] = resolve_defaults(settings, run.routing).method_settings("mcts_oracle_step").step_oracle
out["judged"] = list(STEP_ORACLES[out["step_oracle"]]("1 + 1?", ["right", "wrong"]))
out["heavy"] = [m for m in ("torch", "transformers", "datasets") if m in sys.modules]
print(json.dumps(out))
'''


def test_a_world_is_its_folder(tmp_path):
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "world.py").write_text(textwrap.dedent(WORLD))
    (folder / "data.py").write_text(textwrap.dedent(DATA))
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ})   # conftest put src on PYTHONPATH
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out == {
        "listed": ["tiny", "toy", "toy_deep"], "oracles": ["tiny", "toy", "toy_deep"],
        "worlds": ["tiny", "toy", "toy_deep"], "runs": ["tiny", "toy", "toy_deep"],
        "loader_imported_by_listing": False,        # a "module:attribute" entry: imported on first use
        "loaded": ["1 + 1?"], "loader_is_its_own": True,
        "text_fields": ["question", "hint"],        # check_fields reads the world's own, with the same message
        "error": "rows.jsonl: record 1: field 'hint' must be text, got int 3",
        "step_oracle": "tiny",                      # --step_oracle left open follows --dataset to the world's own
        "judged": [True, False],
        "heavy": []}
