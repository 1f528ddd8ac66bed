"""The stage CLIs on small local data: the checkout's scripts run as a user runs them.

The scripts' paths (``EVAL_SCRIPT``, ``RUN_MCTS``, ``SHOW_TREE``), small GSM8K files
(``write_gsm8k``, ``STAGE1_ROWS``), flags that keep the tiny model quick (``FAST``), the seed
README's smoke command (``SMOKE``), a repo-like stage-1 folder (``make_workdir``), the arguments of
a quick stage-1 run (``stage1_args``), a ppm adapter trained once per session
(``trained_adapter``), stage 4 in a subprocess (``run_eval``) and a command's main run in this
process (``call_main``, ``run_module``, ``stage_module``). Use it for end-to-end and bad-input
tests of the commands.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import REPO
from helpers_trees import GSM8K


EVAL_SCRIPT = REPO / "src" / "experiments" / "compare_sbs_mcts.py"
EVAL_ROWS = [("Tom has 3 apples and buys 4 more. How many apples does he have?", 7),
              ("A box holds 6 pens. How many pens are in 2 boxes?", 12),
              ("Sara had 10 coins and lost 3. How many are left?", 7)]
FAST = ["--max_new_tokens", "6", "--device_map", "cpu", "--no_compile"]   # the random tiny model never stops


def write_gsm8k(path: Path) -> Path:
    path.write_text("".join(json.dumps({"question": q, "answer": f"So it is {a}.\n#### {a}"}) + "\n"
                            for q, a in EVAL_ROWS))
    return path


def trained_adapter(tmp_path_factory, tiny_model_dir) -> Path:
    """A ppm adapter from src/train/trainer.py (a couple of steps), built once per test session."""
    out = tmp_path_factory.getbasetemp() / "eval_prm_adapter"
    if (out / "adapter_config.json").is_file():
        return out
    pairs = tmp_path_factory.getbasetemp() / "eval_pairs.jsonl"
    pairs.write_text("".join(json.dumps({"prompt": f"What is {i} + {i}?",
                                         "chosen_actions": [f"{i}+{i}={2 * i}", f"Answer: {2 * i}"],
                                         "rejected_actions": [f"{i}+{i}={2 * i}", f"Answer: {2 * i + 1}"]}) + "\n"
                             for i in range(6)))
    done = subprocess.run([sys.executable, str(REPO / "src" / "train" / "trainer.py"), "--mode", "ppm",
                           "--data_dir", str(pairs), "--model-id", str(tiny_model_dir), "--output-dir", str(out),
                           "--max-steps", "1", "--train-batch-size", "4", "--grad-accum", "1", "--lora-r", "4",
                           "--lora-alpha", "8", "--seed", "0", "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def run_eval(*argv, cwd=REPO):
    """src/experiments/compare_sbs_mcts.py with `argv`, as a user runs it."""
    return subprocess.run([sys.executable, str(EVAL_SCRIPT), *map(str, argv)], cwd=cwd, capture_output=True,
                          text=True, timeout=400)


RUN_MCTS = REPO / "src" / "run_mcts.py"
SHOW_TREE = REPO / "src" / "show_tree.py"

STAGE1_ROWS = [
    {"question": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "3 + 4 = 7\n#### 7"},
    {"question": "A box holds 6 pens. How many pens are in 2 boxes?", "answer": "6 * 2 = 12\n#### 12"},
    {"question": "Ann had 9 cards and gave away 5. How many are left?", "answer": "no final answer here"},
]
def make_workdir(tmp_path: Path) -> Path:
    """A folder laid out like the repo: configs/gsm8k.yaml (short outputs, so the test is quick) and data."""
    shipped = REPO / "configs" / "gsm8k.yaml"
    config = yaml.safe_load(shipped.read_text()) if shipped.is_file() else GSM8K
    for agent in config["agents"]:
        agent["max_new_tokens"] = 6
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "gsm8k.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "gsm8k.jsonl").write_text("".join(json.dumps(r) + "\n" for r in STAGE1_ROWS))
    return tmp_path


SMOKE = ["--dataset", "gsm8k", "--split", "train", "--n", "2", "--seed", "42", "--n_rollouts", "2",
         "--search_c", "4", "--n_candidates", "3", "--mas_config", "configs/gsm8k.yaml", "--load_in_4bit",
         "--no_compile"]  # the seed README's smoke test, verbatim


# a checkout script's name -> the stage module it runs (masprm.stages)
STAGE_OF_SCRIPT = {"run_mcts": "masprm.stages.trees", "preprocess_data": "masprm.stages.preprocess",
                   "trainer": "masprm.stages.train", "compare_sbs_mcts": "masprm.stages.evaluate",
                   "aggregator": "masprm.stages.aggregate", "show_tree": "masprm.stages.show_tree",
                   "demo": "masprm.stages.demo", "lab": "masprm.lab.command"}   # checkout script -> its command


def stage_module(script: str):
    """The command module behind a checkout script (``run_mcts`` -> ``masprm.stages.trees``)."""
    return importlib.import_module(STAGE_OF_SCRIPT[script])


def call_main(monkeypatch, capsys, args: list[str], script: str = "run_mcts") -> tuple[int, str, str]:
    """Run a CLI in this process: fast, and run_mcts loads no model before the input is checked."""
    from masprm.cli import run_cli

    monkeypatch.setattr(sys, "argv", [f"{script}.py", *args])
    with pytest.raises(SystemExit) as exit_info:
        run_cli(stage_module(script).main)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def run_module(monkeypatch, capsys, module: str, argv: list[str]) -> tuple[int, list[str], str]:
    """(exit code, stderr lines, stdout) of a command's main run through run_cli in this process."""
    from masprm.cli import run_cli

    monkeypatch.setattr(sys, "argv", [module.rsplit(".", 1)[-1] + ".py", *argv])
    try:
        run_cli(importlib.import_module(module).main)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    captured = capsys.readouterr()
    return code, [ln for ln in captured.err.splitlines() if ln.strip()], captured.out


