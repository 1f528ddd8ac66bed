"""Fresh single passes of a toy world's policy as the supervised row's training records, and a scorer's fit to them.

    python -m masprm.instruments.passes --world toy_deep --n 400 --samples 2 --seed 42 --out results/learnability/passes_400.jsonl
    python -m masprm.instruments.passes --world toy_deep --fit checkpoints/x --records results/learnability/passes_400.jsonl

Writing (the default): the first ``--n`` questions of the world's **train** buckets in generation order (never dev
or test: a question's split is a hash of its text), ``--samples``
passes each through the team, sampled exactly as the step benchmark samples its transcripts
(`masprm.instruments.stepbench.sample_split`: one batched pass at ``--temperature`` and ``--top_p``, keyed by ``--seed``
and the question, so the same seed gives the same file). The first questions are the train split itself (400 on
toy_deep); a larger ``--n`` (up to ``MAX_QUESTIONS``, the learning curves' largest size) goes on along the same
buckets, so every size holds the smaller ones' questions first. Each message labelled by the world's step truth with
the `step_truth` scheme's rule (its own verdict, +1 / -1). The output is a stage-2 ``steps`` file (prompt = the
question, completions = the messages, labels), trained with ``--mode prm``; each record's ``meta`` names the
scheme, the question (the eval split groups by it) and its pass.

``--fit FOLDER --records FILE``: the train-fit of docs/learnability.md, a scorer's step AUC per agent on the
records of its first ``--n`` questions, every step valued as the step benchmark values one (the full transcript
after it), printed and written as JSON to ``--out`` when given. Pure Python until a model loads.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from masprm.checks import check_output_file, check_seeds
from masprm.cli import ArgumentParser, check, run_cli
from masprm.config import add_config_args, arg, config_from_args, require, require_each
from masprm.io import atomic_write_json, atomic_write_jsonl
from masprm.paths import PathText, check_input_dir
from masprm.step_metrics import auc
from masprm.worlds import WORLDS

SCHEME = "step_truth"   # the rule the records are labelled by (masprm.worlds.step_truth)
# the recipe search's largest train size: 4 times the learning curves' largest (docs/learnability.md, C9's amendment)
MAX_QUESTIONS = 25600


@dataclass(frozen=True)
class PassArgs:
    world: str = arg("toy_deep", flags=("--world",), help=f"the toy world ({', '.join(WORLDS.names())}; "
                                                          "default toy_deep)")
    n: int = arg(400, flags=("--n",), help=f"the first N questions of the world's train buckets (default 400, "
                                           f"toy_deep's train split; at most {MAX_QUESTIONS}: more go on past the "
                                           "split along the same buckets, never into dev or test)")
    samples: int = arg(2, flags=("--samples",), help="passes per question (default 2)")
    policy: PathText | None = arg(None, help="the policy model folder (default: the world's build, "
                                             "artifacts/<world>/policy)")
    mas_config: PathText | None = arg(None, flags=("--mas_config",), help="the team (default: the world's)")
    temperature: float = arg(0.7, help="sampling temperature (default 0.7, the step benchmark's)")
    top_p: float = arg(0.95, flags=("--top_p",), help="nucleus sampling (default 0.95)")
    seed: int = arg(42, help="seed of the passes (the same seed writes the same file)")
    search_batch_size: int = arg(32, flags=("--search_batch_size",),
                                 help="questions whose model calls are batched together (the file does not "
                                      "depend on it)")
    out: PathText | None = arg(None, help="the records (JSONL) to write; with --fit, the fit report (JSON), "
                                          "optional")
    fit: PathText | None = arg(None, flags=("--fit",),
                               help="instead of writing records: this scorer folder's step AUC per agent on "
                                    "--records (its train-fit)")
    records: PathText | None = arg(None, flags=("--records",), help="--fit: the steps file the scorer was "
                                                                     "trained on")

    def __post_init__(self) -> None:
        require(self.world in WORLDS, "world", f"world: {WORLDS.unknown_message(self.world)}")
        require_each(self, ("n", "samples", "search_batch_size"), lambda v: v >= 1, "must be at least 1")
        require_each(self, ("temperature",), lambda v: v > 0, "must be positive")
        require(0 < self.top_p <= 1, "top_p", f"top_p must be in (0, 1], got {self.top_p}")
        check_seeds(self)
        require(self.n <= MAX_QUESTIONS, "n", f"n: at most {MAX_QUESTIONS} train questions (the recipe search's "
                                              f"largest size, docs/learnability.md), got {self.n}")
        require((self.fit is None) == (self.records is None), "records",
                "records: --fit and --records go together (the scorer and the file it was trained on)")
        require(self.fit is not None or self.out is not None, "out", "out: give --out FILE, the records to write")
        WORLDS[self.world].fill_defaults(self)


def first_questions(task, n: int) -> tuple:
    """The first `n` problems of a task's train buckets in generation order: its train split first, then (where `n`
    is larger) the ones after it; every size holds every smaller one as its prefix. Kept out of the task's own
    module, whose code is part of the shipped policies' build fingerprint."""
    from itertools import islice

    from masprm.worlds.toy.task import generate_split

    fixed = generate_split("train", task)
    return fixed[:n] if n <= len(fixed) else (*fixed, *islice(task.iter_split("train"), len(fixed), n))


