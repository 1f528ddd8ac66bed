"""Show a stage-1 search tree: a PNG picture and/or indented text.

    python src/show_tree.py results/<run>/0.json              # writes results/<run>/0.png
    python src/show_tree.py results/<run>/0.json --text       # prints the tree
    python src/show_tree.py results/<run>/0.json --text --out tree.png --max_depth 3

Agents are shown by their names in the team the tree records (found from the working folder or above the
tree, with the recorded content), or in the team ``--mas_config`` names; else by index (``agent 2``).
"""

import pathlib
from dataclasses import dataclass

from masprm.checks import check_output_file
from masprm.cli import ArgumentParser, check, run_cli
from masprm.config import add_config_args, arg, config_from_args, require_each
from masprm.paths import PathText
from masprm.io import read_json
from masprm.errors import ConfigError
from masprm.graph import load_mas_config
from masprm.plots.tree_plot import agent_of, recorded_team_names, save_tree_png, tree_report, tree_text
from masprm.tree_schema import check_search_tree
from masprm.log import get_logger

log = get_logger(__name__)


@dataclass
class ShowTreeArgs:
    tree: PathText = arg(positional=True, help="a tree JSON written by masprm-mcts (src/run_mcts.py): "
                                                         "results/<run>/<idx>.json")
    out: PathText | None = arg(None, help="PNG to write (default: next to the tree, same name; with --text only when "
                                     "given)")
    text: bool = arg(False, help="print the tree as indented text")
    max_depth: int | None = arg(None, flags=("--max_depth",), help="text: deepest level shown")
    max_children: int | None = arg(None, flags=("--max_children",), help="text: children shown per node")
    rollouts: int = arg(0, help="text: also list the N most visited finished rollouts with their reward")
    mas_config: PathText | None = arg(None, flags=("--mas_config",),
                                      help="the team whose agent names label the tree (default: the team the tree "
                                           "records, when its file is found unchanged; else agents by index)")

    def __post_init__(self) -> None:
        require_each(self, ("max_depth", "max_children", "rollouts"), lambda v: v >= 0, "must be >= 0")


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description="Render a stage-1 tree JSON as a PNG and/or indented text.")
    add_config_args(ap, ShowTreeArgs)
    args = config_from_args(ShowTreeArgs, ap.parse_args(argv))

    check(not pathlib.Path(args.tree).is_dir(), f"{args.tree}: is a folder; pass one tree file (<idx>.json)")
    out = None
    if args.out or not args.text:
        out = pathlib.Path(args.out) if args.out else pathlib.Path(args.tree).with_suffix(".png")
        check(out.suffix.lower() == ".png", f"--out must name a .png file, got {out}")
        check_output_file(out, "out")
    team = load_mas_config(args.mas_config).agent_names if args.mas_config else None
    tree = read_json(args.tree)
    check_search_tree(tree, args.tree)
    names = team if team is not None else recorded_team_names(tree, args.tree)
    if team is not None:
        check_team_covers(tree, team, args.mas_config)
    elif names is None:
        log.info(f"agents shown by index: the team the tree records ({(tree.get('meta') or {}).get('config')}) is "
                 "not found with its recorded content (--mas_config names one)")

    if args.text:
        if args.rollouts:
            print(tree_report(tree, k=args.rollouts, max_depth=args.max_depth,
                              max_children=args.max_children, names=names))
        else:
            print(tree_text(tree, args.max_depth, args.max_children, names=names))
    if out is not None:
        save_tree_png(tree, out, names=names)
        log.info(f"wrote {out}")
    return 0


def check_team_covers(tree: dict, team: list[str], source: str) -> None:
    """A team given by --mas_config must name every agent the tree runs (else its names would mislabel it)."""
    stack, highest = [tree], -1
    while stack:
        node = stack.pop()
        highest = max(highest, agent_of(node) if agent_of(node) is not None else -1)
        stack.extend(node.get("children") or [])
    if highest >= len(team):
        agents = f"{len(team)} agent{'' if len(team) == 1 else 's'}"
        raise ConfigError(f"--mas_config {source} has {agents}, but the tree runs agent {highest}: not the team "
                          "of this tree", setting="mas_config")


def cli() -> None:
    """The console script (pyproject.toml) and the checkout's script: one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
