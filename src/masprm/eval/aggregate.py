"""Stage 5 core: aggregate seed-specific evaluation logs into one row per experiment.

An experiment id is a log's file name without `.txt` and without its trailing
`_<seed>`; the logs of one experiment differ only in that seed. Only logs
whose status line says COMPLETED count (in the original's logs handoff_prm's
paired lines follow it), and only when every metric line it reads, standard or
optional, is there once (an optional one may be absent), finite and in range
(``read_metrics``); any other log is named among the skipped. Per metric the CSV
has the mean and (except pass@3 and pass@5) the sample standard deviation across
seeds (0 for one seed), 4 decimals; an optional metric a row lacks, or that its
logs call undefined (`N/A`), is `N/A`. Column names, row order (first appearance in the sorted file names)
and CSV dialect are the original aggregator's, so its logs give its CSV; when
some log has a manifest (this project's), two columns follow: Method and
Budget, from the manifest's facts (a log without one: from its label).

The plot (``masprm.eval.budget_plot``) reads more than the CSV: from a log's `.summary.json` sidecar its
model work per finished example (policy tokens generated + scorer tokens read,
the policy's log-prob scoring included), and from its `.manifest.json` the
method and the facts its run recorded: the search family and its budget keys
(simulations, beam widths, voters), never decoded from the method's name. Experiments of one
method that differ only in the budget form one curve. Logs without sidecars
(the original's format) still plot: against generated tokens, with the method
and budget read from the condition label. Pure Python (matplotlib is imported
only to draw the plot).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from masprm.checks import read_utf8
from masprm.errors import DataError
from masprm.eval.logs import COMPLETED, LogFiles, text_status
from masprm.io import read_json
from masprm.eval.pool_metrics import OPTIONAL_LINES, OPTIONAL_RANGES, UNDEFINED   # columns only when a row has them
from masprm.paths import matching_files

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# metric key (the CSV's column stem, as the original names it) -> the log line it is read from
METRIC_LINES = {
    "pass@1": r"Accuracy \(pass@1\):",
    "pass@3": r"Pass@3:",
    "pass@5": r"Pass@5:",
    "tokens": r"Tokens:",
    "prm_calls": r"Mean PRM calls per example:",
    "agent_runs": r"Mean Agent runs per example:",
}
# This project's logs also name a line after what it counts (every scorer call, ORM too) beside the
# original's "PRM calls" line, which stays for the original's aggregator; when both are there the
# new one is read, and a log with only the original's line still aggregates.
NEW_METRIC_LINES = {"prm_calls": r"Mean scorer calls per example:"}
NO_STD = {"pass@3", "pass@5"}
# What a metric can be: a rate in [0, 1], or a count per example (>= 0).
METRIC_RANGES = {k: (0.0, 1.0) if k.startswith("pass@") else (0.0, math.inf) for k in METRIC_LINES}


@dataclass(frozen=True)
class MetricLine:
    """One metric as the aggregator reads it: its line's spellings (the preferred first), its range, and whether
    a log may lack it (the optional ones: only some methods write them, and write "N/A" when undefined).

    Every line is read the same way (``read_metrics``): written at most once per spelling, its value the first
    word after the label, a finite number in the range; a standard metric's line must be there, so a log cut in
    the middle of its metric lines is not counted."""

    key: str
    spellings: tuple[str, ...]
    low: float
    high: float
    optional: bool = False

    @property
    def patterns(self) -> list[re.Pattern]:
        return [re.compile(rf"^{s}(.*)$", re.MULTILINE) for s in self.spellings]


READ_LINES = [*(MetricLine(k, tuple(s for s in (NEW_METRIC_LINES.get(k), label) if s), *METRIC_RANGES[k])
                for k, label in METRIC_LINES.items()),
              *(MetricLine(k, (label,), *OPTIONAL_RANGES[k], optional=True) for k, label in OPTIONAL_LINES.items())]
_READ_PATTERNS = {line.key: line.patterns for line in READ_LINES}
_START = re.compile(r"^=== START (.+?) \| dataset=(\S+)", re.MULTILINE)   # labels have spaces
_SEED = re.compile(r"^(.*)_(\d+)$")


def metric_order() -> list[str]:
    """pass@1 first, the other pass@k next, then the rest alphabetically."""
    passes = sorted((k for k in METRIC_LINES if k.startswith("pass@") and k != "pass@1"),
                    key=lambda k: int(k.split("@")[1]))
    rest = sorted(k for k in METRIC_LINES if not k.startswith("pass@"))
    return ["pass@1", *passes, *rest]


def present_optional(rows: Sequence["Row"]) -> list[str]:
    """The optional metrics (OPTIONAL_LINES) some row has, in their order there."""
    return [k for k in OPTIONAL_LINES if any(row.values.get(k) for row in rows)]


# Columns after the original's when some row's condition is recorded in a manifest: its method and budget
# (read from the manifest's facts), which the fingerprinted experiment name does not say.
CONDITION_COLUMNS = ["Method", "Budget"]


def columns(optional: Sequence[str] = (), conditions: bool = False) -> list[str]:
    cols = ["Experiment", "Seeds"]
    for key in [*metric_order(), *optional]:
        cols.append(f"{key}_mean")
        if key not in NO_STD:
            cols.append(f"{key}_std")
    return cols + (CONDITION_COLUMNS if conditions else [])


def has_recorded_conditions(rows: Sequence["Row"]) -> bool:
    """True when some row's condition comes from a manifest (the original's logs have none: its columns)."""
    return any(row.condition.recorded for row in rows)


# --------------------------------------------------------------------------- what a condition is


# An original-format label: name, a "(key=value, ...)" settings group, then optional "[scorer folders]".
_LABEL_SETTINGS = re.compile(r"^(?P<name>.*?)\s*\((?P<settings>[^()]*=[^()]*)\)(?P<folders>\s*\[[^\]]*\])?$")


def split_label(label: str) -> tuple[str, str]:
    """A condition label without its settings group, and that group.

    ``"SBS + PRM (B1=3, B2=5) [prm: x]"`` gives ``("SBS + PRM [prm: x]", "B1=3, B2=5")``;
    a parenthesis without ``=`` is part of the name ("Greedy + Voter (policy only, no PRM)").
    """
    m = _LABEL_SETTINGS.match(label)
    return (m.group("name") + (m.group("folders") or ""), m.group("settings")) if m else (label, "")


def facts_of(manifest: dict | None, method: str) -> dict:
    """What the condition is (family, scorer roles, budget keys): the manifest's ``facts``, or for a
    manifest written before they were recorded, the registered method's record."""
    facts = (manifest or {}).get("facts")
    if isinstance(facts, dict):
        return facts
    from masprm.eval.methods import METHODS, method_facts   # the registry imports the searches: only when needed
    return method_facts(method, ()) if method in METHODS else {}


