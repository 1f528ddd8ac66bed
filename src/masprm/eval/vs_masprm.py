"""Paired comparisons against the MASPRM: each configured condition against the MASPRM-guided condition
of its family, on the same questions (the original newer branch's rule).

    every pooled selector (voter_plain, voter_logprob, voter_orm, pooled_judge)  vs voter_prm
    the other best-of-N rankers (bon_logprob, bon_orm)                           vs bon_prm
    mcts_judge                                                                   vs mcts_prm

When both conditions of a pair ran in one command, the difference in accuracy
(this condition minus the MASPRM's) gets a paired bootstrap 95% CI over questions
(10,000 resamples seeded with the run's seed) and an exact McNemar p, through the
project's one implementation (``masprm.paired_stats.paired_accuracy``, which the
handoff comparison uses too). Pure Python.
"""

from __future__ import annotations

from typing import Any, Sequence

from masprm.paired_stats import paired_accuracy

VS_MASPRM = {**dict.fromkeys(("voter_plain", "voter_logprob", "voter_orm", "pooled_judge"), "voter_prm"),
             **dict.fromkeys(("bon_logprob", "bon_orm"), "bon_prm"), "mcts_judge": "mcts_prm"}
LINE_START = "Paired vs MASPRM "   # its log lines start so (masprm.eval.logs looks past them)


def correct_by_question(records: Sequence[dict]) -> dict[Any, bool]:
    """Example index -> correct (a crashed example counts as wrong, as in accuracy)."""
    return {r["index"]: bool(r.get("correct")) and not r.get("error") for r in records}


def configured_pairs(methods: Sequence[str]) -> list[tuple[str, str]]:
    """(condition, its MASPRM reference) for each configured pair whose two methods both ran."""
    return [(m, VS_MASPRM[m]) for m in methods if m in VS_MASPRM and VS_MASPRM[m] in methods]


def compare_with_masprm(records: Sequence[dict], masprm_records: Sequence[dict], *, seed: int) -> dict:
    """This condition (B) against the MASPRM's (A), paired by question."""
    r = paired_accuracy(correct_by_question(masprm_records), correct_by_question(records), seed=seed)
    return {"n_pairs": r["n_pairs"], "accuracy": r["accuracy_b"], "masprm_accuracy": r["accuracy_a"],
            "delta": r["delta"], "ci_low": r["ci_low"], "ci_high": r["ci_high"], "only_this": r["only_b"],
            "only_masprm": r["only_a"], "mcnemar_exact_p": r["mcnemar_p"]}


def vs_masprm_lines(reference: str, result: dict) -> list[str]:
    """The compared condition's text-log lines (just before its status line)."""
    return [f"{LINE_START}({reference}) accuracy delta (95% bootstrap CI over {result['n_pairs']} questions): "
            f"{result['delta']:.4f} [{result['ci_low']:.4f}, {result['ci_high']:.4f}]",
            f"{LINE_START}({reference}) McNemar exact: this-only={result['only_this']}, "
            f"masprm-only={result['only_masprm']}, p={result['mcnemar_exact_p']:.6f}"]
