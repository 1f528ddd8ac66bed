"""The one MCTS loop of stages 1 and 4 (``masprm.search.mcts``), driven by hand-made guides."""

from __future__ import annotations

from masprm.graph import MASGraph
from masprm.search.mcts import run_simulations, simulate
from masprm.search.node import Node

CHAIN = MASGraph.from_dict({
    "agents": [{"name": "planner", "system_prompt": "plan"}, {"name": "solver", "system_prompt": "solve"}],
    "edges": [[-1, 0], [0, 1]],
})


class ScriptedGuide:
    """Expands with fixed texts per depth (none at `dead_depth`), goes into the last new child,
    selects the first child, and values a path by its length (negative when it is not finished)."""

    def __init__(self, texts_by_depth, dead_depth=None):
        self.texts_by_depth, self.dead_depth = texts_by_depth, dead_depth
        self.expanded, self.valued = [], []

    def widen(self, node):   # never: a node keeps its one expansion's children
        return []
        yield

    def select(self, node):
        return node.children[0]

    def expand(self, node):
        self.expanded.append(node.depth)
        texts = [] if node.depth == self.dead_depth else self.texts_by_depth[node.depth]
        yield ("a request", node.depth)   # a model request, answered by the driver
        return [node.add_child(node.state.next_runnable(), t) for t in texts]

    def enter(self, path, new):
        return new[-1]

    def value(self, path):
        self.valued.append([n.text for n in path])
        return float(len(path)) if path[-1].is_terminal else -float(len(path))
        yield


def run(gen):
    """Drive a guide's search by hand: every yielded request gets None (the scripted guide ignores it)."""
    try:
        next(gen)
        while True:
            gen.send(None)
    except StopIteration as stop:
        return stop.value


def test_a_simulation_expands_enters_and_backs_up_the_path_value():
    guide = ScriptedGuide({0: ["plan A", "plan B"], 1: ["Answer: 1"]})
    root = Node(CHAIN.start("q"))
    run(simulate(root, guide))
    assert guide.expanded == [0, 1]                      # the root, then the child it went into
    assert guide.valued == [[None, "plan B", "Answer: 1"]]
    plan_a, plan_b = root.children
    assert (root.visits, root.q_sum, plan_b.visits, plan_b.q_sum) == (1, 3.0, 1, 3.0)
    assert plan_a.visits == 0
    # the second simulation selects (first child) instead of expanding the root again
    run(simulate(root, guide))
    assert guide.expanded == [0, 1, 1] and plan_a.children[0].text == "Answer: 1"
    assert (root.visits, root.q_sum) == (2, 6.0)


def test_a_dead_end_values_the_unfinished_path():
    guide = ScriptedGuide({0: ["plan A"]}, dead_depth=1)
    root = Node(CHAIN.start("q"))
    run(simulate(root, guide))
    assert guide.valued == [[None, "plan A"]]
    assert (root.visits, root.q_sum, root.children[0].q_sum) == (1, -2.0, -2.0)


def test_run_simulations_stops_when_settled_and_counts_what_ran():
    guide = ScriptedGuide({0: ["plan A"], 1: ["Answer: 1"]})
    root = Node(CHAIN.start("q"))
    assert run(run_simulations(root, guide, 5, settled=lambda r: r.visits >= 3)) == 3
    assert root.visits == 3
    assert run(run_simulations(Node(CHAIN.start("q")), guide, 4)) == 4
