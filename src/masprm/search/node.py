"""Search-tree nodes over agent messages, selection rules and back-up.

Shared by training-time MAS-MCTS (stage 1) and inference-time search
(stage 4). A node holds the routing state of its trajectory, so expanding it
never replays the graph. Pure Python: no torch import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from masprm.graph import RoutingState
from masprm.tree_schema import MAX_JSON_CHILDREN, action_text, tree_node


@dataclass(eq=False)
class Node:
    state: RoutingState
    parent: "Node | None" = None
    agent: int | None = None          # the agent whose output created this node (None at the root)
    text: str | None = None           # that output
    children: list["Node"] = field(default_factory=list)
    visits: int = 0
    q_sum: float = 0.0
    init_value: float = 0.0
    init_visits: int = 0
    info: dict[str, Any] = field(default_factory=dict)  # scores, log-probs, priors of this node

    def __post_init__(self) -> None:
        self.is_terminal = self.state.is_terminal
        self.final_answer = self.state.final_answer() if self.is_terminal else None

    @property
    def q_mean(self) -> float:
        denom = self.visits + self.init_visits
        return (self.q_sum + self.init_value) / denom if denom else 0.0

    @property
    def depth(self) -> int:
        return len(self.state.outputs)

    @property
    def action_text(self) -> str | None:
        return None if self.agent is None else action_text(self.agent, self.text)

    def add_child(self, agent: int, text: str, **kwargs: Any) -> "Node":
        child = Node(self.state.decide(agent, text), parent=self, agent=agent, text=text, **kwargs)
        self.children.append(child)
        return child

    def path(self) -> list["Node"]:
        """Nodes from the root down to this one."""
        nodes = []
        node: Node | None = self
        while node is not None:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]

    def walk(self) -> Iterator["Node"]:
        """Depth-first, children in stored order."""
        yield self
        for child in self.children:
            yield from child.walk()


# --------------------------------------------------------------------------- selection rules


def uct_training(q_mean: float, n_parent: int, n_child: int, c: float) -> float:
    """Stage-1 UCT: q + c * sqrt(ln(max(N_parent, 1)) / max(N_child, 1))."""
    return q_mean + c * math.sqrt(math.log(max(n_parent, 1)) / max(n_child, 1))


def uct_inference(q_mean: float, n_parent: int, n_child: int, c: float) -> float:
    """Stage-4 UCT: q + c * sqrt(ln(N_parent + 1) / (N_child + 1))."""
    return q_mean + c * math.sqrt(math.log(n_parent + 1) / (n_child + 1))


def puct(q_mean: float, n_parent: int, n_child: int, c: float, prior: float) -> float:
    """PUCT: q + c * prior * sqrt(max(N_parent, 1)) / (1 + N_child)."""
    return q_mean + c * prior * math.sqrt(max(n_parent, 1)) / (1 + n_child)


def progressive_widening(n_children: int, visits: int, k: float, alpha: float, cap: int | None) -> bool:
    """Whether a node with children and `visits` backed-up visits gains one more: while it has fewer
    than k * visits^alpha and, with a cap, fewer than `cap`."""
    return (cap is None or n_children < cap) and n_children < k * visits ** alpha


def argmax_child(node: Node, key: Callable[[Node], float]) -> Node:
    """The child with the largest key; the first one stored wins ties."""
    best, best_key = node.children[0], key(node.children[0])
    for child in node.children[1:]:
        k = key(child)
        if k > best_key:
            best, best_key = child, k
    return best


def backup(path: list[Node], value: float) -> None:
    for node in path:
        node.visits += 1
        node.q_sum += value


# --------------------------------------------------------------------------- tree JSON
# A node is written with its first MAX_JSON_CHILDREN children; the root's text is the question.


def node_to_json(node: Node) -> dict[str, Any]:
    return tree_node(steps=node.state.steps(), action=node.action_text, is_terminal=node.is_terminal,
                     final_answer=node.final_answer, visits=node.visits, q_sum=node.q_sum, q_mean=node.q_mean,
                     node_text=node.state.question if node.agent is None else node.text,
                     children=[node_to_json(c) for c in node.children[:MAX_JSON_CHILDREN]])
