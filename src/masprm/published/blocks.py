"""`make report`: the measured tables of the docs, written from the results files so they cannot drift.

    python -m masprm.published.blocks            # rewrite every generated block of docs/**/*.md and the README
    python -m masprm.published.blocks --check    # exit 1 when a block differs from what the results give (its diff shown)

A block is made from the run archives checked into the repository (`--archives`, default archives/ beside the
docs folder: each run's newest version, checked whole and read from a temporary copy), so a fresh clone
regenerates them without running anything; a block no archive holds is made from the checkout's results and
logs where they are, and left as it is otherwise (the command names each such block). A block made from an
archive ends with a line naming it (`SOURCE_LINE`).

A doc marks each generated block with its source:

    <!-- report: demo-table -->
    ... (rewritten by this command) ...
    <!-- /report -->

The blocks (`BLOCKS`) and where they come from:

    demo-table    the demo's logs (logs/toy_demo), aggregated as stage 5 does
    demo-claims   results/toy_demo_claims.txt (python -m masprm.instruments.claims)
    stepbench     results/toy_stepbench.json (python -m masprm.instruments.stepbench)
    lab-table     results/toy_lab.md (make lab)
    lab-claims    results/toy_lab_claims.txt (make lab)
    lab-summary   results/toy_lab.json (the lab table's facts) and toy_lab_claims.json (make lab): a few
                  columns for the README, the cells `make demo` made marked †; a results folder from
                  before toy_lab.json: the table of results/toy_lab.md, unmarked (with a note)
    toy_deep-lab-table, -claims, -summary          the same of results/toy_deep_lab* (make lab WORLD=toy_deep)
    toy_deep-explore-table, -claims, -summary      the same of results/toy_deep_explore* (make lab-explore ...)
    lab-rows-..., toy_deep-explore-rows-...        the same of a run of some rows (python src/lab.py --rows ...):
                                                   results/toy_lab_rows*, results/toy_deep_explore_rows*

The docs are `--docs`/**/*.md (a run's page under docs/results/ too) and the README.md beside that folder.

A block whose source is missing is left as it is, and the command says so; `--check` prints each block that
differs as a unified diff. Pure Python: no torch import.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from masprm.archive.read import newest, opened
from masprm.cli import ArgumentParser, UsageError, run_cli
from masprm.config import add_config_args, arg, config_from_args
from masprm.eval.aggregate import Row, aggregate, read_logs, row_names
from masprm.io import atomic_write_text
from masprm.paths import PathText, check_input_dir
from masprm.instruments.claims import comparison_name

_BLOCK = re.compile(r"(<!-- report: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /report -->)", re.DOTALL)


@dataclass
class ReportArgs:
    docs: PathText = arg("docs", help="folder of the Markdown docs whose generated blocks are rewritten, with the "
                                   "README.md beside it (default docs)")
    results: PathText = arg("results", help="folder of the results files (default results)")
    logs_dir: PathText = arg("logs/toy_demo", flags=("--logs_dir",), help="the demo's stage-4 logs (default logs/toy_demo)")
    check: bool = arg(False, help="write nothing; exit 1 when a block differs from what its source gives, and "
                                  "print each such block's diff")
    archives: PathText | None = arg(None, help="folder of the run archives the blocks are made from first "
                                               "(default: archives beside the --docs folder)")


# --------------------------------------------------------------------------- the demo's table

# The demo's methods, in the order its table lists them (each method's budgets by model work).
DEMO_METHODS = ("single_pass", "sbs_logprob", "sbs_prm", "mcts_logprob", "mcts_prm", "mcts_orm")


def _cell(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def demo_table(rows: list[Row]) -> str:
    """method | budget | pass@1 (%) mean ± std | pass@5 (%) | generated tokens and model work per question."""
    def order(row: Row) -> tuple:
        method = row.condition.method
        rank = DEMO_METHODS.index(method) if method in DEMO_METHODS else len(DEMO_METHODS)
        return (rank, method, row.work_mean() or 0.0)

    lines = ["| method | budget | pass@1 (%) | pass@5 (%) | generated tokens / question | model work / question |",
             "|---|---|--:|--:|--:|--:|"]
    # each row named as the CSV names it (`mcts_prm --orm_leaf`)
    for row, name in sorted(zip(rows, row_names(rows)), key=lambda named: order(named[0])):
        p1, sd, p5 = row.mean("pass@1"), row.std("pass@1"), row.mean("pass@5")
        pass1 = "n/a" if p1 is None else f"{100 * p1:.1f} ± {100 * (sd or 0.0):.1f}"
        lines.append(f"| {name} | {row.condition.budget} | {pass1} | "
                     f"{_cell(None if p5 is None else 100 * p5, '.1f')} | {_cell(row.mean('tokens'), '.0f')} | "
                     f"{_cell(row.work_mean(), '.0f')} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the step-level benchmark

SCORER_NAMES = {"masprm": "MASPRM", "orm": "ORM", "logprob": "policy log-prob"}


def stepbench_table(report: dict) -> str:
    """One row per scorer: accuracies, F1, AUC overall and per agent, and ECE where the report has it."""
    scorers = report["scorers"]
    agents = list(next(iter(scorers.values()))["auc_by_agent"])
    with_ece = any("ece" in s for s in scorers.values())
    head = ["scorer", "acc. erroneous", "acc. correct", "F1", "AUC", *(f"AUC {a}" for a in agents)]
    head += ["ECE"] if with_ece else []
    lines = ["| " + " | ".join(head) + " |", "|---|" + "--:|" * (len(head) - 1)]
    for name, s in scorers.items():
        cells = [SCORER_NAMES.get(name, name), _cell(s["acc_erroneous"], ".2f"), _cell(s["acc_correct"], ".2f"),
                 _cell(s["f1"], ".2f"), _cell(s["auc"], ".2f"),
                 *(_cell(s["auc_by_agent"].get(a), ".2f") for a in agents)]
        cells += [_cell(s.get("ece"), ".3f")] if with_ece else []
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the blocks


def _fenced(path: Path) -> str:
    return "```\n" + path.read_text(encoding="utf-8").rstrip("\n") + "\n```"


def _untitled(path: Path) -> str:
    """A markdown report without its own `# title` line: the doc's section already names it."""
    lines = path.read_text(encoding="utf-8").strip().splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "\n".join(lines).strip()


