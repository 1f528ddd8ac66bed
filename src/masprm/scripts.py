"""Console scripts (``pyproject.toml``): each runs one of the checkout's stage scripts.

    masprm-mcts        src/run_mcts.py                     stage 1: MAS-MCTS trees
    masprm-preprocess  src/train/preprocess_data.py        stage 2: PRM samples and preference pairs
    masprm-train       src/train/trainer.py                stage 3: a LoRA scorer
    masprm-eval        src/experiments/compare_sbs_mcts.py stage 4: scorer-guided search vs baselines
    masprm-aggregate   aggregator.py                       stage 5: mean/std over seeds
    masprm-show-tree   src/show_tree.py                    a tree as text / PNG
    masprm-demo        src/demo.py                         the toy end-to-end demo

The scripts stay the seed README's ``python src/...`` commands; these names run the
same files with the same flags, so the package is installed editable
(``pip install -e .``, which ``make setup`` does) from a checkout.
"""

from __future__ import annotations

import runpy
import sys
from functools import partial
from pathlib import Path

SRC = Path(__file__).resolve().parents[1]
SCRIPTS = {
    "masprm-mcts": SRC / "run_mcts.py",
    "masprm-preprocess": SRC / "train" / "preprocess_data.py",
    "masprm-train": SRC / "train" / "trainer.py",
    "masprm-eval": SRC / "experiments" / "compare_sbs_mcts.py",
    "masprm-aggregate": SRC.parent / "aggregator.py",
    "masprm-show-tree": SRC / "show_tree.py",
    "masprm-demo": SRC / "demo.py",
}


def run(name: str) -> None:
    script = SCRIPTS[name]
    if not script.is_file():
        sys.exit(f"{name}: {script} not found; install the package from a checkout with pip install -e .")
    sys.argv[0] = str(script)
    runpy.run_path(str(script), run_name="__main__")


# The console-script entry points (pyproject.toml names them).
mcts = partial(run, "masprm-mcts")
preprocess = partial(run, "masprm-preprocess")
train = partial(run, "masprm-train")
evaluate = partial(run, "masprm-eval")
aggregate = partial(run, "masprm-aggregate")
show_tree = partial(run, "masprm-show-tree")
demo = partial(run, "masprm-demo")
