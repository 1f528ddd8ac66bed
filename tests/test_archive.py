"""Run archives (`masprm.archive`): a tiny run packed, verified, corrupted, unpacked elsewhere and read again
by stage 5 and `make report` to the same bytes; hostile archives refused in one line; pushing offline refused.

The tiny run is what each stage leaves on disk, written by the stages' own writers where one exists: a tree
folder with its settings (stage 1), a pairs file (stage 2), a scorer folder with training by-products
(stage 3: a pickle among them), stage-4 logs of two conditions at two seeds (`write_stage4_log`: stage 4's
writer), the aggregator's CSV (stage 5, its own main), the claims text and a step benchmark. Seconds, no model.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from pathlib import Path

import pytest

from helpers_stage4_logs import write_stage4_log
from helpers_trees import gsm8k_tree, write_trees
from masprm.archive import cli as archive_cli
from masprm.archive.commands import stage4_argv
from masprm.archive.format import ArchiveError, card_text, parse_manifest, safe_path, sha256_of
from masprm.archive.pack import pack
from masprm.archive.read import check, opened, unpack
from masprm.stages import aggregate
from masprm.published import blocks as report

RUN = "results/toy_res_train_policy_r2_c4_cand3_t0p7_p0p95"
TABLES = ["logs/toy_demo", "results/toy_demo_aggregated_results.csv", "results/toy_stepbench.json",
          "results/toy_demo_claims.txt"]
FULL = TABLES + [RUN, f"results/ppm_pairs_{Path(RUN).name}.jsonl", "checkpoints/toy-ppm"]
DOC = ("# Toy\n<!-- report: demo-table -->\nold\n<!-- /report -->\n<!-- report: demo-claims -->\nold\n"
       "<!-- /report -->\n<!-- report: stepbench -->\nold\n<!-- /report -->\n<!-- report: lab-table -->\n"
       "not run\n<!-- /report -->\n")


def condition_logs(logs: Path, method: str, fingerprint: str, label: str, budget: dict, accs: dict,
                   definition: dict | None = None, **record) -> None:
    """One condition at each seed of `accs` (seed -> pass@1), as stage 4 writes it (`definition`: the whole
    one, else method and settings only; `record`: more fields of its manifest)."""
    for seed, acc in accs.items():
        manifest = {"condition": method, "fingerprint": fingerprint, "seed": seed, **record,
                    "definition": definition or {"method": method, "settings": budget},
                    "facts": {"family": method.split("_")[0], "scorer_kind": method.split("_", 1)[1],
                              "routing": "static", "scorer_roles": [], "budget_keys": sorted(budget), "label": label}}
        records = [{"idx": i, "correct": i < 3, "pred": str(i), "gold": "2"} for i in range(4)]
        write_stage4_log(logs / f"toy_{method}_{fingerprint}_policy_{seed}", records, manifest, label=label,
                         summary={**{f"pass@{k}": acc for k in range(1, 11)}, "tokens_mean": 40.0 + seed,
                                  "tokens_std": 1.0, "tokens_n": 4, "generated_tokens_total": 160,
                                  "scorer_tokens_total": 80, "agent_runs_mean": 4.0})


@pytest.fixture
def tiny_run(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    trees = root / RUN
    write_trees(trees, [gsm8k_tree(), gsm8k_tree(0.5)])
    (trees / ".run_settings").write_text(json.dumps({"seed": 42, "dataset": "toy", "model": {
        "path": "/somewhere/artifacts/toy/policy", "identity": "90b75d04534326ba"}}))
    (root / f"results/ppm_pairs_{Path(RUN).name}.jsonl").write_text(
        '{"prompt": "q", "chosen": "a", "rejected": "b"}\n' * 3)
    scorer = root / "checkpoints/toy-ppm"
    (scorer / "checkpoint-2").mkdir(parents=True)
    (scorer / "masprm_scorer.json").write_text(json.dumps({"status": "completed", "mode": "ppm"}))
    (scorer / "adapter_config.json").write_text("{}")
    (scorer / "adapter_model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    (scorer / "training_args.bin").write_bytes(pickle.dumps({"lr": 1e-3}))   # a by-product, a pickle
    (scorer / "checkpoint-2" / "optimizer.pt").write_bytes(b"PK\x03\x04...")
    logs = root / "logs/toy_demo"
    # each fingerprint is stage 4's: stable_hash of the definition condition_logs records, {"method": "single_pass",
    # "settings": {}} and {"method": "sbs_prm", "settings": {"b1": 3, "b2": 5}}
    condition_logs(logs, "single_pass", "9c3b4b40e5", "Single pass", {}, {14: 0.25, 24: 0.5})
    condition_logs(logs, "sbs_prm", "9a608ebfb6", "SBS + PRM (B1=3, B2=5)", {"b1": 3, "b2": 5},
                   {14: 0.5, 24: 0.75})
    (logs / "toy_sbs_prm_9a608ebfb6_policy_42.partial.jsonl").write_text("{}\n")   # an unfinished condition
    (logs / "demo_output").mkdir()
    (logs / "demo_output" / "eval_main.out").write_text("progress\n")
    assert aggregate.main(["--logs_dir", str(logs), "--out", str(root / TABLES[1]), "--no_plot"]) == 0
    (root / TABLES[2]).write_text(json.dumps({"scorers": {"masprm": {
        "acc_erroneous": 0.6, "acc_correct": 0.7, "f1": 0.65, "auc": 0.7, "auc_by_agent": {"Reader": 0.5}}}}))
    (root / TABLES[3]).write_text("(i) SBS + PRM vs single pass: +25.0 points [+5.0, +45.0] (holds)\n")
    return root


def packed(root: Path, level: str = "tables", out: Path | None = None):
    return pack("toy_demo", FULL, root=root, out=out or root.parent / "archives", level=level,
                meta={"command": "make demo", "seeds": [14, 24]}, commands={TABLES[1]: "python aggregator.py ..."})


def cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """masprm-archive as a user runs it: its exit code, stdout and stderr."""
    old = sys.argv
    sys.argv = ["masprm-archive", *argv]
    try:
        with pytest.raises(SystemExit) as done:
            archive_cli.cli()
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def files_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_tiny_run_packs_verifies_and_unpacks_to_the_same_table_and_blocks(tiny_run, tmp_path, capsys):
    done = packed(tiny_run)
    assert done.created and done.path.name == "toy_demo-v1"
    listed = {e.path: e for e in done.manifest.files}
    # tables level: the logs' own files (not the unfinished one, not the command outputs) and the three results
    assert {p.split("/")[0] for p in listed} == {"logs", "results"}
    assert len([p for p in listed if p.startswith("logs/")]) == 2 * 2 * 4   # 2 conditions x 2 seeds x 4 files
    assert not any("partial" in p or "demo_output" in p for p in listed)
    records = listed["logs/toy_demo/toy_sbs_prm_9a608ebfb6_policy_14.jsonl"]
    assert records.gzip and records.fingerprint == "9a608ebfb6" and (done.path / records.stored).is_file()
    assert listed[TABLES[1]].command == "python aggregator.py ..."
    assert cli(["verify", str(done.path)], capsys)[0] == 0

    elsewhere = tmp_path / "elsewhere"
    assert cli(["unpack", str(done.path), "--to", str(elsewhere)], capsys)[0] == 0
    originals = files_under(tiny_run)
    assert all(originals[rel] == data for rel, data in files_under(elsewhere).items())   # byte for byte
    # and with the run's times: the claims and the lab keep the newest of two conditions by its log's time
    assert all((elsewhere / rel).stat().st_mtime_ns == (tiny_run / rel).stat().st_mtime_ns for rel in listed)
    # stage 5 on the unpacked logs, and straight from the archive, gives the run's CSV to the byte
    for flags in (["--logs_dir", str(elsewhere / "logs/toy_demo")], ["--archive", str(done.path)]):
        out = tmp_path / "again.csv"
        assert aggregate.main([*flags, "--out", str(out), "--no_plot"]) == 0
        assert out.read_bytes() == (tiny_run / TABLES[1]).read_bytes()
    # make report: the blocks from the archive are those from the run's own files, plus the line naming it
    docs_run, docs_archive = tmp_path / "a" / "docs", tmp_path / "b" / "docs"
    for docs in (docs_run, docs_archive):
        docs.mkdir(parents=True)
        (docs / "toy.md").write_text(DOC)
    assert report.main(["--docs", str(docs_run), "--results", str(tiny_run / "results"),
                        "--logs_dir", str(tiny_run / "logs/toy_demo")]) == 0
    assert report.main(["--docs", str(docs_archive), "--archives", str(done.path.parent)]) == 0
    from_run, from_archive = (d.joinpath("toy.md").read_text() for d in (docs_run, docs_archive))
    assert "| sbs_prm | 3x5 | 62.5 ± 17.7 |" in from_run   # mean of 50 and 75; sample std 17.7
    for name in report.DEMO_BLOCKS:
        body = report.block_body(from_archive, name)
        assert report.without_source(body) == report.without_source(report.block_body(from_run, name)) != "old"
    assert from_archive.count(f"from the archive `{os.path.relpath(done.path, docs_archive.parent)}`") == 3


def test_the_full_level_adds_trees_records_and_scorers_never_their_pickles(tiny_run, tmp_path):
    done = packed(tiny_run, "full")
    parts = {e.path: e.part for e in done.manifest.files}
    assert parts[f"{RUN}/0.json"] == "trees" and parts[f"{RUN}/.run_settings"] == "trees"
    assert parts[f"results/ppm_pairs_{Path(RUN).name}.jsonl"] == "stage2"
    scorer = sorted(p for p, part in parts.items() if part == "scorer")
    assert scorer == ["checkpoints/toy-ppm/adapter_config.json", "checkpoints/toy-ppm/adapter_model.safetensors",
                      "checkpoints/toy-ppm/masprm_scorer.json"]   # no training_args.bin, no checkpoint-2/
    assert "checkpoints/toy-ppm/training_args.bin (kind)" in done.left_out
    assert not check(done.path)[1]
    # a tree folder's fingerprint leaves its absolute paths out: another machine's run has the same one
    assert len({e.fingerprint for e in done.manifest.files if e.part == "trees"}) == 1
    unpack(done.path, tmp_path / "copy")
    assert (tmp_path / "copy" / RUN / "0.json").read_bytes() == (tiny_run / RUN / "0.json").read_bytes()


def test_the_same_files_make_no_new_version_and_a_changed_one_does(tiny_run):
    first = packed(tiny_run)
    again = packed(tiny_run)
    assert not again.created and again.path == first.path
    (tiny_run / TABLES[3]).write_text("(i) changed\n")
    assert packed(tiny_run).path.name == "toy_demo-v2"


@pytest.mark.parametrize("stored", ["logs/toy_demo/toy_single_pass_9c3b4b40e5_policy_14.txt",
                                    "logs/toy_demo/toy_single_pass_9c3b4b40e5_policy_14.jsonl.gz"])
def test_one_corrupt_byte_fails_verify_in_one_line_naming_the_file(tiny_run, tmp_path, capsys, stored):
    done = packed(tiny_run)
    path = done.path / "data" / stored
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    code, out, err = cli(["verify", str(done.path)], capsys)
    assert code == 1 and out == "" and err.count("\n") == 1 and str(path) in err and "differs" in err
    target = tmp_path / "out"
    code, _, err = cli(["unpack", str(done.path), "--to", str(target)], capsys)
    assert code == 2 and err.count("\n") == 1 and str(path) in err and not target.exists()


def test_a_file_not_in_the_manifest_or_a_missing_one_fails_verify(tiny_run, capsys):
    done = packed(tiny_run)
    (done.path / "data" / "results" / "extra.txt").write_text("x")
    (done.path / "data" / TABLES[3]).unlink()
    code, _, err = cli(["verify", str(done.path)], capsys)
    lines = err.splitlines()
    assert code == 1 and len(lines) == 2
    assert "extra.txt: not in the manifest" in lines[0] and "toy_demo_claims.txt: missing" in lines[1]


def edit_manifest(archive: Path, change) -> None:
    path = archive / "manifest.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def first_txt(data: dict) -> dict:
    return next(f for f in data["files"] if f["path"].endswith(".txt"))


HOSTILE = {
    "a ../ path": lambda a: edit_manifest(a, lambda d: first_txt(d).update(path="../../escaped.txt")),
    "an absolute path": lambda a: edit_manifest(a, lambda d: first_txt(d).update(path="/tmp/escaped.txt")),
    "a link": lambda a: os.symlink("/etc/hostname", a / "data" / "results" / "link.txt"),
    "a linked folder": lambda a: os.symlink("/etc", a / "data" / "etc"),
    "a pickle's name": lambda a: (a / "data" / "results" / "model.pkl").write_bytes(pickle.dumps(1)),
    "a listed pickle": lambda a: edit_manifest(a, lambda d: first_txt(d).update(path="logs/x.bin")),
    "a pickle's bytes": lambda a: (a / "data" / TABLES[3]).write_bytes(pickle.dumps(os.system)),
    "a malformed manifest": lambda a: (a / "manifest.json").write_text("[1, 2"),
}


@pytest.mark.parametrize("problem", sorted(HOSTILE))
def test_an_unsafe_archive_is_refused_in_one_line_and_nothing_is_written(tiny_run, tmp_path, capsys, problem):
    done = packed(tiny_run)
    if problem == "a pickle's bytes":   # listed with its own checksum, as a hostile packer would list it
        HOSTILE[problem](done.path)
        entry = {"path": TABLES[3], "part": "results", "size": (done.path / "data" / TABLES[3]).stat().st_size}
        from masprm.archive.format import sha256_of
        entry["sha256"] = sha256_of((done.path / "data" / TABLES[3]).read_bytes())
        edit_manifest(done.path, lambda d: [f.update(entry) for f in d["files"] if f["path"] == TABLES[3]])
    else:
        HOSTILE[problem](done.path)
    with pytest.raises(ArchiveError):
        check(done.path)
    target = tmp_path / "target"
    for argv in (["verify", str(done.path)], ["unpack", str(done.path), "--to", str(target)]):
        code, out, err = cli(argv, capsys)
        assert code == 2 and err.count("\n") == 1 and "masprm-archive: error:" in err
    assert not target.exists() and not (tmp_path / "escaped.txt").exists()


@pytest.mark.parametrize("path", ["", "a//b.txt", "./a.txt", "a/../b.txt", "C:/x.txt", "a\\..\\b.txt", "a\0.txt"])
def test_paths_that_could_leave_the_folder_are_refused(path):
    with pytest.raises(ArchiveError):
        safe_path(path, "manifest.json")


def test_unpack_never_replaces_a_file_that_differs_and_skips_one_that_is_the_same(tiny_run, tmp_path, capsys):
    done = packed(tiny_run)
    target = tmp_path / "target"
    (target / "results").mkdir(parents=True)
    (target / TABLES[3]).write_text("mine\n")
    code, _, err = cli(["unpack", str(done.path), "--to", str(target)], capsys)
    assert code == 2 and "exists and differs" in err and (target / TABLES[3]).read_text() == "mine\n"
    assert sorted(p.name for p in target.rglob("*")) == ["results", "toy_demo_claims.txt"]   # nothing else written
    (target / TABLES[3]).write_bytes((tiny_run / TABLES[3]).read_bytes())
    assert unpack(done.path, target)[1] == [TABLES[3]]   # already there with the same bytes: skipped


def test_opened_gives_a_checked_copy_and_removes_it(tiny_run):
    done = packed(tiny_run)
    with opened(done.path) as root:
        assert (root / TABLES[1]).read_bytes() == (tiny_run / TABLES[1]).read_bytes()
    assert not root.exists()


def test_push_offline_is_one_line_with_the_command_to_run_later(tiny_run, capsys, monkeypatch):
    done = packed(tiny_run)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = cli(["push", str(done.path), "--repo_id", "me/toy-demo"], capsys)
    assert code == 2 and err.count("\n") == 1 and "HF_HUB_OFFLINE" in err
    assert f"masprm-archive push {done.path} --repo_id me/toy-demo" in err
    code, _, err = cli(["push", str(done.path), "--repo_id", "no owner"], capsys)
    assert code == 2 and "--repo_id" in err


def test_push_sends_the_folder_as_a_dataset_and_tags_its_version(tiny_run, capsys, monkeypatch):
    done = packed(tiny_run)
    calls = []

    class Api:   # the Hub client's three calls, recorded
        def create_repo(self, repo_id, **kw):
            calls.append(("create_repo", repo_id, kw["repo_type"]))

        def upload_folder(self, **kw):
            calls.append(("upload_folder", kw["repo_id"], kw["repo_type"], kw["folder_path"]))
            return "https://hub/commit/1"

        def create_tag(self, repo_id, **kw):
            calls.append(("create_tag", repo_id, kw["tag"]))

    import huggingface_hub
    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    monkeypatch.setattr(archive_cli, "offline_reason", lambda: None)
    assert cli(["push", str(done.path), "--repo_id", "me/toy-demo"], capsys)[0] == 0
    assert calls == [("create_repo", "me/toy-demo", "dataset"),
                     ("upload_folder", "me/toy-demo", "dataset", str(done.path)), ("create_tag", "me/toy-demo", "v1")]


def test_report_check_regenerates_from_archives_names_blocks_with_none_and_prints_diffs(tiny_run, tmp_path,
                                                                                         capsys):
    checkout = tmp_path / "clone"   # a fresh clone: docs and archives, no results, no logs
    (checkout / "docs").mkdir(parents=True)
    (checkout / "docs" / "toy.md").write_text(DOC)
    packed(tiny_run, out=checkout / "archives")
    flags = ["--docs", str(checkout / "docs"), "--results", str(checkout / "results")]
    assert report.main([*flags, "--check"]) == 1
    out = capsys.readouterr().out
    # each differing block as a unified diff: its old line out, the archive's table in
    assert f"--- {checkout / 'docs' / 'toy.md'} [demo-table] (in the doc)" in out
    assert "\n-old\n" in out and "\n+| sbs_prm | 3x5 | 62.5 ± 17.7 |" in out
    assert "lab-table (" in out and "report: 1 doc(s) differ" in out   # no archive holds the lab's table
    assert (checkout / "docs" / "toy.md").read_text() == DOC   # --check writes nothing
    assert report.main(flags) == 0 and report.main([*flags, "--check"]) == 0
    assert "not run" in (checkout / "docs" / "toy.md").read_text()   # the block with no source left as it was


def test_the_demo_says_whether_its_numbers_match_the_published_ones(tiny_run, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "toy_world.md").write_text(DOC)
    results, logs = tiny_run / "results", tiny_run / "logs/toy_demo"
    verdict = report.demo_verdict(docs, results, logs)
    assert verdict.startswith("differs from the published numbers in 3 block(s): demo-table (") and \
        "toy_world.md" in verdict and "make report-check" in verdict
    done = packed(tiny_run, out=tmp_path / "archives")   # published from the archive: its line does not count
    assert report.main(["--docs", str(docs), "--archives", str(done.path.parent)]) == 0
    assert report.demo_verdict(docs, results, logs).startswith("matches the published numbers")


def test_the_demo_packs_what_it_made_once_and_its_archive_flags_are_checked(tiny_run, monkeypatch, capsys):
    from types import SimpleNamespace

    from masprm.stages import demo

    from masprm.running import commands
    from masprm.running.run_archive import ArchiveFlags, archive_run, demo_paths
    from masprm.worlds.runs import WORLD_RUNS

    monkeypatch.setattr(commands, "ROOT", tiny_run)
    world = WORLD_RUNS["toy"]
    made = SimpleNamespace(aggregate=["python", "aggregator.py"], stepbench=["python", "-m", "masprm.instruments.stepbench"],
                           claims=["python", "-m", "masprm.instruments.claims"], trees=["python", "src/run_mcts.py"],
                           pairs=["python", "src/train/preprocess_data.py"],
                           scorers=[SimpleNamespace(data=f"results/ppm_pairs_{Path(RUN).name}.jsonl",
                                                    out="checkpoints/toy-ppm", cmd=["python", "src/train/trainer.py"])])
    paths = demo_paths(world, made, RUN)
    done = archive_run(ArchiveFlags(), "toy_demo", paths, command="make demo", seeds=[14, 24], train_seed=42,
                       world=world)
    assert done.path == tiny_run / "archives" / "toy_demo-v1" and done.manifest.level == "tables"
    assert done.manifest.meta["command"] == "make demo" and done.manifest.meta["seeds"] == [14, 24]
    commands = {e.path: e.command for e in done.manifest.files}
    assert commands[TABLES[1]] == "python aggregator.py" and commands[TABLES[3]] == "python -m masprm.instruments.claims"
    assert "$ python -m masprm.archive pack toy_demo logs/toy_demo" in capsys.readouterr().out
    again = archive_run(ArchiveFlags(), "toy_demo", paths, command="make demo", seeds=[14, 24], train_seed=42,
                        world=world)
    assert not again.created and "already holds these files" in capsys.readouterr().out
    assert archive_run(ArchiveFlags(no_archive=True), "toy_demo", paths, command="make demo", seeds=[14],
                       train_seed=42, world=world) is None
    assert demo.run_command([], world) == "make demo"
    assert demo.run_command(["--no_archive"], world) == "python src/demo.py --no_archive"
    with pytest.raises(SystemExit) as refused:
        demo.main(["--archive_level", "most", "--dry_run"])
    assert refused.value.code == 2 and "--archive_level" in capsys.readouterr().err


REPO = Path(__file__).resolve().parents[1]
ARCHIVES_BUDGET = 4 * 2**20   # the repository's archives, all together (docs/sharing.md, "The archives in this repository")


def test_the_repositorys_archives_verify_hold_tables_only_and_stay_small():
    found = sorted(p for p in (REPO / "archives").iterdir() if p.is_dir())
    assert "toy_demo-v1" in [p.name for p in found]
    for archive in found:
        manifest, problems = check(archive)
        assert not problems and manifest.level == "tables"
    assert sum(f.stat().st_size for a in found for f in a.rglob("*") if f.is_file()) <= ARCHIVES_BUDGET


def test_report_check_in_a_fresh_clone_regenerates_the_blocks_of_the_checked_in_archives(tmp_path, capsys):
    # a fresh clone: the docs and the archives, no results and no logs
    none = str(tmp_path / "none")
    assert report.main(["--docs", str(REPO / "docs"), "--results", none, "--logs_dir", none, "--check"]) == 0
    out = capsys.readouterr().out
    assert "demo-table (archives/toy_demo-v1)" in out and "stepbench (archives/toy_demo-v1)" in out
    assert "lab-table (" in out   # the replicated toy lab's outputs are lost: named, left as they are


# --------------------------------------------------------------------------- commands reproduce fingerprints

# A condition as stage 4 defines it: sbs_logprob run by STAGE4_COMMAND. Its settings are the method's as stage 4
# records them: --b1 3 --b2 5 as given, the rest the flags' defaults (top_p 0.95, max_new_tokens 1024,
# sbs_temperature 1.0, logprob_agg sum); the team's and the policy's contents and the code version name what
# an archive does not hold, taken as recorded. Its fingerprint is stable_hash(CMD_DEFINITION): 424c8bfbc6.
CMD_DEFINITION = {"method": "sbs_logprob",
                  "settings": {"top_p": 0.95, "max_new_tokens": 1024, "sbs_temperature": 1.0, "b1": 3, "b2": 5,
                               "logprob_agg": "sum"},
                  "data": {"dataset": "toy", "split": "test", "sample_n": 4, "data_file": None},
                  "mas_config": "d00a858bc6d1db37",
                  "models": {"policy": {"id": "artifacts/toy/policy", "base": None, "content": "90b75d04534326ba",
                                        "base_content": None, "load_in_4bit": False}},
                  "code_version": "246c76482f01"}
CMD_FINGERPRINT = "424c8bfbc6"
STAGE4_COMMAND = ("python src/experiments/compare_sbs_mcts.py --dataset toy --sample_n 4 --gen_model_id "
                  "artifacts/toy/policy --mas_config configs/toy.yaml --methods single_pass sbs_logprob --b1 3 --b2 5 "
                  "--seeds 14 24 --logs_dir logs/toy_cmd --device_map cpu")
CMD_LOG = f"logs/toy_cmd/toy_sbs_logprob_{CMD_FINGERPRINT}_policy_14"


def packed_with_command(root: Path):
    """The tiny run's tables and a logs folder made by STAGE4_COMMAND, recorded as its command."""
    condition_logs(root / "logs/toy_cmd", "sbs_logprob", CMD_FINGERPRINT, "SBS + logprob (B1=3, B2=5)", {},
                   {14: 0.5, 24: 0.75}, CMD_DEFINITION, mas_config_path="configs/toy.yaml")
    return pack("toy_demo", TABLES + ["logs/toy_cmd"], root=root, out=root.parent / "archives", level="tables",
                meta={"command": "make demo"}, commands={"logs/toy_cmd": STAGE4_COMMAND})