# The lab table's columns the README's summary keeps, and the comparison it adds from the claims.
SUMMARY_COLUMNS = ("scorer", "label AUC R / P / S / V", "step F1", "step AUC R / P", "SBS pass@1 %", "MCTS pass@1 %", "BoN min pass@1 %")
SUMMARY_CLAIM = ("ORM", "MCTS", "MCTS vs ORM, points [95% CI]")   # baseline, column, the summary's header
# A summary column no row of the lab has, and the one shown in its place (toy_deep ranks best-of-N by the last
# step's value only).
SUMMARY_FALLBACK = {"BoN min pass@1 %": "BoN last pass@1 %"}


DEMO_MARK = " †"   # after a cell whose numbers `make demo` wrote (the lab reads the demo's own conditions)
DEMO_NOTE = "scorer (†: from `{demo}`, the rest from `{lab}`)"   # the first header when a cell is marked
# Each lab's report files (results/<stem>.md, .json, _claims.txt, _claims.json) by its blocks' prefix: the toy
# world's lab keeps the names it had before the second world existed.
LAB_BLOCKS = {"lab": "toy_lab", "toy_deep-lab": "toy_deep_lab", "toy_deep-explore": "toy_deep_explore",
              # a run of some rows (`lab --rows`) reports under its own names
              "lab-rows": "toy_lab_rows", "toy_deep-explore-rows": "toy_deep_explore_rows"}


def markdown_rows(text: str) -> list[dict[str, str]]:
    """The rows of the first Markdown table in `text`, each as {header: cell}."""
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("|")]
    if len(lines) < 2:
        return []
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return [dict(zip(cells[0], row)) for row in cells[2:]]


