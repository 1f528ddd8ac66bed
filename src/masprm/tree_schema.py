"""The search-tree file format: one JSON object per example, written by stage 1, read by stage 2,
the plots and show_tree.

A node is a JSON object with these keys, in this order (``tree_node`` writes them):

    steps         the agent outputs from the root to this node (list of strings)
    action_text   "[agent i] <output>" for the agent i that produced the node; None at the root
    is_terminal   True when the trajectory ends here (every agent has run)
    final_answer  the answer extracted at a terminal node, else None
    visits        how many back-ups passed through the node (int)
    q_sum         the sum of those back-ups' values (±1 at graded leaves)
    q_mean        q_sum / visits (0 for an unvisited node)
    node_text     the question at the root, the agent's output elsewhere
    children      the child nodes (list): the first MAX_JSON_CHILDREN of them

The root also carries ``meta`` (the example's index, gold answer, the run's settings).
A node's value is its ``q_mean``, or ``q_sum / visits`` when ``q_mean`` is missing.
``read_tree`` / ``parse_tree`` read a file into light ``TreeStep`` nodes for stage 2,
checking every key they use and every node's values (``check_node_values``: visits >= 0,
values in [-1, 1], texts strings); ``read_tree_json`` refuses a string UTF-8 cannot hold. Pure Python: no torch import.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from masprm.errors import TreeError, quoted
from masprm.io import check_encodable

if TYPE_CHECKING:
    from masprm.graph import MASGraph

MAX_JSON_CHILDREN = 8   # a node is written with its first 8 children only: its visits may count unwritten ones
NODE_KEYS = ("steps", "action_text", "is_terminal", "final_answer", "visits", "q_sum", "q_mean", "node_text",
             "children")
_AGENT_PREFIX = re.compile(r"^\[agent\s+(\d+)\]")
MAX_TREE_DEPTH = 200   # a stage-1 tree is as deep as its team's longest trajectory (a handful of agents)


def action_text(agent: int, text: str) -> str:
    """The ``action_text`` of agent ``agent``'s output ``text``."""
    return f"[agent {agent}] {text}"


def agent_of_action(action: Any) -> int | None:
    """The agent index an ``action_text`` starts with; None at the root or when it names none."""
    if not isinstance(action, str):
        return None
    match = _AGENT_PREFIX.match(action)
    return int(match.group(1)) if match else None


def tree_node(*, steps: Sequence[str], action: str | None, is_terminal: bool, final_answer: str | None,
              visits: int, q_sum: float, q_mean: float, node_text: str, children: Sequence[dict]) -> dict[str, Any]:
    """One node as the file stores it (keys in NODE_KEYS order)."""
    return {"steps": list(steps), "action_text": action, "is_terminal": is_terminal, "final_answer": final_answer,
            "visits": visits, "q_sum": q_sum, "q_mean": q_mean, "node_text": node_text, "children": list(children)}


def is_search_tree(data: Any) -> bool:
    """The root of a tree file: an object with an int ``visits`` and a ``children`` list."""
    return (isinstance(data, dict) and isinstance(data.get("children"), list)
            and isinstance(data.get("visits"), int) and not isinstance(data.get("visits"), bool))


def check_search_tree(data: Any, name: str, max_depth: int = MAX_TREE_DEPTH) -> None:
    """A TreeError naming `name` unless `data` is a search tree whose every node can be walked.

    Checked without recursion: every node is an object whose ``children`` is a list
    (or missing), and no path is deeper than `max_depth`, so the readers that
    recurse (text, picture) cannot fail half way.
    """
    if not is_search_tree(data):
        raise TreeError(f"{name}: not a search tree (expected 'visits' and a 'children' list at the top)")
    stack: list[tuple[Any, str, int]] = [(data, "root", 0)]
    while stack:
        node, where, depth = stack.pop()
        if not isinstance(node, dict):
            raise TreeError(f"{name}: {where}: a node must be a JSON object, got {type(node).__name__}")
        for key in ("visits", "q_sum", "q_mean"):
            if key in node and _number(node[key], key, f"{name}: {where}") is None:
                raise TreeError(f"{name}: {where}: '{key}' must be a number, got null")
        check_node_values(node, f"{name}: {where}")
        children = node.get("children")
        if children is None:
            continue
        if not isinstance(children, list):
            raise TreeError(f"{name}: {where}: 'children' must be a list, got {type(children).__name__}")
        if children and depth >= max_depth:
            raise TreeError(f"{name}: nested deeper than {max_depth} levels; not a stage-1 tree")
        stack.extend((child, f"{where}/{k}", depth + 1) for k, child in enumerate(children))


