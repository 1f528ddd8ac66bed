"""Adding a search method or a scorer kind is one registration, and the CLI runs it end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from masprm.search.scorer_kinds import SCORER_KINDS, ScorerKind, register_scorer_kind
from masprm.search.beam import Beam, beam_search
from masprm.search.context import SearchResult
from masprm.eval.methods import METHODS, register_method, register_scored_method
from masprm.search.settings import MCTSSettings, PassSettings, SBSSettings, ViewSettings, VoterSettings

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- the one place each is added


def _short_steps(ctx, cands):
    """A step value without any model: shorter outputs score higher."""
    for c in cands:
        c.score = -len(c.text) / 100
    return
    yield


def _short_leaf(ctx, path):
    return -sum(len(n.text or "") for n in path) / 100
    yield


def _short_weight(ctx, runs):
    return [-sum(len(c.text) for c in b.trail) / 100 for b in runs]
    yield


def _last_of_two(ctx, example):
    """Two single passes advanced together; the second one's answer."""
    runs = yield from beam_search(ctx, [Beam(ctx.graph.start(example.question))] * 2, width=2, branching=1,
                                  scorer=None, temperature=ctx.settings.sbs_temperature)
    answers = [b.state.final_answer() for b in runs]
    return SearchResult(answers[-1], answers[::-1])


def register_kind_and_methods() -> None:
    """The one place each is added: the kind's record, one row per method on it, and a new method."""
    register_scorer_kind(ScorerKind("shortest", _short_steps, _short_leaf, _short_weight))
    # name               family   kind        settings (the fingerprint)
    for row in (("sbs_shortest",   "sbs",   "shortest", (SBSSettings, ViewSettings)),
                ("mcts_shortest",  "mcts",  "shortest", (MCTSSettings, ViewSettings)),
                ("voter_shortest", "voter", "shortest", (VoterSettings, ViewSettings))):
        register_scored_method(*row)
    register_method("last_of_two", settings=(PassSettings,))(_last_of_two)


def _wide_single_pass(ctx, example):
    """A single pass as wide as the SBS beam: it reads --b1, which it does not declare."""
    runs = yield from beam_search(ctx, [Beam(ctx.graph.start(example.question))] * ctx.settings.b1,
                                  width=ctx.settings.b1, branching=1, scorer=None,
                                  temperature=ctx.settings.sbs_temperature)
    answers = [b.state.final_answer() for b in runs]
    return SearchResult(answers[0], answers)


ADDED_METHODS = ("sbs_shortest", "mcts_shortest", "voter_shortest", "last_of_two", "wide_single_pass")


@pytest.fixture(scope="module", autouse=True)
def registered():
    """Everything this module adds, registered for its tests and removed afterwards (no other test sees it)."""
    register_kind_and_methods()
    register_method("wide_single_pass", settings=(PassSettings,))(_wide_single_pass)
    yield
    for name in ADDED_METHODS:
        METHODS.unregister(name)
    SCORER_KINDS.unregister("shortest")


# --------------------------------------------------------------------------- through the CLI


def run_cli(monkeypatch, tiny_model_dir, tmp_path, methods):
    from masprm.stages import evaluate as cli

    from masprm.eval.methods import flags_read_by

    # the families' small budgets, passed only where a method reads them (stage 4 refuses a flag that cannot act)
    budgets = flags_read_by(methods, ["--b1", "2", "--b2", "2", "--voter_k", "2", "--n_simulations", "2",
                                      "--max_children", "2"])
    argv = ["compare_sbs_mcts.py", "--dataset", "toy", "--split", "test", "--sample_n", "3", "--seed", "14",
            "--gen_model_id", str(tiny_model_dir), "--mas_config", str(ROOT / "configs" / "toy.yaml"),
            "--methods", *methods, *budgets, "--max_new_tokens", "4", "--logs_dir", str(tmp_path), "--workers", "1",
            "--search_batch_size", "3", "--device_map", "cpu", "--no_compile"]
    monkeypatch.setattr(sys, "argv", argv)
    assert cli.main() == 0
    return {m: [json.loads(line) for line in next(tmp_path.glob(f"toy_{m}_*.jsonl")).read_text().splitlines()]
            for m in methods}


