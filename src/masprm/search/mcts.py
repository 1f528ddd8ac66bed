"""MCTS over agent messages: one simulation loop, two guides.

A simulation descends from the root. At a node with children the guide
may first widen it (add a child) and then selects one; a childless node is expanded by the guide (the next runnable
agent's samples, in one batched request) and the guide says which new child
the simulation goes on into; at a terminal node (or a dead end, when the
policy returned nothing) the guide values the path, and the value is backed
up along it. The two searches of the method differ only in their guide:

- ``OutcomeGuide`` (stage 1, MAS-MCTS): training UCT; every sample becomes a
  child; the simulation goes on into a random new child, a terminal one when
  there is one, and grades the other terminal ones on the spot; a path is
  worth +1 when its final answer is correct and -1 otherwise.
- ``ScorerGuide`` (stage 4, ``mcts_*``): inference UCT or PUCT; duplicate
  texts are dropped and each child starts with its step score as one visit;
  the simulation goes on by the selection rule; a path is worth its scorer
  kind's leaf value. Two opt-in options (off: the original's rule):
  ``--distinct_tries`` samples again while an expansion has fewer distinct
  texts than asked, and ``--pw_k`` / ``--pw_alpha`` widen a node progressively
  (``node.progressive_widening``): a fresh child, scored like any new one.

Pure Python: no torch import.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from masprm.search.context import SearchContext, SearchResult
from masprm.search.engine import RequestKeys, Sample, Search
from masprm.search.expand import ensure_logprobs, propose_distinct, softmax, token_cap
from masprm.search.node import (Node, argmax_child, backup, progressive_widening, puct, uct_inference,
                                uct_training)
from masprm.search.scorer_kinds import SCORER_KINDS, score_candidates

if TYPE_CHECKING:
    from masprm.graph import MASGraph

Grader = Callable[[str, "str | None"], bool]


class Guide(Protocol):
    def widen(self, node: Node) -> Search: ...            # a search step; may add a child to a node that has some
    def select(self, node: Node) -> Node: ...             # a child of a node that has children
    def expand(self, node: Node) -> Search: ...           # a search step; returns the new children
    def enter(self, path: list[Node], new: list[Node]) -> Node: ...  # the new child to go on into
    def value(self, path: list[Node]) -> Search: ...      # a search step; returns the path's value


def simulate(root: Node, guide: Guide) -> Search:
    """One simulation from the root to a terminal node (or a dead end), backed up."""
    path = [root]
    while not path[-1].is_terminal:
        node = path[-1]
        if node.children:
            yield from guide.widen(node)
            path.append(guide.select(node))
            continue
        new = yield from guide.expand(node)
        if not new:  # the policy returned nothing: the path ends here
            break
        path.append(guide.enter(path, new))
    backup(path, (yield from guide.value(path)))


def run_simulations(root: Node, guide: Guide, n: int, settled: Callable[[Node], bool] | None = None) -> Search:
    """Up to `n` simulations; `settled(root)`, asked after each, may end the search early. Returns how many ran."""
    done = 0
    while done < n:
        yield from simulate(root, guide)
        done += 1
        if settled is not None and settled(root):
            break
    return done


# --------------------------------------------------------------------------- stage 1: outcome-labelled trees


@dataclass
class OutcomeGuide:
    """The stage-1 guide of one example: its grader, its random choices and what its expansions cost."""

    graph: MASGraph
    settings: Any                # train_mcts.TreeSearchSettings (not imported: stage 4 never loads stage 1's module)
    gold: str | None
    rng: random.Random
    grade: Grader
    keys: RequestKeys | None = None   # the example's random streams (None: the policy's own RNG)
    policy_calls: int = 0
    agent_runs: int = 0          # candidates sampled
    prompt_tokens: int = 0       # each call's prompt, counted once whatever n is
    generated_tokens: int = 0

    def widen(self, node: Node) -> Search:
        """Never: a stage-1 node keeps the samples of its one expansion."""
        return []
        yield  # a search step that needs no model

    def select(self, node: Node) -> Node:
        parent_visits, c = node.visits, self.settings.c
        return argmax_child(node, lambda ch: uct_training(ch.q_mean, parent_visits, ch.visits, c))

    def expand(self, node: Node) -> Search:
        """One child per sampled output of the next runnable agent (no de-duplication)."""
        agent = node.state.next_runnable()
        cap = token_cap(self.graph, agent, self.settings.max_new_tokens)
        keys = self.keys.next(1) if self.keys is not None else None
        [gens] = yield Sample((node.state.messages(agent),), self.settings.n_candidates,
                              self.settings.temperature, self.settings.top_p, cap, keys)
        self.policy_calls += 1
        self.agent_runs += len(gens)
        self.prompt_tokens += gens[0].prompt_tokens if gens else 0
        self.generated_tokens += sum(g.new_tokens for g in gens)
        return [node.add_child(agent, g.text) for g in gens]

    def enter(self, path: list[Node], new: list[Node]) -> Node:
        """A random new child, a terminal one if any; the other terminal ones are graded now."""
        terminal = [ch for ch in new if ch.is_terminal]
        chosen = self.rng.choice(terminal or new)
        for sibling in terminal:
            if sibling is not chosen:
                backup(path + [sibling], self.reward(sibling))
        return chosen

    def value(self, path: list[Node]) -> Search:
        return self.reward(path[-1])
        yield  # a search step that needs no model

    def reward(self, leaf: Node) -> float:
        """+1 for a terminal leaf with a correct final answer, else -1 (cached on the node)."""
        if "reward" not in leaf.info:
            correct = leaf.is_terminal and self.grade(leaf.final_answer, self.gold)
            leaf.info["reward"] = 1.0 if correct else -1.0
        return leaf.info["reward"]

    def usage(self) -> dict[str, int]:
        return {"policy_calls": self.policy_calls, "agent_runs": self.agent_runs,
                "prompt_tokens": self.prompt_tokens, "generated_tokens": self.generated_tokens}


# --------------------------------------------------------------------------- stage 4: scorer-guided search

SELECTION_RULES: dict[str, Callable[[Node, Node, float], float]] = {
    "uct": lambda parent, child, c: uct_inference(child.q_mean, parent.visits, child.visits, c),
    "puct": lambda parent, child, c: puct(child.q_mean, parent.visits, child.visits, c, child.info["prior"]),
}


def select_child(node: Node, rule: str, c: float) -> Node:
    score = SELECTION_RULES[rule]
    return argmax_child(node, lambda child: score(node, child, c))


@dataclass
class ScorerGuide:
    """The stage-4 guide: children scored by `step_scorer`, paths valued by `leaf_value` (scorer kinds)."""

    ctx: SearchContext
    step_scorer: str
    leaf_value: str

    def select(self, node: Node) -> Node:
        return select_child(node, self.ctx.settings.uct_type, self.ctx.settings.c_uct)

    def expand(self, node: Node) -> Search:
        """The node's first children: --max_children samples of the next runnable agent."""
        return (yield from self.grow(node, self.ctx.settings.max_children))

    def widen(self, node: Node) -> Search:
        """One fresh child when progressive widening (--pw_k) allows the node more than it has."""
        s = self.ctx.settings
        if s.pw_k is None or not progressive_widening(len(node.children), node.visits, s.pw_k, s.pw_alpha,
                                                      s.pw_max_children):
            return []
        return (yield from self.grow(node, 1))

    def grow(self, node: Node, n: int) -> Search:
        """Up to n new children: sample (again while too few are distinct, --distinct_tries), drop the texts
        the node already has, score; priors over all the node's children. Returns the new children."""
        s = self.ctx.settings
        agent = node.state.next_runnable()
        cands = yield from propose_distinct(self.ctx, node.state, agent, n, temperature=s.mcts_temperature,
                                            tries=s.distinct_tries, known=[child.text for child in node.children])
        if not cands:  # the policy returned nothing new (at an expansion: a dead end)
            return []
        yield from score_candidates(self.ctx, self.step_scorer, cands)
        if s.uct_type == "puct":
            yield from ensure_logprobs(self.ctx, cands)
        new = [node.add_child(agent, c.text, init_value=c.score, init_visits=1,
                              info={"score": c.score, "logprob": c.logprob}) for c in cands]
        # PUCT's prior: the softmax of the children's per-token log-probs, taken again when a child joins
        priors = (softmax([child.info["logprob"].avg_token for child in node.children]) if s.uct_type == "puct"
                  else [1.0 / len(node.children)] * len(node.children))
        for child, prior in zip(node.children, priors):
            child.info["prior"] = prior
        return new

    def enter(self, path: list[Node], new: list[Node]) -> Node:
        return self.select(path[-1])

    def value(self, path: list[Node]) -> Search:
        return (yield from SCORER_KINDS[self.leaf_value].leaf(self.ctx, path))