Q_TOLERANCE = 1e-9   # a value is a mean of back-ups in [-1, 1]; sums of +-1 are exact in floating point


def check_node_values(node: dict, where: str) -> None:
    """A node's values are possible: visits a whole number >= 0, its value (q_mean, or q_sum / visits)
    in [-1, 1], its texts strings (or null) and its steps a list of strings. A TreeError naming `where`."""
    visits = _number(node.get("visits"), "visits", where)
    if visits is not None and (visits < 0 or visits != int(visits)):
        raise TreeError(f"{where}: 'visits' must be a whole number >= 0, got {quoted(node['visits'])}")
    value = node_value(node, where)
    if value is not None and not -1 - Q_TOLERANCE <= value <= 1 + Q_TOLERANCE:
        key = "q_mean" if node.get("q_mean") is not None else "q_sum / visits"
        raise TreeError(f"{where}: '{key}' is {value:g}, outside [-1, 1]")
    for key in ("node_text", "action_text", "final_answer"):
        if node.get(key) is not None and not isinstance(node[key], str):
            raise TreeError(f"{where}: '{key}' must be a string, got {type(node[key]).__name__}")
    steps = node.get("steps")
    if steps is not None and not (isinstance(steps, list) and all(isinstance(x, str) for x in steps)):
        raise TreeError(f"{where}: 'steps' must be a list of strings")


def _number(raw: Any, key: str, where: str) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise TreeError(f"{where}: '{key}' must be a number, got {quoted(raw)}")
    if not math.isfinite(raw):
        raise TreeError(f"{where}: '{key}' is {raw} (not a finite number)")
    return float(raw)


def node_value(node: dict, where: str = "node") -> float | None:
    """A node's value: its q_mean, or q_sum / visits when q_mean is missing (None when unvisited)."""
    q = _number(node.get("q_mean"), "q_mean", where)
    if q is not None:
        return q
    visits = _number(node.get("visits"), "visits", where) or 0.0
    q_sum = _number(node.get("q_sum"), "q_sum", where) or 0.0
    return q_sum / visits if visits > 0 else None


def node_visits(node: dict, where: str = "node") -> int:
    return int(_number(node.get("visits"), "visits", where) or 0)


def read_tree_json(path: str | Path, name: str | None = None) -> Any:
    """The JSON of a tree file; a file that cannot be read or parsed is a TreeError naming it."""
    path = Path(path)
    name = name or path.name
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError) as err:
        raise TreeError(f"{name}: cannot be read ({err.__class__.__name__}: {err})") from None
    except json.JSONDecodeError as err:
        raise TreeError(f"{name}: not valid JSON ({err})") from None
    except ValueError as err:   # a number too long to convert
        raise TreeError(f"{name}: not valid JSON ({quoted(str(err))})") from None
    except RecursionError:
        raise TreeError(f"{name}: nested too deeply") from None
    check_encodable(data, text, name, TreeError)
    return data


# --------------------------------------------------------------------------- reading a tree for stage 2