def resealed(archive: Path, change) -> None:
    """The manifest changed by `change` and the card made again for it: every checksum still passes."""
    edit_manifest(archive, change)
    manifest = parse_manifest((archive / "manifest.json").read_text())
    (archive / "manifest.json").write_text(manifest.text())   # the card records the hash of this text
    (archive / "README.md").write_text(card_text(manifest))


def test_a_stage4_logs_recorded_command_reproduces_its_fingerprint(tiny_run, capsys):
    done = packed_with_command(tiny_run)
    assert {e.command for e in done.manifest.files if e.path.startswith("logs/toy_cmd/")} == {STAGE4_COMMAND}
    code, out, err = cli(["verify", str(done.path)], capsys)
    assert code == 0 and err == ""


@pytest.mark.parametrize("edit, expected", [
    (("--b1 3", "--b1 4"), "its command gives b1=4, the log records 3"),
    (("--sample_n 4", "--sample_n 8"), "its command gives sample_n=8, the log records 4"),
    (("single_pass sbs_logprob", "single_pass sbs_prm"), "do not hold its method sbs_logprob"),
    (("--seeds 14 24", "--seed 42"), "its command runs seed(s) 42, the log is seed 14"),
    (("artifacts/toy/policy", "Qwen/Qwen2.5-1.5B-Instruct"), "gen_model_id='Qwen/Qwen2.5-1.5B-Instruct'"),
    (("--b1 3", "--b1 three"), "not one stage 4 accepts (argument --b1: invalid int value"),
])
def test_an_edited_command_fails_verify_naming_the_file(tiny_run, capsys, edit, expected):
    done = packed_with_command(tiny_run)
    text_log = f"{CMD_LOG}.txt"

    def edit_one(data):   # the seed-14 text log's command only: its other files keep the true one
        entry = next(f for f in data["files"] if f["path"] == text_log)
        entry["command"] = entry["command"].replace(*edit)
    resealed(done.path, edit_one)
    code, out, err = cli(["verify", str(done.path)], capsys)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert str(done.path / "data" / text_log) in err and f"fingerprint {CMD_FINGERPRINT} not reproduced" in err
    assert expected in err