def model_work(summary: dict | None) -> float | None:
    """(generated_tokens_total + scorer_tokens_total) / finished examples of a summary sidecar, else None."""
    try:
        done = summary["n"] - summary["errors"]
        work = summary["generated_tokens_total"] + summary["scorer_tokens_total"]
    except (KeyError, TypeError):
        return None
    return work / done if done > 0 else None


@dataclass
class PlotCondition:
    """What a plot needs to know about a log's condition besides its metrics."""

    method: str                   # the registered method (mcts_prm), or the label's name for old logs
    budget: str = ""              # "10 sims", "3x5", "k=5", or the label's settings group
    series: str = ""              # experiments with equal series differ only in the budget
    settings: dict = field(default_factory=dict)   # the non-budget settings, to tell series apart
    recorded: bool = False        # method and budget from a manifest (False: from the label)


def condition_of(label: str, manifest: dict | None, summary: dict | None) -> PlotCondition:
    """The method from the manifest (or summary) sidecar; without either, from the label."""
    definition = (manifest or {}).get("definition") or {}
    method = ((manifest or {}).get("condition") or definition.get("method")
              or (summary or {}).get("condition"))
    name, label_budget = split_label(label)
    if not method:   # the original's format: the label is the only record of the condition
        return PlotCondition(name, label_budget, json.dumps([name]))
    settings = dict(definition.get("settings") or {})
    facts = facts_of(manifest, method)
    from masprm.eval.methods import budget_label   # as in facts_of: the stats modules stay numpy-free
    others = {k: v for k, v in settings.items() if k not in facts.get("budget_keys", ())}
    series = json.dumps([method, {**definition, "settings": others}], sort_keys=True, default=str)
    return PlotCondition(method, budget_label(facts, settings) or label_budget, series, others, recorded=True)


