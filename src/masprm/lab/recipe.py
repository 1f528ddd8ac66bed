"""The lab's families as recipes: one data file per family under masprm/lab/recipes/, read once.

    toy.yaml                the toy world's lab (`make lab`): every row and condition, the compute-matched sweep
    toy_deep.yaml           the deep world's confirmatory family (`make lab WORLD=toy_deep`)
    toy_deep_explore.yaml   its exploratory family (`make lab-explore WORLD=toy_deep`)

A recipe names its world and its lab (the name in its logs and results paths: "lab", "explore"), its rows
(`masprm.lab.rows.LAB_SCORERS` slugs, or ``all``), best-of-N's step aggregations and the objectives whose rows
rank best-of-N passes, its compute-matched sweep (a name of `compute_match.SWEEPS`, or ``none``), whether it runs
the benchmarks, whether the comparisons against the MASPRM join the Holm family, its seeds, whether it is
exploratory, and the lines it prints about what it leaves out. The world's own facts (its team, paths, splits,
costs) are the world's (`masprm.worlds.runs.WorldRun`); a recipe only chooses. Adding a family is adding a
file; `lab --recipe NAME` runs one by its file name, and a world's lab and --explore run the recipe of that
world and lab. A recipe that does not read is one `ConfigError` naming the file and what is wrong.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

import yaml

from masprm.errors import ConfigError

RECIPES = Path(__file__).resolve().parent / "recipes"   # shipped as package data (pyproject.toml)
BON_AGGS = ("min", "last")   # best-of-N's step aggregations the lab's commands know (command.BON_SUFFIX)


@dataclass(frozen=True)
class Recipe:
    """The scorer lab's family on a world: its rows and conditions, as data (a pre-registration fixes them)."""

    name: str                         # the file's name without .yaml
    world: str                        # the world it runs on (masprm.worlds)
    lab: str                          # its name in logs and results paths (logs/<world>_<lab>, results/<world>_<lab>*)
    rows: tuple[str, ...] | None      # slugs of `rows.LAB_SCORERS` (None: every row)
    bon_aggs: tuple[str, ...]         # best-of-N's step aggregations; the first one's no-scorer command draws
    bon_objectives: tuple[str, ...] | None   # the rows ranking best-of-N passes, by objective (None: every row)
    sweep_name: str | None            # the compute-matched sweep (`compute_match.SWEEPS`); None: not measured
    benchmarks: bool = True           # the step and label benchmarks (masprm.instruments.stepbench / labelbench)
    masprm_tested: bool = True        # the comparisons against the MASPRM join the Holm family (False: shown only)
    notes: tuple[str, ...] = ()       # what the family leaves out on purpose, one line each (printed by the plan)
    train_seeds: tuple[int, ...] | None = None    # the lab's --train_seeds default (None: rows.TRAIN_SEEDS)
    search_seeds: tuple[int, ...] | None = None   # the lab's --seeds default (None: the demo's, demo.SEEDS)
    exploratory: bool = False         # no primary comparison (every learned row's under Holm), run after the
                                      # world's own lab has written its report (`check_explore_order`)

    @property
    def sweep(self) -> Mapping | None:
        """The sweep's plan: budget -> (search family, row) -> settings (None: not measured on the world)."""
        from masprm.lab.compute_match import SWEEPS
        return None if self.sweep_name is None else SWEEPS[self.sweep_name]

    def has_row(self, slug: str) -> bool:
        return self.rows is None or slug in self.rows

    def ranks_passes(self, objective: str) -> bool:
        return self.bon_objectives is None or objective in self.bon_objectives


def _names(value: Any, key: str, where: Path, every: bool) -> tuple[str, ...] | None:
    if every and value == "all":
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {key} must be a list of names" + (" or `all`" if every else "") + f", got {value!r}")
    return tuple(value)


def _seeds(value: Any, key: str, where: Path) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(type(v) is int and v >= 0 for v in value):
        raise ConfigError(f"{where}: {key} must be a list of seeds (whole numbers >= 0), got {value!r}")
    return tuple(value)


