"""Every option of every command says what it does in --help (its parser walked, subcommands included)."""

from __future__ import annotations

import argparse

import pytest

from helpers_cli import command_modules, command_parser


def parsers(parser: argparse.ArgumentParser, name: str):
    """The parser and, for a command with subcommands, each subcommand's parser, with a name to report."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, sub_parser in action.choices.items():
                yield from parsers(sub_parser, f"{name} {sub}")


def test_the_walk_finds_the_stages():
    found = set(command_modules())
    assert {"masprm.stages.trees", "masprm.stages.preprocess", "masprm.stages.train", "masprm.stages.evaluate",
            "masprm.stages.aggregate", "masprm.worlds.build"} <= found


@pytest.mark.parametrize("module", command_modules())
def test_every_option_has_help(module):
    missing = []
    for name, parser in parsers(command_parser(module), module):
        parser.format_help()   # adds what a parser adds at help time (--config)
        missing += [f"{name}: {'/'.join(a.option_strings) or a.dest}" for a in parser._actions
                    if not isinstance(a, argparse._SubParsersAction) and not (a.help or "").strip()]
    assert not missing, "options without help: " + ", ".join(missing)
