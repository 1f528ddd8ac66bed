"""The per-condition loop: log names and content, sidecars, skipping, FAILED, resume after a crash."""

from __future__ import annotations

import json

import pytest

from conftest import FakePolicy
from masprm.data import Example, LoadedData
from masprm.eval.logs import COMPLETED, LogFiles, log_status
from masprm.eval.runner import Comparison, ModelSpec, run_conditions
from helpers_eval_world import FakeScorer, chain_graph, prefers_good, respond, settings

N = 4


def data(n=N):
    return LoadedData([Example(i, f"What is 3 + 4? (#{i})", "7", {}) for i in range(n)], skipped=1)


SPECS = {"policy": ModelSpec("policy", "fake-policy"), "masprm": ModelSpec("scorer", "fake-prm")}


class World:
    """Fake models handed out by spec, with a count of the examples each condition ran."""

    def __init__(self, respond_fn=respond):
        self.policy = FakePolicy(respond_fn)
        self.prm = FakeScorer(prefers_good)
        self.loaded: list[str] = []

    def loader(self, spec):
        self.loaded.append(spec.model_id)
        return {"fake-policy": self.policy, "fake-prm": self.prm}[spec.model_id]

    def run(self, tmp_path, methods, messages=None, comparisons=None, **overrides):
        s = settings(**{"dataset": "chain", "split": "test", "gen_model_id": "fake-policy", "prm_dir": "fake-prm",
                        "seed": 14, "methods": methods, **overrides})
        announce = (messages.append if messages is not None else lambda m: None)
        return run_conditions(methods, s, chain_graph(), data(), SPECS, logs_dir=tmp_path, loader=self.loader,
                              announce=announce, comparisons=comparisons)


def test_conditions_write_named_logs_with_sidecars(tmp_path):
    conds = World().run(tmp_path, ["single_pass", "sbs_prm", "mcts_prm"])
    by = {c.method: c for c in conds}
    for c in conds:
        fp = c.manifest["fingerprint"]
        assert c.files.log.name == f"chain_{c.method}_{fp}_fake-policy_14.txt"
        for path in (c.files.log, c.files.records, c.files.manifest, c.files.summary):
            assert path.is_file()
        assert not c.files.partial.exists()
        lines = c.files.log.read_text().splitlines()
        assert lines[0] == f"=== START {c.label} | dataset=chain | N={N} | manifest={c.manifest_hash} ==="
        assert lines[1] == f"[data] examples={N} skipped_no_gold=1"
        assert lines[-1] == COMPLETED
        assert not any(ln.startswith("[progress]") for ln in lines)   # every LOG_EVERY = 10 examples
        records = [json.loads(ln) for ln in c.files.records.read_text().splitlines()]
        assert [r["index"] for r in records] == list(range(N))
        assert {"index", "condition", "prediction", "gold", "correct", "candidates", "metrics"} <= set(records[0])
    assert [c.label for c in conds] == ["DyLAN single pass (no scorer)", "SBS + PRM (B1=3, B2=5) [prm: fake-prm]",
                                        "DyLAN MCTS + PPM (N=10, 3 children) [prm: fake-prm]"]
    assert by["single_pass"].summary["accuracy"] == 0.0
    assert by["sbs_prm"].summary["accuracy"] == 1.0 and by["mcts_prm"].summary["accuracy"] == 1.0
    text = by["sbs_prm"].files.log.read_text()
    assert "Accuracy (pass@1): 1.0000" in text and "Total Agent runs: 80" in text and "Total PRM calls: 80" in text
    assert "Mean PRM calls per example: 20.00" in text


