"""The toy world's step-level benchmark: where does a team transcript first go wrong, and do the scorers see it?

    python -m masprm.toy.stepbench --policy artifacts/toy/policy \\
        --prm_dir checkpoints/toy-ppm --orm_dir checkpoints/toy-orm --out results/toy_stepbench.json

The world knows every story, so each message of a sampled transcript can be
checked for free (`masprm.toy.steplabel`): the labels say which agent made
the first error, if any. These labels are for evaluation only; the scorers
were trained on final outcomes alone.

Transcripts are sampled from the policy (one pass through the team at
``--temperature``) on two splits: ``train`` (calibration,
``--calibration_samples`` per question) and ``test`` (the benchmark,
``--samples`` per question). Each scorer gives every step a
value:

- ``masprm``: the MASPRM's value of the state after the step (what SBS and
  MCTS read);
- ``orm``: the ORM's value of the same state (it was trained on finished
  transcripts only);
- ``logprob``: the policy's mean log-prob per token of the step's message.

As in ProcessBench, a scorer flags the first step whose value falls below a
threshold as the first error (none below: "no error"); the threshold that
maximises F1 on the calibration transcripts is applied to the test
transcripts. Reported per scorer: accuracy on erroneous transcripts, on
correct ones, their harmonic mean (F1), and the AUC of the step value
against step correctness over all test steps.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from tqdm import tqdm

from masprm.checks import check_output_file
from masprm.cli import ArgumentParser, check, run_cli
from masprm.config import add_config_args, arg, config_from_args, require, require_each
from masprm.search.context import SearchContext
from masprm.graph import MASGraph, load_mas_config
from masprm.io import atomic_write_json
from masprm.models.options import ModelOptions
from masprm.search.engine import LoadedModels, Models, RequestKeys, run_batched
from masprm.search.expand import Step, ensure_logprobs, masprm_values, orm_values, propose
from masprm.search.settings import SamplingSettings, ViewSettings, combined_settings
from masprm.step_metrics import auc, best_threshold, localisation_scores
from masprm.toy.steplabel import label_transcript, summarize
from masprm.toy.task import Problem, generate_split
from masprm.toy.transcripts import check_graph

SCORERS = ("masprm", "orm", "logprob")
SPLITS = {"calibration": "train", "test": "test"}   # transcript set -> the task split it samples


@dataclass(frozen=True)
class StepBenchArgs:
    policy: str = arg("artifacts/toy/policy", help="the policy model folder (default artifacts/toy/policy)")
    prm_dir: str = arg("checkpoints/toy-ppm", flags=("--prm_dir",), help="the MASPRM folder")
    orm_dir: str = arg("checkpoints/toy-orm", flags=("--orm_dir",), help="the ORM folder")
    mas_config: str = arg("configs/toy.yaml", flags=("--mas_config",), help="the team")
    out: str = arg("results/toy_stepbench.json", help="JSON report to write")
    samples: int = arg(2, help="transcripts sampled per test question (default 2)")
    calibration_samples: int = arg(1, flags=("--calibration_samples",),
                                   help="transcripts sampled per train question, to choose the thresholds (default 1)")
    temperature: float = arg(0.7, help="sampling temperature (default 0.7, the demo's)")
    top_p: float = arg(0.95, flags=("--top_p",), help="nucleus sampling (default 0.95)")
    seed: int = arg(42, help="seed of the sampled transcripts")
    search_batch_size: int = arg(32, flags=("--search_batch_size",),
                                 help="questions whose model calls are batched together (results do not depend on it)")

    def __post_init__(self) -> None:
        require_each(self, ("samples", "calibration_samples", "search_batch_size"), lambda v: v >= 1,
                     "must be at least 1")
        require_each(self, ("temperature",), lambda v: v > 0, "must be positive")
        require(0 < self.top_p <= 1, "top_p", f"top_p must be in (0, 1], got {self.top_p}")


# --------------------------------------------------------------------------- one question


def transcripts(ctx: SearchContext, problem: Problem, samples: int, temperature: float) -> Step:
    """`samples` passes through the team, then every step's value under each scorer (batched calls)."""
    graph = ctx.graph
    states = [graph.start(problem.question)] * samples
    steps: list[list[Any]] = [[] for _ in range(samples)]   # per transcript: its candidates, in order
    for agent in graph.topo_order:
        proposals = yield from propose(ctx, states, agent, 1, temperature=temperature)
        for trail, [cand] in zip(steps, proposals):
            trail.append(cand)
        states = [cand.state for [cand] in proposals]
    flat = [c for trail in steps for c in trail]
    masprm = iter((yield from masprm_values(ctx, [c.state for c in flat], [c.agent for c in flat])))
    orm = iter((yield from orm_values(ctx, [c.state for c in flat])))
    yield from ensure_logprobs(ctx, flat)
    out = []
    for trail in steps:
        values = {"masprm": [next(masprm) for _ in trail], "orm": [next(orm) for _ in trail],
                  "logprob": [c.logprob.avg_token for c in trail]}
        out.append({"outputs": [c.text for c in trail], "values": values})
    return out


