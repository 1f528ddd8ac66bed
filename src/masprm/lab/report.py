"""The scorer lab's report: one table, the paired claims, the compute-matched sweep, and accuracy against model work.

    write_report(rows, ["logs/toy_demo", "logs/toy_lab"], "results/toy_lab_stepbench.json",
                 "results/toy_lab_labelbench", "results/toy_lab.md", "results/toy_lab_claims.txt",
                 "results/toy_lab.png", budgets={"sbs": {"b1": 2, "b2": 3}, ...},
                 made_by={"logs/toy_demo": "make demo", "logs/toy_lab": "make lab"})

The table's facts go to results/toy_lab.json beside its Markdown (what ``make report`` reads).

The cells (`masprm.lab.cells`): each row's conditions over the seeds, by column (SBS, MCTS,
best-of-N per ``step_agg``) at the lab's budgets; best-of-N counts its N samples' generation in every
condition, also where the samples were read back from the store. The table adds each learned row's
headroom recovered against the step oracle. Claims: every row against the ORM and against the paper's
MASPRM in each column, the paired difference in pass@1 per question (mean over seeds) with a 95%
bootstrap CI over questions and the claims report's verdict words (`masprm.instruments.claims.Comparison`),
then the compute-matched sweep's comparisons (`masprm.lab.sweep_report`), all under one Holm family.
Pure Python (matplotlib only to draw the plot).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Sequence

from masprm.eval.budget_plot import save_png
from masprm.io import atomic_write_text
from masprm.paired_stats import Headroom, mde
from masprm.scorer_meta import held_out_auc
from masprm.lab.cells import (SINGLE_PASS, Budgets, Cell, LabRow, accuracy_text,
                                  paired, read_cells, seed_suffix)
from masprm.lab.claims import (COLUMNS, EXTRA_ROWS, LOGPROB, ORM_LEAF, REFERENCE_ROWS, LabComparison, adjust,
                                   claims_text, comparison_name, headroom_lines, headroom_text, headrooms,
                                   power_lines)
from masprm.lab.sweep_report import Plan, sweep_cells, sweep_comparisons, sweep_lines, sweep_points
from masprm.worlds import WORLDS
from masprm.worlds.runs import DEFAULT_WORLD, WORLD_RUNS
Headrooms = dict[str, dict[str, Headroom | None]]   # column -> row slug -> its headroom recovered


def default_world() -> dict:
    """The report's world when none is given: the toy world's record (its name and test questions)."""
    return WORLD_RUNS[DEFAULT_WORLD].report_record()


def world_agents(world: dict | None) -> tuple[str, ...]:
    """The team whose label AUCs the table shows, in team order: the world's agents (its step truth), so that
    every world's team reaches its report (toy: Reader / Planner / Solver / Verifier; toy_deep: eight)."""
    return WORLDS[(world or {}).get("name", DEFAULT_WORLD)].truth.agents


def agent_initials(agents: Sequence[str]) -> str:
    """The label AUC column's header: each agent's initial with its number (Op1 -> O1), team order."""
    return " / ".join(a[0] + "".join(c for c in a if c.isdigit()) for a in agents)


# --------------------------------------------------------------------------- the benchmarks


def read_json_or_none(path: str | Path) -> dict | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def label_aucs(report: dict | None) -> dict[str, float | None]:
    """Per agent, the AUC of label value against step correctness from a label-quality report
    (``auc_by_agent``, at the top or under ``agents``); {} when there is none."""
    if not report:
        return {}
    if isinstance(report.get("auc_by_agent"), dict):
        return report["auc_by_agent"]
    agents = report.get("agents")
    return {a: (v or {}).get("auc") for a, v in agents.items()} if isinstance(agents, dict) else {}