def lab_rows(table: Path) -> list[tuple[dict[str, str], dict[str, str]]]:
    """The lab table's rows: (cells by column, the command that made each pass@1 cell), from the facts the lab
    writes beside its Markdown (toy_lab.json); a results folder from before those facts: its Markdown table,
    with no command known."""
    facts_file = table.with_suffix(".json")
    if not facts_file.exists():
        print(f"report: lab-summary: no {facts_file} (results from before it was written): read the table of "
              f"{table}, its cells unmarked")
        return [(row, {}) for row in markdown_rows(table.read_text(encoding="utf-8"))]
    facts = json.loads(facts_file.read_text(encoding="utf-8"))
    made_by = facts.get("made_by") or {}
    return [(row["cells"], {col: made_by.get(folder, "") for col, folder in row["logs"].items()})
            for row in facts["rows"]]


def lab_summary(table: Path, claims: Path) -> str:
    """A few columns of the lab's table, with each scorer's paired difference to the ORM under MCTS; a cell
    made by `make demo` (its pass@1, or a difference between two such) is marked, the first header says so."""
    found = json.loads(claims.read_text(encoding="utf-8")) if claims.exists() else []
    by_name = {c["name"]: c["result"] for c in found}
    base, column, title = SUMMARY_CLAIM
    rows = lab_rows(table)
    # the label AUC column names the world's team (toy: R / P / S / V; toy_deep: its eight agents): the table's own
    label = next((c for cells, _ in rows for c in cells if c.startswith("label AUC")), None)
    shown = tuple(SUMMARY_FALLBACK[c] if c in SUMMARY_FALLBACK and all(cells.get(c, "–") == "–" for cells, _ in rows)
                  else label if label and c.startswith("label AUC") else c for c in SUMMARY_COLUMNS)
    column_key = f"{column} pass@1 %"
    base_by = next((by for cells, by in rows if cells.get("scorer") == base), {}).get(column_key)
    made = {command for _, by in rows for command in by.values() if command}

    def by_demo(command: str | None) -> bool:   # `make demo`, or `make demo WORLD=...`
        return bool(command) and command.split(" WORLD=")[0] == "make demo"

    lines, marked = [], False
    for cells, by in rows:
        r = by_name.get(comparison_name(cells.get("scorer", ""), base, column))
        diff = (f"{100 * r['mean_diff']:+.1f} [{100 * r['ci_low']:+.1f}, {100 * r['ci_high']:+.1f}]"
                if r else "–")
        demo = {c for c in shown if by_demo(by.get(c))}
        if r and by_demo(by.get(column_key)) and by.get(column_key) == base_by:
            demo.add(title)
        marked = marked or bool(demo)
        row = [*(cells.get(c, "–") for c in shown), diff]
        lines.append("| " + " | ".join(v + (DEMO_MARK if c in demo else "") for c, v in zip((*shown, title), row))
                     + " |")
    note = DEMO_NOTE.format(demo=next((c for c in sorted(made) if by_demo(c)), "make demo"),
                            lab=next((c for c in sorted(made) if not by_demo(c)), "make lab"))
    head = [note if marked else shown[0], *shown[1:], title]
    return "\n".join(["| " + " | ".join(head) + " |", "|---" + "|--:" * len(shown) + "|", *lines])


def block_sources(args: ReportArgs) -> dict[str, tuple[Path, Callable[[], str]]]:
    """block name -> (the file it is made from, how to make its body)."""
    results, logs = Path(args.results), Path(args.logs_dir)
    sources = {
        "demo-table": (logs, lambda: demo_table(aggregate(read_logs(logs))[0])),
        "demo-claims": (results / "toy_demo_claims.txt", lambda: _fenced(results / "toy_demo_claims.txt")),
        "stepbench": (results / "toy_stepbench.json", lambda: stepbench_table(
            json.loads((results / "toy_stepbench.json").read_text(encoding="utf-8")))),
    }
    for prefix, stem in LAB_BLOCKS.items():
        table, claims = results / f"{stem}.md", results / f"{stem}_claims.txt"
        sources |= {f"{prefix}-table": (table, lambda table=table: _untitled(table)),
                    f"{prefix}-claims": (claims, lambda claims=claims: _fenced(claims)),
                    f"{prefix}-summary": (table, lambda table=table, claims=claims:
                                          lab_summary(table, claims.with_suffix(".json")))}
    return sources


