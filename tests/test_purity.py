"""The pure core imports no torch (nor transformers/peft): checked in a fresh interpreter per module."""

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "peft")
PURE = {
    "masprm.answers": HEAVY,
    "masprm.graph": HEAVY,
    "masprm.state_text": HEAVY,
    "masprm.labels.mining": HEAVY,
    "masprm.tree_schema": HEAVY,
    "masprm.data": HEAVY + ("datasets", "numpy"),   # the loaders import them when they run
    "masprm.registry": HEAVY,
    "masprm.config": HEAVY,
    "masprm.errors": HEAVY,
    "masprm.cli": HEAVY,
    "masprm.checks": HEAVY,
    "masprm.eval.runner": HEAVY,
    "masprm.eval.aggregate": HEAVY,
    "masprm.eval.bootstrap": HEAVY + ("numpy",),
    "masprm.paired_stats": HEAVY + ("numpy",),
    "masprm.step_metrics": HEAVY + ("numpy",),
    "masprm.worlds.toy.steplabel": HEAVY,
    "masprm.instruments.claims": HEAVY + ("numpy",),
    "masprm.handoff.methods": HEAVY,
    "masprm.handoff.settings": HEAVY,
    "masprm.eval.settings": HEAVY,
    "masprm.models.options": HEAVY,      # the stages' model flags, without a model library
    "masprm.identity": HEAVY,
    "masprm.archive.pack": HEAVY,        # packing and reading run archives (masprm-archive, make report)
    "masprm.archive.read": HEAVY,
    "masprm.archive.commands": HEAVY,    # verify's fingerprint checks: stage 4's settings, never its models
    "masprm.archive.cli": HEAVY,
    "masprm.train.config": HEAVY,       # --help and flag errors of the trainer stay instant
    "masprm.train.objectives": HEAVY,
    "masprm.scorer_meta": HEAVY,
    "masprm.objective_facts": HEAVY,   # read by --help of the trainer, the roles and the lab
    "masprm.search.train_mcts": HEAVY,  # stage 1's search
    "masprm.eval.tree_runner": HEAVY,   # stage 1's resume and worker plumbing
    "masprm.search.beam": HEAVY,
    "masprm.search.vote": HEAVY,
    "masprm.search.mcts": HEAVY,
    "masprm.search.context": HEAVY,
    "masprm.search.scorer_kinds": HEAVY,
    "masprm.search.oracles": HEAVY,
    "masprm.worlds.toy.oracle": HEAVY,
    "masprm.search.rollouts": HEAVY,
    "masprm.labels.shapley": HEAVY,
    "masprm.eval.methods": HEAVY,
    "masprm.stages.train": HEAVY,       # the stage commands load models only after their flags are checked
    "masprm.stages.trees": HEAVY,
    "masprm.stages.evaluate": HEAVY,
    "masprm.run_folder": HEAVY,
    "masprm.parallel": HEAVY,
    "masprm.plots.tree_plot": ("torch",),   # drawing trees is part of stage 1, without a model
}


@pytest.mark.parametrize("module", sorted(PURE))
def test_core_module_imports_no_heavy_library(module):
    code = (f"import sys, json, {module}; "
            f"print(json.dumps(sorted(m for m in {PURE[module]!r} if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ})   # conftest put src on PYTHONPATH
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [], f"{module} imports {done.stdout.strip()}"
