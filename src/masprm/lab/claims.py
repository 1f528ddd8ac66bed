"""The scorer lab's claims: the pre-declared primary comparison, Holm over the rest, equivalence, power, and
each row's headroom recovered against the step oracle.

Every setting here was fixed in docs/scorer_lab.md ("The instruments") before any run used it: the one
primary comparison (tested alone at 5%), the family (every other comparison of a learned row, under
Holm's adjustment at family-wise 5%; the policy log-prob is a reference row), the equivalence margin
(2 points, two one-sided bootstrap tests) and the MDE at 80% power under each table. The statistics
are `masprm.paired_stats`'s. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from masprm.eval.bootstrap import load_condition, per_question
from masprm.paired_stats import Headroom, adjusted_verdict, headroom_bootstrap, holm, mde, tost
from masprm.instruments.claims import Comparison, comparison_name

COLUMNS = ("SBS", "MCTS", "BoN min", "BoN last")
LOGPROB = "logprob"          # the row of the conditions without a scorer
ORM_LEAF = "masprm-ormleaf"  # the paper's headline configuration: the MASPRM guides MCTS, the ORM values leaves
# Rows that are not a trained scorer of `rows`: the log-prob and the reference scorers (shown, never tested:
# masprm.search.oracles), and the MASPRM with ORM leaves (a learned configuration, tested like a row).
REFERENCE_ROWS = {LOGPROB: "policy log-prob", "oracle_step": "oracle: step labeller",
                  "oracle_outcome": "oracle: gold outcome", "true_value": "oracle: true value"}
EXTRA_ROWS = {ORM_LEAF: "MASPRM + ORM leaf"}
# Fixed in advance (docs/scorer_lab.md, "The instruments"): the one primary comparison, tested alone at
# alpha; every other learned row's comparison is one family under Holm; the equivalence margin.
PRIMARY = ("MASPRM", "ORM", "MCTS")      # (row, baseline, column): the paper's MASPRM vs the ORM under MCTS
EQUIVALENCE_MARGIN = 0.02                # TOST margin, 2 points


@dataclass
class LabComparison(Comparison):
    tested: bool = True     # False: a reference row (the policy log-prob), shown but outside the Holm family
    adjusted_p: float | None = None   # Holm-adjusted p over the family (None: the primary, or not tested)
    train_seeds: int = 1    # training seeds the two-level bootstrap resampled (1: the paired bootstrap)
    declared: bool = True   # the lab declares the primary comparison (False: an exploratory lab, all under Holm)

    @property
    def primary(self) -> bool:
        return self.declared and self.name == comparison_name(*PRIMARY)

    @property
    def adjusted(self) -> str:
        """The verdict after Holm over the family (the primary's own verdict; "–" for a reference row)."""
        if self.result is None:
            return "not evaluated"
        if self.primary:
            return self.verdict
        return "–" if self.adjusted_p is None else adjusted_verdict(self.result, self.adjusted_p)

    def lab_line(self) -> str:
        """The claims file's line: the paired result, the Holm verdict, equivalence where it shows, the MDE."""
        if self.result is None:
            return self.line()
        parts = [self.line(), "primary" if self.primary else f"Holm: {self.adjusted}" if self.tested
                 else "reference row, not tested"]
        if self.verdict != "holds":
            eq = tost(self.result, EQUIVALENCE_MARGIN)
            if eq.equivalent:
                parts.append(f"equivalent within ±{100 * EQUIVALENCE_MARGIN:g} points")
            elif eq.not_better:
                parts.append(f"not better by more than {100 * EQUIVALENCE_MARGIN:g} points")
        parts.append(f"MDE {100 * mde(self.result.se):.1f}")
        if self.train_seeds > 1:
            parts.append(f"{self.train_seeds} training seeds")
        return "; ".join(parts)


def adjust(found: Sequence[LabComparison]) -> None:
    """Holm over the family: every tested comparison with a result except the primary."""
    family = [c for c in found if c.tested and c.result is not None and not c.primary]
    for c, p in zip(family, holm([c.result.p_value for c in family])):
        c.adjusted_p = p


def claims_text(found: Sequence[LabComparison]) -> str:
    family = sum(1 for c in found if c.adjusted_p is not None)
    tests = (f"Primary (fixed in advance): {comparison_name(*PRIMARY)}, tested alone at 5%. Holm: the verdict after "
             f"Holm's adjustment over the other {family} comparisons of learned rows (family-wise 5%); the "
             if any(c.primary for c in found) else   # an exploratory lab declares none
             f"Exploratory: no primary comparison. Holm: the verdict after Holm's adjustment over all {family} "
             "comparisons of learned rows (family-wise 5%); the ")
    lines = ["Every scorer against the ORM and against the paper's MASPRM: the paired difference in pass@1 per "
             "test question (mean over seeds), 95% bootstrap CI over questions; holds = CI above 0. A line that says 'N "
             "training seeds' pairs the rows seed by seed (tree and training seed) and resamples the seeds too "
             "(two-level bootstrap: the CI includes the training variance).",
             tests + "policy log-prob is a reference row. Where a comparison does not hold: \"not better by more than "
             f"{100 * EQUIVALENCE_MARGIN:g} points\" / \"equivalent within ±{100 * EQUIVALENCE_MARGIN:g} points\" "
             "by two one-sided bootstrap tests at 5%. MDE: the minimum detectable effect at 80% power, in points "
             "(2.80 x the bootstrap standard error)."]
    for claim in dict.fromkeys(c.claim for c in found):
        lines += ["", claim] + [f"  {c.lab_line()}" for c in found if c.claim == claim]
    return "\n".join(lines) + "\n"


def power_lines(found: Sequence[LabComparison]) -> list[str]:
    """Under the table: per column, the range of the MDEs at 80% power of the rows against the ORM."""
    out = []
    for column in COLUMNS:
        mdes = [100 * mde(c.result.se) for c in found
                if c.result is not None and c.tested and c.claim == f"vs {PRIMARY[1]}" and c.name.endswith(f"({column})")]
        if mdes:
            out.append(f"{column} {min(mdes):.1f}-{max(mdes):.1f}")
    if not out:
        return []
    return [f"- power: the minimum detectable difference against the ORM at 80% power (points; range over the "
            f"rows): {', '.join(out)}."]


def question_values(cell: Any) -> dict[str, float]:
    """pass@1 per question, the mean over the cell's seeds."""
    return per_question(load_condition(cell.folder, cell.experiment))


def headrooms(rows: Sequence[Any], cells: dict, seed: int) -> dict[str, dict[str, Headroom | None]]:
    """Per search column where the ORM and the step oracle ran, per learned row with a cell there (the ORM
    aside, the MASPRM with ORM leaves included): the share of the step oracle's gain over the ORM it recovers,
    with its CI; None where that gain has a CI reaching 0 (nothing to recover)."""
    orm = next((row.slug for row in rows if row.objective == "orm"), None)
    learned = [row.slug for row in rows if row.slug != orm] + list(EXTRA_ROWS)
    found: dict[str, dict[str, Headroom | None]] = {}
    for column in COLUMNS:
        base, ceiling = cells.get((orm, column)), cells.get(("oracle_step", column))
        if base is None or ceiling is None:
            continue
        found[column] = {slug: headroom_bootstrap(question_values(cells[(slug, column)]), question_values(base),
                                                  question_values(ceiling), seed=seed)
                         for slug in learned if (slug, column) in cells}
    return found


def headroom_text(h: Headroom | None) -> str:
    """A table cell: the share recovered in % with its 95% CI; "no headroom" where there is none to recover."""
    return "no headroom" if h is None else f"{100 * h.share:+.0f} [{100 * h.ci_low:+.0f}, {100 * h.ci_high:+.0f}]"


def headroom_lines(rows: Sequence[Any], cells: dict, seed: int,
                   found: dict[str, dict[str, Headroom | None]] | None = None) -> list[str]:
    """Per learned row and search: the share of the step oracle's gain over the ORM it recovers, with its CI
    (``found``: `headrooms` of the same cells, when already computed)."""
    names = {row.slug: row.name for row in rows} | EXTRA_ROWS
    lines = []
    for column, by_row in (headrooms(rows, cells, seed) if found is None else found).items():
        for slug, h in by_row.items():
            if h is not None:
                lines.append(f"  {names[slug]} ({column}): {100 * h.share:+.0f}% [{100 * h.ci_low:+.0f}%, "
                             f"{100 * h.ci_high:+.0f}%] of the step oracle's {100 * h.gap.mean_diff:+.1f} points "
                             "over the ORM")
        if any(h is None for h in by_row.values()):
            lines.append(f"  {column}: no headroom to recover: the step oracle's gain over the ORM has a CI "
                         "reaching 0")
    if not lines:
        return []
    return ["", "headroom recovered: (row - ORM) / (step oracle - ORM) in pass@1 per question, 95% bootstrap CI "
                "(shown where the step oracle's gain over the ORM has its CI above 0)"] + lines
