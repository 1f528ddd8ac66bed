"""The demo's numerics check (bench/numerics_check.py): which settings a CPU offers, what counts as a difference,
and, small, that the demo's stages 1-3 give the same bytes under the pinning and with AVX2 everywhere."""

from __future__ import annotations

import sys

import pytest

from helpers import REPO

sys.path.insert(0, str(REPO / "bench"))
import numerics_check  # noqa: E402


def test_a_setting_runs_only_where_the_cpu_has_its_instructions():
    # PyTorch 2.13 does not cap ATEN_CPU_CAPABILITY=avx512 to the CPU: without AVX-512 its first vectorised
    # kernel is an illegal instruction (exit 132, seen on an AMD EPYC with AVX2 only), so the check skips it
    run, skipped = numerics_check.offered(["pinned", "unpinned", "avx512"], {"avx", "avx2", "fma"})
    assert run == ["pinned", "unpinned"]
    assert skipped == {"avx512": "the CPU lacks avx512bw, avx512dq, avx512f, avx512vl"}
    run, skipped = numerics_check.offered(["avx512"], {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq"})
    assert run == ["avx512"] and skipped == {}


def test_every_output_a_rerun_must_reproduce_is_compared_byte_for_byte(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for run in (a, b):
        (run / "results" / "trees").mkdir(parents=True)
        (run / "checkpoints" / "toy-orm" / "checkpoint-2").mkdir(parents=True)
        (run / "results" / "trees" / "0.json").write_text('{"value": 0.5}')
        (run / "results" / "prm_samples_x.jsonl").write_text("{}\n")
        (run / "checkpoints" / "toy-orm" / "adapter_model.safetensors").write_bytes(b"\x00\x01")
        (run / "checkpoints" / "toy-orm" / "masprm_scorer.json").write_text("{}")
    (b / "checkpoints" / "toy-orm" / "checkpoint-2" / "trainer_state.json").write_text("{}")   # times: not compared
    assert numerics_check.differing(a, b) == []
    (b / "results" / "trees" / "0.json").write_text('{"value": 0.6}')     # same size, another byte
    (b / "checkpoints" / "toy-orm" / "adapter_model.safetensors").write_bytes(b"\x00\x02")
    (a / "results" / "trees" / "1.json").write_text("{}")                  # a tree only one run wrote
    assert numerics_check.differing(a, b) == ["checkpoints/toy-orm/adapter_model.safetensors",
                                              "results/trees/0.json", "results/trees/1.json"]


@pytest.mark.slow
def test_the_demos_stages_give_the_same_bytes_under_the_pinning_and_with_avx2_everywhere(tmp_path):
    """Two trees, their records and an ORM trained for two steps, under the demo's pinning and under the pinning
    with MKL and oneDNN limited to AVX2 (a CPU without AVX-512): byte-identical on any x86-64 CPU with AVX2."""
    runs = numerics_check.compare(["pinned-avx2-cpu"], trees=2, steps=2, tmp=tmp_path)
    # 2 trees + the process samples + the pairs + the scorer's weights and record
    assert runs == {"pinned-avx2-cpu vs pinned": {"outputs": 6, "differ": []}}
