"""The static evaluation methods of SPEC §9, registered in the method registry.

single_pass, step-level beam search (sbs_*), inference MCTS (mcts_*) and
voters (voter_*) all grow trajectories through `masprm.eval.expand`; they
differ in what they keep. Importing this module also registers the handoff
methods when that package is present, so the registry is complete for the CLI.
Pure Python: no torch import.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from masprm.answers import answers_equal
from masprm.eval.expand import (SCORER_KINDS, Candidate, ScorerKind, Step, aggregate_logprob,
                                drop_duplicate_texts, ensure_logprobs, orm_values, prm_values, propose,
                                score_candidates, softmax)
from masprm.eval.registry import EvalContext, MethodResult, register_method
from masprm.eval.settings import (LogProbSettings, MCTSSettings, ORMLeafSettings, PassSettings, SBSSettings,
                                  ViewSettings, VoterSettings)
from masprm.graph import RoutingState
from masprm.search.node import Node, argmax_child, backup, puct, uct_inference


def scorers_needed(method: str, settings: Any) -> set[str]:
    """Scorer roles beyond the registry's static `needs` (`--orm_leaf` adds the ORM to mcts_prm)."""
    return {"orm"} if method == "mcts_prm" and getattr(settings, "orm_leaf", False) else set()


# --------------------------------------------------------------------------- step-level beam search


@dataclass(frozen=True)
class Beam:
    state: RoutingState
    score: float = 0.0
    trail: tuple[Candidate, ...] = ()    # the candidates chosen so far, in order


def beam_search(ctx: EvalContext, beams: list[Beam], *, width: int, branching: int,
                scorer: str | None, temperature: float) -> Step:
    """Decide the agents in topological order, `branching` candidates per beam, keep `width`.

    Beams for which the agent is not runnable are carried forward with their
    score. A candidate's score replaces its beam's score. Without a scorer
    only each beam's first candidate is kept and nothing is re-ranked.
    """
    for agent in ctx.graph.topo_order:
        active = [i for i, b in enumerate(beams) if b.state.is_runnable(agent)]
        if not active:
            continue
        proposals = yield from propose(ctx, [beams[i].state for i in active], agent, branching,
                                       temperature=temperature)
        if scorer:
            yield from score_candidates(ctx, scorer, [c for group in proposals for c in group])
        grown = dict(zip(active, proposals))
        next_beams: list[Beam] = []
        for i, beam in enumerate(beams):
            if i not in grown:
                next_beams.append(beam)
                continue
            kept = grown[i] if scorer else grown[i][:1]
            next_beams.extend(Beam(c.state, c.score if scorer else beam.score, beam.trail + (c,))
                              for c in kept)
        if scorer:
            next_beams.sort(key=lambda b: -b.score)   # stable: earlier beams win ties
        beams = next_beams[:width]
    return beams


def sbs(ctx: EvalContext, example: Any, *, width: int, branching: int, scorer: str | None) -> Step:
    start = Beam(ctx.graph.start(example.question))
    beams = yield from beam_search(ctx, [start], width=width, branching=branching, scorer=scorer,
                        temperature=ctx.settings.sbs_temperature)
    answers = [b.state.final_answer() for b in beams]
    return MethodResult(answers[0], answers, {"beam_scores": [b.score for b in beams]})


@register_method("single_pass", settings=(PassSettings,))
def single_pass(ctx: EvalContext, example: Any) -> Step:
    return (yield from sbs(ctx, example, width=1, branching=1, scorer=None))


def sbs_family(ctx: EvalContext, example: Any, kind: str) -> Step:
    return (yield from sbs(ctx, example, width=ctx.settings.b1, branching=ctx.settings.b2, scorer=kind))


# --------------------------------------------------------------------------- inference MCTS


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


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def vote(answers: Sequence[str], log_weights: Sequence[float],
         same: Callable[[str, str], bool] = answers_equal) -> tuple[int, list[list[int]]]:
    """Index of the winning answer, and the groups (lists of run indices).

    Answers are grouped by `same` against each group's first member. The
    group with the largest total weight wins; ties go to the larger group,
    then the shorter representative (the group's first member, as in the
    original), then the earlier group. The prediction is the winning group's
    shortest member.
    """
    groups: list[list[int]] = []
    for i, answer in enumerate(answers):
        for group in groups:
            if same(answer, answers[group[0]]):
                group.append(i)
                break
        else:
            groups.append([i])

    def shortest(group: list[int]) -> int:
        return min(group, key=lambda i: (len(answers[i]), i))

    def rank(g: int) -> tuple:
        group = groups[g]
        return (_logsumexp([log_weights[i] for i in group]), len(group), -len(answers[group[0]]), -g)

    best = max(range(len(groups)), key=rank)
    return shortest(groups[best]), groups


def voter_family(ctx: EvalContext, example: Any, weighting: str) -> Step:
    k = ctx.settings.voter_k
    start = Beam(ctx.graph.start(example.question))
    # k independent single passes, advanced together so each agent is one policy call.
    runs = yield from beam_search(ctx, [start] * k, width=k, branching=1, scorer=None,
                       temperature=ctx.settings.sbs_temperature)
    answers = [b.state.final_answer() for b in runs]
    winner, groups = vote(answers, (yield from SCORER_KINDS[weighting].weight(ctx, runs)))
    return MethodResult(answers[winner], answers, {"answer_groups": len(groups)})


