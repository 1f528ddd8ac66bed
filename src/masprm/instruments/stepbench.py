"""The toy world's step-level benchmark: where does a team transcript first go wrong, and do the scorers see it?

    python -m masprm.instruments.stepbench --policy artifacts/toy/policy \\
        --prm_dir checkpoints/toy-ppm --orm_dir checkpoints/toy-orm --out results/toy_stepbench.json
    python -m masprm.instruments.stepbench --scorer mc=checkpoints/toy-lab-mc-prm --scorer orm=checkpoints/toy-orm ...

The world knows every story, so each message of a sampled transcript can be
checked for free (`masprm.worlds.toy.steplabel`): the labels say which agent made
the first error, if any. Only the supervised row (``--labels step_truth``)
is trained on them; every other scorer never saw them.

Transcripts are sampled from the policy (one pass through the team at
``--temperature``) on two splits: ``train`` (calibration,
``--calibration_samples`` per question) and the benchmark's split
(``--split``: ``test`` by default, ``dev`` for design work, which then never
samples or reads the test split; ``--samples`` per question), once, whatever
the number of scorers. Each scorer gives every step a value:

- a scorer folder (``--scorer NAME=FOLDER``, repeatable; ``--prm_dir`` is
  the scorer ``masprm``, ``--orm_dir`` the scorer ``orm``, and without any
  ``--scorer`` both default to the world's demo folders,
  ``checkpoints/<world>-ppm`` and ``-orm``, never another world's): its value of the state
  after the step, the full transcript so far (what SBS and MCTS read; the
  ORM was trained on finished transcripts only). Each folder is loaded once
  and reads every step of a split in one batched call;
- ``logprob`` (always): the policy's mean log-prob per token of the step's message.

As in ProcessBench, a scorer flags the first step whose value falls below a
threshold as the first error (none below: "no error"); the threshold that
maximises F1 on the calibration transcripts is applied to the test
transcripts. Reported per scorer: accuracy on erroneous transcripts, on
correct ones, their harmonic mean (F1), the AUC of the step value against
step correctness over all test steps and within each agent's steps, and the
expected calibration error (``ECE_BINS`` equal-width bins) of the values read
as probabilities of a right step: a scorer's tanh value v as (v + 1) / 2,
the log-prob as exp(mean log-prob per token), i.e. the geometric-mean token
probability.

``--world toy_deep`` samples the deep toy world's splits with its policy and team (the defaults of
``--policy`` and ``--mas_config`` follow ``--world``) and judges them with its step truth
(`masprm.worlds.StepTruth`); the default is the toy world.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from functools import partial
from types import SimpleNamespace
from pathlib import Path
from typing import Any, Sequence

from tqdm import tqdm

from masprm.checks import check_output_file, check_seeds
from masprm.cli import ArgumentParser, check, run_cli
from masprm.config import add_config_args, arg, config_from_args, require, require_each
from masprm.paths import PathText, check_input_dir
from masprm.search.context import SearchContext
from masprm.graph import MASGraph, load_mas_config
from masprm.io import atomic_write_json
from masprm.data import Example
from masprm.models import backends
from masprm.models.options import ModelOptions
from masprm.paired_stats import bootstrap_ci
from masprm.scorer_folder import read_scorer_folder
from masprm.search.engine import LoadedModels, Models, RequestKeys, run_batched
from masprm.search.expand import SearchStep, ensure_logprobs, propose
from masprm.search.oracles import outcome_value, step_value
from masprm.search.settings import SamplingSettings, ViewSettings, combined_settings
from masprm.state_text import state_text
from masprm.step_metrics import (ECE_BINS, auc, best_threshold, best_thresholds_by_step, expected_calibration_error,
                                 localisation_scores, localisation_scores_by_step)
from masprm.worlds.toy.steplabel import summarize
from masprm.worlds.toy.task import Problem, generate_split
from masprm.worlds import WORLDS, StepTruth

LOGPROB = "logprob"    # the policy's own step value, always reported
ORACLES = ("oracle_step", "oracle_outcome")   # the reference scorers that need no model (--oracles)
DEFAULT_FOLDERS = {"masprm": "ppm", "orm": "orm"}   # without --scorer: checkpoints/<world>-<objective>, the demo's
BENCH_SPLITS = ("test", "dev")   # --split: the split the benchmark's transcripts are sampled on
CI_RESAMPLES, CI_SEED = 1000, 0   # the step metrics' bootstrap over test transcripts (docs/scorer_lab.md)


@dataclass(frozen=True)
class StepBenchArgs:
    policy: PathText | None = arg(None, help="the policy model folder (default: the world's build, "
                                             "artifacts/<world>/policy)")
    prm_dir: PathText | None = arg(None, flags=("--prm_dir",),
                              help="the MASPRM folder, reported as 'masprm' (default checkpoints/<world>-ppm "
                                   "when no --scorer is given)")
    orm_dir: PathText | None = arg(None, flags=("--orm_dir",),
                              help="the ORM folder, reported as 'orm' (default checkpoints/<world>-orm when no "
                                   "--scorer is given)")
    scorer: list[str] = arg(default_factory=list, flags=("--scorer",), action="append", metavar="NAME=FOLDER",
                            help="a scorer folder, reported under NAME (repeatable)")
    mas_config: PathText | None = arg(None, flags=("--mas_config",), help="the team (default: the world's, "
                                                                          "configs/<world>.yaml)")
    out: PathText | None = arg(None, help="JSON report to write (default results/<world>_stepbench.json; with "
                                          "--split dev results/<world>_stepbench_dev.json)")
    split: str = arg("test", flags=("--split",), choices=BENCH_SPLITS,
                     help="the split the benchmark's transcripts are sampled on: test (default) or dev (design "
                          "work: the test split is then never sampled or read; a world with a dev split only); "
                          "the thresholds are chosen on the train split either way")
    samples: int = arg(2, help="transcripts sampled per test question (default 2)")
    calibration_samples: int = arg(1, flags=("--calibration_samples",),
                                   help="transcripts sampled per train question, to choose the thresholds (default 1)")
    temperature: float = arg(0.7, help="sampling temperature (default 0.7, the demo's)")
    top_p: float = arg(0.95, flags=("--top_p",), help="nucleus sampling (default 0.95)")
    seed: int = arg(42, help="seed of the sampled transcripts")
    search_batch_size: int = arg(32, flags=("--search_batch_size",),
                                 help="questions whose model calls are batched together (results do not depend on it)")
    oracles: bool = arg(False, flags=("--oracles",),
                        help="also report the reference scorers oracle_step and oracle_outcome (the step labeller "
                             "and the gold check as scorers; masprm.search.oracles)")
    world: str = arg("toy", flags=("--world",), help=f"the toy world ({', '.join(WORLDS.names())}; default toy)")

    def __post_init__(self) -> None:
        require(self.world in WORLDS, "world", f"world: {WORLDS.unknown_message(self.world)}")
        world = WORLDS[self.world]
        require(self.split in world.truth.task.splits, "split",
                f"split: the {self.world} world has no {self.split} split (its splits: "
                f"{', '.join(s for s in world.truth.task.splits if s != 'sft')})")
        world.fill_defaults(self, out=f"results/{self.world}_stepbench{'_dev' if self.split == 'dev' else ''}.json")
        require_each(self, ("samples", "calibration_samples", "search_batch_size"), lambda v: v >= 1,
                     "must be at least 1")
        require_each(self, ("temperature",), lambda v: v > 0, "must be positive")
        require(0 < self.top_p <= 1, "top_p", f"top_p must be in (0, 1], got {self.top_p}")
        check_seeds(self)


def scorer_folders(args: StepBenchArgs) -> dict[str, str]:
    """NAME -> folder of every scorer to load, in the order given (--prm_dir, --orm_dir, then each --scorer);
    without --scorer the world's demo folders (one line naming a missing one: no other world's stands in)."""
    folders = {} if args.scorer else {name: f"checkpoints/{args.world}-{objective}"
                                      for name, objective in DEFAULT_FOLDERS.items()}
    for name, folder in folders.items():
        flag = "prm_dir" if name == "masprm" else "orm_dir"
        check(getattr(args, flag) is not None or Path(folder).is_dir(),
              f"--{flag}: the {args.world} world's default scorer folder {folder} is not there (its demo's); give "
              f"--{flag} FOLDER or --scorer NAME=FOLDER")
    for name, flag in (("masprm", "prm_dir"), ("orm", "orm_dir")):
        if getattr(args, flag):
            folders[name] = getattr(args, flag)
    for spec in args.scorer:
        name, sep, folder = spec.partition("=")
        check(bool(sep and name and folder), f"--scorer {spec}: expected NAME=FOLDER")
        check(name != LOGPROB, f"--scorer {spec}: the name {LOGPROB!r} is the policy's log-prob, always reported")
        check(name not in ORACLES, f"--scorer {spec}: the name {name!r} is a reference scorer's (--oracles)")
        check(name not in folders, f"--scorer {spec}: the name {name!r} is given twice")
        folders[name] = folder
    return folders


def bench_splits(args: StepBenchArgs) -> dict[str, tuple[str, str]]:
    """The transcript sets, each (its split, the flag of its samples per question): the calibration set on the
    train split, the benchmark's on --split (its name in the report). Nothing else is sampled: a dev run never
    draws from the test split."""
    return {"calibration": ("train", "calibration_samples"), args.split: (args.split, "samples")}


# --------------------------------------------------------------------------- sampling


def transcripts(ctx: SearchContext, problem: Problem, samples: int, temperature: float) -> SearchStep:
    """`samples` passes through the team, each step's state and its mean log-prob per token (batched calls)."""
    graph = ctx.graph
    states = [graph.start(problem.question)] * samples
    steps: list[list[Any]] = [[] for _ in range(samples)]   # per transcript: its candidates, in order
    for agent in graph.topo_order:
        proposals = yield from propose(ctx, states, agent, 1, temperature=temperature)
        for trail, [cand] in zip(steps, proposals):
            trail.append(cand)
        states = [cand.state for [cand] in proposals]
    yield from ensure_logprobs(ctx, [c for trail in steps for c in trail])
    return [{"outputs": [c.text for c in trail], "states": [c.state for c in trail],
             "values": {LOGPROB: [c.logprob.avg_token for c in trail]}} for trail in steps]


