"""The lab's compute-matched sweep in its report: pass@1 against the budget of agent samples per question.

At each budget of `masprm.lab.compute_match.SWEEP` (fixed in docs/scorer_lab.md), best-of-N + ORM is
the reference and SBS and MCTS run with the demo's MASPRM and its ORM at their matched settings. Here
their logs are read (`sweep_cells`), each search condition is compared with best-of-N + ORM at the
same budget (`sweep_comparisons`: the paired bootstrap over questions; members of the claims' Holm
family), and the two tables and the picture's points are made. Pure Python.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from masprm.lab.compute_match import CONDITIONS, REFERENCE, Setting
from masprm.lab.cells import Cell, accuracy_text, condition_place, paired, read_placed
from masprm.lab.claims import LabComparison

Plan = Mapping[int, Mapping[tuple[str, str], Setting | None]]   # budget -> (family, row) -> settings
NAMES = {REFERENCE: "best-of-N + ORM", ("sbs", "masprm"): "SBS + MASPRM", ("sbs", "orm"): "SBS + ORM (prefixes)",
         ("mcts", "masprm"): "MCTS + MASPRM", ("mcts", "orm"): "MCTS + ORM (leaves)"}
COLUMN = {"bon": "BoN last", "sbs": "SBS", "mcts": "MCTS"}   # the lab table's column of each family's condition
CLAIM = "vs best-of-N + ORM at equal agent samples (compute-matched sweep)"


def demo_rows(rows: Sequence[Any]) -> dict[str, Any]:
    """The sweep's rows among the lab's: the MASPRM and the ORM at the lab's --seed (the demo's)."""
    found = {}
    for row in rows:
        if getattr(row, "train_seed", None) is None:
            if (row.scheme, row.objective) == ("masprm", "ppm"):
                found["masprm"] = row
            elif row.objective == "orm":
                found["orm"] = row
    return found


def key(family: str, row: str, setting: Setting) -> tuple:
    """A logged condition's identity in the sweep: the same condition serves every budget it is matched at."""
    return family, row, tuple(sorted(setting.items()))


def sweep_cells(logs_dirs: Sequence[Any], rows: Sequence[Any], plan: Plan,
                lab: str | None = None) -> dict[tuple, Cell]:
    """Every COMPLETED sweep condition of the logs folders, by `key`, its row by the keys `lab`'s jobs recorded
    (`masprm.lab.cells`; the one `lab` asked for last, else the newest experiment, where several)."""
    by_row = demo_rows(rows)
    wanted = {key(family, row, s): (family, row, s) for conditions in plan.values()
              for (family, row), s in conditions.items() if s is not None and row in by_row}

    def place(manifest: dict) -> tuple | None:
        for k, (family, row, s) in wanted.items():
            if condition_place(manifest, [by_row[row]], {family: s}, lab) == (by_row[row].slug, COLUMN[family]):
                return k
        return None

    return read_placed(logs_dirs, place, lab)


def cell_of(cells: Mapping[tuple, Cell], plan: Plan, budget: int, condition: tuple[str, str]) -> Cell | None:
    s = plan[budget].get(condition)
    return None if s is None else cells.get(key(*condition, s))


def comparison_name(condition: tuple[str, str], budget: int) -> str:
    return f"{NAMES[condition]} vs {NAMES[REFERENCE]} ({budget} agent samples)"


def sweep_comparisons(cells: Mapping[tuple, Cell], plan: Plan, seed: int) -> list[LabComparison]:
    """Each search condition with a setting at a budget against best-of-N + ORM there (not evaluated where either
    did not run); the Holm adjustment is the caller's, over the whole family."""
    found = []
    for budget in plan:
        base = cell_of(cells, plan, budget, REFERENCE)
        for condition in CONDITIONS[1:]:
            if plan[budget].get(condition) is None:
                continue   # no setting of its search fits the budget: no comparison
            mine = cell_of(cells, plan, budget, condition)
            result = paired([mine], [base], seed) if mine and base else None
            found.append(LabComparison(CLAIM, comparison_name(condition, budget), result))
    return found


def _setting_text(family: str, s: Setting) -> str:
    return {"bon": f"N={s.get('bon_n')}", "sbs": f"{s.get('b1')}x{s.get('b2')}",
            "mcts": f"{s.get('n_simulations')} sim"}[family]


def _cell_text(cell: Cell | None, family: str, s: Setting | None) -> str:
    if s is None:
        return "none fits"
    if cell is None:
        return f"– ({_setting_text(family, s)}: not run)"
    samples, work = cell.samples_mean(), cell.work_mean()
    used = ", ".join(x for x in ("–" if samples is None else f"{samples:.1f} samples",
                                 "–" if work is None else f"{work:.0f} tokens"))
    return f"{accuracy_text(cell)} ({_setting_text(family, s)}; {used})"


def _diff_text(c: LabComparison | None) -> str:
    if c is None:
        return "none fits"
    if c.result is None:
        return "not evaluated"
    r = c.result
    return (f"{100 * r.mean_diff:+.1f} [{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}] {c.verdict}; "
            f"Holm: {c.adjusted}")


def sweep_lines(cells: Mapping[tuple, Cell], plan: Plan, found: Sequence[LabComparison]) -> list[str]:
    """The report's section: pass@1 per condition and budget, then each search's difference to the reference."""
    if not any(cell_of(cells, plan, b, c) for b in plan for c in CONDITIONS):
        return []
    budgets = list(plan)
    head = ["| condition | " + " | ".join(f"{b} samples" for b in budgets) + " |", "|---|" + "---|" * len(budgets)]
    by_name = {c.name: c for c in found if c.claim == CLAIM}
    accuracy = [f"| {NAMES[c]} | " + " | ".join(_cell_text(cell_of(cells, plan, b, c), c[0], plan[b].get(c))
                                                for b in budgets) + " |" for c in CONDITIONS]
    diffs = [f"| {NAMES[c]} | " + " | ".join(_diff_text(by_name.get(comparison_name(c, b)) if plan[b].get(c)
                                                        else None) for b in budgets) + " |" for c in CONDITIONS[1:]]
    return ["", "### Compute-matched sweep", "",
            "pass@1 % (mean ± std over the seeds) at each budget of agent samples per question, the demo's MASPRM "
            "and ORM; in brackets each condition's setting (matched on the train questions, docs/scorer_lab.md) "
            "and the agent samples and model work (policy + scorer tokens) per question its test runs used. "
            "\"none fits\": no setting of the search is within the budget.", "", *head, *accuracy, "",
            "Against best-of-N + ORM at the same budget: paired difference in pass@1 per question (points), 95% "
            "bootstrap CI over questions, the verdict and the Holm-adjusted verdict (the claims' family).", "",
            *head, *diffs]


def sweep_points(cells: Mapping[tuple, Cell], plan: Plan) -> dict[str, list[tuple[float, float, float]]]:
    """Per condition, (agent samples, pass@1 mean, std) of each budget where it ran: the picture's lines."""
    points: dict[str, list[tuple[float, float, float]]] = {}
    for condition in CONDITIONS:
        for budget in plan:
            cell = cell_of(cells, plan, budget, condition)
            if cell is not None and cell.samples_mean() is not None:
                points.setdefault(NAMES[condition], []).append((cell.samples_mean(), *cell.mean_std()))
    return points