# --------------------------------------------------------------------------- scorer kinds

# What a scorer kind's value is at a step, at an MCTS leaf and as a voter run's log-weight.

def _score_prm(ctx: EvalContext, cands: Sequence[Candidate]) -> Step:
    values = yield from prm_values(ctx, [c.state for c in cands], [c.agent for c in cands])
    for c, v in zip(cands, values):
        c.score = v


def _score_logprob(ctx: EvalContext, cands: Sequence[Candidate]) -> Step:
    yield from ensure_logprobs(ctx, cands)
    for c in cands:
        c.score = aggregate_logprob([c.logprob], ctx.settings.logprob_agg)


def _score_zero(ctx: EvalContext, cands: Sequence[Candidate]) -> Step:
    # The ORM only judges finished transcripts; intermediate steps start neutral.
    for c in cands:
        c.score = 0.0
    return
    yield  # a search step that asks no model



def _leaf_prm(ctx: EvalContext, path: list[Node]) -> Step:
    if ctx.settings.orm_leaf:   # --orm_leaf: the PRM guides the search, the ORM values its leaves
        return (yield from _leaf_orm(ctx, path))
    return path[-1].info.get("score", 0.0)


def _leaf_logprob(ctx: EvalContext, path: list[Node]) -> Step:
    # Every node of a log-prob tree got its step log-prob when it was created.
    return aggregate_logprob([n.info["logprob"] for n in path[1:]], ctx.settings.logprob_agg)
    yield  # asks no model


def _leaf_orm(ctx: EvalContext, path: list[Node]) -> Step:
    leaf = path[-1]
    if "orm" not in leaf.info:   # a terminal leaf is revisited; score it once
        [leaf.info["orm"]] = yield from orm_values(ctx, [leaf.state])
    return leaf.info["orm"]


def _log_weights_prm(ctx: EvalContext, beams: list[Beam]) -> Step:
    # One forward over every step of every run: product of max(1e-6, (v + 1) / 2).
    steps = [c for b in beams for c in b.trail]
    values = iter((yield from prm_values(ctx, [c.state for c in steps], [c.agent for c in steps])))
    return [sum(math.log(max(1e-6, (next(values) + 1) / 2)) for _ in b.trail) for b in beams]


def _log_weights_logprob(ctx: EvalContext, beams: list[Beam]) -> Step:
    yield from ensure_logprobs(ctx, [c for b in beams for c in b.trail])
    return [aggregate_logprob([c.logprob for c in b.trail], ctx.settings.logprob_agg) for b in beams]


def _log_weights_orm(ctx: EvalContext, beams: list[Beam]) -> Step:
    values = yield from orm_values(ctx, [b.state for b in beams])
    return [-math.log1p(math.exp(-v)) for v in values]   # log sigmoid


def _log_weights_plain(ctx: EvalContext, beams: list[Beam]) -> Step:
    return [0.0] * len(beams)
    yield  # asks no model


# Each family's settings class and its method for a kind.
FAMILIES: dict[str, tuple[type, Callable[[EvalContext, Any, str], Step]]] = {
    "sbs": (SBSSettings, sbs_family), "mcts": (MCTSSettings, mcts_family), "voter": (VoterSettings, voter_family),
}


def register_scorer_kind(kind: ScorerKind) -> ScorerKind:
    """Register a scorer kind and its methods ``<family>_<name>`` for each of its families."""
    SCORER_KINDS.register(kind.name, kind)
    for family in kind.families:
        cls, run = FAMILIES[family]
        extra = kind.mcts_settings if family == "mcts" else ()
        register_method(f"{family}_{kind.name}", needs=kind.needs, settings=(cls, *kind.settings, *extra))(
            lambda ctx, example, _run=run, _kind=kind.name: _run(ctx, example, _kind))
    return kind


register_scorer_kind(ScorerKind("prm", _score_prm, _leaf_prm, _log_weights_prm, needs=("prm",),
                                settings=(ViewSettings,), mcts_settings=(ORMLeafSettings,)))
register_scorer_kind(ScorerKind("logprob", _score_logprob, _leaf_logprob, _log_weights_logprob,
                                settings=(LogProbSettings,)))
register_scorer_kind(ScorerKind("orm", _score_zero, _leaf_orm, _log_weights_orm, families=("mcts", "voter"),
                                needs=("orm",), settings=(ViewSettings,)))
register_scorer_kind(ScorerKind("plain", weight=_log_weights_plain, families=("voter",)))


# --------------------------------------------------------------------------- handoff methods


def _register_handoff_methods() -> None:
    """The handoff package registers its methods on import; it is optional."""
    try:
        importlib.import_module("masprm.handoff.methods")
    except ModuleNotFoundError as err:
        if not (err.name or "").startswith("masprm.handoff"):
            raise


_register_handoff_methods()