def read_recipe(path: Path) -> Recipe:
    """One recipe file as a record, every value checked (one `ConfigError` naming the file and the value)."""
    from masprm.lab.compute_match import SWEEPS
    from masprm.lab.rows import LAB_SCORERS
    from masprm.worlds.runs import WORLD_RUNS
    try:
        found = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: not a readable recipe ({e})") from e
    if not isinstance(found, dict):
        raise ConfigError(f"{path}: a recipe is a mapping of settings, got {type(found).__name__}")
    known = {f.name for f in fields(Recipe)} - {"name", "sweep_name"} | {"sweep"}
    unknown = sorted(set(found) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(map(str, unknown))}; a recipe knows "
                          f"{', '.join(sorted(known))}")
    for key in ("world", "lab", "rows", "bon_aggs", "bon_objectives", "sweep"):
        if key not in found:
            raise ConfigError(f"{path}: no {key} (a recipe names its world, lab, rows, bon_aggs, bon_objectives "
                              "and sweep)")
    world, lab = found["world"], found["lab"]
    if world not in WORLD_RUNS:
        raise ConfigError(f"{path}: world: {WORLD_RUNS.unknown_message(world)}")
    if not isinstance(lab, str) or not lab.isidentifier():
        raise ConfigError(f"{path}: lab must be a name (letters, digits, _), got {lab!r}")
    rows = _names(found["rows"], "rows", path, every=True)
    slugs = [s.slug for s in LAB_SCORERS]
    for slug in rows or ():
        if slug not in slugs:
            raise ConfigError(f"{path}: rows: no row {slug!r}; valid: {', '.join(slugs)}")
    aggs = _names(found["bon_aggs"], "bon_aggs", path, every=False)
    if not set(aggs) <= set(BON_AGGS):
        raise ConfigError(f"{path}: bon_aggs must be some of {', '.join(BON_AGGS)}, got {list(aggs)}")
    sweep = found["sweep"]
    if sweep != "none" and sweep not in SWEEPS:
        raise ConfigError(f"{path}: sweep must be `none` or one of {', '.join(SWEEPS)}, got {sweep!r}")
    flags = {}
    for key in ("benchmarks", "masprm_tested", "exploratory"):
        if key in found:
            if not isinstance(found[key], bool):
                raise ConfigError(f"{path}: {key} must be true or false, got {found[key]!r}")
            flags[key] = found[key]
    notes = found.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise ConfigError(f"{path}: notes must be a list of lines, got {notes!r}")
    return Recipe(path.stem, world, lab, rows, aggs, _names(found["bon_objectives"], "bon_objectives", path, every=True),
                  None if sweep == "none" else sweep, notes=tuple(notes),
                  train_seeds=_seeds(found.get("train_seeds"), "train_seeds", path),
                  search_seeds=_seeds(found.get("search_seeds"), "search_seeds", path), **flags)


def recipes() -> dict[str, Recipe]:
    """Every recipe of `RECIPES`, by name, read once per process (`recipes_in`)."""
    return recipes_in(RECIPES)


@functools.lru_cache(maxsize=None)
def recipes_in(folder: Path) -> dict[str, Recipe]:
    """Every recipe of `folder`, by name; two recipes of one world and lab are refused (the world's lab and its
    --explore would not know which to run)."""
    found = {path.stem: read_recipe(path) for path in sorted(folder.glob("*.yaml"))}
    seen: dict[tuple[str, str], str] = {}
    for recipe in found.values():
        other = seen.setdefault((recipe.world, recipe.lab), recipe.name)
        if other != recipe.name:
            raise ConfigError(f"{folder}: recipes {other} and {recipe.name} are both the {recipe.world} world's "
                              f"{recipe.lab!r} lab")
    return found


def recipe_names() -> list[str]:
    """The recipes' names, from their files' names alone (nothing read: a help text lists them before any check)."""
    return sorted(path.stem for path in RECIPES.glob("*.yaml"))


def recipe_named(name: str) -> Recipe:
    """The recipe of that name (a ConfigError listing the valid ones)."""
    found = recipes()
    if name not in found:
        raise ConfigError(f"recipe: no recipe {name!r} in {RECIPES}; valid: {', '.join(found)}")
    return found[name]


def world_recipe(world: str, lab: str = "lab") -> Recipe | None:
    """The recipe a world's lab (`lab`: "lab", or "explore" for --explore) runs; None where it has none."""
    return next((r for r in recipes().values() if (r.world, r.lab) == (world, lab)), None)


def lab_recipe(args) -> Recipe:
    """The family a lab run runs (`args`: the lab's settings): `--recipe`'s, else the world's lab's, or with
    --explore its exploratory one's."""
    if getattr(args, "recipe", None):
        return recipe_named(args.recipe)
    explore = bool(getattr(args, "explore", False))
    found = world_recipe(args.world, "explore" if explore else "lab")
    if found is None:   # the lab's settings refuse it first; a caller that built its own learns it here
        raise ConfigError(f"recipe: the {args.world} world has no {'exploratory ' * explore}lab recipe ({RECIPES})")
    return found