def pass_records(transcripts: list[dict]) -> list[dict]:
    """Stage-2 steps records of labelled transcripts (`stepbench.sample_split`'s), in their order."""
    seen: dict[str, int] = {}
    out = []
    for t in transcripts:
        k = seen[t["question"]] = seen.get(t["question"], -1) + 1
        out.append({"prompt": t["question"], "completions": t["outputs"],
                    "labels": [1.0 if s["correct"] else -1.0 for s in t["steps"]],
                    "meta": {"label_scheme": SCHEME, "question": t["question"], "pass": k,
                             "agents": [s["agent"] for s in t["steps"]]}})
    return out


def write_passes(args: PassArgs) -> int:
    from masprm.graph import load_mas_config
    from masprm.instruments import stepbench

    check_input_dir(args.policy, "policy")
    check_output_file(args.out, "out", inputs={"policy": args.policy, "mas_config": args.mas_config})
    world = WORLDS[args.world]
    graph = load_mas_config(args.mas_config)
    try:
        world.check_graph(graph)
    except ValueError as err:
        check(False, f"{err} (--mas_config)")
    started = time.time()
    problems = first_questions(world.truth.task, args.n)
    transcripts = stepbench.sample_split(stepbench.load_policy(args), graph, problems, args, args.samples)
    written = atomic_write_jsonl(args.out, pass_records(transcripts))
    right = sum(s["correct"] for t in transcripts for s in t["steps"])
    steps = sum(len(t["steps"]) for t in transcripts)
    print(f"[passes] {args.world} train questions 0-{args.n - 1}, {args.samples} passes each: {written} records, "
          f"{steps} steps ({right} right), {time.time() - started:.0f} s -> {args.out}")
    return 0


def agent_aucs(records: list[dict], values: list[list[float]]) -> dict[str, float | None]:
    """Each agent's step AUC: its steps' values against their labels (+1 right), team order."""
    by_agent: dict[str, tuple[list[float], list[int]]] = {}
    for rec, vs in zip(records, values):
        for agent, v, y in zip(rec["meta"]["agents"], vs, rec["labels"]):
            pair = by_agent.setdefault(agent, ([], []))
            pair[0].append(v)
            pair[1].append(int(y > 0))
    return {agent: auc(vs, ys) for agent, (vs, ys) in by_agent.items()}


def read_records(path: str, n: int) -> list[dict]:
    """The records of the file's first n questions (in the file's order), each naming its agents."""
    from masprm.train.data import load_records   # a bad file is one line naming it

    records, questions = [], []
    for rec in load_records(path, "prm"):
        meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
        check(isinstance(meta.get("agents"), list) and len(meta["agents"]) == len(rec.get("labels", ())),
              f"--records {path}: a record without its agents (meta.agents): a file of masprm.instruments.passes is needed")
        if meta.get("question") not in questions:
            if len(questions) == n:
                break
            questions.append(meta.get("question"))
        records.append(rec)
    return records


def fit_report(args: PassArgs) -> int:
    from masprm.state_text import join_steps
    from masprm.instruments.stepbench import load_scorer_folder

    check_input_dir(args.fit, "fit")
    if args.out is not None:
        check_output_file(args.out, "out", inputs={"fit": args.fit, "records": args.records})
    records = read_records(args.records, args.n)
    scorer = load_scorer_folder(args.fit, args.policy, "fit")
    texts = [join_steps(r["prompt"], r["completions"][:i + 1], scorer.separator)
             for r in records for i in range(len(r["completions"]))]
    flat = iter(scorer.score_batch(texts))
    values = [[next(flat) for _ in r["completions"]] for r in records]
    by_agent = agent_aucs(records, values)
    known = [v for v in by_agent.values() if v is not None]
    report = {"scorer": str(args.fit), "records": str(args.records), "questions": args.n, "steps": len(texts),
              "auc_by_agent": by_agent, "auc_mean": sum(known) / len(known) if known else None}
    print(json.dumps(report))
    if args.out is not None:
        atomic_write_json(args.out, report)
    return 0


def main() -> int:
    p = ArgumentParser(description="Fresh single passes of a toy world's policy labelled by its step truth (the "
                                   "supervised row's records), or a scorer's fit to them (--fit).")
    add_config_args(p, PassArgs)
    args = config_from_args(PassArgs, p.parse_args())
    return fit_report(args) if args.fit is not None else write_passes(args)


if __name__ == "__main__":
    run_cli(main)