def transcript_settings(top_p: float) -> object:
    """What the transcripts' searches read: sampling without a token cap, scorers seeing the full transcript."""
    return combined_settings((SamplingSettings, ViewSettings), {SamplingSettings: SamplingSettings(top_p, None),
                                                               ViewSettings: ViewSettings("full")})


def sample_split(models: Models, graph: MASGraph, problems: Sequence[Problem], args: StepBenchArgs,
                 samples: int) -> list[dict]:
    """Every question's transcripts, labelled by the world's step truth, in question order (independent of the
    batch size)."""
    label_transcript = WORLDS[args.world].truth.label
    settings = transcript_settings(args.top_p)

    def job(i: int, problem: Problem):
        ctx = SearchContext(models.policy, graph, settings, keys=RequestKeys(args.seed, i))
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


def score_steps(scorer: Any, name: str, transcripts: Sequence[dict]) -> None:
    """Every step's value under one scorer (the full transcript after the step), one batched call."""
    sep = scorer.separator
    values = iter(scorer.score_batch([state_text(s, "full", None, sep) for t in transcripts for s in t["states"]]))
    for t in transcripts:
        t["values"][name] = [next(values) for _ in t["states"]]


def score_oracles(transcripts: Sequence[dict], truth: StepTruth) -> None:
    """Every step's value under the reference scorers, by their rules in masprm.search.oracles (no model)."""
    for t in transcripts:
        story = truth.story_of(t["question"])
        ctx = SimpleNamespace(example=Example(0, story.question, str(story.answer)),
                              settings=SimpleNamespace(step_oracle=truth.oracle))
        t["values"]["oracle_step"] = [step_value(ctx, state) for state in t["states"]]
        t["values"]["oracle_outcome"] = [outcome_value(ctx, state) for state in t["states"]]


