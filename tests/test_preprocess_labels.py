"""src/train/preprocess_data.py --labels NAME: one scheme's file, today's outputs untouched, flag errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from masprm.errors import MasprmError
from masprm.stages import preprocess as preprocess_data
from helpers_trees import dylan_tree, preprocess_workdir, write_trees

RUN = "gsm8k_res_train_Qwen_Qwen2.5-1.5B-Instruct_r40_c4_cand3_t0p7_p0p95"
README_FLAGS = ["--target-nodes", "5", "--ppm-max-pairs", "8", "--ppm-pos-topk", "4", "--ppm-neg-topk", "4",
                "--view", "full", "--mas_config", "configs/gsm8k.yaml"]


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def without_scheme(records):
    """The records with meta.label_scheme taken out (and a meta that held only it)."""
    out = []
    for rec in records:
        rec = dict(rec)
        meta = {k: v for k, v in rec.pop("meta").items() if k != "label_scheme"}
        out.append({**rec, **({"meta": meta} if meta else {})})
    return out


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return preprocess_workdir(tmp_path, RUN)


def test_the_papers_schemes_are_todays_records_with_their_name(workdir):
    preprocess_data.main(["--input", f"results/{RUN}", "--make-ppm", *README_FLAGS])
    results = workdir / "results"
    today = {p.name: p.read_bytes() for p in results.glob("*.jsonl")}
    for name in ("masprm", "mc"):
        preprocess_data.main(["--input", f"results/{RUN}", "--labels", name, *README_FLAGS])
    pairs, steps = read_jsonl(results / f"labels_masprm_{RUN}.jsonl"), read_jsonl(results / f"labels_mc_{RUN}.jsonl")
    assert {r["meta"]["label_scheme"] for r in pairs} == {"masprm"} and {r["meta"]["label_scheme"] for r in steps} == {"mc"}
    assert without_scheme(pairs) == read_jsonl(results / f"ppm_pairs_{RUN}.jsonl")
    assert without_scheme(steps) == read_jsonl(results / f"prm_samples_{RUN}.jsonl")
    # --labels writes its one file only: today's outputs are byte for byte as they were
    assert {p.name: p.read_bytes() for p in results.glob("*.jsonl") if p.name in today} == today
    assert sorted(p.name for p in results.glob("*.jsonl")) == sorted([*today, f"labels_masprm_{RUN}.jsonl",
                                                                      f"labels_mc_{RUN}.jsonl"])


def test_a_schemes_flags_and_summary(workdir, capsys):
    preprocess_data.main(["--input", f"results/{RUN}", "--labels", "first_error", "--first-error-threshold", "0.3"])
    recs = read_jsonl(workdir / "results" / f"labels_first_error_{RUN}.jsonl")
    assert [r["labels"] for r in recs] == [[-1.0]]      # read (0.2) fails at 0.3; the two in-window trees dedupe
    out = capsys.readouterr().out
    assert (f"[preprocess][labels first_error] files=3 trees=3 malformed=0 outside_root_window=1 | records=6 "
            f"duplicates=5 | kept=1 | paths: no error 0, first error at step 0:6 | wrote -> "
            f"{workdir / 'results' / f'labels_first_error_{RUN}.jsonl'}") in out


def test_self_consistency_prints_how_often_it_agrees_with_gold(workdir, capsys):
    preprocess_data.main(["--input", f"results/{RUN}", "--labels", "self_consistency"])
    # each tree: answers 4 (+1), 5 (-1), 7 (-1) tie at one vote; the first seen (4, the gold) wins, so all agree
    assert "terminal rewards agree with gold 9/9 (100.0%) | majority answer is gold in 3/3 trees" in \
        capsys.readouterr().out


def test_the_local_view_has_its_own_file_name(workdir):
    run = "gsm8k_dylan_res_train_tiny_r2_c4_cand3_t0p7_p0p95"
    write_trees(workdir / "results" / run, [dylan_tree()])
    preprocess_data.main(["--input", f"results/{run}", "--target-nodes", "0", "--view", "local", "--labels", "mc"])
    recs = read_jsonl(workdir / "results" / f"labels_mc_local_{run}.jsonl")
    assert recs and all(r["meta"]["view"] == "local" and r["meta"]["label_scheme"] == "mc" for r in recs)


@pytest.mark.parametrize("argv, message", [
    (["--labels", "first_eror"], "--labels: unknown label scheme 'first_eror' (valid: advantage, balanced_pairs, "
                                 "first_error, first_error_search, majority_outcome, margin_pairs, masprm, mc, "),
    (["--labels", "first_eror"], "; did you mean 'first_error'?)"),
    (["--labels", "first_error", "--pair-margin", "0.3"],
     "--pair-margin is a setting of --labels margin_pairs, not of --labels first_error"),
    (["--per-agent-cap", "3"], "--per-agent-cap is a setting of --labels balanced_pairs (add --labels NAME)"),
    (["--labels", "masprm", "--make-ppm"], "--make-ppm writes the paper's pairs next to the PRM samples"),
    (["--labels", "margin_pairs", "--pair-margin", "-1"], "pair_margin must be in [0, 2], got -1.0"),
    (["--labels", "shapley"], "--labels shapley needs fresh policy samples: give --rollout-policy FOLDER"),
    (["--labels", "mc", "--rollout-policy", "x"], "--rollout-policy is read only by the rollout-based label "
                                                  "schemes, not by --labels mc"),
    (["--rollout-policy", "x"], "--rollout-policy is read only by the rollout-based label schemes (add --labels"),
    (["--rollout-ensemble", "x"], "--rollout-ensemble is read only by the rollout-based label schemes (add --labels"),
    (["--labels", "mc_rollouts_active", "--rollout-policy", "x"],
     "--labels mc_rollouts_active ranks prefixes by an ensemble's spread: give --rollout-ensemble FOLDER"),
    (["--labels", "mc_rollouts_uniform", "--rollout-policy", "x", "--rollout-ensemble", "y"],
     "--rollout-ensemble is read only by --labels mc_rollouts_active, not by --labels mc_rollouts_uniform"),
    # --rollout-budget belongs to both budgeted schemes; --active-rollouts to the active one only
    (["--labels", "mc_rollouts_uniform", "--rollout-policy", "x", "--active-rollouts", "3"],
     "--active-rollouts is a setting of --labels mc_rollouts_active, not of --labels mc_rollouts_uniform"),
    (["--rollout-budget", "8"], "--rollout-budget is a setting of --labels mc_rollouts_active and --labels "
                                "mc_rollouts_uniform (add --labels NAME)"),
    (["--labels", "mc_rollouts_active", "--rollout-policy", "x", "--rollout-ensemble", "y", "--rollout-budget", "-1"],
     "rollout_budget must be at least 1, got -1"),
])
def test_flag_errors_are_one_line_and_write_nothing(workdir, argv, message):
    with pytest.raises(MasprmError) as err:
        preprocess_data.main(["--input", f"results/{RUN}", *argv])
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not list((workdir / "results").glob("*.jsonl"))


@pytest.mark.slow
def test_a_rollout_scheme_samples_from_the_policy_and_reports_its_cost(workdir, tiny_model_dir, capsys):
    argv = ["--input", f"results/{RUN}", "--labels", "mc_rollouts", "--mc-rollouts", "2",
            "--rollout-policy", str(tiny_model_dir), "--seed", "3"]
    preprocess_data.main(argv)
    path = workdir / "results" / f"labels_mc_rollouts_{RUN}.jsonl"
    recs = read_jsonl(path)
    # every label is 2f - 1 for f in {0, 1/2, 1} (two completions), the last step the path's own outcome
    assert recs and all(y in (-1.0, 0.0, 1.0) for r in recs for y in r["labels"])
    assert all(r["meta"]["label_scheme"] == "mc_rollouts" for r in recs)
    out = capsys.readouterr().out
    assert "[preprocess][labels mc_rollouts] policy cost: " in out and " agent runs, " in out
    first = path.read_bytes()
    preprocess_data.main(argv)   # the same seed samples the same texts
    assert path.read_bytes() == first


@pytest.mark.slow
def test_the_budgeted_schemes_spend_the_budget_and_the_same_seed_gives_the_same_file(workdir, tiny_model_dir,
                                                                                      tmp_path, capsys):
    from helpers_training import train_tiny

    (tmp_path / "ens").mkdir()
    ensemble = train_tiny(tmp_path / "ens", tiny_model_dir, "ensemble", 8, ensemble_heads=3).output_dir
    for name, extra in (("mc_rollouts_uniform", []), ("mc_rollouts_active", ["--rollout-ensemble", str(ensemble)])):
        argv = ["--input", f"results/{RUN}", "--labels", name, "--rollout-budget", "7", "--rollout-policy",
                str(tiny_model_dir), "--seed", "3", *extra]
        preprocess_data.main(argv)
        out = capsys.readouterr().out
        # two trees in the window (root values 0.2 and 0.1), five open prefixes and 7 completions each
        assert "prefixes=10 rollouts=14" in out and f"[preprocess][labels {name}] policy cost: " in out
        path = workdir / "results" / f"labels_{name}_{RUN}.jsonl"
        first = path.read_bytes()
        assert all(r["meta"]["label_scheme"] == name for r in read_jsonl(path))
        preprocess_data.main(argv)
        assert path.read_bytes() == first
    # an ensemble folder that is not there, or a scorer that is not an ensemble: one line, nothing written
    for folder, message in ((tmp_path / "none", "no such folder"), (tiny_model_dir, "")):
        with pytest.raises(MasprmError, match="rollout.ensemble") as err:   # the CLI spells it as the flag
            preprocess_data.main(["--input", f"results/{RUN}", "--labels", "mc_rollouts_active", "--rollout-policy",
                                  str(tiny_model_dir), "--rollout-ensemble", str(folder), "--rollout-budget", "3"])
        assert message in str(err.value) and "\n" not in str(err.value)
    assert path.read_bytes() == first


@pytest.mark.parametrize("make, said", [
    (lambda workdir, model: "ens", "ens: no such folder"),
    (lambda workdir, model: (workdir / "ens").mkdir() or "ens", "ens: the folder is empty (no trained scorer in it)"),
    # a plain policy folder: no trained head at all (transformers would fill one at random)
    (lambda workdir, model: str(model), "{model}: the weights hold no trained head (score.bias [1] is missing): "
                                        "loaded as a masprm scorer it would score with a random one"),
])
def test_a_bad_ensemble_folder_is_refused_before_the_rollout_policy_loads(workdir, tiny_model_dir, monkeypatch,
                                                                          capsys, make, said):
    """--labels mc_rollouts_active reads two models: the ensemble's folder is checked whole before the policy
    loads (a bad one was once refused only after that load), one line, exit 2, nothing written."""
    from helpers import snapshot
    from helpers_cli import run_module

    folder = make(workdir, tiny_model_dir)
    monkeypatch.setattr(preprocess_data, "rollout_source",
                        lambda *a, **k: pytest.fail("the rollout policy loaded before the ensemble was checked"))
    before = snapshot(workdir)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.stages.preprocess",
                                ["--input", f"results/{RUN}", "--labels", "mc_rollouts_active", "--rollout-policy",
                                 str(tiny_model_dir), "--rollout-ensemble", folder, "--rollout-budget", "3"])
    assert code == 2 and lines == [f"preprocess.py: error: --rollout-ensemble {said.format(model=tiny_model_dir)}"]
    assert snapshot(workdir) == before