def test_an_edited_definition_fails_for_each_file_of_its_condition(tiny_run, capsys):
    done = packed_with_command(tiny_run)
    sidecar = done.path / "data" / f"{CMD_LOG}.manifest.json"
    record = json.loads(sidecar.read_text())
    record["definition"]["settings"]["b1"] = 4   # what the fingerprint was not computed from
    sidecar.write_text(json.dumps(record))
    data = sidecar.read_bytes()
    resealed(done.path, lambda d: [f.update(size=len(data), sha256=sha256_of(data)) for f in d["files"]
                                   if f["path"] == f"{CMD_LOG}.manifest.json"])
    code, _, err = cli(["verify", str(done.path)], capsys)
    # the seed-14 condition's four files (text log, records, manifest, summary) each list the command
    assert code == 1 and err.count("\n") == 4 and err.count("not its fingerprint 424c8bfbc6") == 4
    assert f"{CMD_LOG}.txt" in err and f"{CMD_LOG}.jsonl.gz" in err


def test_a_log_without_a_command_is_checked_against_its_own_record_only(tiny_run, capsys):
    # the tiny run's logs name no command (as the demo's: several stage-4 commands wrote one folder): that is no
    # error, and each fingerprint is still checked against the condition's recorded definition and file name
    done = packed(tiny_run)
    assert check(done.path)[1] == []
    stem = "logs/toy_demo/toy_single_pass_9c3b4b40e5_policy_24"
    resealed(done.path, lambda d: [f.update(fingerprint="0123456789") for f in d["files"]
                                   if f["path"] == f"{stem}.summary.json"])
    code, _, err = cli(["verify", str(done.path)], capsys)
    assert code == 1 and err.count("\n") == 1 and f"{stem}.summary.json" in err
    assert "its condition's manifest records fingerprint 9c3b4b40e5, the archive's 0123456789" in err
    # a command that is not stage 4's, or that reads a run file, is not parsed
    assert stage4_argv("make demo") is None and stage4_argv("masprm-eval --config configs/runs/eval.yaml") is None
    assert stage4_argv("masprm-eval --methods single_pass") == ["--methods", "single_pass"]