# --------------------------------------------------------------------------- reading logs


@dataclass
class ParsedLog:
    experiment: str
    seed: int | None
    status: str | None            # COMPLETED, FAILED or None (unfinished)
    metrics: dict[str, float]
    label: str                    # condition (from the START line), for plots
    condition: PlotCondition | None = None   # method and budget, for plots (None: from the label)
    work: float | None = None     # model work per finished example (None: no summary sidecar)
    problem: str | None = None    # why the log cannot be counted (None: it can, once COMPLETED)


def split_experiment(stem: str) -> tuple[str, int | None]:
    m = _SEED.match(stem)
    return (m.group(1), int(m.group(2))) if m else (stem, None)


def _value(found: str, line: MetricLine) -> tuple[float | None, str | None]:
    """(value, problem) of the text after a metric line's label: its first word a finite number in the line's
    range; an optional metric's "N/A" is an undefined value (None, no problem)."""
    word = (found.split() or [""])[0]
    if line.optional and word == UNDEFINED:
        return None, None
    value = float(word) if _NUMBER.fullmatch(word) else math.nan
    if not math.isfinite(value):
        return None, f"its {line.key} value is not a number"
    if not line.low <= value <= line.high:
        return None, f"its {line.key} value {value:g} is outside [{line.low:g}, {line.high:g}]"
    return value, None


def read_metrics(text: str) -> tuple[dict[str, float], str | None]:
    """Every metric of a log's text (``READ_LINES``), and why they cannot be counted (None: they can; else
    the first problem met, the values of a line with a problem left out).

    Each spelling present is checked; the value comes from the preferred one. A standard metric's line
    missing, any line written twice, or a value that is no finite number in its range is a problem."""
    metrics: dict[str, float] = {}
    problems = []
    for line in READ_LINES:
        found = [pattern.findall(text) for pattern in _READ_PATTERNS[line.key]]
        most = max(map(len, found))
        if most > 1:
            problems.append(f"its {line.key} line is written {most} times")
        elif most == 0 and not line.optional:
            problems.append(f"it has no {line.key} line")
        read = [_value(values[0], line) for values in found if values]
        bad = [problem for _, problem in read if problem]
        problems += bad
        if most == 1 and not bad and (value := next((v for v, _ in read if v is not None), None)) is not None:
            metrics[line.key] = value
    return metrics, problems[0] if problems else None


def log_problem(text: str, seed: int | None) -> str | None:
    """Why a finished log's numbers cannot be averaged, or None: a seed in the name and every metric line as
    ``read_metrics`` wants it."""
    if seed is None:
        return "its name carries no seed (_<seed> before .txt)"
    return read_metrics(text)[1]


def parse_log(stem: str, text: str, manifest: dict | None = None, summary: dict | None = None) -> ParsedLog:
    """A log's text, with its manifest and summary sidecars where they exist."""
    status = text_status(text)
    metrics = read_metrics(text)[0]
    start = _START.search(text)
    experiment, seed = split_experiment(stem)
    label = start.group(1) if start else experiment
    problem = log_problem(text, seed) if status == "COMPLETED" else None
    return ParsedLog(experiment, seed, status, metrics, label, condition_of(label, manifest, summary),
                     model_work(summary), problem)


