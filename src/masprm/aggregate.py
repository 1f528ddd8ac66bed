"""Stage 5 core: aggregate seed-specific evaluation logs into one row per experiment.

An experiment id is a log's file name without `.txt` and without its trailing
`_<seed>`; the logs of one experiment differ only in that seed. Only logs
whose status line says COMPLETED count (handoff_prm's paired lines may follow
it). Per metric the CSV has the mean and (except pass@3 and pass@5) the sample
standard deviation across seeds (0 for one seed), 4 decimals; missing values
are `N/A`. Column names, row order (first appearance in the sorted file names)
and CSV dialect are the original aggregator's, so its logs give its CSV. Pure
Python (matplotlib is imported only to draw the plot).
"""

from __future__ import annotations

import csv
import io
import os
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from masprm.eval.logs import text_status

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
# metric key (the CSV's column stem, as the original names it) -> the log line it is read from
METRIC_LINES = {
    "pass@1": r"Accuracy \(pass@1\):",
    "pass@3": r"Pass@3:",
    "pass@5": r"Pass@5:",
    "tokens": r"Tokens:",
    "prm_calls": r"Mean PRM calls per example:",
    "agent_runs": r"Mean Agent runs per example:",
}
NO_STD = {"pass@3", "pass@5"}
_PATTERNS = {k: re.compile(rf"^{label}\s*{_NUMBER}", re.MULTILINE) for k, label in METRIC_LINES.items()}
_START = re.compile(r"^=== START (.+?) \| dataset=(\S+)", re.MULTILINE)   # labels have spaces
_SEED = re.compile(r"^(.*)_(\d+)$")


def metric_order() -> list[str]:
    """pass@1 first, the other pass@k next, then the rest alphabetically."""
    passes = sorted((k for k in METRIC_LINES if k.startswith("pass@") and k != "pass@1"),
                    key=lambda k: int(k.split("@")[1]))
    rest = sorted(k for k in METRIC_LINES if not k.startswith("pass@"))
    return ["pass@1", *passes, *rest]


def columns() -> list[str]:
    cols = ["Experiment", "Seeds"]
    for key in metric_order():
        cols.append(f"{key}_mean")
        if key not in NO_STD:
            cols.append(f"{key}_std")
    return cols


@dataclass
class ParsedLog:
    experiment: str
    seed: int | None
    status: str | None            # COMPLETED, FAILED or None (unfinished)
    metrics: dict[str, float]
    label: str                    # condition (from the START line), for plots


def split_experiment(stem: str) -> tuple[str, int | None]:
    m = _SEED.match(stem)
    return (m.group(1), int(m.group(2))) if m else (stem, None)


def parse_log(stem: str, text: str) -> ParsedLog:
    status = text_status(text)
    metrics = {k: float(m.group(1)) for k, pat in _PATTERNS.items() if (m := pat.search(text))}
    start = _START.search(text)
    experiment, seed = split_experiment(stem)
    return ParsedLog(experiment, seed, status, metrics, start.group(1) if start else experiment)


@dataclass
class Row:
    experiment: str
    label: str
    seeds: list[int | None] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)

    def mean(self, key: str) -> float | None:
        vals = self.values.get(key) or []
        return statistics.fmean(vals) if vals else None

    def std(self, key: str) -> float | None:
        vals = self.values.get(key) or []
        return (statistics.stdev(vals) if len(vals) > 1 else 0.0) if vals else None


def aggregate(logs: Iterable[ParsedLog]) -> tuple[list[Row], list[str]]:
    """Rows of COMPLETED logs grouped by experiment, and the names of skipped logs.

    Rows come in the order their experiment first appears in ``logs`` (the
    original's order for logs read in sorted file-name order).
    """
    rows: dict[str, Row] = {}
    skipped = []
    for log in logs:
        if log.status != "COMPLETED":
            skipped.append(f"{log.experiment}_{log.seed} ({log.status or 'unfinished'})"
                           if log.seed is not None else f"{log.experiment} ({log.status or 'unfinished'})")
            continue
        row = rows.setdefault(log.experiment, Row(log.experiment, log.label))
        row.seeds.append(log.seed)
        for key, value in log.metrics.items():
            row.values.setdefault(key, []).append(value)
    return list(rows.values()), skipped


def read_logs(logs_dir: str | Path) -> list[ParsedLog]:
    """The folder's `*.txt` logs in sorted file-name order."""
    paths = sorted(Path(logs_dir).glob("*.txt"), key=lambda p: p.name)
    return [parse_log(p.stem, p.read_text(encoding="utf-8", errors="replace")) for p in paths]


def _fmt(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.4f}"


def row_cells(row: Row) -> list[str]:
    cells = [row.experiment, str(len(row.seeds))]
    for key in metric_order():
        cells.append(_fmt(row.mean(key)))
        if key not in NO_STD:
            cells.append(_fmt(row.std(key)))
    return cells


def to_csv(rows: Sequence[Row]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)   # the csv module's default dialect (CRLF rows), as the original wrote
    writer.writerow(columns())
    for row in rows:
        writer.writerow(row_cells(row))
    return buf.getvalue()


def format_table(rows: Sequence[Row]) -> str:
    table = [columns()] + [row_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def plot_labels(rows: Sequence[Row]) -> list[str]:
    """The condition name, or the experiment id where two experiments share a condition name."""
    names = [r.label for r in rows]
    return [r.label if names.count(r.label) == 1 else r.experiment for r in rows]


def plot_results(rows: Sequence[Row], out: str | Path) -> bool:
    """Accuracy (mean ± std over seeds) against mean generated tokens, one labelled point per experiment."""
    points = [(r, lab) for r, lab in zip(rows, plot_labels(rows))
              if r.mean("pass@1") is not None and r.mean("tokens") is not None]
    if not points:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5))
    for row, label in points:
        x, y, err = row.mean("tokens"), row.mean("pass@1"), row.std("pass@1")
        ax.errorbar([x], [y], yerr=[err], fmt="o", capsize=4)
        ax.annotate(f"{label} (n={len(row.seeds)})", (x, y), textcoords="offset points", xytext=(6, 6),
                    fontsize=8)
    ax.set_xlabel("mean generated tokens per example")
    ax.set_ylabel("accuracy (pass@1), mean ± std over seeds")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    os.replace(tmp, out)
    return True