def transcript_settings(top_p: float) -> object:
    """What the transcripts' searches read: sampling without a token cap, scorers seeing the full transcript."""
    return combined_settings((SamplingSettings, ViewSettings), {SamplingSettings: SamplingSettings(top_p, None),
                                                               ViewSettings: ViewSettings("full")})


def sample_split(models: Models, graph: MASGraph, problems: Sequence[Problem], args: StepBenchArgs,
                 samples: int) -> list[dict]:
    """Every question's transcripts, labelled, in question order (independent of the batch size)."""
    settings = transcript_settings(args.top_p)

    def job(i: int, problem: Problem):
        ctx = SearchContext(models.policy, graph, settings, masprm=models.scorer("masprm"),
                            orm=models.scorer("orm"), keys=RequestKeys(args.seed, i))
        return (i, problem), lambda: transcripts(ctx, problem, samples, args.temperature)

    found: dict[int, list[dict]] = {}
    bar = tqdm(total=len(problems), desc="stepbench", unit="question")
    for (i, problem), result, error in run_batched(models, (job(i, p) for i, p in enumerate(problems)),
                                                   args.search_batch_size):
        if error is not None:
            raise error
        for t in result:
            label = label_transcript(problem, t["outputs"])
            t.update(question=problem.question, first_error=label.first_error, final_correct=label.final_correct,
                     repaired=label.repaired, steps=[asdict(s) for s in label.steps], label=label)
        found[i] = result
        bar.update(1)
    bar.close()
    return [t for i in sorted(found) for t in found[i]]


# --------------------------------------------------------------------------- metrics


def scorer_report(calibration: list[dict], test: list[dict], scorer: str) -> dict:
    """Threshold from the calibration transcripts, localisation and AUC on the test transcripts."""
    threshold = best_threshold([(t["values"][scorer], t["first_error"]) for t in calibration])
    scores = localisation_scores([(t["values"][scorer], t["first_error"]) for t in test], threshold)
    pairs = [(v, step) for t in test for v, step in zip(t["values"][scorer], t["steps"])]
    by_agent = {}   # within one agent's steps: free of the value's drift along the transcript
    for agent in dict.fromkeys(step["agent"] for _, step in pairs):
        mine = [(v, step) for v, step in pairs if step["agent"] == agent]
        by_agent[agent] = auc([v for v, _ in mine], [int(step["correct"]) for _, step in mine])
    return {"threshold": threshold, **scores, "auc": auc([v for v, _ in pairs], [int(s["correct"]) for _, s in pairs]),
            "auc_by_agent": by_agent}


def report_lines(report: dict) -> list[str]:
    def num(x):
        return f"{x:.3f}" if x is not None else "n/a"

    agents = list(report["scorers"][SCORERS[0]]["auc_by_agent"])
    lines = [f"{'scorer':<8} {'acc_erroneous':>13} {'acc_correct':>11} {'F1':>6} {'AUC':>6}   AUC by agent: "
             + " ".join(f"{a:>8}" for a in agents)]
    for name in SCORERS:
        r = report["scorers"][name]
        lines.append(f"{name:<8} {r['acc_erroneous']:>13.3f} {r['acc_correct']:>11.3f} {r['f1']:>6.3f} "
                     f"{num(r['auc']):>6}   {'':14}" + " ".join(f"{num(r['auc_by_agent'][a]):>8}" for a in agents))
    return lines


def load_models(args: StepBenchArgs) -> LoadedModels:
    from masprm.models.policy import HFPolicy   # imports torch: only once the flags are checked
    from masprm.models.scorer import load_scorer

    options = ModelOptions(device_map="cpu")
    return LoadedModels(HFPolicy(args.policy, options, setting="policy"),
                        {"masprm": load_scorer(args.prm_dir, args.policy, options, setting="prm_dir"),
                         "orm": load_scorer(args.orm_dir, args.policy, options, setting="orm_dir")})


def main() -> int:
    p = ArgumentParser(description="Step-level benchmark of the toy world: error localisation by each scorer.")
    add_config_args(p, StepBenchArgs)
    args = config_from_args(StepBenchArgs, p.parse_args())
    for flag, folder in (("--policy", args.policy), ("--prm_dir", args.prm_dir), ("--orm_dir", args.orm_dir)):
        check(Path(folder).is_dir(), f"{flag} {folder}: no such folder")
    check_output_file(args.out, "out")
    graph = load_mas_config(args.mas_config)
    try:
        check_graph(graph)
    except ValueError as err:
        check(False, f"{err} (--mas_config)")

    started = time.time()
    models = load_models(args)
    samples = {"calibration": args.calibration_samples, "test": args.samples}
    sets = {name: sample_split(models, graph, generate_split(split), args, samples[name])
            for name, split in SPLITS.items()}
    report = {
        "settings": asdict(args),
        "labels": {name: summarize([t.pop("label") for t in ts]) for name, ts in sets.items()},
        "scorers": {s: scorer_report(sets["calibration"], sets["test"], s) for s in SCORERS},
        "seconds": round(time.time() - started, 1),
        "transcripts": sets["test"],
    }
    atomic_write_json(args.out, report)
    print("\n".join(report_lines(report)))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    run_cli(main)