# --------------------------------------------------------------------------- one row per experiment


@dataclass
class Row:
    experiment: str
    label: str
    seeds: list[int | None] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)
    condition: PlotCondition | None = None     # its first log's (None: from the label)
    work: list[float | None] = field(default_factory=list)   # per seed, None without a summary sidecar

    def __post_init__(self) -> None:
        if self.condition is None:
            self.condition = condition_of(self.label, None, None)

    def mean(self, key: str) -> float | None:
        vals = self.values.get(key) or []
        return statistics.fmean(vals) if vals else None

    def std(self, key: str) -> float | None:
        vals = self.values.get(key) or []
        return (statistics.stdev(vals) if len(vals) > 1 else 0.0) if vals else None

    def work_mean(self) -> float | None:
        """Mean model work over seeds; None unless every seed's log had a summary sidecar."""
        if not self.work or any(w is None for w in self.work):
            return None
        return statistics.fmean(self.work)


def aggregate(logs: Iterable[ParsedLog]) -> tuple[list[Row], list[str]]:
    """Rows of COMPLETED logs grouped by experiment, and the names of skipped logs.

    Rows come in the order their experiment first appears in ``logs`` (the
    original's order for logs read in sorted file-name order).
    """
    rows: dict[str, Row] = {}
    skipped = []
    for log in logs:
        if log.status != "COMPLETED" or log.problem:
            name = f"{log.experiment}_{log.seed}" if log.seed is not None else log.experiment
            skipped.append(f"{name} ({log.problem or log.status or 'unfinished'})")
            continue
        row = rows.setdefault(log.experiment, Row(log.experiment, log.label, condition=log.condition))
        row.seeds.append(log.seed)
        row.work.append(log.work)
        for key, value in log.metrics.items():
            row.values.setdefault(key, []).append(value)
    return list(rows.values()), skipped


def read_logs(logs_dir: str | Path, setting: str = "logs_dir") -> list[ParsedLog]:
    """The folder's `*.txt` logs in sorted file-name order, with their sidecars where present.

    An entry that is not a readable regular file (a folder, a FIFO, a dangling link) is never opened: it
    comes back as a log with a ``problem``, so ``aggregate`` names it among the skipped.
    """
    logs = []
    for path, problem in matching_files(logs_dir, "*.txt", setting):
        files = LogFiles(path.with_name(path.stem))
        logs.append(ParsedLog(*split_experiment(path.stem), None, {}, path.stem, problem=problem) if problem else
                    parse_log(path.stem, path.read_text(encoding="utf-8", errors="replace"),
                              _read_sidecar(files.manifest), _read_sidecar(files.summary)))
    return logs


def completed_seed_logs(folder: str | Path, setting: str = "logs_dir") -> Iterator[tuple[Path, str, int, LogFiles]]:
    """(log, experiment, seed, its files) of each COMPLETED log of `folder` whose name carries a seed and that has
    a manifest, in file-name order: what the readers that place conditions by their manifests count (the lab's
    cells, the demo's claims). Read strictly: an entry named ``*.txt`` that is no readable regular file, or a
    log that is not UTF-8, is one line naming it (the aggregator instead names and skips it: ``read_logs``)."""
    for log, problem in matching_files(folder, "*.txt", setting):
        if problem:   # a folder, a FIFO, a dangling link: never opened
            raise DataError(f"{log}: {problem}, where a stage-4 log goes; move it out of the logs folder")
        experiment, seed = split_experiment(log.stem)
        files = LogFiles(log.with_name(log.stem))
        if seed is not None and text_status(read_utf8(log, "stage-4 log")) == COMPLETED and files.manifest.is_file():
            yield log, experiment, seed, files


