"""The package outside a checkout: defaults that name shipped files, and a wheel installed into a fresh venv.

The wheel test builds the wheel from a copy of the checkout (`pip wheel --no-deps --no-build-isolation`,
so no build back end is downloaded), makes a new virtual environment without the project's packages, and
installs the wheel with all its dependencies from the machine's local package index only (the file://
indexes and wheel folders in pip's configuration; it is skipped where there is none). Then, from an empty
folder: `--version` on every command, `masprm-demo --dry_run`, the toy world from the shipped policy, and
`masprm-mcts` on the shipped toy config.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from masprm.graph import SHIPPED_CONFIGS, load_mas_config, resolve_config_path, shipped_config_names
from masprm.run_folder import default_config_path

from helpers import REPO

CHECKOUT_ONLY = (".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "results",
                 "artifacts", "checkpoints", "logs", "runs")


def test_defaults_that_name_shipped_files_resolve_from_an_empty_folder(tmp_path, monkeypatch):
    from masprm.handoff.settings import HANDOFF_CONFIG
    from masprm.stages import demo
    from masprm.worlds import build
    from masprm.instruments.stepbench import StepBenchArgs

    monkeypatch.chdir(tmp_path)
    for name in shipped_config_names():
        assert resolve_config_path(default_config_path(name)) == SHIPPED_CONFIGS / f"{name}.yaml"
    for default in (HANDOFF_CONFIG, StepBenchArgs().mas_config, demo.CONFIG, build.DEFAULT_CONFIG):
        path = resolve_config_path(default)
        assert path.parent == SHIPPED_CONFIGS and load_mas_config(default).source == str(path)
    assert list(tmp_path.iterdir()) == []   # resolving wrote nothing


def test_the_toy_world_builds_from_an_empty_folder_with_its_default_config(tmp_path, monkeypatch):
    from masprm.worlds.build import build_toy_world

    monkeypatch.chdir(tmp_path)
    manifest = build_toy_world("artifacts/toy", log=lambda line: None)
    assert manifest["source"] == "shipped" and manifest["config"] == str(SHIPPED_CONFIGS / "toy.yaml")
    assert (tmp_path / "artifacts" / "toy" / "policy" / "model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["artifacts"]


# --------------------------------------------------------------------------- the wheel in a fresh venv


def local_package_sources() -> list[str]:
    """pip options that reach only this machine's own package files (file:// indexes, wheel folders)."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    indexes, folders = [], []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        values = value.strip("'\"").split()
        if key.endswith(("index-url", "extra-index-url")):
            indexes += [v for v in values if v.startswith("file://") and Path(v[len("file://"):]).is_dir()]
        elif key.endswith("find-links"):
            folders += [v for v in values if Path(v).is_dir()]
    if not indexes:
        return []
    options = ["--index-url", indexes[0]]
    for extra in dict.fromkeys(indexes[1:]):
        options += ["--extra-index-url", extra]
    for folder in dict.fromkeys(folders):
        options += ["--find-links", folder]
    return options


@pytest.mark.slow
def test_a_wheel_installs_offline_into_a_fresh_venv_and_runs_from_an_empty_folder(tmp_path):
    sources = local_package_sources()
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("VIRTUAL_ENV")}
    if not sources:
        pytest.skip("no local package index in pip's configuration: this test installs offline only")
    source = tmp_path / "checkout"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(*CHECKOUT_ONLY))
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(source)], capture_output=True, text=True, timeout=600, env=clean)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("masprm-*.whl")

    venv = tmp_path / "venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, env=clean)
        # without PYTHONPATH: pip must not take the checkout's package for an installed one
        installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile",
                                    *sources, str(wheel)], capture_output=True, text=True, timeout=1800, env=clean)
        assert installed.returncode == 0, installed.stderr[-3000:]
        run_from_an_empty_folder(venv, tmp_path / "empty", clean)
    finally:
        shutil.rmtree(venv, ignore_errors=True)   # about 1.6 GB


def run_from_an_empty_folder(venv: Path, empty: Path, env: dict[str, str]) -> None:
    from masprm import __version__

    empty.mkdir()
    env = dict(env)
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               TQDM_DISABLE="1")

    def run(*argv: str, timeout: int = 600) -> subprocess.CompletedProcess:
        done = subprocess.run(list(argv), cwd=empty, env=env, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{argv}: {done.stderr[-3000:]}"
        return done

    where = run("python", "-c", "import masprm; print(masprm.__file__)").stdout.strip()
    assert Path(where).is_relative_to(venv), where   # the installed copy, not the checkout
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    for name in scripts:
        assert run(name, "--version", timeout=120).stdout.strip() == f"{name} (masprm {__version__})"
    plan = run("masprm-demo", "--dry_run").stdout
    assert "python -m masprm.stages.trees --dataset toy" in plan and "--mas_config configs/toy.yaml" in plan

    run("python", "-m", "masprm.worlds.build")   # the shipped policy and the shipped toy config, package data
    trees = run("masprm-mcts", "--dataset", "toy", "--split", "train", "--n", "2", "--n_rollouts", "2",
                "--n_candidates", "2", "--model_id", "artifacts/toy/policy", "--device_map", "cpu", "--no_compile",
                "--no_plot")
    folder = re.search(r"wrote 2 trees to (\S+)", trees.stdout).group(1)
    assert Path(folder).parts[0] == "results" and sorted(p.name for p in (empty / folder).glob("*.json")) == \
        ["0.json", "1.json"]
    assert sorted(p.name for p in empty.iterdir()) == ["artifacts", "results"]   # outputs stay in the folder