# Two short-spoken agents and the tiny model: stage-1 arguments of a quick run on local data.
TWO_AGENTS = {"agents": [{"name": "Solver", "system_prompt": "Solve it.", "max_new_tokens": 6},
                         {"name": "Checker", "system_prompt": "Check it.", "max_new_tokens": 6}],
              "edges": [[-1, 0], [0, 1], [-1, 1]]}


def stage1_args(folder: Path, model_dir: Path, n: int = 3) -> list[str]:
    """Arguments of a quick stage-1 run on the tiny model; writes its team and data into `folder`."""
    (folder / "team.yaml").write_text(yaml.safe_dump(TWO_AGENTS))
    data = write_gsm8k(folder / "gsm8k.jsonl")
    return ["--dataset", "gsm8k", "--data_file", str(data), "--mas_config", str(folder / "team.yaml"),
            "--model_id", str(model_dir), "--n", str(n), "--n_rollouts", "2", "--n_candidates", "2", *FAST]


class _ParserCaught(Exception):
    """Raised at a command's first parse: the parser is built, nothing has run."""


def command_modules() -> list[str]:
    """Every module of the package with a command: a ``main`` that builds a ``masprm.cli.ArgumentParser``
    (found by reading the sources, so a new command is walked without being listed here)."""
    package = REPO / "src" / "masprm"
    found = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "ArgumentParser(" in text and "\ndef main(" in text:
            found.append(".".join(("masprm", *path.relative_to(package).with_suffix("").parts)))
    return found


def command_parser(module_name: str):
    """The parser a command's ``main`` builds, caught when it first parses (no work is done)."""
    from unittest import mock

    from masprm.cli import ArgumentParser

    module = importlib.import_module(module_name)
    caught = []

    def catch(self, args=None, namespace=None):
        caught.append(self)
        raise _ParserCaught

    with mock.patch.object(ArgumentParser, "parse_known_args", catch), mock.patch.object(sys, "argv", [module_name]):
        with pytest.raises(_ParserCaught):
            module.main()
    return caught[0]
