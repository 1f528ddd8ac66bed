"""Helpers shared by the test files (imported as ``helpers``: pytest puts tests/ on the path).

Hand-built MAS configs and search trees (in the tree format of ``masprm.tree_schema``),
synthetic stage-2 records for scorer training, loading a stage script as a module, the
scripted two-agent world of the evaluation tests, stage-1 jobs on a scripted team, and
running the stage CLIs on small local data.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import os
import random
from typing import Any
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from masprm.data import Example
from masprm.eval.logs import LogFiles, PartialLog, manifest_hash_of, render_log, start_line, write_condition
from masprm.eval.methods import METHODS
from masprm.eval.metrics import summarize_records
from masprm.eval.settings import EvalSettings
from masprm.search.engine import drive
from masprm.search.context import SearchContext
from masprm.graph import MASGraph
from masprm.eval.tree_runner import TreeJob
from masprm.search.train_mcts import TreeSearchSettings
from masprm.train import TrainConfig
from masprm.tree_schema import action_text, tree_node

REPO = Path(__file__).resolve().parents[1]
SEP = "</step>"


def flag(cmd: list[str], name: str) -> list[str]:
    """The values after `name` in a command line, up to the next flag."""
    i = cmd.index(name)
    out = []
    for value in cmd[i + 1:]:
        if value.startswith("--"):
            break
        out.append(value)
    return out


def load_script(path: str | Path, name: str | None = None):
    """A module file (e.g. a plug-in in tmp_path) imported by path, without running it as __main__."""
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


def train_tiny(tmp: Path, model: Path, mode: str, seed: int, scheme: str = "mc", **overrides):
    """A scorer of `mode` trained (two optimizer steps unless `overrides` say) on 16 scripted step records of `scheme`."""
    from masprm.train import train_scorer

    rng = random.Random(seed)
    records = [{**step_record(rng), "meta": {"label_scheme": scheme}} for _ in range(16)]
    return train_scorer(config(tmp, write_jsonl(tmp / "s.jsonl", records), model, mode,
                               **{"max_steps": 2, "eval_steps": 2, **overrides}))


def first_eval_batch(result, collator) -> tuple[dict, Any, dict]:
    """(the first eval example, the trainer in eval mode, that example collated on the model's device)."""
    example, trainer = result.eval_examples[0], result.trainer
    trainer.model.eval()
    return example, trainer, {k: v.to(trainer.model.device) for k, v in collator(0)([example]).items()}


def config(tmp: Path, data: Path, model: Path, mode: str, **overrides) -> TrainConfig:
    settings = dict(mode=mode, data_file=str(data), output_dir=str(tmp / f"out_{mode}"), model_id=str(model),
                    lr=3e-3, train_batch_size=8, grad_accum=1, lora_r=8, lora_alpha=16, lora_dropout=0.0,
                    max_length=64, max_prompt_length=32, logging_steps=1, progress=False)
    settings.update(overrides)
    return TrainConfig(**settings)


# --------------------------------------------------------------------------- the scripted evaluation world
# Solver -> Finisher. The Solver's first sample for a prompt is "bad", later ones are "good plan k";
# the Finisher answers 7 (the gold) after a good plan and 5 after a bad one. The fake policy's
# log-prob is -len(text), so likelihood prefers the short "bad" step: only a scorer that knows
# better finds the answer.

CHAIN = {
    "agents": [{"name": "Solver", "system_prompt": "solve"}, {"name": "Finisher", "system_prompt": "finish"}],
    "edges": [[-1, 0], [0, 1]],
}
GOLD = "7"
QUESTION = "What is 3 + 4?"


def chain_graph() -> MASGraph:
    return MASGraph.from_dict(CHAIN, source="<chain>")


def respond(messages, k, rng):
    if messages[0]["content"] == "solve":
        return "bad" if k == 0 else f"good plan {k}"
    return "Answer: 7" if "good" in messages[1]["content"] else "Answer: 5"


def scripted_solver(pattern):
    """A respond() whose Solver outputs follow `pattern` call after call (for voters: n=1 per prompt)."""
    calls = iter(range(10**6))

    def fn(messages, k, rng):
        if messages[0]["content"] == "solve":
            return pattern[next(calls) % len(pattern)]
        return respond(messages, k, rng)

    return fn


class FakeScorer:
    """The tests' one `Scorer`: score_batch via a rule on the text; records each call's texts
    (``calls``) and sizes (``batches``); counts words as tokens."""

    separator = "</step>"

    def __init__(self, rule):
        self.rule = rule
        self.batches: list[int] = []
        self.calls: list[list[str]] = []
        self.texts: list[str] = []
        self.tokens_seen = 0
        self.last_tokens: list[int] = []

    def count_tokens(self, text):
        return len(text.split())

    def score_batch(self, texts):
        self.batches.append(len(texts))
        self.calls.append(list(texts))
        self.texts.extend(texts)
        self.last_tokens = [self.count_tokens(t) for t in texts]   # per text, as HFScorer reports them
        self.tokens_seen += sum(self.last_tokens)
        return [self.rule(t) for t in texts]


def prefers_good(text: str) -> float:
    return 0.9 if "good" in text else -0.9


def prefers_bad(text: str) -> float:
    return -prefers_good(text)


def orm_prefers_seven(text: str) -> float:
    return 0.9 if "Answer: 7" in text else -0.9


@functools.lru_cache(maxsize=1)
def _defaults() -> dict:
    from masprm.stages.evaluate import build_parser
    return vars(build_parser().parse_args([]))


def settings(**overrides) -> EvalSettings:
    """The runner's settings from the CLI's defaults (the one source of them), with flag overrides."""
    return EvalSettings.from_args({**_defaults(), **overrides})


def make_ctx(method: str, policy, *, masprm=None, orm=None, **overrides) -> SearchContext:
    """The context `method` runs in on the chain world: its own settings (flag overrides applied)."""
    return SearchContext(policy=policy, graph=chain_graph(), settings=settings(**overrides).method_settings(method),
                         scorers={role: s for role, s in (("masprm", masprm), ("orm", orm)) if s is not None})


def run_method(method: str, ctx: SearchContext, ex: Example | None = None):
    """`method` on one example alone (each request one model call); its SearchResult."""
    return drive(METHODS[method].search(ctx, ex or example()), ctx)


def example(idx: int = 0) -> Example:
    return Example(idx, QUESTION, GOLD, {})


# --------------------------------------------------------------------------- stage-1 jobs on a scripted team

# A reader, a solver and a refiner that runs only when the solver hedges: trajectories of 2 or 3 steps.
BRANCHY = MASGraph.from_dict({
    "agents": [{"name": "reader", "system_prompt": "read"}, {"name": "solver", "system_prompt": "solve"},
               {"name": "refiner", "system_prompt": "refine"}],
    "edges": [[-1, 0], [-1, 1], [0, 1], [1, 2, "contains:unsure"]],
})


def ends_with_gold(prediction: str, gold: str | None) -> bool:
    return gold is not None and prediction.strip().endswith(gold)


def random_team(fake_policy):
    """Outputs drawn from the policy's (reseeded) RNG: the tree depends only on the seed."""
    def respond(messages, k, rng):
        role = messages[0]["content"]
        if role == "solve":
            return rng.choice(["Answer: 3", "Answer: 4", "unsure, maybe 3"])
        if role == "refine":
            return rng.choice(["Answer: 3", "Answer: 5"])
        return rng.choice(["numbers 1 and 2", "one plus two"])
    return fake_policy(respond)


EXAMPLES = [Example(i, f"What is {i} + 2?", str(i + 2), {"source": "test"}) for i in range(4)]


def make_job(out_dir: Path, seed: int = 42, **kw) -> TreeJob:
    settings = TreeSearchSettings(n_rollouts=6, n_candidates=kw.pop("n_candidates", 3))
    return TreeJob(BRANCHY, settings, str(out_dir), seed, {"dataset": "toy", "split": "train",
                   "config": "configs/x.yaml", "model": "fake"}, grade=ends_with_gold, **kw)


# --------------------------------------------------------------------------- the stage CLIs on small local data

EVAL_SCRIPT = REPO / "src" / "experiments" / "compare_sbs_mcts.py"
EVAL_ROWS = [("Tom has 3 apples and buys 4 more. How many apples does he have?", 7),
              ("A box holds 6 pens. How many pens are in 2 boxes?", 12),
              ("Sara had 10 coins and lost 3. How many are left?", 7)]
FAST = ["--max_new_tokens", "6", "--device_map", "cpu", "--no_compile"]   # the random tiny model never stops


def write_gsm8k(path: Path) -> Path:
    path.write_text("".join(json.dumps({"question": q, "answer": f"So it is {a}.\n#### {a}"}) + "\n"
                            for q, a in EVAL_ROWS))
    return path


def trained_adapter(tmp_path_factory, tiny_model_dir) -> Path:
    """A ppm adapter from src/train/trainer.py (a couple of steps), built once per test session."""
    out = tmp_path_factory.getbasetemp() / "eval_prm_adapter"
    if (out / "adapter_config.json").is_file():
        return out
    pairs = tmp_path_factory.getbasetemp() / "eval_pairs.jsonl"
    pairs.write_text("".join(json.dumps({"prompt": f"What is {i} + {i}?",
                                         "chosen_actions": [f"{i}+{i}={2 * i}", f"Answer: {2 * i}"],
                                         "rejected_actions": [f"{i}+{i}={2 * i}", f"Answer: {2 * i + 1}"]}) + "\n"
                             for i in range(6)))
    done = subprocess.run([sys.executable, str(REPO / "src" / "train" / "trainer.py"), "--mode", "ppm",
                           "--data_dir", str(pairs), "--model-id", str(tiny_model_dir), "--output-dir", str(out),
                           "--max-steps", "1", "--train-batch-size", "4", "--grad-accum", "1", "--lora-r", "4",
                           "--lora-alpha", "8", "--seed", "0", "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def run_eval(*argv, cwd=REPO):
    """src/experiments/compare_sbs_mcts.py with `argv`, as a user runs it."""
    return subprocess.run([sys.executable, str(EVAL_SCRIPT), *map(str, argv)], cwd=cwd, capture_output=True,
                          text=True, timeout=400)


RUN_MCTS = REPO / "src" / "run_mcts.py"
SHOW_TREE = REPO / "src" / "show_tree.py"

STAGE1_ROWS = [
    {"question": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "3 + 4 = 7\n#### 7"},
    {"question": "A box holds 6 pens. How many pens are in 2 boxes?", "answer": "6 * 2 = 12\n#### 12"},
    {"question": "Ann had 9 cards and gave away 5. How many are left?", "answer": "no final answer here"},
]
def make_workdir(tmp_path: Path) -> Path:
    """A folder laid out like the repo: configs/gsm8k.yaml (short outputs, so the test is quick) and data."""
    shipped = REPO / "configs" / "gsm8k.yaml"
    config = yaml.safe_load(shipped.read_text()) if shipped.is_file() else GSM8K
    for agent in config["agents"]:
        agent["max_new_tokens"] = 6
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "gsm8k.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "gsm8k.jsonl").write_text("".join(json.dumps(r) + "\n" for r in STAGE1_ROWS))
    return tmp_path


SMOKE = ["--dataset", "gsm8k", "--split", "train", "--n", "2", "--seed", "42", "--n_rollouts", "2",
         "--search_c", "4", "--n_candidates", "3", "--mas_config", "configs/gsm8k.yaml", "--load_in_4bit",
         "--no_compile"]  # the seed README's smoke test, verbatim


# a checkout script's name -> the stage module it runs (masprm.stages)
STAGE_OF_SCRIPT = {"run_mcts": "trees", "preprocess_data": "preprocess", "trainer": "train",
                   "compare_sbs_mcts": "evaluate", "aggregator": "aggregate", "show_tree": "show_tree", "demo": "demo",
                   "lab": "lab"}


def stage_module(script: str):
    """The stage module behind a checkout script (``run_mcts`` -> ``masprm.stages.trees``)."""
    return importlib.import_module(f"masprm.stages.{STAGE_OF_SCRIPT[script]}")


def call_main(monkeypatch, capsys, args: list[str], script: str = "run_mcts") -> tuple[int, str, str]:
    """Run a CLI in this process: fast, and run_mcts loads no model before the input is checked."""
    from masprm.cli import run_cli

    monkeypatch.setattr(sys, "argv", [f"{script}.py", *args])
    with pytest.raises(SystemExit) as exit_info:
        run_cli(stage_module(script).main)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def run_module(monkeypatch, capsys, module: str, argv: list[str]) -> tuple[int, list[str], str]:
    """(exit code, stderr lines, stdout) of a command's main run through run_cli in this process."""
    from masprm.cli import run_cli

    monkeypatch.setattr(sys, "argv", [module.rsplit(".", 1)[-1] + ".py", *argv])
    try:
        run_cli(importlib.import_module(module).main)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    captured = capsys.readouterr()
    return code, [ln for ln in captured.err.splitlines() if ln.strip()], captured.out


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root`: a file's content hash and mode, a folder (a new empty one counts too),
    a link's target; "nothing outside, nothing lost" compares two of these."""
    out = {}
    for p in sorted(root.rglob("*")):
        key = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[key] = f"-> {os.readlink(p)}"
        elif p.is_dir():
            out[key] = "folder"
        elif p.is_file():
            out[key] = hashlib.sha1(p.read_bytes()).hexdigest() + oct(p.stat().st_mode & 0o777)
        else:
            out[key] = "special"   # a FIFO: never read
    return out


# --------------------------------------------------------------------------- Ray workers


def ray_ships(*modules: str) -> None:
    """Ray workers import only the masprm package the run ships them: what the named test modules
    define (scripted setups, fake policies) travels with the pickled tasks instead."""
    from ray import cloudpickle

    for name in modules:
        cloudpickle.register_pickle_by_value(sys.modules[name])


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ray_temp_dir() -> Path:
    """A fresh Ray temp folder (sessions, the address file) under /tmp: Ray's socket paths must stay short."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))


# Two short-spoken agents and the tiny model: stage-1 arguments of a quick run on local data.
TWO_AGENTS = {"agents": [{"name": "Solver", "system_prompt": "Solve it.", "max_new_tokens": 6},
                         {"name": "Checker", "system_prompt": "Check it.", "max_new_tokens": 6}],
              "edges": [[-1, 0], [0, 1], [-1, 1]]}


def stage1_args(folder: Path, model_dir: Path, n: int = 3) -> list[str]:
    """Arguments of a quick stage-1 run on the tiny model; writes its team and data into `folder`."""
    (folder / "team.yaml").write_text(yaml.safe_dump(TWO_AGENTS))
    data = write_gsm8k(folder / "gsm8k.jsonl")
    return ["--dataset", "gsm8k", "--data_file", str(data), "--mas_config", str(folder / "team.yaml"),
            "--model_id", str(model_dir), "--n", str(n), "--n_rollouts", "2", "--n_candidates", "2", *FAST]


def files_under(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` by its relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- stage-4 logs


def write_stage4_log(stem: Path, records: list[dict], manifest: dict, *, label: str, dataset: str = "toy",
                     summary: dict | None = None, errors: int = 0, finished: bool = True) -> dict:
    """One condition's files as stage 4 leaves them, written by stage 4's own writer (``masprm.eval.logs``):
    the text log (START line, metric lines, COMPLETED or FAILED when ``errors``), the records, manifest and
    summary sidecars. ``summary`` sets metrics the records do not carry (a test's records hold only what it
    reads); ``finished=False`` leaves what an interrupted run leaves (the START line and a partial file).
    Returns the summary written."""
    files = LogFiles(Path(stem))
    header = [start_line(label, dataset, len(records), manifest_hash_of(manifest))]
    if not finished:
        PartialLog(files, manifest_hash_of(manifest), header, records)
        return {}
    full = {**summarize_records([]), "n": len(records), "errors": errors, "extra": {}, **(summary or {})}
    write_condition(files, render_log(header, [], full), records, manifest, full)
    return full
