"""Hand-built MAS configs and search trees, in the tree format of ``masprm.tree_schema``.

The Reader -> Planner -> Solver -> Verifier team (``GSM8K``), a variable-depth team whose judge can
call in a refiner (``DYLAN``), a one-agent team; node builders (``node``, ``leaf``, ``root``) and two
fixed trees with hand-set values (``gsm8k_tree``, ``dylan_tree``); a scripted policy for the GSM8K
team on that tree's question; trees written to a folder and a repo-like stage-2 folder
(``preprocess_workdir``). Use it for tests of labels, pairs and stage 2 that start from trees
instead of running a search.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from masprm.tree_schema import action_text, tree_node


# Reader -> Planner -> Solver -> Verifier with question skip-edges (the graph of configs/gsm8k.yaml).
GSM8K = {
    "agents": [{"name": n, "system_prompt": f"You are the {n}."} for n in ("Reader", "Planner", "Solver", "Verifier")],
    "edges": [[-1, 0], [-1, 1], [0, 1], [1, 2], [-1, 3], [2, 3]],
}
# Two solvers -> judge; a refiner and a final judge run only when the judge disagrees.
DYLAN = {
    "agents": [{"name": n, "system_prompt": n} for n in ("SolverA", "SolverB", "Judge", "Refiner", "Final")],
    "edges": [[-1, 0], [-1, 1], [0, 2], [1, 2], [-1, 3], [2, 3, "contains:VERDICT: DISAGREE"], [3, 4]],
}
SINGLE = {"agents": [{"name": "Solo", "system_prompt": "Solve."}], "edges": [[-1, 0]]}

Q = "What is 2 + 2?"


def node(agent, text, q, *children, terminal=False, visits=1):
    return tree_node(steps=[], action=action_text(agent, text), is_terminal=terminal,
                     final_answer=text if terminal else None, visits=visits, q_sum=q * visits, q_mean=q,
                     node_text=text, children=children)


def leaf(agent, text, q, visits=1):
    return node(agent, text, q, terminal=True, visits=visits)


def root(q, *children, question=Q, visits=10):
    return {**tree_node(steps=[], action=None, is_terminal=False, final_answer=None, visits=visits,
                        q_sum=q * visits, q_mean=q, node_text=question, children=children),
            "meta": {"gold": "4", "dataset": "test"}}


def gsm8k_tree(root_q=0.2):
    """The fixed-depth example: R1 -> {P1 -> S1 -> {V1 +1, V2 -1}, P2 -> S2 -> V3 -1}."""
    return root(root_q, node(0, "read", 0.2,
                             node(1, "plan A", 0.5,
                                  node(2, "solve A", 0.5, leaf(3, "answer: 4", 1.0), leaf(3, "answer: 5", -1.0))),
                             node(1, "plan B", -1.0,
                                  node(2, "solve B", -1.0, leaf(3, "answer: 7", -1.0))),
                             visits=6))


def scripted_team(verify):
    """A scripted policy for GSM8K's team on `gsm8k_tree`'s question: a fresh Reader writes 'fresh reading', a
    Planner 'plan X', a Solver 'solve B' after plan B and 'solve A' otherwise; the Verifier answers
    `verify(what it was shown)`."""
    from conftest import FakePolicy

    def respond(messages, k, rng):
        who, seen = messages[0]["content"], messages[-1]["content"]
        if who == "You are the Planner.":
            return "plan X"
        if who == "You are the Solver.":
            return "solve B" if "plan B" in seen else "solve A"
        return verify(seen) if who == "You are the Verifier." else "fresh reading"

    return FakePolicy(respond)


def dylan_tree():
    """Variable depth: the judge agrees (3 steps, terminal) or disagrees (5 steps)."""
    return root(0.0, node(0, "A says 3", 0.0,
                          node(1, "B says 4", 0.0,
                               leaf(2, "VERDICT: AGREE answer 3", -1.0),
                               node(2, "VERDICT: DISAGREE", 0.5,
                                    node(3, "refined 4", 0.5, leaf(4, "final 4", 1.0), leaf(4, "final 3", -1.0),
                                         visits=2),
                                    visits=2),
                               visits=3)))


def write_trees(folder, trees):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, t in enumerate(trees):
        p = folder / f"{i}.json"
        p.write_text(json.dumps(t) if not isinstance(t, str) else t)
        paths.append(p)
    return paths


def preprocess_workdir(folder: Path, run: str) -> Path:
    """A repo-like stage-2 folder: configs/gsm8k(_dylan).yaml and results/<run>/ with three trees."""
    (folder / "configs").mkdir()
    (folder / "configs" / "gsm8k.yaml").write_text(yaml.safe_dump(GSM8K))
    (folder / "configs" / "gsm8k_dylan.yaml").write_text(yaml.safe_dump(DYLAN))
    write_trees(folder / "results" / run, [gsm8k_tree(), gsm8k_tree(0.1), gsm8k_tree(0.95)])
    return folder
