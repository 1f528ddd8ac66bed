"""--config FILE: every command's settings from a YAML run file, the command line winning (masprm.run_config).

The shipped examples (configs/runs/) are the demo's own commands: parsed, each gives the namespace its
stage's demo command gives. A bad file is refused in one line naming the file and the key, exit 2, before
any work; a team config given to --config is read as --mas_config (stage 2's old spelling).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import REPO, snapshot
from helpers_cli import command_modules, command_parser

from masprm import run_config
from masprm.stages import aggregate, evaluate, train, trees
from masprm.stages.demo import DemoArgs, commands

RUNS = REPO / "configs" / "runs"


def write(tmp_path: Path, data, name: str = "run.yaml") -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def refusal(parser, argv: list[str], capsys) -> str:
    """The one stderr line of a refused parse (exit 2)."""
    with pytest.raises(SystemExit) as done:
        parser.parse_args(argv)
    assert done.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# --------------------------------------------------------------------------- the examples are the demo's commands


def demo_stage_args(cmd: list[str]) -> list[str]:
    """A demo command's flags: without the interpreter and script, and without --quiet (the demo trains quietly;
    the example shows training's progress)."""
    return [token for token in cmd[2:] if token != "--quiet"]


DEMO = commands(DemoArgs())
EXAMPLES = [("toy_stage1_trees.yaml", trees.build_parser, DEMO.trees),
            ("toy_stage3_train.yaml", train.build_parser, DEMO.scorers[0].cmd),
            ("toy_stage4_eval.yaml", evaluate.build_parser, DEMO.evals["eval_main"]),
            ("toy_stage5_aggregate.yaml", lambda: command_parser(aggregate.__name__), DEMO.aggregate)]