def test_a_compared_condition_waits_for_its_partner_and_its_log_is_final_at_completed(tmp_path):
    calls = []

    def compare(records, partner_records, seed, partner_log):
        calls.append(partner_log)
        result = {"indices": [r["index"] for r in records], "partner": [r["index"] for r in partner_records],
                  "seed": seed}
        return result, [f"Paired vs MASPRM (sbs_prm) over {len(partner_records)} questions"]

    pairs = {"single_pass": Comparison("sbs_prm", "paired_test", compare)}
    # single_pass's examples come first: it is written only once sbs_prm has all four records
    by = {c.method: c for c in World().run(tmp_path, ["single_pass", "sbs_prm"], comparisons=pairs)}
    owner, partner = by["single_pass"], by["sbs_prm"]
    assert owner.files.log.read_text().splitlines()[-2:] == ["Paired vs MASPRM (sbs_prm) over 4 questions", COMPLETED]
    partner_lines = partner.files.log.read_text().splitlines()
    assert partner_lines[-1] == COMPLETED and not any(ln.startswith("Paired") for ln in partner_lines)
    assert json.loads(owner.files.summary.read_text())["paired_test"] == {
        "indices": [0, 1, 2, 3], "partner": [0, 1, 2, 3], "seed": 14}
    assert calls == [partner.files.log.name]
    # a rerun reuses both: no comparison, and no file of either is written again
    before = {p: p.read_bytes() for p in tmp_path.glob("chain_*")}
    again = World().run(tmp_path, ["single_pass", "sbs_prm"], comparisons=pairs)
    assert all(c.reused for c in again) and calls == [partner.files.log.name]
    assert {p: p.read_bytes() for p in tmp_path.glob("chain_*")} == before
    # without its partner in the command a condition carries no comparison
    (alone,) = World().run(tmp_path / "alone", ["single_pass"], comparisons=pairs)
    assert "paired_test" not in alone.summary and alone.files.log.read_text().splitlines()[-1] == COMPLETED
    # a partner reused from an earlier run is compared through its records file
    World().run(tmp_path / "later", ["sbs_prm"])
    by = {c.method: c for c in World().run(tmp_path / "later", ["single_pass", "sbs_prm"], comparisons=pairs)}
    assert by["sbs_prm"].reused and by["single_pass"].summary["paired_test"]["partner"] == [0, 1, 2, 3]


def test_fingerprint_ignores_the_seed_but_not_the_condition_settings(tmp_path):
    def names(**kw):
        return {c.method: c.files.log.name for c in World().run(tmp_path / "x", ["sbs_prm", "mcts_prm"], **kw)}

    a, b = names(), names(seed=24)
    assert a["sbs_prm"].removesuffix("_14.txt") == b["sbs_prm"].removesuffix("_24.txt")
    c = names(b1=2)
    assert c["sbs_prm"] != a["sbs_prm"]          # b1 defines SBS ...
    assert c["mcts_prm"] == a["mcts_prm"]        # ... but not MCTS


def test_completed_conditions_are_loaded_instead_of_rerun(tmp_path):
    first = World().run(tmp_path, ["single_pass", "sbs_prm"])
    world, messages = World(), []
    again = world.run(tmp_path, ["single_pass", "sbs_prm"], messages=messages)
    assert world.policy.calls == [] and world.loaded == []
    assert [c.summary for c in again] == [c.summary for c in first]
    assert all("already COMPLETED" in m for m in messages) and len(messages) == 2


def _crash_on(marker, exc):
    def fn(messages, k, rng):
        if marker in messages[-1]["content"]:
            raise exc
        return respond(messages, k, rng)
    return fn


def test_crashing_examples_mark_the_condition_failed_and_are_retried(tmp_path):
    (cond,) = World(_crash_on("(#2)", ValueError("model broke"))).run(tmp_path, ["single_pass"])
    assert log_status(cond.files.log) == "FAILED" and cond.summary["errors"] == 1
    assert cond.files.log.read_text().splitlines()[-1] == "FAILED (1 of 4 examples raised errors)"
    bad = [json.loads(ln) for ln in cond.files.records.read_text().splitlines()][2]
    assert bad["error"].startswith("ValueError: model broke") and bad["correct"] is False
    # A rerun retries only the crashed example.
    world = World()
    (again,) = world.run(tmp_path, ["single_pass"])
    assert again.summary["status"] == COMPLETED and again.summary["errors"] == 0
    assert world.policy.calls == [("sample", 1), ("sample", 1)]