def _num(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def step_cells(stepbench: dict | None, slug: str) -> list[str]:
    """step F1 (one threshold, then one per agent), ECE and AUC at the Reader / Planner (– where it did not run)."""
    r = ((stepbench or {}).get("scorers") or {}).get(slug)
    if not r:
        return ["–", "–", "–", "–"]
    by_agent, cis = r.get("auc_by_agent") or {}, r.get("auc_by_agent_ci") or {}

    def with_ci(value, ci) -> str:   # a 95% CI over the test transcripts, where the benchmark has one
        return _num(value) + (f" [{_num(ci[0])}, {_num(ci[1])}]" if ci else "")

    return [with_ci(r.get("f1"), r.get("f1_ci")), _num(r.get("f1_by_agent_thresholds")), _num(r.get("ece")),
            " / ".join(with_ci(by_agent.get(a), cis.get(a)) for a in ("Reader", "Planner"))]


# --------------------------------------------------------------------------- the table


def _misses(cell: Cell | None) -> str:
    if cell is None:
        return "–"
    total = sum(cell.misses.values())
    share = [f"{100 * cell.misses.get(k, 0) / total:.0f}" for k in ("not_generated", "not_chosen")]
    return " / ".join(share) + (f" (+{cell.misses['unknown']} unknown)" if cell.misses.get("unknown") else "")


def table_records(rows: Sequence[LabRow], cells: dict, stepbench: dict | None, labelbench: dict[str, dict | None],
                  headroom: Headrooms | None = None, agents: Sequence[str] | None = None) -> tuple[list[str], list[dict]]:
    """The table's header and its rows as facts: ``cells`` by column, each pass@1 cell's logs folder (``logs``);
    ``headroom``: `lab_claims.headrooms` of the same cells (its column; none computed: every cell "–");
    ``agents``: the team whose label AUCs it shows (`world_agents`; default: the toy world's)."""
    agents = tuple(agents or world_agents(None))
    head = ["scorer", "scheme", "objective", f"label AUC {agent_initials(agents)}", "step F1", "step F1, per-agent thresholds",
            "step ECE", "step AUC R / P", *(f"{c} pass@1 %" for c in COLUMNS),
            "model work / question: " + " / ".join(COLUMNS),
            "agent samples / question: " + " / ".join(COLUMNS),
            "misses % never generated / not chosen: " + " · ".join(COLUMNS),
            "headroom recovered %: " + " / ".join(COLUMNS)]
    # a row trained on final correctness alone has no step labels of a scheme: its signal is the outcome
    entries = [(row.name, row.slug, "outcome" if row.outcome_only else row.scheme, row.objective, row)
               for row in rows] + [(EXTRA_ROWS[ORM_LEAF], ORM_LEAF, "masprm", "ppm + orm leaves", None)] + \
              [(name, slug, "–", "–", None) for slug, name in REFERENCE_ROWS.items()]
    # a row without any cell (the reference scorers not run, no --orm_leaf log) is left out
    entries = [e for e in entries if e[4] is not None or e[1] == LOGPROB or any((e[1], c) in cells for c in COLUMNS)]
    records = []
    for name, slug, scheme, objective, row in entries:
        aucs = label_aucs(labelbench.get(row.scheme)) if row is not None and not row.outcome_only else {}
        labels = ("–" if row is None else "outcome only" if row.outcome_only
                  else " / ".join(_num(aucs.get(a)) for a in agents) if aucs else "–")
        mine = [cells.get((slug, c)) for c in COLUMNS]
        work = " / ".join("–" if c is None or c.work_mean() is None else f"{c.work_mean():.0f}" for c in mine)
        samples = " / ".join("–" if c is None or c.samples_mean() is None else f"{c.samples_mean():.1f}" for c in mine)
        room = " / ".join(headroom_text(headroom[c][slug]) if slug in (headroom or {}).get(c, {}) else "–"
                          for c in COLUMNS)
        values = [name, scheme, objective, labels, *step_cells(stepbench, slug), *map(accuracy_text, mine), work,
                  samples, " · ".join(map(_misses, mine)), room]
        records.append({"slug": slug, "cells": dict(zip(head, values)),
                        "logs": {f"{c} pass@1 %": str(cell.folder) for c, cell in zip(COLUMNS, mine) if cell}})
    return head, records


def table_lines(rows: Sequence[LabRow], cells: dict, stepbench: dict | None, labelbench: dict[str, dict | None],
                headroom: Headrooms | None = None, agents: Sequence[str] | None = None) -> list[str]:
    head, records = table_records(rows, cells, stepbench, labelbench, headroom, agents)
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(r["cells"][h] for h in head) + " |" for r in records)]


