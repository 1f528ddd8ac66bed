"""The packages form layers: each imports only the packages below it, so the import graph has no cycle.

    core (the top-level modules)  <  plots, labels, models  <  search  <  handoff  <  eval  <  worlds
        <  instruments  <  published  <  stages  <  lab
                                                              train (labels, models)
                                     archive (run archives: core, and eval for stage 4's settings and log
                                     records, which verify checks a log's command against; the published
                                     tables, the stages and the lab read them)

Imports inside functions count too: a lazy import is still a dependency.
"""

import ast
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "src" / "masprm"
ALLOWED = {   # package -> the packages it may import
    "core": set(),
    "plots": {"core"},
    "labels": {"core"},
    "models": {"core"},
    "search": {"core", "plots"},
    "train": {"core", "labels", "models"},
    "handoff": {"core", "search"},
    "eval": {"core", "plots", "search", "handoff", "models"},   # plots: stage 1's runner draws its trees
    "archive": {"core", "eval"},   # verify parses a stage-4 log's recorded command with stage 4's settings
    # a world: its task, team, step truth and policy build; it registers itself into the core's registries
    "worlds": {"core", "search", "models", "labels"},
    # the instruments measure a world: step and label benchmarks, headroom, single passes, the paper's claims
    "instruments": {"core", "search", "handoff", "eval", "models", "labels", "train", "worlds"},
    # the docs' published tables, written from results files and archives, and the reference pages written from
    # the label schemes' and objectives' registries (`make report`)
    "published": {"core", "eval", "archive", "instruments", "labels", "train"},
    # the drivers' machinery: commands in subprocesses under the pinned numerics, a run's archive at its end
    "running": {"core", "worlds", "archive"},
    "stages": {"core", "plots", "labels", "models", "search", "train", "handoff", "eval", "worlds", "instruments",
               "published", "archive", "running"},
    # the lab drives the pipeline's commands over a world: its plan, jobs, cells, claims and report
    "lab": {"core", "plots", "labels", "models", "search", "train", "handoff", "eval", "worlds", "instruments",
            "published", "archive", "running", "stages"},
}


def package_of(module: str) -> str:
    """'masprm.search.mcts' -> 'search'; a top-level module ('masprm.graph') is 'core'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else "core"


def imports() -> list[tuple[str, str, str]]:
    """(importing module's package, importing file, imported module) for every masprm import."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).with_suffix("")
        here = package_of(".".join(("masprm", *rel.parts)))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found += [(here, str(rel), name) for name in names if name.startswith("masprm.")]
    return found


def test_every_package_has_a_layer():
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages | {"core"} == set(ALLOWED)


def test_each_package_imports_only_the_layers_below_it():
    wrong = [f"{file} imports {name}" for here, file, name in imports()
             if package_of(name) not in ALLOWED[here] | {here}]
    assert not wrong


def test_no_stage_command_imports_another():
    """Each module of stages/ is one command; what two commands share lives below them (running/, eval/, ...),
    so a command can change without moving another."""
    wrong = [f"{file} imports {name}" for here, file, name in imports()
             if here == "stages" and package_of(name) == "stages" and name != "masprm.stages"]
    assert not wrong


# Inside the lab, three tiers, each importing only its own and those below: what reads a run's logs and
# reports on them, what plans a run (records, prices, plans), and the commands that drive both.
LAB_TIERS = {
    "measure": {"claims", "cells", "compute_match", "power", "sweep_report", "report"},
    "plan": {"job", "estimate", "rows", "recipe", "sweep_jobs", "plan", "dry_run"},
    "command": {"finish", "pilot", "command", "__main__"},
}
LAB_ORDER = list(LAB_TIERS)


def test_each_lab_module_imports_only_its_tier_and_those_below():
    tier = {module: name for name, modules in LAB_TIERS.items() for module in modules}
    found = {p.stem for p in (PACKAGE / "lab").glob("*.py")} - {"__init__"}
    assert found == set(tier), f"give each lab module a tier in LAB_TIERS: {sorted(found ^ set(tier))}"
    wrong = []
    for here, file, name in imports():
        parts = name.split(".")
        if here != "lab" or len(parts) < 3 or parts[1] != "lab":
            continue
        mine, theirs = tier[Path(file).name], tier[parts[2]]
        if LAB_ORDER.index(theirs) > LAB_ORDER.index(mine):
            wrong.append(f"{file} ({mine}) imports {name} ({theirs})")
    assert not wrong


def test_the_allowed_graph_itself_has_no_cycle():
    seen: dict[str, int] = {}

    def depth(package: str, path: tuple[str, ...] = ()) -> int:
        assert package not in path, " -> ".join(path + (package,))
        if package not in seen:
            seen[package] = 1 + max((depth(p, path + (package,)) for p in ALLOWED[package]), default=0)
        return seen[package]

    for package in ALLOWED:
        depth(package)


# The import circles between modules today, each closed by an import inside a function: a dataset given by path or
# hub id is read by dataset_sources, which builds on data's readers;
# SBS's beam scores through scorer_kinds, whose kinds type their beams; the public scorer formats build on the own
# scorer. No other may appear.
KNOWN_CIRCLES = {frozenset({"data", "dataset_sources"}),
                 frozenset({"search/beam", "search/scorer_kinds"}),
                 frozenset({"models/public_scorers", "models/scorer"})}


def module_graph() -> dict[str, set[str]]:
    """Module file (relative, no suffix) -> the masprm module files it imports, at the top or inside a function,
    as the code version reads them (masprm.identity): `from masprm.stages import lab` imports stages/lab; a
    package's __init__ is left out (importing a.b runs a/__init__, which closes no circle of modules)."""
    from masprm.identity import masprm_imports

    def rel(path: Path) -> str:
        return path.relative_to(PACKAGE).with_suffix("").as_posix()

    return {rel(path): {rel(f) for f in masprm_imports(path, PACKAGE)
                        if f != path and f.name != "__init__.py"}
            for path in PACKAGE.rglob("*.py")}


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(frozenset(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_between_modules():
    # what the old 400-line cap stood for: a module has one job, and the modules' imports form an order. Splitting
    # files to stay under a line count is what made the lab's circle.
    found = set(circles(module_graph()))
    assert found <= KNOWN_CIRCLES, sorted(sorted(c) for c in found - KNOWN_CIRCLES)
    assert KNOWN_CIRCLES <= found   # a circle that is gone leaves this list


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}   # a -> b -> c -> a; d only points in
    assert circles(graph) == [frozenset({"a", "b", "c"})]
    assert circles({"a": {"b"}, "b": set()}) == []