def test_an_interrupted_condition_resumes_where_it_stopped(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        # one example at a time, so examples 0 and 1 are finished when #2 is interrupted
        World(_crash_on("(#2)", KeyboardInterrupt())).run(tmp_path / "a", ["sbs_prm"], search_batch_size=1)
    (partial,) = (tmp_path / "a").glob("*.partial.jsonl")
    files = LogFiles(partial.with_name(partial.name.removesuffix(".partial.jsonl")))
    assert log_status(files.log) is None                       # unfinished: not COMPLETED
    assert len(files.partial.read_text().splitlines()) == 1 + 2  # header + examples 0 and 1
    world, messages = World(), []
    (resumed,) = world.run(tmp_path / "a", ["sbs_prm"], messages=messages, search_batch_size=1)
    assert "resuming, 2/4" in messages[0]
    assert sum(1 for call in world.policy.calls if call == ("sample", 1)) == 2   # examples 2 and 3 only
    (clean,) = World().run(tmp_path / "b", ["sbs_prm"])
    assert resumed.files.records.read_text() == clean.files.records.read_text()
    assert resumed.files.log.read_text() == clean.files.log.read_text()


def test_results_do_not_depend_on_when_a_worker_loads_its_models(tmp_path):
    # Loading a model initialises weights from the global RNG; it must not shift an example's sampling.
    def random_solver(messages, k, rng):
        if messages[0]["content"] == "solve":
            return f"good plan {rng.randint(0, 9)}" if rng.random() < 0.5 else f"bad {rng.randint(0, 9)}"
        return respond(messages, k, rng)

    class RngEatingWorld(World):
        def loader(self, spec):
            self.policy.rng.random()          # what weight initialisation does to a real RNG
            return super().loader(spec)

    fresh = RngEatingWorld(random_solver)
    (a,) = fresh.run(tmp_path / "a", ["sbs_prm"])
    warm = RngEatingWorld(random_solver)
    for spec in SPECS.values():                # a worker that already holds its models
        warm.loader(spec)
    (b,) = warm.run(tmp_path / "b", ["sbs_prm"])
    assert a.files.records.read_text() == b.files.records.read_text()


def test_fingerprint_follows_checkpoint_and_config_content(tmp_path):
    from masprm.eval.runner import condition_manifest

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"weights-1")
    specs = {**SPECS, "masprm": ModelSpec("scorer", str(adapter))}
    s = settings(dataset="chain", split="test", gen_model_id="fake-policy", seed=14)

    def fp(graph=None):
        return condition_manifest("sbs_prm", s, graph or chain_graph(), data(), specs)["fingerprint"]

    before = fp()
    copy = tmp_path / "elsewhere"
    copy.mkdir()
    (copy / "adapter_model.safetensors").write_bytes(b"weights-1")
    specs["masprm"] = ModelSpec("scorer", str(copy))
    assert fp() != before           # the path is part of the identity ...
    specs["masprm"] = ModelSpec("scorer", str(adapter))
    assert fp() == before
    (adapter / "adapter_model.safetensors").write_bytes(b"weights-2")
    assert fp() != before           # ... and so is the content
    # ... of what loads: a finished scorer's training checkpoints (with their run times) do not count
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "checkpoint-4").mkdir()
    (adapter / "checkpoint-4" / "trainer_state.json").write_text('{"eval_runtime": 0.3}')
    trained = fp()
    (adapter / "checkpoint-4" / "trainer_state.json").write_text('{"eval_runtime": 0.4}')
    assert fp() == trained
    # ... nor its event logs, data cache and training arguments (times and paths of the training run)
    for by_product in ("runs/Dec02_vm/events.out.tfevents.1", "map_cache/ppm_1.json", "training_args.bin"):
        (adapter / by_product).parent.mkdir(parents=True, exist_ok=True)
        (adapter / by_product).write_bytes(b"run at 23:51")
    assert fp() == trained
    (adapter / "adapter_config.json").write_text('{"r": 8}')
    assert fp() != trained
    config = tmp_path / "team.yaml"
    config.write_text(json.dumps({"agents": [{"name": "a", "system_prompt": "x"}], "edges": [[-1, 0]]}))
    from masprm.graph import load_mas_config
    one = fp(load_mas_config(config))
    config.write_text(json.dumps({"agents": [{"name": "a", "system_prompt": "y"}], "edges": [[-1, 0]]}))
    assert fp(load_mas_config(config)) != one


