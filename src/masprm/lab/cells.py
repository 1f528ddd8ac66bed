"""The scorer lab's cells: every COMPLETED stage-4 condition of its logs folders, placed by row and column.

A row is a trained scorer (``rows``: objects with ``name``, ``slug``, ``scheme``, ``objective``,
``folder``, ``outcome_only``; `masprm.lab.rows.LabScorer`), plus the policy's log-prob (the
conditions without a scorer) and the reference scorers. The stage-4 logs (of several folders: the demo's
holds the SBS and MCTS conditions the lab shares with it) are placed in columns by method (SBS, MCTS,
best-of-N per ``step_agg``), at the settings each family's conditions must have (``budgets``), and in rows
by the row keys this lab's jobs recorded in their manifests (``lab``: the lab's name; `masprm.eval.lab_jobs`):
a condition two of its rows asked for is each one's. A log no job of this lab asked for (the demo's own, an
archived run's from before the keys were recorded) is matched to the row whose scorer folder its manifest names,
as before. Where a place has logs of several experiments, the one this lab asked for last wins (the times its
jobs recorded), then the newest log among those it never asked for. A cell holds, over the seeds: pass@1,
model work per question (policy tokens generated + scorer tokens read, `masprm.eval.aggregate.model_work`),
agent samples per question and the misses split (`masprm.eval.metrics.split_misses`). Pure Python.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from masprm.answers import is_correct
from masprm.eval.aggregate import completed_seed_logs, facts_of, json_sidecar, model_work
from masprm.eval.lab_jobs import lab_jobs_of
from masprm.eval.logs import read_records
from masprm.eval.metrics import split_misses
from masprm.paired_stats import PairedResult, two_level_bootstrap
from masprm.search.scorer_kinds import SCORER_KINDS
from masprm.lab.claims import LOGPROB, ORM_LEAF, REFERENCE_ROWS, question_values

FAMILY_COLUMNS = {"sbs": "SBS", "mcts": "MCTS", "bon": "BoN"}   # search family -> its column
SINGLE_PASS = "single pass"  # its column outside the table (a line under it)
Budgets = dict[str, dict[str, Any]]   # search family -> the settings a tabulated condition has


class LabRow(Protocol):
    name: str
    slug: str
    scheme: str
    objective: str
    folder: str
    outcome_only: bool


@dataclass
class Cell:
    """One row's condition in one column, over its seeds."""

    experiment: str
    folder: Path                      # the logs folder it was read from
    seeds: list[int] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    work: list[float | None] = field(default_factory=list)
    samples: list[float | None] = field(default_factory=list)   # agent samples (policy runs) per question
    misses: dict[str, int] = field(default_factory=dict)
    mtime: float = 0.0
    asked: str | None = None          # when the lab reading it last asked for it (None: never)

    def add(self, seed: int, summary: dict, records: list[dict], mtime: float, asked: str | None = None) -> None:
        self.seeds.append(seed)
        self.accuracy.append(summary["pass@1"])
        self.work.append(model_work(summary))
        self.samples.append(summary.get("agent_runs_mean"))
        for kind, n in split_misses(records, is_correct).items():
            self.misses[kind] = self.misses.get(kind, 0) + n
        self.mtime = max(self.mtime, mtime)
        if asked is not None:
            self.asked = max(self.asked or asked, asked)

    def order(self) -> tuple:
        """Which of two experiments of one place is taken (the greater): one the lab asked for over one it never
        did, then the later ask; between two it never asked for, the newer log."""
        return self.asked is not None, self.asked or "", self.mtime

    def mean_std(self) -> tuple[float, float]:
        return statistics.fmean(self.accuracy), statistics.stdev(self.accuracy) if len(self.accuracy) > 1 else 0.0

    def work_mean(self) -> float | None:
        return statistics.fmean(self.work) if self.work and None not in self.work else None

    def samples_mean(self) -> float | None:
        return statistics.fmean(self.samples) if self.samples and None not in self.samples else None


def condition_places(manifest: dict, rows: Sequence[LabRow], budgets: Budgets,
                     lab: str | None = None) -> list[tuple[str, str]]:
    """Every (row slug or LOGPROB, column) of a logged condition: the rows `lab`'s jobs asked for it as (by key),
    else the row of the scorer folder it names; [] for one the lab does not tabulate (another method, another
    budget, another scorer, a row not among `rows`)."""
    method = manifest.get("condition") or ""
    if method == "single_pass":
        return [(LOGPROB, SINGLE_PASS)]
    definition = manifest.get("definition") or {}
    settings = definition.get("settings") or {}
    facts = facts_of(manifest, method)   # family and scorer kind as the run recorded them
    family, kind = facts.get("family"), facts.get("scorer_kind")
    if family not in FAMILY_COLUMNS or any(settings.get(k) != v for k, v in budgets.get(family, {}).items()):
        return []
    column = FAMILY_COLUMNS[family]
    if family == "bon":
        column = f"BoN {settings.get('step_agg')}"
    if kind in REFERENCE_ROWS:
        return [(kind, column)]
    keys = asked_rows(manifest, lab)
    if keys:   # the lab's own record: its rows by key, never by a folder's name
        by_key = {row_key(row): row for row in rows}
        chosen = [by_key[k] for k in keys if k in by_key]
    else:
        needs = SCORER_KINDS[kind].needs if kind in SCORER_KINDS else ()
        role = needs[0] if needs else None
        folder = ((definition.get("models") or {}).get(role) or {}).get("id") if role else None
        chosen = [next((row for row in rows if folder and Path(folder).name == Path(row.folder).name), None)]
    return [place for place in (row_place(row, settings, column) for row in chosen if row) if place]