def fill_blocks(text: str, bodies: dict[str, str]) -> str:
    """`text` with the body of every block named in `bodies` replaced (other blocks untouched)."""
    def replace(m: re.Match) -> str:
        name = m.group("name")
        return m.group(0) if name not in bodies else f"{m.group(1)}{bodies[name].rstrip()}\n{m.group(4)}"

    return _BLOCK.sub(replace, text)


def block_names(text: str) -> list[str]:
    return [m.group("name") for m in _BLOCK.finditer(text)]


def block_body(text: str, name: str) -> str | None:
    """The body of the generated block `name` in `text` (None: no such block)."""
    return next((m.group("body") for m in _BLOCK.finditer(text) if m.group("name") == name), None)


# --------------------------------------------------------------------------- archives, diffs and the command

DEMO_LOGS = "logs/toy_demo"   # the demo's stage-4 logs, in a checkout and in its archive
DEMO_BLOCKS = ("demo-table", "demo-claims", "stepbench")   # the blocks `make demo` makes (docs/toy_world.md)
# The last line of a block made from an archive: which one (a path relative to the README's folder).
SOURCE_LINE = "*Made by `make report` from the archive `{archive}` (`masprm-archive verify {archive}`).*"
_SOURCE = re.compile(r"^\*Made by `make report` from the archive `[^`]+`")


def archive_bodies(archives: Path, names: set[str], base: Path) -> dict[str, tuple[str, str]]:
    """name -> (body, the archive's path) of each block in `names` whose source one of the run archives in
    `archives` holds (each run's newest version, checked whole; the first run by name wins), read from a
    temporary copy of its files at their run paths."""
    found: dict[str, tuple[str, str]] = {}
    for archive in newest(archives):
        shown = os.path.relpath(archive, base)
        with opened(archive) as root:
            sources = block_sources(ReportArgs(results=str(root / "results"), logs_dir=str(root / DEMO_LOGS)))
            for name in sorted(names - set(found)):
                if name in sources and sources[name][0].exists():
                    found[name] = (f"{sources[name][1]().rstrip()}\n\n{SOURCE_LINE.format(archive=shown)}", shown)
    return found


def without_source(body: str) -> str:
    """A block's body without the line naming its archive: its numbers only."""
    return "\n".join(line for line in body.splitlines() if not _SOURCE.match(line)).strip()


@dataclass(frozen=True)
class Stale:
    """A generated block whose body in a doc differs from what its source gives."""

    doc: str
    name: str
    old: str
    new: str

    def diff(self) -> list[str]:
        return list(difflib.unified_diff(self.old.splitlines(), self.new.splitlines(),
                                         f"{self.doc} [{self.name}] (in the doc)",
                                         f"{self.doc} [{self.name}] (from its source)", lineterm=""))


def stale_blocks(docs: list[Path], bodies: dict[str, str], numbers_only: bool = False) -> list[Stale]:
    """The blocks of `docs` named in `bodies` that differ from them (`numbers_only`: the lines naming an
    archive left out of the comparison)."""
    found = []
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        for name in block_names(text):
            if name not in bodies:
                continue
            old, new = block_body(text, name) or "", bodies[name].rstrip() + "\n"
            if (without_source(old) != without_source(new)) if numbers_only else old != new:
                found.append(Stale(str(doc), name, old, new))
    return found