@dataclass(eq=False, slots=True)
class TreeStep:
    """One tree node as preprocessing needs it."""

    text: str                 # node_text, stripped: what the records carry
    value: float | None       # q_mean, else q_sum / visits, else None
    is_terminal: bool
    visits: int
    agent: int | None         # from action_text "[agent i] ..."; None at the root
    inbox: str                # local view: the user content this node's agent saw ("" otherwise)
    children: list["TreeStep"] = field(default_factory=list)
    answer: str | None = None  # final_answer at a terminal node (self-consistency labels vote with it)


@dataclass(eq=False, slots=True)
class Tree:
    name: str
    question: str
    root: TreeStep
    off_config: list[str] = field(default_factory=list)  # local view: subtrees skipped, and why


def _parse_node(d: Any, where: str, question: str, graph: MASGraph | None, state: Any,
                agent: int | None, inbox: str, off_config: list[str]) -> TreeStep:
    """Build the TreeStep for ``d`` and, recursively, its children.

    With a graph (local view) ``state`` is the routing state after this
    node's decision; each child's agent must be the one the graph runs next.
    A child that is not (or names no agent) cannot be routed: it and its
    subtree are left out and the reason is appended to ``off_config``, so
    only the paths through it are lost, as in the original.
    """
    check_node_values(d, where)
    children_raw = d.get("children")
    if children_raw is None:
        children_raw = []
    if not isinstance(children_raw, list):
        raise TreeError(f"{where}: 'children' must be a list")
    step = TreeStep(text="", value=node_value(d, where), is_terminal=bool(d.get("is_terminal", False)),
                visits=node_visits(d, where), agent=agent, inbox=inbox,
                answer=d.get("final_answer") if isinstance(d.get("final_answer"), str) else None)
    for k, c in enumerate(children_raw):
        cwhere = f"{where}/{k}"
        if not isinstance(c, dict):
            raise TreeError(f"{cwhere}: a node must be a JSON object")
        raw_text = c.get("node_text")
        if raw_text is None:
            raw_text = ""
        if not isinstance(raw_text, str):
            raise TreeError(f"{cwhere}: 'node_text' must be a string, got {type(raw_text).__name__}")
        c_agent, c_inbox, c_state = agent_of_action(c.get("action_text")), "", None
        if graph is not None:
            if c_agent is None:
                off_config.append(f"{cwhere}: action_text does not start with '[agent i]' "
                                  f"(needed for the local view)")
                continue
            expected = state.next_runnable()
            if c_agent != expected:
                wanted = "no agent (the trajectory is terminal)" if expected is None else f"agent {expected}"
                off_config.append(f"{cwhere}: the tree runs agent {c_agent} but {graph.source} runs {wanted} "
                                  f"next (was the tree made with another config?)")
                continue
            c_inbox = state.user_content(c_agent) or question
            c_state = state.decide(c_agent, raw_text)  # route the text as the agent produced it
        child = _parse_node(c, cwhere, question, graph, c_state, c_agent, c_inbox, off_config)
        child.text = raw_text.strip()
        step.children.append(child)
    return step


def parse_tree(data: Any, name: str, graph: MASGraph | None = None) -> Tree:
    """A tree JSON object -> Tree. Pass the MAS graph for the local view."""
    if not isinstance(data, dict):
        raise TreeError(f"{name}: a tree must be a JSON object, got {type(data).__name__}")
    question = data.get("node_text")
    if not isinstance(question, str):
        raise TreeError(f"{name}: the root has no 'node_text' (the question)")
    # The local view routes the stripped question through the team, as the original's stage 2 did.
    state = graph.start(question.strip()) if graph is not None else None
    off_config: list[str] = []
    root = _parse_node(data, f"{name}: root", question.strip(), graph, state, None, "", off_config)
    root.text = question.strip()
    return Tree(name, question.strip(), root, off_config)


def read_tree(path: str | Path, name: str | None = None, graph: MASGraph | None = None) -> Tree:
    path = Path(path)
    name = name or path.name
    data = read_tree_json(path, name)
    try:
        return parse_tree(data, name, graph)
    except RecursionError:
        raise TreeError(f"{name}: nested too deeply") from None