def report_text(rows: Sequence[LabRow], cells: dict, stepbench: dict | None, labelbench: dict[str, dict | None],
                single_pass: Cell | None, budgets: Budgets, notes: Sequence[str], power: Sequence[str] = (), *,
                headroom: Headrooms | None = None, sweep: Sequence[str] = (), world: dict | None = None) -> str:
    world = world or default_world()
    agents = world_agents(world)
    lines = [f"# The scorer lab ({world['name']} world)", "",
             "Which outcome-only training signal gives the best process scorer for this team? Every scorer is "
             f"trained with the demo's settings on the demo's trees; searches on the {world['test_questions']} test "
             "questions; pass@1 in % as mean ± std over the seeds.", "",
             *table_lines(rows, cells, stepbench, labelbench, headroom, agents), ""]
    if single_pass is not None:
        lines.append(f"Single pass, no scorer: {accuracy_text(single_pass)} %.")
    lines += [
        "",
        f"- label AUC: the label value against the world's step truth, per agent ({' / '.join(agents)}; "
        "`python -m masprm.instruments.labelbench`); \"outcome only\": trained on final correctness alone.",
        "- step F1 / ECE / AUC: error localisation on sampled test transcripts (`python -m masprm.instruments.stepbench`); "
        "ECE after mapping a value v to (v + 1) / 2 (log-prob: exp of the mean per-token log-prob), 10 bins; "
        "[95% CI] from 1,000 bootstrap resamples of the test transcripts; per-agent thresholds: one threshold per "
        "agent chosen on the calibration transcripts (coordinate ascent from the single one).",
        f"- SBS {budgets['sbs']['b1']}x{budgets['sbs']['b2']} and MCTS with {budgets['mcts']['n_simulations']} "
        f"simulations guided by the scorer; BoN: {budgets['bon']['bon_n']} single passes ranked by the scorer's "
        "step values aggregated by min or by the last step's value (the same passes for every scorer at a seed). "
        "The ORM row's SBS is the ORM valuing each prefix; its MCTS values the leaves only (mcts_orm).",
        "- model work: policy tokens generated + scorer tokens read per question, mean over seeds; a BoN "
        "condition counts the generation of its 8 passes even where they were read back from the store.",
        "- agent samples: agent messages the policy generated per question (mean over seeds), the compute a "
        "search spends on the team; a BoN condition counts its N passes' messages.",
        "- misses: the share (%) of question-seeds the search missed although a right final answer was never "
        "among those it generated (never generated), and although one was (not chosen: it returned another); "
        "with pass@1 they add up to 100.",
        "- headroom recovered: (row − ORM) / (step oracle − ORM) in pass@1 per question under the same search, in %, "
        "with its 95% bootstrap CI (the ratio per resample); \"no headroom\" where the step oracle's gain over the "
        "ORM has a CI reaching 0, – where the step oracle or the ORM did not run.",
    ]
    lines += list(power)
    bench = (stepbench or {}).get("scorers") or {}
    for what, found in (("outcome AUC: each scorer's value of a finished transcript against its final correctness, "
                         "on the step benchmark's calibration transcripts (train questions; what best-of-N asks of it)",
                         [(row.name, bench.get(row.slug, {}).get("outcome_auc")) for row in rows]),
                        ("held-out outcome AUC: the same for each trajectory-level scorer on the finished transcripts "
                         "of its eval split, questions held out of its training (the calibration split; its kept "
                         "checkpoint has the highest)", [(row.name, held_out_auc(row.folder)) for row in rows])):
        if any(v is not None for _, v in found):
            lines.append(f"- {what}: " + ", ".join(f"{name} {_num(v)}" for name, v in found if v is not None) + ".")
    lines += [f"- not run: {note}" for note in notes]
    if "preregistration" in world:
        code = world.get("code", {})
        lines.append(f"- pre-registration: {world['preregistration']['file']} at commit "
                     f"{world['preregistration']['commit']} when the report was written"
                     + (f" (code at {code['commit']}{', with uncommitted changes' if code.get('dirty') else ''})"
                        if code else "") + ".")
    return "\n".join([*lines, *sweep]) + "\n"


# --------------------------------------------------------------------------- claims


def seed_cells(cells: dict, slug: str, column: str, suffixes: Sequence[str]) -> list[Cell | None]:
    """A row's cell in a column at each training seed; a reference row (no training) is the same at every seed."""
    if slug in REFERENCE_ROWS:
        return [cells.get((slug, column))] * len(suffixes)
    return [cells.get((slug + suffix, column)) for suffix in suffixes]


