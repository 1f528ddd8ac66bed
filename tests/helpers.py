"""Helpers shared by the test files (imported as ``helpers``: pytest puts tests/ on the path).

Hand-built MAS configs and search trees (in the tree format of ``masprm.tree_schema``),
synthetic stage-2 records for scorer training, and loading a stage script as a module.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

from masprm.train import TrainConfig
from masprm.tree_schema import action_text, tree_node

REPO = Path(__file__).resolve().parents[1]
SEP = "</step>"


def load_script(path: str | Path, name: str | None = None):
    """A stage script (e.g. src/experiments/compare_sbs_mcts.py) imported as a module, without running main."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- MAS configs and trees

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


# --------------------------------------------------------------------------- scorer training records


def ppm_record(rng: random.Random) -> dict:
    """The chosen step opens with CORRECT, the rejected one with INCORRECT; the rest is shared noise.

    The deciding word sits several tokens before the separator, so the head
    has to attend back to it.
    """
    a, b = rng.randint(1, 40), rng.randint(1, 40)
    tail = f"{a} + {b} = {a + b + rng.choice([0, 1])}."
    return {"prompt": f"Q: {a} plus {b}? ",
            "chosen_actions": ["Read.", f"CORRECT {tail}"],
            "rejected_actions": ["Read.", f"INCORRECT {tail}"],
            "meta": {"ignored": True}}


def step_record(rng: random.Random) -> dict:
    """Labels follow the verdict word of the last step (earlier step: a weaker echo)."""
    a, b = rng.randint(1, 40), rng.randint(1, 40)
    y = rng.choice([-1.0, 1.0])
    word = "CORRECT" if y > 0 else "INCORRECT"
    return {"prompt": f"Q: {a} plus {b}? ", "completions": [f"{a} + {b}.", f"VERDICT: {word}"],
            "labels": [0.3 * y, y]}


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def config(tmp: Path, data: Path, model: Path, mode: str, **overrides) -> TrainConfig:
    settings = dict(mode=mode, data_file=str(data), output_dir=str(tmp / f"out_{mode}"), model_id=str(model),
                    lr=3e-3, train_batch_size=8, grad_accum=1, lora_r=8, lora_alpha=16, lora_dropout=0.0,
                    max_length=64, max_prompt_length=32, logging_steps=1, progress=False)
    settings.update(overrides)
    return TrainConfig(**settings)