# --------------------------------------------------------------------------- metrics


def as_probability(scorer: str, value: float) -> float:
    """A step value as the probability that the step is right: exp of the mean log-prob per token for the
    log-prob, (v + 1) / 2 for a scorer's tanh value."""
    return math.exp(value) if scorer == LOGPROB else (value + 1) / 2


def agent_auc(transcripts: Sequence[dict], scorer: str, agent: str) -> float | None:
    """The AUC of the scorer's values within one agent's steps (free of the value's drift along a transcript)."""
    mine = [(v, step) for t in transcripts for v, step in zip(t["values"][scorer], t["steps"]) if step["agent"] == agent]
    return auc([v for v, _ in mine], [int(step["correct"]) for _, step in mine])


def scorer_report(calibration: list[dict], test: list[dict], scorer: str) -> dict:
    """Threshold from the calibration transcripts; localisation, AUC and calibration on the test transcripts,
    F1 and the per-agent AUCs with 95% CIs from CI_RESAMPLES bootstrap resamples of the test transcripts."""
    threshold = best_threshold([(t["values"][scorer], t["first_error"]) for t in calibration])

    def f1(ts: Sequence[dict]) -> float | None:   # undefined on a resample without one of the two classes
        r = localisation_scores([(t["values"][scorer], t["first_error"]) for t in ts], threshold)
        return r["f1"] if r["n_erroneous"] and r["n_correct"] else None

    scores = localisation_scores([(t["values"][scorer], t["first_error"]) for t in test], threshold)
    pairs = [(v, step) for t in test for v, step in zip(t["values"][scorer], t["steps"])]
    agents = list(dict.fromkeys(step["agent"] for _, step in pairs))
    labels = [int(s["correct"]) for _, s in pairs]
    ci = partial(bootstrap_ci, test, n_resamples=CI_RESAMPLES, seed=CI_SEED)
    # one threshold per agent (step position), chosen on the calibration transcripts as the single one is
    by_step = best_thresholds_by_step([(t["values"][scorer], t["first_error"]) for t in calibration])
    per_agent_f1 = localisation_scores_by_step([(t["values"][scorer], t["first_error"]) for t in test], by_step)["f1"]
    return {"threshold": threshold, **scores, "auc": auc([v for v, _ in pairs], labels),
            "auc_by_agent": {a: agent_auc(test, scorer, a) for a in agents},
            "ece": expected_calibration_error([as_probability(scorer, v) for v, _ in pairs], labels),
            "f1_ci": ci(f1), "auc_by_agent_ci": {a: ci(partial(agent_auc, scorer=scorer, agent=a)) for a in agents},
            "thresholds_by_agent": dict(zip(agents, by_step)), "f1_by_agent_thresholds": per_agent_f1,
            # as a ranker of finished transcripts (what best-of-N asks of it), on the calibration split
            "outcome_auc": auc([t["values"][scorer][-1] for t in calibration if t["values"][scorer]],
                               [int(t["final_correct"]) for t in calibration if t["values"][scorer]])}