def test_code_fingerprint_covers_every_module_on_the_evaluation_path(tmp_path):
    import shutil
    from pathlib import Path

    from masprm import identity
    from masprm.eval import logs

    root = tmp_path / "masprm"
    shutil.copytree(Path(logs.__file__).resolve().parents[1], root,
                    ignore=shutil.ignore_patterns("__pycache__"))
    method_file = str(root / "eval" / "methods.py")
    names = {f.relative_to(root).as_posix() for f in logs.code_files(method_file, root)}
    assert {"models/policy.py", "models/scorer.py", "models/loading.py", "data.py", "models/text_encoder.py",
            "models/token_scorer.py", "scorer_meta.py",
            "answers.py", "graph.py", "state_text.py", "search/node.py", "search/expand.py",
            "search/beam.py", "search/mcts.py", "search/vote.py"} <= names
    assert "plots/tree_plot.py" not in names and "search/train_mcts.py" not in names   # stages 1 and show_tree

    def version():
        identity._code_version_cache.clear()
        return logs.code_version(method_file, root)

    before = version()
    for rel in ("models/policy.py", "data.py", "models/text_encoder.py"):
        source = (root / rel).read_text()
        # a comment, a reworded docstring and another layout: the same code, the same version
        (root / rel).write_text(source.replace('"""', '"""Reworded. ', 1).replace("\n", "  # edited\n", 3)
                                + "\n\n# edited\n")
        assert version() == before, rel
        (root / rel).write_text(source + "\nEDITED = 1\n")   # a statement: another version
        after = version()
        assert after != before, rel
        before = after
    (root / "plots" / "tree_plot.py").write_text("EDITED = 1\n")
    assert version() == before


def test_a_completed_log_of_another_example_selection_is_rerun(tmp_path):
    World().run(tmp_path, ["single_pass"])
    s = settings(dataset="chain", split="test", gen_model_id="fake-policy", prm_dir="fake-prm", seed=14,
                 methods=["single_pass"])
    other = LoadedData([Example(i, f"What is 3 + 4? (other #{i})", "7", {}) for i in range(N)], skipped=1)
    world = World()
    (cond,) = run_conditions(["single_pass"], s, chain_graph(), other, SPECS, logs_dir=tmp_path,
                             loader=world.loader, announce=lambda m: None)
    assert not cond.reused and world.policy.calls               # same file name, new examples: rerun
    records = [json.loads(ln) for ln in cond.files.records.read_text().splitlines()]
    assert all("other" in r["question"] for r in records)
    world = World()
    (same,) = run_conditions(["single_pass"], s, chain_graph(), other, SPECS, logs_dir=tmp_path,
                             loader=world.loader, announce=lambda m: None)
    assert same.reused and world.policy.calls == []


