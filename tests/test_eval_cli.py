"""The seed README's evaluation command on the tiny model with a stage-3 adapter, then the aggregator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from masprm.roles import ROLES
from masprm.scorer_folder import read_scorer_folder

from masprm.cli import PARSED_FLAGS, UsageError, error_line
from masprm.errors import MasprmError, ModelError

from helpers import REPO as ROOT
from helpers_cli import FAST, stage_module, write_gsm8k
from helpers_cli import run_eval as run


@pytest.mark.slow
def test_readme_command_runs_on_the_tiny_model_and_aggregates(tiny_model_dir, prm_dir, tmp_path):
    data, logs = write_gsm8k(tmp_path / "gsm8k.jsonl"), tmp_path / "logs"
    readme = ["--dataset", "gsm8k", "--split", "test", "--seed", "14", "--prm_dir", prm_dir,
              "--prm_base_model_id", tiny_model_dir, "--gen_model_id", tiny_model_dir,
              "--mas_config", "configs/gsm8k.yaml",
              "--methods", "single_pass", "sbs_logprob", "sbs_prm", "mcts_logprob", "mcts_prm",
              "--b1", "3", "--b2", "5", "--n_simulations", "10", "--max_children", "3", "--c_uct", "2",
              "--sbs_temperature", "0.7", "--mcts_temperature", "0.7", "--top_p", "0.95"]
    done = run(*readme, "--data_file", data, "--sample_n", 1, "--logs_dir", logs, *FAST)
    assert done.returncode == 0, done.stderr[-3000:]
    texts = sorted(logs.glob("*.txt"))
    assert len(texts) == 5
    for method in ("single_pass", "sbs_logprob", "sbs_prm", "mcts_logprob", "mcts_prm"):
        (log,) = [p for p in texts if p.name.startswith(f"gsm8k_{method}_")]
        assert log.name.endswith(f"_{Path(tiny_model_dir).name}_14.txt")
        lines = log.read_text().splitlines()
        assert lines[-1] == "COMPLETED" and any(ln.startswith("Accuracy (pass@1): ") for ln in lines)
        records = [json.loads(ln) for ln in log.with_suffix(".jsonl").read_text().splitlines()]
        assert [r["index"] for r in records] == [0] and not any(r["error"] for r in records)
        usage = [r["metrics"] for r in records]
        # Four agents, one output each per trajectory at least; every output is capped at 6 tokens.
        assert all(u["agent_runs"] >= 4 and 0 < u["generated_tokens"] <= 6 * u["agent_runs"] for u in usage)
        if method.endswith("_prm"):
            assert all(u["scorer_calls"] > 0 and u["scorer_tokens"] > 0 for u in usage)
        else:
            assert all(u["scorer_calls"] == 0 for u in usage)
    sbs = [json.loads(ln) for ln in next(p for p in texts if "_sbs_prm_" in p.name)
           .with_suffix(".jsonl").read_text().splitlines()]
    assert all(r["metrics"]["agent_runs"] == 5 + 3 * 5 * 3 for r in sbs)   # B2, then B1 x B2 per agent
    assert "p@1" in done.stdout and "sbs_prm" in done.stdout                  # the printed table

    agg = subprocess.run([sys.executable, str(ROOT / "aggregator.py"), "--logs_dir", logs,
                          "--out", tmp_path / "aggregated_results.csv"], capture_output=True, text=True,
                         timeout=120)
    assert agg.returncode == 0, agg.stderr
    rows = (tmp_path / "aggregated_results.csv").read_text().splitlines()
    assert len(rows) == 1 + 5 and all(row.split(",")[1] == "1" for row in rows[1:])
    assert (tmp_path / "aggregated_results.png").is_file()


def _cli():
    return stage_module("compare_sbs_mcts")


def _validate(argv):
    cli = _cli()
    return cli.validate(*cli.parse_command(argv))


@pytest.mark.parametrize("argv, message", [
    (["--top_p", "0"], "--top_p must be in (0, 1]"),
    (["--b1", "0", "--methods", "sbs_logprob"], "--b1 must be at least 1"),
    (["--c_uct", "-1", "--methods", "mcts_logprob"], "--c_uct must be >= 0"),
    (["--mcts_temperature", "0", "--methods", "mcts_logprob"], "--mcts_temperature must be > 0"),
    (["--methods", "mcts_prm"], "--prm_dir checkpoints/Qwen2.5-1.5B-RM: no such folder (the default: mcts_prm "
                                "needs a trained scorer there, or pass --prm_dir)"),
    (["--methods", "mcts_orm", "voter_orm"], "mcts_orm, voter_orm need --orm_dir"),
    (["--methods", "single_pass", "--orm_leaf"], "--orm_leaf needs mcts_prm"),
    (["--methods", "mcts_prm", "--orm_leaf", "--prm_dir", "."], "mcts_prm needs --orm_dir"),
    (["--methods", "sbs_prm", "--prm_dir", "/no/such/adapter"], "--prm_dir /no/such/adapter: no such folder"),
    (["--methods", "beam_magic"], "--methods: unknown beam_magic"),
    (["--methods", "single_pass", "handoff_fixed"], "cannot be mixed"),
])
def test_bad_flags_are_named(argv, message):
    with pytest.raises(MasprmError) as err:
        _validate(argv)
    assert message in error_line(err.value, PARSED_FLAGS)   # the line the CLI prints


def test_missing_model_or_data_file_is_a_usage_error(tiny_model_dir, tmp_path, monkeypatch):
    cli = _cli()
    monkeypatch.chdir(ROOT)
    base = ["compare_sbs_mcts.py", "--methods", "single_pass", "--dataset", "gsm8k",
            "--mas_config", "configs/gsm8k.yaml", "--logs_dir", str(tmp_path / "logs")]
    monkeypatch.setattr(sys, "argv", base + ["--gen_model_id", str(tmp_path / "missing_model"),
                                             "--data_file", str(write_gsm8k(tmp_path / "d.jsonl"))])
    with pytest.raises(ModelError, match="^gen_model_id .*missing_model") as err:
        cli.main()
    assert error_line(err.value, PARSED_FLAGS).startswith("--gen_model_id ")
    monkeypatch.setattr(sys, "argv", base + ["--gen_model_id", str(tiny_model_dir),
                                             "--data_file", str(tmp_path / "missing.jsonl")])
    with pytest.raises(MasprmError, match="missing.jsonl"):   # a DataError; run_cli prefixes --data_file
        cli.main()
    assert not (tmp_path / "logs").exists()    # nothing was started


def test_math_levels_select_handoff_examples_only():
    # The original passes --math_levels / --math_stratify_by to the loader for handoff runs only.
    cli = _cli()
    fixture = ROOT / "tests" / "fixtures" / "datasets" / "competition_math.jsonl"
    rows = [json.loads(line) for line in fixture.read_text().splitlines() if line.strip()]
    base = ["--dataset", "competition_math", "--data_file", str(fixture), "--seed", "3"]
    static = cli.load_data(cli.parse_command(base + ["--methods", "single_pass"])[1], "static")
    handoff = cli.load_data(cli.parse_command(base + ["--methods", "handoff_fixed"])[1], "handoff")
    assert {"Level 1", "Level 2", "Level 4", "Level 5"} <= {e.meta["level"] for e in static.examples}
    assert len(static.examples) + static.skipped == len(rows)      # every row of the split was read
    assert {e.meta["level"] for e in handoff.examples} == {"Level 4", "Level 5"}


def test_workers_split_the_gpus_as_the_original(monkeypatch):
    from masprm.cluster import plan_workers

    cli = _cli()
    for name in ("RAY_NUM_WORKERS", "WORKERS_PER_GPU"):
        monkeypatch.delenv(name, raising=False)

    def sizing(flag, gpus):   # the stage's rule, then what Ray is asked for on one machine with `gpus` GPUs
        workers, share = cli.resolve_workers(flag, gpus=gpus)
        plan = plan_workers([{"CPU": 8.0, "GPU": float(gpus)}], workers, share, items=100)
        return plan.count, plan.gpus

    assert sizing(3, 1) == (3, pytest.approx(1 / 3))        # three workers share one GPU
    assert sizing(None, 2) == (2, 1.0)                      # one per GPU
    assert cli.resolve_workers(None, gpus=0) == (1, 0.0)    # CPU only: one (in this process)
    assert sizing(2, 0) == (2, 0.0)
    monkeypatch.setenv("RAY_NUM_WORKERS", "4")
    assert sizing(None, 1) == (4, 0.25)
    assert sizing(2, 1) == (2, 0.5)                         # --workers wins over the variable
    monkeypatch.delenv("RAY_NUM_WORKERS")
    monkeypatch.setenv("WORKERS_PER_GPU", "2")
    assert sizing(None, 2) == (4, 0.5)
    assert cli.resolve_workers(None, on_cluster=True) == (None, 0.5)   # counted on the cluster once joined
    monkeypatch.setenv("WORKERS_PER_GPU", "two")
    with pytest.raises(UsageError, match=r"\$WORKERS_PER_GPU must be a positive integer"):
        cli.resolve_workers(None, gpus=1)


def test_scorer_precision_flag_sets_the_scorers_options_only(tmp_path, tiny_model_dir, monkeypatch):
    cli = _cli()
    # An empty folder stands in for a scorer here: the folder check is tested in test_bad_inputs.
    monkeypatch.setattr(cli, "check_scorer_folder", lambda *a, **k: None)
    argv = ["--methods", "mcts_prm", "--prm_dir", str(tmp_path), "--gen_model_id", str(tiny_model_dir),
            "--device_map", "cpu", "--load_in_4bit"]

    def specs_of(argv):
        run, settings = cli.parse_command(argv)
        return cli.model_specs(settings, run)

    specs = specs_of(argv)
    assert specs["policy"].options.load_in_4bit and not specs["masprm"].options.load_in_4bit  # auto on CPU: fp32
    specs = specs_of(argv[:-1] + ["--scorer_precision", "4bit"])
    assert not specs["policy"].options.load_in_4bit and specs["masprm"].options.load_in_4bit
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(argv + ["--scorer_precision", "int3"])


@pytest.mark.slow
def test_seeds_in_one_process_write_the_logs_of_one_command_per_seed(tiny_model_dir, tmp_path):
    data = write_gsm8k(tmp_path / "gsm8k.jsonl")
    base = ["--dataset", "gsm8k", "--split", "test", "--gen_model_id", tiny_model_dir, "--data_file", data,
            "--mas_config", "configs/gsm8k.yaml", "--methods", "single_pass", "mcts_logprob", "--sample_n", 2,
            "--n_simulations", 2, "--max_children", 2, *FAST]
    together, apart = tmp_path / "together", tmp_path / "apart"
    done = run(*base, "--seeds", 14, 24, "--logs_dir", together)
    assert done.returncode == 0, done.stderr[-3000:]
    for seed in (14, 24):
        done = run(*base, "--seed", seed, "--logs_dir", apart)
        assert done.returncode == 0, done.stderr[-3000:]
    names = sorted(p.name for p in together.glob("*.txt"))
    assert names == sorted(p.name for p in apart.glob("*.txt")) and len(names) == 4   # same fingerprints
    for name in names:
        stem = name[:-4]
        assert (together / f"{stem}.jsonl").read_text() == (apart / f"{stem}.jsonl").read_text()


def test_the_originals_scorer_defaults_and_repeated_methods(tmp_path, monkeypatch, tiny_model_dir):
    cli = _cli()
    monkeypatch.chdir(tmp_path)   # no checkpoints/ here: the default --prm_dir does not exist
    run, settings = cli.parse_command(["--methods", "single_pass", "mcts_logprob", "single_pass",
                                       "--gen_model_id", str(tiny_model_dir)])
    models = settings.models
    assert models.scorer_folders() == {"masprm": "checkpoints/Qwen2.5-1.5B-RM", "orm": None, "handoff_masprm": None}
    assert models.scorer_bases() == {"masprm": "Qwen/Qwen2.5-1.5B-Instruct", "orm": None, "handoff_masprm": None}
    cli.validate(run, settings)
    assert run.methods == ["single_pass", "mcts_logprob"]   # the original runs dict.fromkeys(methods): once each
    # Methods that use no MASPRM neither check nor load the default folder.
    assert set(cli.model_specs(settings, run)) == {"policy"}

    # The default base gives way to the base the adapter names; a given base is used as given.
    qwen = "Qwen/Qwen2.5-1.5B-Instruct"
    for recorded, given, expected in [(qwen, qwen, qwen), ("/models/tiny", qwen, "/models/tiny"),
                                      ("/models/tiny", "/models/other", "/models/other")]:
        folder = tmp_path / "scorer"
        folder.mkdir(exist_ok=True)
        (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": recorded}))
        assert cli.scorer_base(read_scorer_folder(folder), given, ROLES["masprm"]) == expected


def test_each_scorer_folder_is_read_once_for_the_checks_and_the_models(tmp_path, monkeypatch, tiny_model_dir,
                                                                      prm_dir):
    cli = _cli()
    reads, specs = [], {}
    monkeypatch.setattr(cli, "read_scorer_folder", lambda folder: reads.append(folder) or read_scorer_folder(folder))

    class Stop(Exception):
        pass

    def model_specs(settings, run, scorers=None):   # stage 4 up to its models, then stop before any data
        specs.update(real_specs(settings, run, scorers))
        raise Stop

    real_specs = cli.model_specs
    monkeypatch.setattr(cli, "model_specs", model_specs)
    with pytest.raises(Stop):
        cli.main(["--methods", "mcts_prm", "--prm_dir", str(prm_dir), "--gen_model_id", str(tiny_model_dir),
                  "--logs_dir", str(tmp_path / "logs"), "--device_map", "cpu"])
    assert reads == [str(prm_dir)] and specs["masprm"].scorer.path == Path(prm_dir)