def comparisons(rows: Sequence[LabRow], cells: dict, seed: int, masprm_tested: bool = True,
                primary: bool = True) -> list[LabComparison]:
    """Every row (and the log-prob) against the ORM and against the paper's MASPRM, in every column, over the
    training seeds both have (the lab's --seed among them), with the family's Holm-adjusted p-values;
    `masprm_tested` False: the comparisons against the MASPRM are shown, not tested (a family against the
    ORM alone, as toy_deep's pre-registration fixes it); `primary` False: no comparison is the primary
    one (an exploratory lab: the MASPRM against the ORM under MCTS joins the Holm family too)."""
    suffixes = list(dict.fromkeys(["", *map(seed_suffix, rows)]))   # the lab's --seed first
    rows = [row for row in rows if not seed_suffix(row)]
    names = {row.slug: row.name for row in rows} | EXTRA_ROWS | REFERENCE_ROWS
    baselines = [row for row in rows if row.objective == "orm"] + \
                [row for row in rows if row.scheme == "masprm" and row.objective == "ppm"]
    found = []
    for base in baselines:
        for column in COLUMNS:
            for slug in names:
                if slug == base.slug:
                    continue
                both = [(a, b) for a, b in zip(seed_cells(cells, slug, column, suffixes),
                                               seed_cells(cells, base.slug, column, suffixes)) if a and b]
                a = cells.get((slug, column))
                result = paired(*zip(*both), seed) if a and cells.get((base.slug, column)) else None
                if a is None and slug in {**EXTRA_ROWS, **REFERENCE_ROWS} and slug != LOGPROB:
                    continue   # a row the lab did not run (the oracles, --orm_leaf): no line
                found.append(LabComparison(f"vs {base.name}", comparison_name(names[slug], base.name, column),
                                           result, tested=slug not in REFERENCE_ROWS
                                           and (base.objective == "orm" or masprm_tested),
                                           train_seeds=len(both) if result else 0, declared=primary))
    adjust(found)
    return found


# --------------------------------------------------------------------------- the plot


def plot_points(rows: Sequence[LabRow], cells: dict) -> list[tuple[str, str, float, float, float]]:
    """(row name, column, model work, accuracy mean, std) of every cell with model work."""
    names = [(row.slug, row.name) for row in rows] + list(EXTRA_ROWS.items()) + list(REFERENCE_ROWS.items())
    points = []
    for slug, name in names:
        for column in COLUMNS:
            cell = cells.get((slug, column))
            if cell is not None and cell.work_mean() is not None:
                points.append((name, column, cell.work_mean(), *cell.mean_std()))
    return points