def search_tree(ctx: SearchContext, question: str, *, step_scorer: str, leaf_value: str) -> Search:
    """n_simulations simulations from the question; returns the root."""
    root = Node(ctx.graph.start(question), init_visits=1)
    yield from run_simulations(root, ScorerGuide(ctx, step_scorer, leaf_value), ctx.settings.n_simulations)
    return root


def mcts(ctx: SearchContext, example: Any, *, step_scorer: str, leaf_value: str) -> Search:
    """The search, then the answer: the highest q_mean followed down from the root."""
    root = yield from search_tree(ctx, example.question, step_scorer=step_scorer, leaf_value=leaf_value)
    guide = ScorerGuide(ctx, step_scorer, leaf_value)
    node = root
    while not node.is_terminal:
        if not node.children:  # finish a branch that was never simulated
            yield from guide.expand(node)
        node = argmax_child(node, lambda child: child.q_mean)
    visited = ranked_terminals(root)
    nodes = sum(1 for _ in root.walk())
    # Whether a simulation ever reached the predicted transcript: a child starts at its step score
    # (the ORM's 0) with no backed-up visit, so an unsimulated branch can win the argmax above.
    return SearchResult(node.final_answer, [n.final_answer for n in visited],
                        {"tree_nodes": nodes, "terminal_visited": len(visited),
                         "prediction_visited": node.visits > 0})


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


def mcts_family(ctx: SearchContext, example: Any, kind: str) -> Search:
    return (yield from mcts(ctx, example, step_scorer=kind, leaf_value=kind))
