"""Stage 2's --prm-root-window LO HI: the PRM samples' root window as an option, both ends included as the
code applies it; the default (the original's [-0.7, 0.7]) writes the same file under the same name as before,
another window is written into the output's name; bad values are one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from masprm.errors import MasprmError
from masprm.labels.mining import PRM_ROOT_WINDOW, Options, Preprocessor, window_tag
from masprm.stages import preprocess as preprocess_data

from helpers import REPO
from helpers_trees import gsm8k_tree, write_trees

RUN = "gsm8k_res_x"


def prm_records_of(folder, root_q, **options):
    """The PRM samples stage 2 keeps from gsm8k_tree with this root value (its 3 graded paths when kept)."""
    [path] = write_trees(folder / str(root_q), [gsm8k_tree(root_q)])
    prm, _ = Preprocessor(Options(**options)).process_file(path)
    return prm


@pytest.mark.parametrize("root_q, kept", [(-0.7, 3), (0.7, 3), (0.0, 3), (0.7000001, 0), (-0.7000001, 0),
                                          (0.95, 0), (-1.0, 0)])
def test_the_default_window_is_closed_at_both_ends(tmp_path, root_q, kept):
    assert PRM_ROOT_WINDOW == (-0.7, 0.7)
    assert len(prm_records_of(tmp_path, root_q)) == kept


@pytest.mark.parametrize("root_q, kept", [(-1.0, 3), (0.95, 3), (1.0, 3), (0.5, 3)])
def test_an_opened_window_keeps_the_decided_trees(tmp_path, root_q, kept):
    assert len(prm_records_of(tmp_path, root_q, prm_root_window=(-1.0, 1.0))) == kept


def test_a_narrow_window_drops_at_its_edges(tmp_path):
    window = (0.1, 0.2)
    assert [len(prm_records_of(tmp_path, q, prm_root_window=window)) for q in (0.09, 0.1, 0.2, 0.21)] == [0, 3, 3, 0]


def test_the_tag_only_when_changed():
    assert window_tag((-0.7, 0.7)) == "" and Options().window_tag == ""
    assert window_tag((-1.0, 1.0)) == "_window-1_1"
    assert Options(prm_root_window=(-0.9, 0.25)).window_tag == "_window-0.9_0.25"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # root values 0.2 (inside both windows), 0.95 (inside [-1, 1] only)
    write_trees(tmp_path / "results" / RUN, [gsm8k_tree(0.2), gsm8k_tree(0.95)])
    return tmp_path


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_default_runs_keep_their_output_name_and_another_window_its_own(workdir):
    preprocess_data.main(["--input", f"results/{RUN}", "--no-dedupe"])
    default = workdir / "results" / f"prm_samples_{RUN}.jsonl"
    assert len(read_jsonl(default)) == 3   # the 0.2 tree's three graded paths
    before = default.read_bytes()
    preprocess_data.main(["--input", f"results/{RUN}", "--no-dedupe", "--prm-root-window", "-1", "1"])
    opened = workdir / "results" / f"prm_samples_window-1_1_{RUN}.jsonl"
    assert len(read_jsonl(opened)) == 6   # both trees
    assert default.read_bytes() == before   # the default run's file is not replaced
    # the same window as the default, spelled out, is the default run (same name, same bytes)
    preprocess_data.main(["--input", f"results/{RUN}", "--no-dedupe", "--prm-root-window", "-0.7", "0.7"])
    assert default.read_bytes() == before
    assert sorted(p.name for p in (workdir / "results").iterdir()) == sorted(
        [RUN, default.name, opened.name])


def test_a_steps_scheme_reads_the_window_and_names_its_file(workdir):
    preprocess_data.main(["--input", f"results/{RUN}", "--labels", "mc", "--no-dedupe", "--prm-root-window",
                          "0.9", "1"])
    rows = read_jsonl(workdir / "results" / f"labels_mc_window0.9_1_{RUN}.jsonl")
    assert [r["labels"][0] for r in rows] == [0.2, 0.2, 0.2]   # the 0.95 tree's paths only (its Reader's 0.2)


@pytest.mark.parametrize("argv, message", [
    (["--prm-root-window", "0.5", "0.1"], "--prm-root-window: LO (0.5) must not exceed HI (0.1)"),
    (["--labels", "masprm", "--prm-root-window", "-1", "1"], "--labels masprm writes pairs, whose window is "
                                                             "--ppm-root-window"),
])
def test_bad_windows_are_refused_before_any_output(workdir, argv, message):
    with pytest.raises(MasprmError) as err:
        preprocess_data.main(["--input", f"results/{RUN}", *argv])
    assert message in str(err.value)
    assert sorted(p.name for p in (workdir / "results").iterdir()) == [RUN]


@pytest.mark.parametrize("lo", ["low", "nan"])
def test_a_non_number_is_one_line_and_exit_2(workdir, lo):
    out = subprocess.run([sys.executable, str(REPO / "src/train/preprocess_data.py"), "--input", f"results/{RUN}",
                          "--prm-root-window", lo, "0.7"], capture_output=True, text=True, cwd=workdir)
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert "--prm-root-window" in line and repr(lo) in line
    assert sorted(p.name for p in (workdir / "results").iterdir()) == [RUN]
