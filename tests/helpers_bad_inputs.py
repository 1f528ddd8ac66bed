"""Running the six command lines of the bad-input table (tests/test_bad_inputs.py) in this process.

``invoke`` calls a CLI as its script does (argv patched, ``run_cli``) and returns its exit code and stderr
lines; ``SCRIPTS`` names the six; ``STAGE1``, ``TRAIN`` and ``EVAL`` are a working command line of stages
1, 3 and 4 in the table's workspace, and ``stage1``, ``tr`` and ``ev`` give one with some flags changed.
``READONLY`` is the workspace's folder no run may write into.
"""

from __future__ import annotations

import sys
import traceback
import warnings
from functools import partial
from pathlib import Path

from helpers_cli import stage_module


REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
SCRIPTS = {
    "run_mcts": SRC / "run_mcts.py",
    "preprocess": SRC / "train" / "preprocess_data.py",
    "trainer": SRC / "train" / "trainer.py",
    "eval": SRC / "experiments" / "compare_sbs_mcts.py",
    "aggregator": REPO / "aggregator.py",
    "show_tree": SRC / "show_tree.py",
}
READONLY = "readonly"  # a folder the runs may not write into


_mains: dict[str, object] = {}


def main_of(cli: str):
    if cli not in _mains:
        _mains[cli] = stage_module(SCRIPTS[cli].stem).main
    return _mains[cli]


def invoke(monkeypatch, capsys, cli: str, argv: list[str]) -> tuple[int, list[str]]:
    """(exit code, stderr lines) of one CLI call; a traceback counts as exit 1 with its lines."""
    from masprm.cli import run_cli

    monkeypatch.setattr(sys, "argv", [SCRIPTS[cli].name, *argv])
    with warnings.catch_warnings(record=True) as shown:
        # What a user's interpreter would print: warnings once per place, no deprecation notices.
        warnings.resetwarnings()
        warnings.simplefilter("default")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
        try:
            run_cli(main_of(cli))
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
        except Exception:  # noqa: BLE001 - a traceback is one of the outcomes being counted
            print(traceback.format_exc(), file=sys.stderr)
            code = 1
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()] + [f"warning: {w.message}" for w in shown]
    return code, lines


STAGE1 = ["--dataset", "gsm8k", "--data_file", "gsm8k.jsonl", "--model_id", "models/a/tiny", "--n", "2",
          "--seed", "42", "--n_rollouts", "1", "--n_candidates", "2", "--max_new_tokens", "4", "--no_plot",
          "--no_compile", "--mas_config", "configs/gsm8k.yaml"]
RUN = "results/{run}"
TRAIN = ["--mode", "ppm", "--data_dir", "pairs.jsonl", "--model-id", "models/a/tiny", "--output-dir", "ckpt/new",
         "--max-steps", "1", "--quiet"]
EVAL = ["--methods", "single_pass", "--dataset", "gsm8k", "--data_file", "gsm8k.jsonl", "--gen_model_id",
        "models/a/tiny", "--mas_config", "configs/gsm8k.yaml", "--logs_dir", "elogs", "--sample_n", "1",
        "--max_new_tokens", "4"]
PRM = ["--methods", "sbs_prm", "--prm_dir"]


def with_flags(base: list[str], *changes: str) -> list[str]:
    """`base` with some flags' values replaced (flag, value pairs); other flags are appended."""
    args = list(base)
    it = iter(changes)
    for flag in it:
        at = args.index(flag) if flag in args else -1
        if at >= 0 and at + 1 < len(args) and not args[at + 1].startswith("--"):
            args[at + 1] = next(it)
        else:
            args.append(flag)
    return args


stage1, ev, tr = (partial(with_flags, base) for base in (STAGE1, EVAL, TRAIN))
