"""Inference MCTS (mcts_*): a tree over agent outputs guided by a scorer kind.

A simulation descends from the root by the selection rule (UCT or PUCT),
expanding a childless node by sampling the next runnable agent (duplicate
texts dropped, each child scored by the step scorer), and backs the leaf
value of the scorer kind up the path. The answer follows the highest mean
value down from the root. Pure Python: no torch import.
"""

from __future__ import annotations

from typing import Any, Callable

from masprm.eval.registry import EvalContext, MethodResult
from masprm.search.expand import (SCORER_KINDS, Step, drop_duplicate_texts, ensure_logprobs, propose,
                                  score_candidates, softmax)
from masprm.search.node import Node, argmax_child, backup, puct, uct_inference


def expand(ctx: EvalContext, node: Node, step_scorer: str) -> Step:
    """Children for the next runnable agent: sample, drop duplicate texts, score, set priors."""
    s = ctx.settings
    agent = node.state.next_runnable()
    [proposed] = yield from propose(ctx, [node.state], agent, s.max_children, temperature=s.mcts_temperature)
    cands = drop_duplicate_texts(proposed)
    yield from score_candidates(ctx, step_scorer, cands)
    if s.uct_type == "puct":
        yield from ensure_logprobs(ctx, cands)
        priors = softmax([c.logprob.avg_token for c in cands])
    else:
        priors = [1.0 / len(cands)] * len(cands)
    for c, prior in zip(cands, priors):
        node.add_child(agent, c.text, init_value=c.score, init_visits=1,
                       info={"score": c.score, "logprob": c.logprob, "prior": prior})


SELECTION_RULES: dict[str, Callable[[Node, Node, float], float]] = {
    "uct": lambda parent, child, c: uct_inference(child.q_mean, parent.visits, child.visits, c),
    "puct": lambda parent, child, c: puct(child.q_mean, parent.visits, child.visits, c, child.info["prior"]),
}


def select_child(node: Node, rule: str, c: float) -> Node:
    score = SELECTION_RULES[rule]
    return argmax_child(node, lambda child: score(node, child, c))


def search_tree(ctx: EvalContext, question: str, *, step_scorer: str, leaf_value: str) -> Step:
    """n_simulations simulations: descend (expanding childless nodes) to a terminal, back up its value."""
    s = ctx.settings
    root = Node(ctx.graph.start(question), init_visits=1)
    for _ in range(s.n_simulations):
        path = [root]
        while not path[-1].is_terminal:
            if not path[-1].children:
                yield from expand(ctx, path[-1], step_scorer)
            path.append(select_child(path[-1], s.uct_type, s.c_uct))
        backup(path, (yield from SCORER_KINDS[leaf_value].leaf(ctx, path)))
    return root


def mcts(ctx: EvalContext, example: Any, *, step_scorer: str, leaf_value: str) -> Step:
    root = yield from search_tree(ctx, example.question, step_scorer=step_scorer, leaf_value=leaf_value)
    # The answer: follow the highest q_mean down; finish a branch that was never simulated.
    node = root
    while not node.is_terminal:
        if not node.children:
            yield from expand(ctx, node, step_scorer)
        node = argmax_child(node, lambda child: child.q_mean)
    visited = ranked_terminals(root)
    nodes = sum(1 for _ in root.walk())
    return MethodResult(node.final_answer, [n.final_answer for n in visited],
                        {"tree_nodes": nodes, "terminal_visited": len(visited)})


def ranked_terminals(root: Node) -> list[Node]:
    """Visited terminal nodes by q_mean, best first (the pass@k candidates).

    Ties keep the original's order: it collected nodes with a stack (the last
    child is visited first) and then sorted stably.
    """
    found, stack = [], [root]
    while stack:
        node = stack.pop()
        if node.is_terminal and node.visits > 0:
            found.append(node)
        stack.extend(node.children)
    return sorted(found, key=lambda n: -n.q_mean)


def mcts_family(ctx: EvalContext, example: Any, kind: str) -> Step:
    return (yield from mcts(ctx, example, step_scorer=kind, leaf_value=kind))