def report_lines(report: dict) -> list[str]:
    def num(x):
        return f"{x:.3f}" if x is not None else "n/a"

    names = list(report["scorers"])
    agents = list(report["scorers"][names[0]]["auc_by_agent"])
    width = max(8, *map(len, names))
    lines = [f"{'scorer':<{width}} {'acc_erroneous':>13} {'acc_correct':>11} {'F1':>6} {'AUC':>6} {'ECE':>6}   "
             "AUC by agent: " + " ".join(f"{a:>8}" for a in agents)]
    for name in names:
        r = report["scorers"][name]
        lines.append(f"{name:<{width}} {r['acc_erroneous']:>13.3f} {r['acc_correct']:>11.3f} {r['f1']:>6.3f} "
                     f"{num(r['auc']):>6} {num(r['ece']):>6}   {'':14}"
                     + " ".join(f"{num(r['auc_by_agent'][a]):>8}" for a in agents))
    return lines


def load_scorer_folder(folder: str, policy: str, setting: str) -> Any:
    """A scorer on the CPU: an adapter on the base model it names (a scorer backbone of its own, not the
    policy), on the policy where it names none."""
    from masprm.models.scorer import load_scorer   # imports torch: only once the flags are checked
    base = None if read_scorer_folder(folder).base_model else policy
    return load_scorer(folder, base, ModelOptions(device_map="cpu"), setting=setting)