def test_a_worker_frees_the_scorer_the_next_condition_does_not_need(tmp_path, monkeypatch):
    from masprm.eval import runner
    from helpers_eval_world import orm_prefers_seven

    events, live = [], set()   # a caching loader, like runner.load_model
    world = World()
    orm = FakeScorer(orm_prefers_seven)
    specs = {**SPECS, "orm": ModelSpec("scorer", "fake-orm")}

    def loader(spec):
        if spec.model_id not in live:
            live.add(spec.model_id)
            events.append(("load", spec.model_id))
        return {"fake-policy": world.policy, "fake-prm": world.prm, "fake-orm": orm}[spec.model_id]

    def release(spec):
        live.discard(spec.model_id)
        events.append(("free", spec.model_id))

    monkeypatch.setattr(runner, "release_model", release)
    s = settings(dataset="chain", split="test", gen_model_id="fake-policy", prm_dir="fake-prm", orm_dir="fake-orm",
                 seed=14)
    conds = run_conditions(["sbs_prm", "mcts_orm", "single_pass"], s, chain_graph(), data(), specs, logs_dir=tmp_path, loader=loader,
                           announce=lambda m: None)
    assert [c.summary["status"] for c in conds] == ["COMPLETED"] * 3
    # The PRM goes before the ORM comes; the policy stays; single_pass needs no scorer.
    assert [e for e in events if e[1] != "fake-policy"] == [("load", "fake-prm"), ("free", "fake-prm"),
                                                            ("load", "fake-orm"), ("free", "fake-orm")]
    assert ("free", "fake-policy") not in events
    # The real release drops the process's cached copy, so the next load builds it again.
    monkeypatch.undo()
    spec = ModelSpec("scorer", "fake-orm")
    runner._LOADED[runner._model_key(spec)] = orm
    runner.release_model(spec)
    assert runner._model_key(spec) not in runner._LOADED


def test_condition_labels_are_the_originals_names_with_the_scorer_folders():
    from masprm.eval import runner

    def label(method, **kw):
        s = settings(prm_dir="ckpt/MASPRM-GSM8K-1.5B", orm_dir="ckpt/ORM-1.5B/", handoff_prm_dir="ckpt/H", **kw)
        return runner.label_of(method, s)

    assert label("single_pass") == "DyLAN single pass (no scorer)"
    assert label("sbs_prm") == "SBS + PRM (B1=3, B2=5) [prm: MASPRM-GSM8K-1.5B]"
    assert label("sbs_logprob", logprob_agg="avg_token") == "SBS + logprob (avg-token, B1=3, B2=5)"
    assert label("mcts_prm", orm_leaf=True, uct_type="puct") == \
        "DyLAN MCTS (PUCT) + PPM (ORM leaf, N=10, 3 children) [prm: MASPRM-GSM8K-1.5B, orm: ORM-1.5B]"
    assert label("mcts_logprob", n_simulations=20, max_children=4) == "MCTS + logprob (N=20, 4 children)"
    assert label("mcts_orm") == "MCTS + ORM (N=10, 3 children) [orm: ORM-1.5B]"
    assert label("voter_plain") == "Greedy + Voter (policy only, no PRM)"
    assert label("voter_logprob", logprob_agg="avg_step") == "Greedy + Voter (score-weighted, logprob) (avg-step)"
    assert label("voter_orm") == "Greedy + Voter (score-weighted, ORM end) [orm: ORM-1.5B]"
    assert label("handoff_prm") == "Agent-selected handoff + MASPRM [handoff_prm: H]"


def test_progress_lines_follow_log_every_and_the_table_uses_labels(tmp_path, monkeypatch):
    from masprm.errors import ConfigError
    from masprm.eval.metrics import results_table

    monkeypatch.setenv("LOG_EVERY", "3")
    (cond,) = World().run(tmp_path, ["sbs_prm"], b1=2)
    progress = [ln for ln in cond.files.log.read_text().splitlines() if ln.startswith("[progress]")]
    assert [ln.split()[1] for ln in progress] == ["3/4"]     # after 3 examples; 4 is not a multiple
    table = results_table([cond]).splitlines()
    assert table[1] == "Table-4 style results" and table[3].startswith("Condition ")
    row = table[5]
    assert row.startswith("SBS + PRM (B1=2, B2=5) [prm: fake-prm]  ") and " 1.000 " in row
    from masprm.eval.aggregate import parse_log   # the aggregator reads the label back for its plot
    assert parse_log(cond.files.log.stem, cond.files.log.read_text()).label == cond.label
    monkeypatch.setenv("LOG_EVERY", "0")
    with pytest.raises(ConfigError, match=r"\$LOG_EVERY must be a positive integer"):
        World().run(tmp_path / "bad", ["sbs_prm"])
