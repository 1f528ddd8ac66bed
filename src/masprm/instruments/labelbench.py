"""The toy world's label-quality benchmark: do a label scheme's records say which messages are right?

    python -m masprm.instruments.labelbench --trees results/<run> \\
        --labels results/labels_first_error_<run>.jsonl --out results/toy_labelbench_first_error.json

Before any scorer is trained, this says whether the step signal is in a
scheme's training records at all. The stage-1 trees name the toy question of
each tree (``meta.example_meta``: split and index, ``masprm.worlds.toy.task``); the
toy step labeller (``masprm.worlds.toy.steplabel``) knows whether each message of a
transcript is right. Every labelled step of the records is compared with that
truth, once per occurrence (as training sees it):

- steps records (``completions`` / ``labels``): step i's label is its value;
- pairs records: the step where chosen and rejected differ; the chosen one
  counts as +1, the rejected one as -1 (pair weights are not used). Pair
  accuracy (per agent and over all pairs): of the pairs whose two steps
  differ in truth, the share whose chosen step is the right one.

Per agent (the step index in the team's order) and over all steps: the number
of labelled steps, how many are wrong, the AUC of the label against step
correctness, and its agreement: the share of labelled steps whose label's sign
is the step's verdict (a label of 0 says neither); for pairs also the share of
all pairs whose chosen step is right and rejected one wrong (agreement) and the
share whose two steps have the same verdict (they carry no step information);
for hard labels (every label is -1 or +1) also the accuracy of
the label's sign and the F1 of the error class (label -1 = "this step is
wrong"). Records must be full-view (the prompt is the question). ``--world toy_deep``: the deep toy
world's trees, judged by its step truth (`masprm.worlds.StepTruth`; default: the toy world). Pure Python.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from masprm.checks import check_output_file
from masprm.cli import ArgumentParser, UsageError, check, run_cli
from masprm.config import add_config_args, arg, config_from_args, require
from masprm.errors import DataError
from masprm.io import atomic_write_json, iter_jsonl
from masprm.labels import LABEL_SCHEMES
from masprm.step_metrics import auc
from masprm.worlds.toy.task import Problem, generate_split
from masprm.worlds import WORLDS, StepTruth

HARD_TOL = 1e-6
DEFAULT_SCHEMES = {"prm_samples": "mc", "ppm_pairs": "masprm"}   # today's files, by their name's start


@dataclass
class LabelBenchArgs:
    trees: Path = arg(help="the stage-1 run folder (its tree JSON files name their toy questions)")
    labels: Path = arg(help="a scheme's records: results/labels_<NAME>_<run>.jsonl, or today's "
                            "prm_samples_<run>.jsonl / ppm_pairs_<run>.jsonl (NAME: any registered scheme, "
                            f"{', '.join(LABEL_SCHEMES.names())})")
    out: Path | None = arg(None, help="JSON report (default results/<world>_labelbench_<scheme>.json)")
    scheme: str | None = arg(None, help="the scheme's name in the report (default: the records' meta.label_scheme, "
                                        "else mc / masprm for today's files)")
    world: str = arg("toy", flags=("--world",), help=f"the toy world of the trees ({', '.join(WORLDS.names())}; "
                                                      "default toy)")

    def __post_init__(self) -> None:
        require(self.world in WORLDS, "world", f"world: {WORLDS.unknown_message(self.world)}")


# --------------------------------------------------------------------------- the truth


def tree_problems(trees: Path, truth: StepTruth = WORLDS["toy"].truth) -> dict[str, Problem]:
    """question -> toy problem, for every tree file of the run (its meta names split and index in `truth.task`)."""
    files = sorted(trees.rglob("*.json")) if trees.is_dir() else []
    check(bool(files), f"--trees: no tree files (*.json) under {trees}")
    found: dict[str, Problem] = {}
    for path in files:
        try:
            tree = json.loads(path.read_text(encoding="utf-8"))
            meta = tree.get("meta") or {}
            example = meta.get("example_meta") or {}
            split, index, question = example.get("split", meta.get("split")), example["source_index"], tree["node_text"]
            problem = generate_split(split, truth.task)[index]
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as err:
            raise UsageError(f"--trees: {path} is not a toy tree with meta.example_meta (split, source_index): "
                             f"{type(err).__name__}: {err}") from None
        check(problem.question == question.strip(), f"--trees: {path}: its question is not toy {split} #{index}")
        found[problem.question] = problem
    return found


@dataclass
class Labelled:
    agent: str
    value: float
    correct: bool


def steps_of(record: dict, problem: Problem, truth: StepTruth = WORLDS["toy"].truth) -> Iterable[Labelled]:
    steps = truth.label(problem, record["completions"]).steps
    for step, value in zip(steps, record["labels"]):
        yield Labelled(step.agent, float(value), step.correct)


def pair_of(record: dict, problem: Problem, truth: StepTruth = WORLDS["toy"].truth) -> tuple[Labelled, Labelled]:
    chosen, rejected = record["chosen_actions"], record["rejected_actions"]
    i = max(k for k, (c, r) in enumerate(zip(chosen, rejected)) if c != r)
    good, bad = truth.label(problem, chosen).steps[i], truth.label(problem, rejected).steps[i]
    return Labelled(good.agent, 1.0, good.correct), Labelled(bad.agent, -1.0, bad.correct)


# --------------------------------------------------------------------------- the metrics


def step_scores(items: list[Labelled], hard: bool) -> dict[str, Any]:
    """n, wrong, AUC (None when a class is empty); for hard labels accuracy and the error class's F1."""
    out: dict[str, Any] = {"n": len(items), "wrong": sum(not it.correct for it in items),
                           "auc": auc([it.value for it in items], [int(it.correct) for it in items]) if items else None,
                           "agreement": sum((it.value > 0 and it.correct) or (it.value < 0 and not it.correct)
                                            for it in items) / len(items) if items else None}
    if hard:
        flagged = [it.value < 0 for it in items]
        hits = sum(f and not it.correct for f, it in zip(flagged, items))
        precision = hits / sum(flagged) if any(flagged) else 0.0
        recall = hits / out["wrong"] if out["wrong"] else 0.0
        out["accuracy"] = sum(f != it.correct for f, it in zip(flagged, items)) / len(items) if items else None
        out["error_f1"] = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return out


