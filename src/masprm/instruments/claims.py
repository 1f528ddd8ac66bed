"""The paper's three claims, tested on the toy world's logs with paired bootstrap CIs over questions.

    python -m masprm.instruments.claims --logs_dir logs/toy_demo --out results/toy_demo_claims.txt

(i)   MASPRM beats a size-matched ORM under MCTS at the same budget (simulations):
      mcts_prm vs mcts_orm, at every simulation count mcts_prm ran (the README's
      when it ran none; "not evaluated" where mcts_orm did not run that count);
(ii)  MASPRM beats policy likelihood as a guide: sbs_prm vs sbs_logprob and
      mcts_prm vs mcts_logprob, at the README's budget;
(iii) MASPRM ranks its candidates better: a smaller Hit@1 -> Hit@5 gap
      (pass@5 - pass@1 per question) than likelihood, under SBS and MCTS.

A condition's value on a question is its mean over the seeds; the CI resamples
questions (`masprm.eval.bootstrap`). A claim "holds" when its 95% CI excludes zero in
the claimed direction. Conditions are found by method and budget in the
logs' manifests, so a rerun with other code (a new fingerprint) is compared
only with itself: when one method has several experiments of the same budget,
the newest log wins. Pure Python.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from masprm.eval.aggregate import completed_seed_logs, json_sidecar
from masprm.checks import check_output_file, check_seeds
from masprm.cli import ArgumentParser, check, run_cli
from masprm.config import add_config_args, arg, config_from_args
from masprm.paths import PathText, check_input_dir
from masprm.io import atomic_write_text
from masprm.eval.bootstrap import compare, compare_gaps
from masprm.paired_stats import PairedResult, format_comparison

MAIN = {"b1": 3, "b2": 5, "n_simulations": 10}   # the README's evaluation budget



def comparison_name(row: str, base: str, column: str) -> str:
    """How a claim names one row against a baseline in one column (the claims file's key)."""
    return f"{row} vs {base} ({column})"


@dataclass
class ClaimsArgs:
    logs_dir: PathText = arg("logs/toy_demo", flags=("--logs_dir",), help="the stage-4 logs (default logs/toy_demo)")
    out: PathText = arg("results/toy_demo_claims.txt", help="text report to write (a .json goes next to it)")
    seed: int = arg(42, help="seed of the bootstrap resampling")

    def __post_init__(self) -> None:
        check_seeds(self)


def experiments(logs_dir: str | Path) -> dict[tuple[str, tuple], str]:
    """(method, its budget settings) -> experiment id, for every COMPLETED log (newest wins)."""
    found: dict[tuple[str, tuple], tuple[float, str]] = {}
    for log, experiment, _, files in completed_seed_logs(logs_dir):
        data = json_sidecar(files.manifest)
        settings = data.get("definition", {}).get("settings", {})
        budget = tuple(sorted((k, settings[k]) for k in ("b1", "b2", "n_simulations", "voter_k") if k in settings))
        if settings.get("orm_leaf"):   # mcts_prm with the ORM on its leaves: another condition at the same budget
            budget += (("orm_leaf", True),)
        key = (data.get("condition"), budget)
        mtime = log.stat().st_mtime
        if key not in found or found[key][0] < mtime:
            found[key] = (mtime, experiment)
    return {key: experiment for key, (_, experiment) in found.items()}


def find(table: dict, method: str, orm_leaf: bool = False, **budget) -> str | None:
    matches = [exp for (m, b), exp in table.items() if m == method and dict(b).get("orm_leaf", False) == orm_leaf
               and all(dict(b).get(k) == v for k, v in budget.items())]
    return matches[0] if len(matches) == 1 else None


@dataclass
class Comparison:
    claim: str
    name: str
    result: PairedResult | None    # None: a condition is missing
    gap: bool = False              # compares Hit@1->Hit@5 gaps (smaller is better for the first condition)

    @property
    def verdict(self) -> str:
        """The claim's verdict: "holds", "reversed", "inconclusive", or "not evaluated"."""
        if self.result is None:
            return "not evaluated"
        verdict = self.result.verdict
        if self.gap:   # for a gap, the claim is that A's is smaller: a negative difference
            verdict = {"holds": "reversed", "reversed": "holds"}.get(verdict, verdict)
        return verdict

    def line(self) -> str:
        if self.result is None:
            return f"{self.name}: not evaluated"
        text = format_comparison(self.name, self.result)
        if self.verdict != self.result.verdict:   # the line ends with the paired result's verdict
            text = text[:text.rindex(f"({self.result.verdict})")] + f"({self.verdict})"
        return text


def comparisons(logs_dir: str | Path, seed: int) -> Iterator[Comparison]:
    table = experiments(logs_dir)

    def pair(claim: str, a: str, b: str, budget: dict, label: str, gap: bool = False,
             orm_leaf: bool = False) -> Comparison:
        ea, eb = find(table, a, orm_leaf, **budget), find(table, b, **budget)
        shown = f"{a} --orm_leaf" if orm_leaf else a
        name = f"{shown} vs {b} ({label})" if not gap else f"Hit@1->Hit@5 gap, {shown} vs {b} ({label})"
        if ea is None or eb is None:
            return Comparison(claim, name, None, gap)
        result = (compare_gaps if gap else compare)(logs_dir, ea, eb, seed=seed)
        return Comparison(claim, name, result, gap)

    sims = sorted({dict(b)["n_simulations"] for (m, b) in table if m == "mcts_prm" and "n_simulations" in dict(b)})
    for n in sims or [MAIN["n_simulations"]]:   # no mcts_prm at all: claim (i) says so at the README's budget
        yield pair("i", "mcts_prm", "mcts_orm", {"n_simulations": n}, f"{n} simulations")
    # the paper's headline configuration, the MASPRM guiding and the ORM on the leaves, where it was run
    leaf_sims = sorted({dict(b)["n_simulations"] for (m, b) in table if m == "mcts_prm" and dict(b).get("orm_leaf")})
    for n in leaf_sims:
        yield pair("i", "mcts_prm", "mcts_orm", {"n_simulations": n}, f"{n} simulations", orm_leaf=True)
    sbs = {"b1": MAIN["b1"], "b2": MAIN["b2"]}
    mcts = {"n_simulations": MAIN["n_simulations"]}
    yield pair("ii", "sbs_prm", "sbs_logprob", sbs, f"B1={sbs['b1']}, B2={sbs['b2']}")
    yield pair("ii", "mcts_prm", "mcts_logprob", mcts, f"{mcts['n_simulations']} simulations")
    yield pair("iii", "sbs_prm", "sbs_logprob", sbs, f"B1={sbs['b1']}, B2={sbs['b2']}", gap=True)
    yield pair("iii", "mcts_prm", "mcts_logprob", mcts, f"{mcts['n_simulations']} simulations", gap=True)


TITLES = {"i": "(i) MASPRM > ORM under MCTS at the same number of simulations",
          "ii": "(ii) MASPRM > policy likelihood under SBS and MCTS",
          "iii": "(iii) smaller Hit@1 -> Hit@5 gap under MASPRM than under likelihood"}


def report(found: list[Comparison]) -> str:
    lines = []
    for claim, title in TITLES.items():
        lines.append(title)
        lines += [f"  {c.line()}" for c in found if c.claim == claim]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = ArgumentParser(description="Test the paper's claims on the toy world's logs (paired bootstrap CIs).")
    add_config_args(p, ClaimsArgs)
    args = config_from_args(ClaimsArgs, p.parse_args())
    check_input_dir(args.logs_dir, "logs_dir")
    check_output_file(args.out, "out", inputs={"logs_dir": args.logs_dir})
    found = list(comparisons(args.logs_dir, args.seed))
    text = report(found)
    atomic_write_text(args.out, text)
    atomic_write_text(Path(args.out).with_suffix(".json"), json.dumps(
        [{"claim": c.claim, "name": c.name, "verdict": c.verdict, "line": c.line(),
          "result": c.result.as_dict() if c.result else None}
         for c in found], indent=1) + "\n")
    print(text, end="")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    run_cli(main)
