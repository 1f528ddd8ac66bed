"""The installable package: console scripts run the stage modules, shims run the same code, short modules."""

import subprocess
import sys
import tomllib

from helpers import REPO
from helpers_cli import STAGE_OF_SCRIPT


def test_every_console_script_runs_a_stage_main():
    import importlib

    entries = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    # every checkout script's stage has a console script; masprm-export-scorer has no checkout script
    assert {f"{module}:cli" for module in STAGE_OF_SCRIPT.values()} < set(entries.values())
    assert entries["masprm-export-scorer"] == "masprm.stages.export_scorer:cli"
    for name, target in entries.items():
        module, attribute = target.split(":")
        # masprm-archive and masprm-lab are no stages: their commands live with the archives and the lab
        assert module.startswith(("masprm.stages.", "masprm.archive.", "masprm.lab.")) and attribute == "cli"
        stage = importlib.import_module(module)
        assert callable(stage.cli) and callable(stage.main)


def test_each_checkout_script_runs_its_stage_and_leaves_sys_path_alone():
    import importlib
    import runpy

    shims = {"run_mcts": REPO / "src" / "run_mcts.py", "preprocess_data": REPO / "src" / "train" / "preprocess_data.py",
             "trainer": REPO / "src" / "train" / "trainer.py",
             "compare_sbs_mcts": REPO / "src" / "experiments" / "compare_sbs_mcts.py",
             "aggregator": REPO / "aggregator.py", "show_tree": REPO / "src" / "show_tree.py",
             "demo": REPO / "src" / "demo.py", "lab": REPO / "src" / "lab.py"}
    for script, path in shims.items():
        before = list(sys.path)
        namespace = runpy.run_path(str(path), run_name="imported")   # as imported, not run: nothing starts
        assert sys.path == before, path
        assert namespace["cli"] is importlib.import_module(STAGE_OF_SCRIPT[script]).cli, path


def test_a_script_and_its_console_entry_print_the_same_help_and_a_version():
    script = subprocess.run([sys.executable, str(REPO / "src" / "train" / "trainer.py"), "--help"],
                            capture_output=True, text=True, timeout=60)
    module = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['masprm-train', '--help']; "
                             "from masprm.stages.train import cli; cli()"], capture_output=True, text=True, timeout=60)
    assert script.returncode == module.returncode == 0
    assert "--model-id MODEL_ID, --model_id MODEL_ID" in script.stdout
    # the usage lines name the program; the flags and their help are the same
    assert script.stdout.split("options:")[1] == module.stdout.split("options:")[1]
    version = subprocess.run([sys.executable, str(REPO / "src" / "run_mcts.py"), "--version"],
                             capture_output=True, text=True, timeout=60)
    from masprm import __version__
    assert version.returncode == 0 and version.stdout.strip() == f"run_mcts.py (masprm {__version__})"



def test_the_package_metadata_is_what_an_index_shows():
    import yaml

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["readme"] == "README.md" and project["authors"] and project["license"] == "MIT"
    assert set(project["optional-dependencies"]) == {"gpu", "ray", "trl", "math", "test", "vllm"}
    assert "Typing :: Typed" in project["classifiers"] and project["urls"]
    assert (REPO / "src" / "masprm" / "py.typed").is_file()
    assert "py.typed" in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "masprm"]
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["preferred-citation"]["year"] == 2025
    assert (REPO / "CHANGELOG.md").read_text().startswith("# Changelog")
