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
    children      the child nodes (list)

The root also carries ``meta`` (the example's index, gold answer, the run's settings).
A node's value is its ``q_mean``, or ``q_sum / visits`` when ``q_mean`` is missing.
Pure Python: no torch import.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from masprm.errors import TreeError

NODE_KEYS = ("steps", "action_text", "is_terminal", "final_answer", "visits", "q_sum", "q_mean", "node_text",
             "children")
_AGENT_PREFIX = re.compile(r"^\[agent\s+(\d+)\]")


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


def _number(raw: Any, key: str, where: str) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise TreeError(f"{where}: '{key}' must be a number, got {raw!r}")
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
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise TreeError(f"{name}: cannot be read ({err.__class__.__name__}: {err})") from None
    except json.JSONDecodeError as err:
        raise TreeError(f"{name}: not valid JSON ({err})") from None
    except RecursionError:
        raise TreeError(f"{name}: nested too deeply") from None