def json_sidecar(path: Path) -> dict:
    """A condition's JSON sidecar (manifest, summary), checked: UTF-8, JSON, an object; else one line naming it."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _read_sidecar(path: Path) -> dict | None:
    """A JSON sidecar, or None when it is missing or unreadable (the log's text still counts)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _fmt(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.4f}"


def option_flags(settings: dict, keys: Sequence[str]) -> list[str]:
    """The settings `keys` as a command line sets them: ``--orm_leaf`` for a switch that is on, ``--uct_type puct``
    for a value; a switch that is off or a setting left unset says nothing (the command would not name it)."""
    flags = []
    for key in keys:
        value = settings.get(key)
        if value is None or value is False:
            continue
        if value is True:
            flags.append(f"--{key}")
        else:
            shown = " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
            flags.append(f"--{key} {shown}")
    return flags


def _told_apart(firsts: Sequence[Row], group: Callable[[Row], Any]) -> list[str]:
    """A name for each of `firsts`: the method; where others of its `group` are listed too, plus the settings that
    differ between them as flags (``mcts_prm --orm_leaf``), else the label's name (it names the scorer folders);
    names still equal within a group are numbered (``#2``)."""
    names = []
    for row in firsts:
        cond = row.condition
        same = [r.condition for r in firsts if group(r) == group(row)]
        keys = sorted({k for c in same for k in c.settings}, key=str)
        differ = [k for k in keys if len({json.dumps(c.settings.get(k), default=str) for c in same}) > 1]
        if len(same) == 1:
            names.append(cond.method)
        elif differ:
            names.append(" ".join([cond.method, *option_flags(cond.settings, differ)]))
        else:
            names.append(f"{cond.method} ({split_label(row.label)[0]})")
    keyed = [(group(row), name) for row, name in zip(firsts, names)]   # a name is numbered among its group's equals
    return [name if keyed.count((g, name)) == 1 else f"{name} #{keyed[:i].count((g, name)) + 1}"
            for i, (g, name) in enumerate(keyed)]


def row_names(rows: Sequence[Row]) -> list[str]:
    """Each row's name in the table's Method column and the CSV: rows that would read the same (one method and
    budget) are told apart by what differs (``_told_apart``), the others named by their method."""
    return _told_apart(rows, lambda row: (row.condition.method, row.condition.budget))


def curve_names(rows: Sequence[Row]) -> dict[str, str]:
    """Each series' name in the plot's legend (``PlotCondition.series``: rows that differ only in their budget):
    series of one method are told apart as rows are (``_told_apart``)."""
    first: dict[str, Row] = {}
    for row in rows:
        first.setdefault(row.condition.series, row)
    return dict(zip(first, _told_apart(list(first.values()), lambda row: row.condition.method)))


def row_cells(row: Row, optional: Sequence[str] = (), conditions: bool = False, name: str | None = None) -> list[str]:
    """A row's cells; `name` its Method cell (default: the method; ``row_names`` tells rows of one method apart)."""
    cells = [row.experiment, str(len(row.seeds))]
    for key in [*metric_order(), *optional]:
        cells.append(_fmt(row.mean(key)))
        if key not in NO_STD:
            cells.append(_fmt(row.std(key)))
    return cells + ([name or row.condition.method, row.condition.budget] if conditions else [])


def _table_cells(rows: Sequence[Row]) -> list[list[str]]:
    """The header and every row's cells, each row's Method cell named by what tells it apart (``row_names``)."""
    optional, conditions = present_optional(rows), has_recorded_conditions(rows)
    return [columns(optional, conditions),
            *(row_cells(row, optional, conditions, name) for row, name in zip(rows, row_names(rows)))]


def to_csv(rows: Sequence[Row]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)   # the csv module's default dialect (CRLF rows), as the original wrote
    writer.writerows(_table_cells(rows))
    return buf.getvalue()


def format_table(rows: Sequence[Row]) -> str:
    table = _table_cells(rows)
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