def load_policy(args: StepBenchArgs) -> LoadedModels:
    # The default backend (the shipped policy's head size 16 is one vLLM's CPU attention lacks).
    return LoadedModels(backends.load_policy(None, args.policy, ModelOptions(device_map="cpu"), setting="policy"))


def main() -> int:
    p = ArgumentParser(description="Step-level benchmark of the toy world: error localisation by each scorer.")
    add_config_args(p, StepBenchArgs)
    args = config_from_args(StepBenchArgs, p.parse_args())
    check_input_dir(args.policy, "policy")
    folders = scorer_folders(args)
    flags = {"masprm": "prm_dir", "orm": "orm_dir"}
    for name, folder in folders.items():
        check_input_dir(folder, flags.get(name, "scorer"), label=f"--{flags.get(name, 'scorer')}")
    # the report never lands inside a folder the benchmark reads (the policy's identity would change)
    check_output_file(args.out, "out", inputs={"policy": args.policy, "mas_config": args.mas_config,
                                               **{flags.get(n, f"scorer {n}"): f for n, f in folders.items()}})
    graph, world = load_mas_config(args.mas_config), WORLDS[args.world]
    try:
        world.check_graph(graph)
    except ValueError as err:
        check(False, f"{err} (--mas_config)")
    splits = bench_splits(args)
    for split, _ in splits.values():   # a split without questions has nothing to sample (toy_deep's test, unsized)
        check(world.truth.task.size(split) > 0, f"--world {args.world}: its {split} split is empty")

    started = time.time()
    models = load_policy(args)
    sets = {name: sample_split(models, graph, generate_split(split, world.truth.task), args, getattr(args, samples))
            for name, (split, samples) in splits.items()}
    for name, folder in folders.items():   # one scorer in memory at a time
        scorer = load_scorer_folder(folder, args.policy, flags.get(name, "scorer"))
        for ts in sets.values():
            score_steps(scorer, name, ts)
        del scorer
    for ts in sets.values():
        if args.oracles:
            score_oracles(ts, world.truth)
        for t in ts:
            del t["states"]
    report = {
        "settings": {**asdict(args), "scorers": folders},
        "labels": {name: summarize([t.pop("label") for t in ts], world.truth.error_kinds) for name, ts in sets.items()},
        "calibration": {"bins": ECE_BINS, "probability": "scorer value v: (v + 1) / 2; logprob: exp(mean log-prob "
                                                         "per token)"},
        "scorers": {s: scorer_report(sets["calibration"], sets[args.split], s)
                    for s in [*folders, *(ORACLES if args.oracles else ()), LOGPROB]},
        "seconds": round(time.time() - started, 1),
        "transcripts": sets[args.split],
    }
    atomic_write_json(args.out, report)
    print("\n".join(report_lines(report)))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    run_cli(main)