def doc_files(docs: str | Path) -> list[Path]:
    """The docs whose blocks are generated: `docs`/**/*.md (the run pages of docs/results/ included) and the
    README.md beside that folder."""
    readme = Path(docs).parent / "README.md"
    return sorted(Path(docs).rglob("*.md")) + ([readme] if readme.exists() else [])


def demo_verdict(docs: str | Path, results: str | Path, logs_dir: str | Path) -> str:
    """The demo's last line: whether the numbers it made match the published ones (docs/toy_world.md's
    blocks, their archive lines left out), or which blocks differ and by how many lines."""
    args = ReportArgs(docs=str(docs), results=str(results), logs_dir=str(logs_dir))
    sources = block_sources(args)
    bodies = {name: sources[name][1]() for name in DEMO_BLOCKS if sources[name][0].exists()}
    where = f"{Path(docs) / 'toy_world.md'}"
    if not bodies:
        return f"no published numbers to compare with: none of its outputs is there (see {where})"
    stale = stale_blocks(doc_files(docs), bodies, numbers_only=True)
    if not stale:
        return f"matches the published numbers ({', '.join(bodies)} of {where})"
    changed = [f"{s.name} ({sum(1 for line in s.diff() if line[:1] in '+-' and line[:3] not in ('+++', '---'))} "
               f"lines)" for s in stale]
    return (f"differs from the published numbers in {len(stale)} block(s): {', '.join(changed)}; "
            f"`make report-check` shows the diff, {where} says when the numbers may differ")


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description="Rewrite the docs' measured tables from the run archives and results files.")
    add_config_args(p, ReportArgs)
    args = config_from_args(ReportArgs, p.parse_args(argv))
    check_input_dir(args.docs, "docs")         # a missing folder is a mistyped flag, never "0 docs rewritten"
    base = Path(args.docs).parent
    archives = Path(args.archives) if args.archives else base / "archives"
    if args.archives:
        check_input_dir(args.archives, "archives")
    if os.path.lexists(args.results) or not newest(archives):   # a fresh clone has archives and no results
        check_input_dir(args.results, "results")
    sources = block_sources(args)
    docs = doc_files(args.docs)
    used = {name for doc in docs for name in block_names(doc.read_text(encoding="utf-8"))}
    unknown = used - set(sources)
    if unknown:
        print(f"report: unknown block(s) {', '.join(sorted(unknown))} (known: {', '.join(sources)})", file=sys.stderr)
        return 2
    from_archives = archive_bodies(archives, used, base)
    bodies = {name: body for name, (body, _) in from_archives.items()}
    missing = []
    for name in sorted(used - set(bodies)):
        source, make = sources[name]
        if source.exists():
            bodies[name] = make()
        else:
            missing.append(f"{name} ({source})")
    if missing:   # one line: a fresh clone has many, and each is named
        print(f"report: no archive in {archives} holds these blocks' sources and the checkout has none of them, "
              f"left as they are: {', '.join(missing)}")
    if from_archives:
        print("report: from archives: " + ", ".join(f"{name} ({archive})" for name, (_, archive)
                                                     in sorted(from_archives.items())))
    if args.check and not bodies:   # a check that compared nothing must not pass
        raise UsageError(f"--check compared nothing: no generated block in {args.docs}/**/*.md or its README has "
                         f"its source (archives in {archives}, results in {args.results}, logs in {args.logs_dir})")
    stale = stale_blocks(docs, bodies)
    if args.check:
        for block in stale:
            print("\n".join(block.diff()))
    else:
        for doc in sorted({block.doc for block in stale}):
            text = Path(doc).read_text(encoding="utf-8")
            atomic_write_text(doc, fill_blocks(text, bodies))
    named = sorted({block.doc for block in stale})
    verb = "differ from their sources" if args.check else "rewritten"
    print(f"report: {len(named)} doc(s) {verb}" + (f": {', '.join(named)} (blocks "
                                                    f"{', '.join(b.name for b in stale)})" if stale else ""))
    return 1 if args.check and stale else 0


def cli() -> None:
    run_cli(main)


if __name__ == "__main__":
    cli()