def scheme_name(path: Path, records: list[dict], given: str | None) -> str:
    if given:
        return given
    named = (records[0].get("meta") or {}).get("label_scheme") if records else None
    if named:
        return named
    return next((name for start, name in DEFAULT_SCHEMES.items() if path.name.startswith(start)), path.stem)


def label_report(trees: Path, labels: Path, scheme: str | None = None, world: str = "toy") -> dict[str, Any]:
    """The benchmark of one records file against a toy world's truth (see the module docstring)."""
    truth = WORLDS[world].truth
    problems = tree_problems(trees, truth)
    records = [rec for _, rec in iter_jsonl(labels)]
    check(bool(records), f"--labels: {labels} holds no records")
    kind = "pairs" if "chosen_actions" in records[0] else "steps"
    items: list[Labelled] = []
    pairs: dict[str, Counter] = {a: Counter() for a in truth.agents}   # per agent: pairs, informative, right
    unmatched = 0
    for rec in records:
        problem = problems.get(str(rec.get("prompt", "")).strip())
        if problem is None:
            unmatched += 1
            continue
        if kind == "steps":
            items.extend(steps_of(rec, problem, truth))
            continue
        good, bad = pair_of(rec, problem, truth)
        items += [good, bad]
        pairs[good.agent].update(pairs=1, informative=good.correct != bad.correct,
                                 right=good.correct and not bad.correct)
    if unmatched == len(records):
        raise DataError(f"{labels}: no record's prompt is a question of the trees in {trees} (the benchmark reads "
                        "full-view records of these trees)", setting="labels")
    hard = all(abs(abs(it.value) - 1.0) <= HARD_TOL for it in items)
    report = {"scheme": scheme_name(labels, records, scheme), "kind": kind, "hard_labels": hard,
              "trees": str(trees), "labels_file": str(labels), "records": len(records) - unmatched,
              "unmatched_records": unmatched, "labelled_steps": len(items),
              "agents": {a: step_scores([it for it in items if it.agent == a], hard) for a in truth.agents},
              "all": step_scores(items, hard)}
    if kind == "pairs":
        report["pairs"] = {**pair_scores(sum(pairs.values(), Counter())),
                           "agents": {a: pair_scores(c) for a, c in pairs.items()}}
    return report


def pair_scores(c: Counter) -> dict[str, Any]:
    """Pairs, those whose two steps differ in truth, the share of these whose chosen step is the right one, and
    over all pairs the share that agrees with the step truth and the share of two steps with the same verdict."""
    return {"pairs": c["pairs"], "informative": c["informative"],
            "pair_accuracy": c["right"] / c["informative"] if c["informative"] else None,
            "agreement": c["right"] / c["pairs"] if c["pairs"] else None,
            "same_verdict": (c["pairs"] - c["informative"]) / c["pairs"] if c["pairs"] else None}


def report_lines(report: dict[str, Any]) -> list[str]:
    def num(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    hard = report["hard_labels"]
    lines = [f"labels {report['scheme']} ({report['kind']}, {'hard' if hard else 'soft'} labels): "
             f"{report['records']} records, {report['labelled_steps']} labelled steps",
             f"{'agent':<9} {'steps':>6} {'wrong':>6} {'AUC':>6}" + (f" {'acc':>6} {'err F1':>6}" if hard else "")
             + f" {'agree':>6}"]
    for name, row in [*report["agents"].items(), ("all", report["all"])]:
        lines.append(f"{name:<9} {row['n']:>6} {row['wrong']:>6} {num(row['auc']):>6}"
                     + (f" {num(row['accuracy']):>6} {num(row['error_f1']):>6}" if hard else "")
                     + f" {num(row.get('agreement')):>6}")
    if "pairs" in report:
        lines.append("pairs whose two steps differ in truth, of all pairs; the share of those whose chosen step is "
                     "right; of all pairs, the share agreeing with the truth and the share of one verdict:")
        for name, p in [*report["pairs"]["agents"].items(), ("all", report["pairs"])]:
            lines.append(f"{name:<9} {p['informative']:>6} of {p['pairs']:<6} {num(p['pair_accuracy'])} "
                         f"{num(p.get('agreement'))} {num(p.get('same_verdict'))}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description="Label quality of a stage-2 records file against the toy world's step truth.")
    add_config_args(p, LabelBenchArgs)
    args = config_from_args(LabelBenchArgs, p.parse_args(argv))
    check(args.labels.is_file(), f"--labels {args.labels}: no such file")
    inputs = {"trees": args.trees, "labels": args.labels}   # the report never replaces what it reads
    # the default --out is named by the scheme, which the first record names: checked before the report's work
    first = next((rec for _, rec in iter_jsonl(args.labels)), None)
    scheme = scheme_name(args.labels, [first] if first is not None else [], args.scheme)
    out = args.out or Path("results") / f"{args.world}_labelbench_{scheme}.json"
    check_output_file(out, "out", inputs=inputs)
    report = label_report(args.trees, args.labels, args.scheme, args.world)
    atomic_write_json(out, report)
    print("\n".join(report_lines(report)))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    run_cli(main)
