"""The config-dataclass -> argparse builder."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from masprm.cli import ArgumentParser
from masprm.config import add_config_args, arg, config_from_args, config_help, flag_names, require, require_each


@dataclass
class Example:
    mode: str = arg(choices=("ppm", "prm"), help="the objective")
    model_id: str = arg("base", flags=("--model-id", "--model_id"), help="base model")
    epochs: float = arg(10.0)
    lora: bool = arg(True, flags=("--no-lora",), action="store_false")
    load_in_4bit: bool | None = arg(None)
    dedupe: bool = arg(True)
    resume: bool = arg(False)
    window: tuple[float, float] = arg((-0.7, 0.7), nargs=2, metavar=("LO", "HI"))
    folder: Path | None = arg(None)
    library_only: int = 3


def parse(argv, **kwargs):
    parser = ArgumentParser(prog="x")
    add_config_args(parser, Example, **kwargs)
    return parser, parser.parse_args(argv)


def test_defaults_types_and_both_spellings():
    _, ns = parse(["--mode", "ppm"])
    cfg = config_from_args(Example, ns)
    assert cfg == Example(mode="ppm")
    _, ns = parse(["--mode", "prm", "--model_id", "m", "--epochs", "2", "--no-lora", "--no-load-in-4bit",
                   "--no-dedupe", "--resume", "--window", "-1", "0.5", "--folder", "f"])
    cfg = config_from_args(Example, ns)
    assert (cfg.model_id, cfg.epochs, cfg.lora, cfg.load_in_4bit, cfg.dedupe, cfg.resume) == \
        ("m", 2.0, False, False, False, True)
    assert list(cfg.window) == [-1.0, 0.5] and cfg.folder == Path("f") and cfg.library_only == 3
    assert not hasattr(ns, "library_only")   # a field without arg() is no flag


def test_required_choices_and_finite_floats_are_checked_by_argparse(capsys):
    for argv in ([], ["--mode", "orm"], ["--mode", "ppm", "--epochs", "nan"]):
        with pytest.raises(SystemExit) as code:
            parse(argv)
        assert code.value.code == 2
    assert "--epochs" in capsys.readouterr().err


def test_subsets_and_overridden_defaults():
    parser, ns = parse(["--mode", "ppm"], only=["mode", "epochs"], defaults={"epochs": 3.0})
    assert vars(ns) == {"mode": "ppm", "epochs": 3.0}
    _, ns = parse([], skip=["mode"])
    assert "mode" not in vars(ns)
    with pytest.raises(TypeError, match="library_only"):
        parse(["--mode", "ppm"], defaults={"library_only": 1})


def test_help_and_flag_names_come_from_the_field():
    parser, _ = parse(["--mode", "ppm"])
    text = parser.format_help()
    assert "--model-id MODEL_ID, --model_id MODEL_ID" in text and "base model" in text
    assert flag_names(Example, "model_id") == ("--model-id", "--model_id")
    assert flag_names(Example, "load_in_4bit") == ("--load-in-4bit",)
    assert config_help(Example, "mode") == "the objective"


def test_config_from_args_overrides_and_ignores_other_attributes():
    cfg = config_from_args(Example, {"mode": "ppm", "unrelated": 1}, epochs=4.0)
    assert cfg.epochs == 4.0 and cfg.mode == "ppm"


@dataclass
class WithPositional:
    tree: str = arg(positional=True, help="a file")
    depth: int | None = arg(None, flags=("--max_depth",))


def test_positional_argument_and_underscore_spelling():
    parser = ArgumentParser(prog="x")
    add_config_args(parser, WithPositional)
    cfg = config_from_args(WithPositional, parser.parse_args(["t.json", "--max_depth", "3"]))
    assert cfg == WithPositional(tree="t.json", depth=3)
    with pytest.raises(SystemExit):
        parser.parse_args([])   # the positional is required


# --------------------------------------------------------------------------- settings classes of a stage


@dataclass(frozen=True)
class Sampling:
    top_p: float = arg(0.95, flags=("--top_p",))
    n: int | None = arg(None, flags=("--n",))

    def __post_init__(self) -> None:
        require(0 < self.top_p <= 1, "top_p", f"top_p must be in (0, 1], got {self.top_p}")
        require_each(self, ("n",), lambda v: v >= 1, "must be >= 1")


@dataclass(frozen=True)
class Beam:
    top_p: float = arg(0.95, flags=("--top_p",))   # shared with Sampling: one flag
    width: int = arg(3, flags=("--width",))
    label: str = "library only"


def test_a_stage_adds_each_classes_flags_once_in_their_groups_and_builds_checked_settings():
    from masprm.cli import PARSED_FLAGS, error_line
    from masprm.config import add_settings_args, group_classes, settings_from_args
    from masprm.errors import ConfigError

    groups = ((None, (Sampling,)), ("beam", (Beam,)))
    parser = ArgumentParser(prog="x")
    add_settings_args(parser, groups)
    assert [a.dest for a in parser._actions if a.dest not in ("help", "version")] == ["top_p", "n", "width"]
    assert [g.title for g in parser._action_groups][-1] == "beam"
    built = settings_from_args(group_classes(groups), parser.parse_args(["--top_p", "0.5", "--width", "2"]))
    assert built == {Sampling: Sampling(0.5, None), Beam: Beam(0.5, 2)}
    for argv, line in ((["--n", "0"], "--n must be >= 1, got 0"),
                       (["--top_p", "2"], "--top_p must be in (0, 1], got 2.0")):
        with pytest.raises(ConfigError) as err:
            settings_from_args(group_classes(groups), parser.parse_args(argv))
        assert error_line(err.value, PARSED_FLAGS) == line   # the line the CLI prints
    assert Sampling(n=None).n is None                       # unset passes require_each
