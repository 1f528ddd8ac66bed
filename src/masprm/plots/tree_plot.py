"""Render a stage-1 tree JSON (the format of ``masprm.tree_schema``) as a picture or as indented text.

Works on the JSON dict, not on live search nodes, so the same code serves
``run_mcts.py`` (right after a search) and ``show_tree.py`` (on any saved
tree). matplotlib is imported only when a picture is drawn, and the figure is
drawn with the Agg canvas directly (no pyplot state): one line collection for
the edges, one scatter per node shape, and text only where it says something
(visit counts of visited nodes, one agent label per sibling group), because
text is what costs time.

Agents are shown by their team's names (``Reader``, ``Solver``) where the team is known: stage 1 draws with
the team it searched with, and ``show_tree`` finds the team a tree records (``recorded_team_names``). The
tree files hold agent indices only, so they stay as they are; without a team an agent is ``agent 2``.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Iterator, Sequence

from masprm.errors import MasprmError
from masprm.graph import load_mas_config, resolve_config_path
from masprm.identity import file_identity
from masprm.io import atomic_write_bytes
from masprm.tree_schema import agent_of_action

Tree = dict[str, Any]
UNVISITED = (0.85, 0.85, 0.85, 1.0)  # an expanded but never visited candidate has no value yet


Names = Sequence[str] | None   # the team's agent names by index; None: agents shown by index


def agent_of(node: Tree) -> int | None:
    return agent_of_action(node.get("action_text"))


def agent_label(node: Tree, names: Names = None) -> str:
    """The agent that wrote ``node``: its name in the team (``Solver``), else ``agent 2``."""
    index = agent_of(node)
    if names is not None and index is not None and 0 <= index < len(names):
        return names[index]
    return f"agent {index}"


def recorded_team_names(tree: Tree, tree_file: str | os.PathLike | None = None) -> list[str] | None:
    """The agent names of the team a stage-1 tree records (``meta.config``), or None when that team is not found.

    The recorded path is tried as it is (from the working folder, or a shipped team's name), then from each
    folder above the tree file (a run folder's checkout); a file counts only when its content is the recorded
    one (``meta.config_identity``), so a team edited since the search never renames its agents.
    """
    meta = tree.get("meta") or {}
    recorded, identity = meta.get("config"), meta.get("config_identity")
    if not isinstance(recorded, str) or not recorded:
        return None
    path = Path(recorded)
    above = [] if path.is_absolute() or tree_file is None else [d / path for d in Path(tree_file).resolve().parents]
    for candidate in [path, *above]:
        try:
            found = resolve_config_path(candidate)
            if identity is not None and file_identity(found) != identity:
                continue
            return load_mas_config(found).agent_names
        except (MasprmError, OSError):   # not there, not readable, not a team: try the next place
            continue
    return None


def _shortened(text: str | None, width: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _stats(node: Tree) -> str:
    return f"[N={node.get('visits', 0)}, q_sum={node.get('q_sum', 0.0):.1f}, q_mean={node.get('q_mean', 0.0):.3f}]"


# --------------------------------------------------------------------------- text


def tree_text(tree: Tree, max_depth: int | None = None, max_children: int | None = None,
              width: int = 100, names: Names = None) -> str:
    """One line per node, indented by depth: agent, output (shortened), visits and values."""
    lines: list[str] = []

    def visit(node: Tree, depth: int) -> None:
        indent = "  " * depth
        if depth == 0:
            lines.append(f"ROOT {_stats(node)} {_shortened(node.get('node_text'), width)}")
        else:
            mark = " (terminal)" if node.get("is_terminal") else ""
            lines.append(f"{indent}-> {agent_label(node, names)}{mark} {_stats(node)} "
                         f"{_shortened(node.get('node_text'), width)}")
        if max_depth is not None and depth >= max_depth:
            return
        children = node.get("children") or []
        shown = children if max_children is None else children[:max_children]
        for child in shown:
            visit(child, depth + 1)
        if len(shown) < len(children):
            lines.append(f"{indent}  ... {len(children) - len(shown)} more")

    visit(tree, 0)
    return "\n".join(lines)


def terminal_paths(tree: Tree) -> Iterator[list[Tree]]:
    """Every root-to-terminal path, depth-first in stored order."""
    stack: list[list[Tree]] = [[tree]]
    while stack:
        path = stack.pop()
        node = path[-1]
        if node.get("is_terminal"):
            yield path
        stack.extend(path + [child] for child in reversed(node.get("children") or []))


def top_rollouts(tree: Tree, k: int = 3) -> list[list[Tree]]:
    """The k most visited finished trajectories (then the best valued; stored order breaks ties)."""
    paths = list(terminal_paths(tree))
    paths.sort(key=lambda p: (-p[-1].get("visits", 0), -p[-1].get("q_mean", 0.0)))
    return paths[:k]


def tree_report(tree: Tree, k: int = 3, max_depth: int = 3, max_children: int = 3,
                width: int = 100, names: Names = None) -> str:
    """What ``--verbose`` prints: the top of the tree and its k most visited rollouts.

    A terminal leaf's reward is its q_mean: every back-up through it carries
    the same +-1.
    """
    meta = tree.get("meta", {})
    head = f"=== tree {meta.get('index', '?')} | gold={meta.get('gold')!r} | root q_mean={tree.get('q_mean', 0.0):.3f}"
    lines = [head + " ===", tree_text(tree, max_depth, max_children, width, names)]
    for rank, path in enumerate(top_rollouts(tree, k), start=1):
        leaf = path[-1]
        lines.append(f"--- rollout {rank} (visits={leaf.get('visits', 0)}) ---")
        for step, node in enumerate(path[1:], start=1):
            lines.append(f"  step {step} {agent_label(node, names)}: {_shortened(node.get('node_text'), width)}")
        lines.append(f"  final answer: {_shortened(leaf.get('final_answer'), width)}")
        lines.append(f"  reward: {leaf.get('q_mean', 0.0):+.0f}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- picture


def _layout(tree: Tree) -> tuple[list[Tree], list[tuple[float, float]], list[int]]:
    """Nodes in depth-first order, their (x, y) positions and parent positions (-1 at the root).

    Leaves take consecutive x slots; a parent sits above the middle of its
    children; y is minus the depth.
    """
    nodes: list[Tree] = []
    xy: list[tuple[float, float]] = []
    parent: list[int] = []
    next_leaf = 0.0

    def place(node: Tree, depth: int, up: int) -> float:
        nonlocal next_leaf
        i = len(nodes)
        nodes.append(node)
        xy.append((0.0, -float(depth)))
        parent.append(up)
        xs = [place(child, depth + 1, i) for child in node.get("children") or []]
        if xs:
            x = (xs[0] + xs[-1]) / 2
        else:
            x, next_leaf = next_leaf, next_leaf + 1
        xy[i] = (x, -float(depth))
        return x

    place(tree, 0, -1)
    return nodes, xy, parent


def save_tree_png(tree: Tree, path: str | os.PathLike, dpi: int = 100, names: Names = None) -> None:
    """Draw the tree (``tree_png``) into a PNG file, atomically."""
    atomic_write_bytes(path, tree_png(tree, dpi, names))


def tree_png(tree: Tree, dpi: int = 100, names: Names = None) -> bytes:
    """The tree as PNG bytes: nodes coloured by q_mean (red -1 .. green +1), visits inside, edges labelled by agent.

    All children of one node come from the same agent (the parent's next
    runnable agent), so one label per sibling group names every edge.
    """
    from matplotlib import colormaps   # heavy: only when a tree is drawn (--no_plot runs never load it)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure

    nodes, xy, parent = _layout(tree)
    n_leaves = sum(1 for n in nodes if not n.get("children"))
    depth = -min(y for _, y in xy)
    width = min(60.0, max(4.0, 0.4 * n_leaves + 1.0))
    height = min(30.0, max(2.5, 1.0 * depth + 1.3))
    fig = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.01, 0.02, 0.98, 0.88))
    ax.set_axis_off()

    segments = [(xy[p], xy[i]) for i, p in enumerate(parent) if p >= 0]
    ax.add_collection(LineCollection(segments, colors="0.6", linewidths=0.8, zorder=1))
    siblings: dict[int, list[int]] = {}
    for i, p in enumerate(parent):
        if p >= 0:
            siblings.setdefault(p, []).append(i)
    for p, kids in siblings.items():
        (px, py), kx = xy[p], (xy[kids[0]][0] + xy[kids[-1]][0]) / 2
        ax.text((px + kx) / 2 + 0.06, py - 0.5, agent_label(nodes[kids[0]], names), fontsize=7,
                ha="left", va="center", color="0.25", zorder=3)

    values = [max(-1.0, min(1.0, float(n.get("q_mean", 0.0)))) for n in nodes]
    red_to_green = colormaps["RdYlGn"]
    colours = [red_to_green((v + 1) / 2) if n.get("visits") else UNVISITED for n, v in zip(nodes, values)]
    xs, ys = [x for x, _ in xy], [y for _, y in xy]
    marker_size = 260 if n_leaves < 60 else 140
    for terminal, marker in ((False, "o"), (True, "s")):
        idx = [i for i, n in enumerate(nodes) if bool(n.get("is_terminal")) == terminal]
        if idx:
            ax.scatter([xs[i] for i in idx], [ys[i] for i in idx], c=[colours[i] for i in idx],
                       s=marker_size, marker=marker, edgecolors="0.2", linewidths=0.6, zorder=2)
    for (x, y), node, value in zip(xy, nodes, values):
        if node.get("visits"):  # grey already says 0; text is the costly part of the picture
            ax.text(x, y, str(node["visits"]), fontsize=6, ha="center", va="center", zorder=4,
                    color="white" if abs(value) > 0.6 else "black")
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylim(min(ys) - 0.5, 0.5)

    # A title instead of a colour bar: a colour bar's axis and ticks would cost more than the tree.
    meta = tree.get("meta", {})
    fig.suptitle(f"tree {meta.get('index', '')}  gold={_shortened(str(meta.get('gold')), 30)}  "
                 f"root q_mean={tree.get('q_mean', 0.0):.3f}\ncolour = q_mean (red -1 .. green +1), "
                 "grey = unvisited, number = visits, square = terminal", fontsize=7)

    out = io.BytesIO()
    fig.savefig(out, format="png", pil_kwargs={"compress_level": 1})  # fast; size barely matters
    return out.getvalue()