def distinct_colours(n: int) -> list[tuple[float, float, float, float]]:
    """n colours, no two alike: tab20's, then tab20b's and tab20c's (a lab table has more than 20 rows, and
    one palette repeated gave the oracles the MASPRM's and the ORM's colours)."""
    from matplotlib import colormaps
    palettes = [colormaps[name] for name in ("tab20", "tab20b", "tab20c")]
    if n > 20 * len(palettes):
        raise ValueError(f"{n} scorers: at most {20 * len(palettes)} distinct colours")
    return [palettes[i // 20](i % 20) for i in range(n)]


def plot(points: Sequence[tuple[str, str, float, float, float]], out: str | Path,
         sweep: dict[str, list[tuple[float, float, float]]] | None = None) -> bool:
    """Accuracy against model work, a colour per scorer and a marker per search, and beside it, where the
    compute-matched sweep ran (``sweep``: `lab_sweep.sweep_points`), accuracy against agent samples per
    question, a line per sweep condition; False when nothing to draw."""
    if not points:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    names = list(dict.fromkeys(p[0] for p in points))
    colour = dict(zip(names, distinct_colours(len(names))))
    markers = dict(zip(COLUMNS, "osD^"))
    fig, axes = plt.subplots(1, 2 if sweep else 1, figsize=(16 if sweep else 9, 6), squeeze=False)
    ax = axes[0][0]
    for name, column, work, mean, std in points:
        ax.errorbar(work, 100 * mean, yerr=100 * std, fmt=markers[column], color=colour[name],
                    capsize=2, markersize=5)
    for name in names:
        ax.plot([], [], "s", color=colour[name], label=name)
    for column, marker in markers.items():
        ax.plot([], [], marker, color="grey", label=column)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.LogFormatter())   # plain numbers ("600", not "6x10^2")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    ax.set_xlabel("model work per question: policy tokens generated + scorer tokens read (mean over seeds)")
    ax.set_ylabel("pass@1 %, mean ± std over seeds")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    if sweep:
        side = axes[0][1]
        for name, line in sweep.items():
            xs, means, stds = zip(*sorted(line))
            side.errorbar(xs, [100 * m for m in means], yerr=[100 * s for s in stds], marker="o", capsize=2,
                          label=name)
        side.set_xlabel("agent samples per question (mean over seeds): the compute-matched sweep")
        side.set_ylabel("pass@1 %, mean ± std over seeds")
        side.grid(alpha=0.3)
        side.legend(fontsize=7)
    save_png(fig, out)
    return True


def write_report(rows: Sequence[LabRow], logs_dirs: Sequence[str | Path], stepbench: str | Path,
                 labelbench_dir: str | Path, report: str | Path, claims: str | Path, plot_file: str | Path, *,
                 budgets: Budgets, seed: int = 42, notes: Iterable[str] = (),
                 made_by: dict[str, str] | None = None, sweep: Plan | None = None, world: dict | None = None,
                 masprm_tested: bool = True, primary: bool = True, lab: str | None = None) -> None:
    """The three outputs, the table's facts as JSON next to it (``made_by``: logs folder -> the command that
    writes it, so a reader can say where each pass@1 comes from) and the claims as JSON next to the text;
    ``sweep``: the compute-matched sweep's plan (`compute_match.SWEEP`), its table and comparisons added;
    ``world``: its name and test questions (default: the toy world's, `default_world`), whose team's label AUCs the
    table shows (`world_agents`), and, where it has one, its pre-registration's
    file and commit (``preregistration``), also recorded in the table's JSON; ``masprm_tested``: whether the
    comparisons against the MASPRM join the Holm family, ``primary``: whether the lab declares its primary
    comparison (`comparisons`); ``lab``: its name, whose jobs' row keys place the cells (`masprm.lab.cells`)."""
    cells = read_cells(logs_dirs, rows, budgets, lab)   # every training seed's cells; the table shows the lab's --seed
    swept = sweep_cells(logs_dirs, rows, sweep, lab) if sweep else {}
    found = comparisons(rows, cells, seed, masprm_tested, primary) + \
        (sweep_comparisons(swept, sweep, seed) if sweep else [])
    adjust(found)   # one Holm family: the sweep's comparisons join the others (docs/scorer_lab.md)
    rows = [row for row in rows if not seed_suffix(row)]
    bench = read_json_or_none(stepbench)
    labels = {row.scheme: read_json_or_none(Path(labelbench_dir) / f"{row.scheme}.json") for row in rows}
    rooms = headrooms(rows, cells, seed)
    atomic_write_text(report, report_text(rows, cells, bench, labels, cells.get((LOGPROB, SINGLE_PASS)), budgets,
                                          list(notes), power_lines(found), headroom=rooms,
                                          sweep=sweep_lines(swept, sweep, found) if sweep else (), world=world))
    head, records = table_records(rows, cells, bench, labels, rooms, world_agents(world))
    prereg = {k: world[k] for k in ("preregistration", "code") if world and k in world}
    atomic_write_text(Path(report).with_suffix(".json"), json.dumps(
        {"columns": head, "rows": records, "made_by": {str(Path(k)): v for k, v in (made_by or {}).items()},
         **prereg}, ensure_ascii=False, indent=1) + "\n")
    atomic_write_text(claims, claims_text(found) + "".join(line + "\n" for line in
                                                       headroom_lines(rows, cells, seed, rooms)))
    atomic_write_text(Path(claims).with_suffix(".json"), json.dumps(
        [{"claim": c.claim, "name": c.name, "verdict": c.verdict, "line": c.lab_line(), "primary": c.primary,
          "holm_p": c.adjusted_p, "holm_verdict": c.adjusted,
          "p_value": c.result.p_value if c.result else None, "mde": mde(c.result.se) if c.result else None,
          "result": c.result.as_dict() if c.result else None} for c in found], indent=1) + "\n")
    plot(plot_points(rows, cells), plot_file, sweep_points(swept, sweep) if sweep else None)
