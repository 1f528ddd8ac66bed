"""The installable package: console scripts that run the stage scripts, no sys.path edits, short modules."""

import subprocess
import sys
import tomllib

from masprm import scripts

from helpers import REPO


def test_every_console_script_runs_an_existing_stage_script():
    entries = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(entries) == set(scripts.SCRIPTS)
    for name, target in entries.items():
        module, attribute = target.split(":")
        assert module == "masprm.scripts" and callable(getattr(scripts, attribute))
        assert getattr(scripts, attribute).args == (name,) and scripts.SCRIPTS[name].is_file()


def test_a_console_script_runs_its_script_with_the_flags():
    code = "import sys; sys.argv = ['masprm-train', '--help']; from masprm.scripts import train; train()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--model-id MODEL_ID, --model_id MODEL_ID" in done.stdout


def test_no_sys_path_edits_and_no_module_over_400_lines():
    sources = [p for p in (REPO / "src").rglob("*.py")] + [REPO / "aggregator.py"] + list((REPO / "bench").glob("*.py"))
    assert not [p for p in sources if "sys.path.insert" in p.read_text() or "sys.path.append" in p.read_text()]
    assert not [p.name for p in (REPO / "src").rglob("*.py") if len(p.read_text().splitlines()) > 400]