@pytest.mark.slow
def test_a_new_scorer_kind_is_one_record_and_one_row_per_method(monkeypatch, tiny_model_dir, tmp_path):
    methods = ["sbs_shortest", "mcts_shortest", "voter_shortest"]
    assert all(m in METHODS for m in methods)
    assert METHODS["sbs_shortest"].settings[1:] == (ViewSettings,)   # the kind's settings join the fingerprint
    records = run_cli(monkeypatch, tiny_model_dir, tmp_path, methods)
    for method in methods:
        assert [r["index"] for r in records[method]] == [0, 1, 2] and not any(r["error"] for r in records[method])
    assert all(r["metrics"]["agent_runs"] > 0 for r in records["sbs_shortest"])
    assert all(r["extra"]["tree_nodes"] > 1 for r in records["mcts_shortest"])


@pytest.mark.slow
def test_a_new_method_is_one_registration_and_runs_through_the_cli(monkeypatch, tiny_model_dir, tmp_path):
    records = run_cli(monkeypatch, tiny_model_dir, tmp_path, ["last_of_two", "single_pass"])
    mine, single = records["last_of_two"], records["single_pass"]
    assert [len(r["candidates"]) for r in mine] == [2, 2, 2]
    # the first pass of last_of_two draws what single_pass draws (same streams), so its second
    # candidate (the first pass, reversed order) is single_pass's prediction
    assert [r["candidates"][1] for r in mine] == [r["prediction"] for r in single]


def test_settings_are_classes_so_a_misspelling_cannot_register():
    with pytest.raises(TypeError, match="dataclass types"):
        register_method("misspelled", settings=("beam_widht",))(_last_of_two)
    assert "misspelled" not in METHODS


def test_a_method_reads_only_the_settings_it_declares_and_only_they_define_it(tmp_path):
    from conftest import FakePolicy
    from helpers_eval_world import chain_graph, example, make_ctx, respond, run_method, settings
    from masprm.data import LoadedData
    from masprm.eval.runner import ModelSpec, condition_manifest, run_conditions

    ctx = make_ctx("wide_single_pass", FakePolicy(respond), b1=2)
    assert ctx.settings.sbs_temperature == 1.0 and ctx.settings.top_p == 0.95
    with pytest.raises(AttributeError, match="has no attribute 'b1'"):
        run_method("wide_single_pass", ctx)
    # through the runner the example fails on its own, with the error in its record
    world = dict(dataset="chain", split="test", gen_model_id="fake-policy", seed=1)
    data, specs = LoadedData([example(0)], skipped=0), {"policy": ModelSpec("policy", "fake-policy")}
    (cond,) = run_conditions(["wide_single_pass"], settings(**world), chain_graph(), data, specs,
                             logs_dir=tmp_path, loader=lambda spec: FakePolicy(respond), announce=lambda m: None)
    [record] = [json.loads(line) for line in cond.files.records.read_text().splitlines()]
    assert record["error"].startswith("AttributeError") and "'b1'" in record["error"]
    # the fingerprint holds the declared settings only: --b1 cannot split (or stale-reuse) its logs
    definition = cond.manifest["definition"]
    assert definition["settings"] == {"top_p": 0.95, "max_new_tokens": 1024, "sbs_temperature": 1.0}

    def fingerprint(**flags):
        return condition_manifest("wide_single_pass", settings(**world, **flags), chain_graph(), data,
                                  specs)["fingerprint"]

    assert fingerprint(b1=9, orm_leaf=True) == fingerprint() != fingerprint(sbs_temperature=0.5)