def condition_place(manifest: dict, rows: Sequence[LabRow], budgets: Budgets,
                    lab: str | None = None) -> tuple[str, str] | None:
    """The first of `condition_places`; None where it has none."""
    found = condition_places(manifest, rows, budgets, lab)
    return found[0] if found else None


def row_place(row: LabRow, settings: dict, column: str) -> tuple[str, str] | None:
    """A row's place in `column` for a condition of these settings (a replica's: its row's at another seed)."""
    seed = seed_suffix(row)
    if settings.get("orm_leaf"):   # only the paper's MASPRM with ORM leaves has a row
        return (ORM_LEAF + seed, column) if (row.scheme, row.objective) == ("masprm", "ppm") else None
    return row.slug + seed, column


def seed_suffix(row: LabRow) -> str:
    """"" for a row at the lab's --seed, "_s<S>" for its replica at training seed S (`LabScorer.key`)."""
    seed = getattr(row, "train_seed", None)
    return "" if seed is None else f"_s{seed}"


def row_key(row: LabRow) -> str:
    """The row's key, as its jobs record it (`LabScorer.key`)."""
    return row.slug + seed_suffix(row)


def asked_rows(manifest: dict, lab: str | None) -> list[str]:
    """The row keys `lab`'s jobs recorded asking for the condition, first ask first (none: never by a row)."""
    return list(dict.fromkeys(e["row"] for e in lab_jobs_of(manifest) if e["lab"] == lab and e.get("row"))) \
        if lab else []


def last_asked(manifest: dict, lab: str | None) -> str | None:
    """When `lab`'s jobs last asked for the condition (None: never)."""
    return max((e["asked"] for e in lab_jobs_of(manifest) if e["lab"] == lab), default=None) if lab else None


def read_cells(logs_dirs: Sequence[str | Path], rows: Sequence[LabRow], budgets: Budgets,
               lab: str | None = None) -> dict[tuple[str, str], Cell]:
    """Every COMPLETED condition of the logs folders in its (row, column), by the keys `lab`'s jobs recorded;
    of several experiments at one place, the one `lab` asked for last (`Cell.order`)."""
    return read_all_placed(logs_dirs, lambda manifest: condition_places(manifest, rows, budgets, lab), lab)


def read_placed(logs_dirs: Sequence[str | Path], place: Callable[[dict], Any],
                lab: str | None = None) -> dict[Any, Cell]:
    """Every COMPLETED condition of the logs folders at the place `place` gives its manifest (None: not read);
    where a place has several experiments, the one `lab` asked for last, else the newest (`Cell.order`)."""
    return read_all_placed(logs_dirs, lambda manifest: [] if (where := place(manifest)) is None else [where], lab)


def read_all_placed(logs_dirs: Sequence[str | Path], places: Callable[[dict], list],
                    lab: str | None) -> dict[Any, Cell]:
    """`read_placed` for a condition that may have several places (`places`: all of them, [] for none): each
    seed's log is placed by its own manifest, its experiment's cell at each place gathers those seeds."""
    experiments: dict[tuple[Path, str, Any], Cell] = {}
    for folder in map(Path, logs_dirs):
        if not folder.is_dir():   # a family whose logs were never made
            continue
        for log, experiment, seed, files in completed_seed_logs(folder):
            manifest = json_sidecar(files.manifest)
            wheres = places(manifest)
            if not wheres or not files.summary.is_file():
                continue
            summary, records = json_sidecar(files.summary), read_records(files.records)
            for where in wheres:
                cell = experiments.setdefault((folder, experiment, where), Cell(experiment, folder))
                cell.add(seed, summary, records, log.stat().st_mtime, last_asked(manifest, lab))
    cells: dict[Any, Cell] = {}
    for (_, _, where), cell in experiments.items():
        if where not in cells or cells[where].order() < cell.order():
            cells[where] = cell
    return cells


def accuracy_text(cell: Cell | None) -> str:
    if cell is None:
        return "–"
    mean, std = cell.mean_std()
    n = len(cell.seeds)
    return f"{100 * mean:.1f} ± {100 * std:.1f}" + (f" ({n} seed{'s' if n > 1 else ''})" if n != 3 else "")


def paired(a: Sequence[Cell], b: Sequence[Cell], seed: int) -> PairedResult:
    """pass@1 of A minus B per question (each the mean over its search seeds), a[s] and b[s] trained at one
    training seed: the two-level bootstrap over training seeds and questions (with one training seed, exactly
    the paired bootstrap over questions)."""
    return two_level_bootstrap([question_values(c) for c in a], [question_values(c) for c in b], seed=seed)
