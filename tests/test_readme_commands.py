"""The README's commands run as written: its smoke test, taken from the README itself, in a fresh shell.

A fresh shell is one whose PATH has no virtual environment (a newcomer's terminal after `make setup`): a
bare `python` there is the system's, which has no masprm, so the README has to name `.venv/bin/python`
(or say to activate it). The commands run in a folder laid out like a fresh checkout (the checkout's
`src/`, `configs/` and `.venv/` linked in), so the trees land in a temporary `results/`, not the checkout's.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from helpers import REPO

# A terminal's PATH without any virtual environment; the system's python3 is on it.
FRESH_PATH = "/usr/local/bin:/usr/bin:/bin"


def readme_block(section: str) -> str:
    """The first ```bash block under the README's `## <section>` heading, as written."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```bash\n(.*?)```", body, re.S)
    assert found, f"README.md: no bash block under '## {section}'"
    return found.group(1)


def test_the_smoke_test_names_a_python_that_has_the_package():
    # the block's interpreter is the environment `make setup` builds, not whatever `python` a shell finds
    commands = readme_block("Smoke test")
    assert re.findall(r"(?:^|&&\s*)(\S+) (?:-m |src/)", commands, re.M) == [".venv/bin/python", ".venv/bin/python"]


@pytest.mark.slow
def test_the_readme_smoke_test_runs_as_written_in_a_fresh_shell(tmp_path):
    for name in ("src", "configs", ".venv"):
        (tmp_path / name).symlink_to(REPO / name)
    env = {"PATH": FRESH_PATH, "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    # what makes the shell fresh: its own python cannot import the package
    bare = subprocess.run(["bash", "-c", "python3 -c 'import masprm'"], env=env, capture_output=True, text=True)
    assert bare.returncode != 0 and "No module named 'masprm'" in bare.stderr
    done = subprocess.run(["bash", "-c", readme_block("Smoke test")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # two trees (--n 2), in the run folder the search settings name (r2 c4 cand3, the default t 0.7, p 0.95)
    trees = sorted(p.name for p in (tmp_path / "results" / "toy_res_train_policy_r2_c4_cand3_t0p7_p0p95").glob("*.json"))
    assert trees == ["0.json", "1.json"]