@pytest.mark.parametrize("name,parser,cmd", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_each_stage_example_is_the_demos_command(name, parser, cmd):
    from_file = vars(parser().parse_args(["--config", str(RUNS / name)]))
    typed = vars(parser().parse_args(demo_stage_args(cmd)))
    assert from_file == typed


def test_there_is_one_example_per_stage():
    assert sorted(p.name for p in RUNS.glob("*.yaml")) == [
        "toy_stage1_trees.yaml", "toy_stage2_pairs.yaml", "toy_stage3_train.yaml", "toy_stage4_eval.yaml",
        "toy_stage5_aggregate.yaml"]


# --------------------------------------------------------------------------- precedence and values


def test_a_flag_on_the_command_line_wins_over_the_file(tmp_path):
    path = write(tmp_path, {"mode": "ppm", "epochs": 3, "lora_r": 4, "data_dir": "x.jsonl"})
    args = train.build_parser().parse_args(["--epochs", "5", "--config", path, "--lora-r", "8"])
    # the file's mode and data stay; both typed flags win, wherever --config stands among them
    assert (args.mode, args.data_file, args.epochs, args.lora_r) == ("ppm", "x.jsonl", 5.0, 8)


def test_keys_take_either_spelling_and_switches_take_true_or_false(tmp_path):
    path = write(tmp_path, {"mode": "orm", "data_dir": "x.jsonl", "grad-accum": 2, "lora": False, "resume": True,
                            "lr": None})   # null: the default stays
    args = train.build_parser().parse_args(["--config", path])
    assert (args.grad_accum, args.lora, args.resume) == (2, False, True)
    assert args.lr == train.build_parser().parse_args(["--mode", "orm"]).lr
    assert not hasattr(args, run_config.DEST)   # no setting of its own: nothing downstream sees it


def test_a_value_that_starts_with_a_dash_stays_a_value(tmp_path):
    path = write(tmp_path, {"mode": "ppm", "step_separator": "-x-"})
    args = train.build_parser().parse_args(["--config", path])
    assert args.separator == "-x-"   # given as --step-separator=-x-, not read as a flag
    from masprm.stages.preprocess import parse_args
    assert parse_args(["--config", write(tmp_path, {"ppm_root_window": [-0.5, 0.5]}, "s2.yaml")]).ppm_root_window \
        == [-0.5, 0.5]


def test_lists_fill_flags_of_several_values(tmp_path):
    path = write(tmp_path, {"seeds": [1, 2], "methods": ["single_pass", "sbs_logprob"]})
    args = evaluate.build_parser().parse_args(["--config", path])
    assert (args.seeds, args.methods) == ([1, 2], ["single_pass", "sbs_logprob"])


# --------------------------------------------------------------------------- refusals: one line, exit 2


@pytest.mark.parametrize("content,expected", [
    ({"epoch": 3}, "key 'epoch': no such setting (did you mean 'epochs'?)"),
    ({"epochs": [3]}, "key 'epochs': expected a value for --epochs, got a list"),
    ({"lora_r": 2.5}, "key 'lora_r': invalid int value: '2.5'"),
    ({"lora_r": True}, "key 'lora_r': expected a value for --lora-r, got true/false"),
    ({"epochs": "many"}, "key 'epochs': invalid float value: 'many'"),
    ({"epochs": float("nan")}, "key 'epochs': must be a finite number"),
    ({"mode": "nope"}, "key 'mode': invalid choice: 'nope'"),
    ({"resume": "yes"}, "key 'resume': --resume is a switch: give true or false, got 'yes'"),
    ({"mode": {"a": 1}}, "key 'mode': expected a value for --mode, got a mapping"),
    (["mode", "ppm"], "expected a mapping of settings (key: value), got list"),
    ("", "expected a mapping of settings (key: value), got an empty file"),
    ("mode: [ppm\n", "not valid YAML"),
    ("mode: ppm\nmode: orm\n", "not valid YAML"),   # a key twice: the project's YAML loader refuses it
])
def test_a_bad_run_file_is_one_line_naming_the_file_and_key(tmp_path, capsys, content, expected):
    path = write(tmp_path, content)
    line = refusal(train.build_parser(), ["--config", path], capsys)
    assert line.startswith(f"-: error: --config {path}") or f"--config {path}" in line
    assert expected in line


def test_a_missing_or_unreadable_run_file_is_named(tmp_path, capsys):
    assert f"--config {tmp_path}/none.yaml: no such file" in refusal(
        train.build_parser(), ["--config", str(tmp_path / "none.yaml")], capsys)
    assert f"--config {tmp_path}: a folder" in refusal(train.build_parser(), ["--config", str(tmp_path)], capsys)
    (tmp_path / "latin1.yaml").write_bytes(b"mode: caf\xe9\n")
    assert "not UTF-8" in refusal(train.build_parser(), ["--config", str(tmp_path / "latin1.yaml")], capsys)


def test_an_abbreviated_config_flag_is_refused_not_ignored(capsys):
    assert "spell the flag out in full" in refusal(train.build_parser(), ["--conf", "x.yaml"], capsys)


def test_a_refused_run_file_stops_the_command_before_any_work_and_writes_nothing(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    path = write(tmp_path, {"logs_dir": str(logs), "out": str(tmp_path / "out.csv"), "no_plott": True})
    before = snapshot(tmp_path)
    done = subprocess.run([sys.executable, str(REPO / "aggregator.py"), "--config", path], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"aggregator.py: error: --config {path}: key 'no_plott': no such setting (did you mean 'no_plot'?); the "
        "settings are the flags of --help without their dashes (see --help)"]
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- a team config at --config


def test_a_team_config_at_config_is_the_team_where_the_command_takes_one():
    args = trees.build_parser().parse_args(["--config", "configs/toy.yaml"])
    assert args.mas_config == "configs/toy.yaml"
    assert trees.build_parser().parse_args(["--config", "toy"]).mas_config == "toy"   # a shipped team by its name


def test_a_team_config_at_config_of_a_command_without_a_team_is_refused(capsys):
    line = refusal(train.build_parser(), ["--config", "configs/toy.yaml"], capsys)
    assert "--config configs/toy.yaml: a team config (agents: ...), and this command takes no team" in line


# --------------------------------------------------------------------------- every command has it


@pytest.mark.parametrize("module", command_modules())
def test_every_command_offers_config_with_help(module):
    parser = command_parser(module)
    text = parser.format_help()
    subcommands = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    if subcommands:   # each subcommand has its own (a run file holds one subcommand's settings)
        assert all("--config FILE" in sub.format_help() for a in subcommands for sub in a.choices.values())
    else:
        assert "--config FILE" in text


# --------------------------------------------------------------------------- stage 2: --mas_config, the old --config


def test_stage2_example_is_the_demos_command():
    from masprm.stages.preprocess import parse_args
    from_file = vars(parse_args(["--config", str(RUNS / "toy_stage2_pairs.yaml")]))
    assert from_file == vars(parse_args(demo_stage_args(DEMO.pairs)))
    assert from_file["config"] == Path("configs/toy.yaml")   # the team: --mas_config (setting `config`)


def test_stage2_team_by_mas_config_by_the_old_config_or_in_a_run_file_writes_the_same(tmp_path, monkeypatch):
    from helpers_trees import preprocess_workdir
    from masprm.stages.preprocess import main

    run = "gsm8k_res_train_m_r40_c4_cand3_t0p7_p0p95"
    monkeypatch.chdir(tmp_path)
    preprocess_workdir(tmp_path, run)
    base = ["--input", f"results/{run}", "--target-nodes", "5", "--make-ppm", "--view", "local"]
    settings = write(tmp_path, {"mas_config": "configs/gsm8k.yaml"}, "stage2.yaml")
    written = []
    for team in (["--mas_config", "configs/gsm8k.yaml"], ["--config", "configs/gsm8k.yaml"],
                 ["--config", settings]):
        for old in (tmp_path / "results").glob("*.jsonl"):   # each spelling writes its own outputs
            old.unlink()
        assert main(base + team) == 0
        written.append({p.name: p.read_bytes() for p in (tmp_path / "results").glob("*.jsonl")})
    assert written[0] and written[0] == written[1] == written[2]
