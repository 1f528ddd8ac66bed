"""The packages form layers: each imports only the packages below it, so the import graph has no cycle.

    core (the top-level modules)  <  plots, labels, models  <  search  <  handoff  <  eval  <  toy  <  stages
                                                              train (labels, models)
                                     archive (run archives: core only; toy's report and the stages read them)

Imports inside functions count too: a lazy import is still a dependency.
"""

import ast

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
    "archive": {"core"},
    "toy": {"core", "search", "handoff", "eval", "models", "labels", "train", "archive"},
    "stages": {"core", "plots", "labels", "models", "search", "train", "handoff", "eval", "toy", "archive"},
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


def test_the_allowed_graph_itself_has_no_cycle():
    seen: dict[str, int] = {}

    def depth(package: str, path: tuple[str, ...] = ()) -> int:
        assert package not in path, " -> ".join(path + (package,))
        if package not in seen:
            seen[package] = 1 + max((depth(p, path + (package,)) for p in ALLOWED[package]), default=0)
        return seen[package]

    for package in ALLOWED:
        depth(package)
