"""The toy worlds, one record each: what a build needs to train, ship and describe a world's policy.

    WORLDS["toy"]        the toy world (masprm/worlds/toy/world.py: masprm.worlds.toy.task, configs/toy.yaml)
    WORLDS["toy_deep"]   the deep toy world (masprm/worlds/toy_deep/world.py, configs/toy_deep.yaml)

Each world is a folder of its own, its records in its `world` module (`world_modules`), found on first need.
The core's registries name only this package's providers (`masprm.registry`): a world's `--dataset` loader,
its text fields and its `--step_oracle` labeller are spelt in its record (`World.dataset`, `text_fields`,
`step_oracle`) and reach `masprm.data.DATASETS`, `masprm.data.TEXT_FIELDS` and
`masprm.search.oracles.STEP_ORACLES` through `provide_datasets`, `provide_text_fields` and
`provide_step_oracles`, so adding a world is adding its folder.

A world names its generated task, its team config, its build folder, its shipped policy folder, the
toy modules whose code trains its policy (the build fingerprint: `masprm.worlds.build`), the
functions that write its reference transcripts and its step truth (`StepTruth`: what the step and
label benchmarks judge messages with). Pure Python: no torch import.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterable, Iterator, Sequence

from masprm.errors import ConfigError
from masprm.graph import MASGraph
from masprm.registry import Registry
from masprm.worlds.toy import steplabel
from masprm.worlds.toy.task import Problem, TaskWorld

TOY_CODE = Path(__file__).resolve().parent
Turn = tuple[int, list[dict[str, str]], str]   # (agent, chat messages, target output)


@dataclass(frozen=True)
class StepTruth:
    """A world's step truth as the benchmarks read it (`masprm.instruments.stepbench`, `masprm.instruments.labelbench`)."""

    oracle: str                       # its step oracle (--step_oracle, `masprm.search.oracles.STEP_ORACLES`)
    task: TaskWorld                   # the splits searched (the dataset's: toy_deep's test split sized by power)
    label: Callable[[Problem, Sequence[str]], steplabel.TranscriptLabel]   # (problem, messages) -> step labels
    story_of: Callable[[str], Problem]                                     # question -> its problem
    error_kinds: dict[str, tuple[str, ...]]                                # agent -> its error kinds, team order

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(self.error_kinds)


@dataclass(frozen=True)
class World:
    name: str
    task: TaskWorld
    config: str                       # the team the policy learns to play
    out: str                          # the build's default folder
    shipped: str                      # the shipped policy's folder, under masprm/worlds/
    sources: tuple[str, ...]          # the toy modules whose code trains the policy (build fingerprint)
    check_graph: Callable[[MASGraph], None]                     # ValueError for another team
    reference_outputs: Callable[..., dict[int, str]]            # (problem, rng) -> agent -> output
    corpus_lines: Callable[[Iterable[Problem], MASGraph], Iterator[str]]
    training_turns: Callable[[Sequence[Problem], MASGraph, int, float], Iterator[Turn]]   # (.., seed, noise)
    data_splits: tuple[str, ...]      # the splits written as GSM8K-schema JSONL
    truth: StepTruth | None = None    # its step truth (every registered world has one)
    policy_defaults: tuple[tuple[str, object], ...] = ()   # PolicySpec settings of the world's default build
    # registered under the world's name; the loader and the labeller as "module:attribute", imported on first use
    dataset: str | None = None        # its --dataset loader (`masprm.data.DATASETS`)
    text_fields: tuple[str, ...] = ()   # its question's fields, text only (`masprm.data.check_fields`)
    step_oracle: str | None = None    # its --step_oracle labeller (`masprm.search.oracles.STEP_ORACLES`)
    # A larger LM of the same corpus for a scorer to start from (the analog of a 7B PRM guiding a 1.5B policy):
    # its PolicySpec settings over `policy_defaults`, and its shipped folder under masprm/worlds/; () and None
    # where the world has none.
    scorer_backbone: tuple[tuple[str, object], ...] = ()
    scorer_shipped: str | None = None

    @property
    def shipped_dir(self) -> Path:
        return TOY_CODE / self.shipped

    def backbone_defaults(self, backbone: str = "policy") -> dict[str, object]:
        """The PolicySpec settings of the world's default build of `backbone` ("policy" or "scorer")."""
        return {**dict(self.policy_defaults), **(dict(self.scorer_backbone) if backbone == "scorer" else {})}

    def fill_defaults(self, settings: object, **more: str) -> None:
        """A toy tool's frozen settings: each of `policy`, `mas_config` (and `more`: name -> value) left None
        becomes the world's own (its build's policy, its team), never another world's."""
        for name, value in {"policy": f"{self.out}/policy", "mas_config": self.config, **more}.items():
            if getattr(settings, name) is None:
                object.__setattr__(settings, name, value)   # frozen dataclasses: set once, in __post_init__


def world_modules() -> dict[str, ModuleType]:
    """Every folder on this package's path (`__path__`) holding a `world` module is a world: its module under
    the folder's name, in name order. Its `WORLD` (the build's record) goes into `WORLDS` and its `RUN` (what the
    demo and the lab's commands need) into `masprm.worlds.runs.WORLD_RUNS` (their providers below). Adding a world
    is adding its folder; nothing else names it."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg and (Path(info.module_finder.path) / info.name / "world.py").is_file():
            module = importlib.import_module(f"{__name__}.{info.name}.world")
            for record in (module.WORLD, module.RUN):
                if record.name != info.name:
                    raise ConfigError(f"masprm/worlds/{info.name}/world.py names its world {record.name!r}: a "
                                      "world's records carry its folder's name")
            found[info.name] = module
    return dict(sorted(found.items()))


# The providers of the registries (`masprm.registry`): each asked once, on a registry's first need.
def provide_worlds() -> list[tuple[str, World]]:
    return [(name, module.WORLD) for name, module in world_modules().items()]


def provide_runs() -> list[tuple[str, object]]:
    return [(name, module.RUN) for name, module in world_modules().items()]


def provide_datasets() -> list[tuple[str, str]]:
    return [(world.name, world.dataset) for world in WORLDS.values() if world.dataset]


def provide_text_fields() -> list[tuple[str, tuple[str, ...]]]:
    return [(world.name, world.text_fields) for world in WORLDS.values() if world.text_fields]


def provide_step_oracles() -> list[tuple[str, str]]:
    return [(world.name, world.step_oracle) for world in WORLDS.values() if world.step_oracle]


WORLDS: Registry[World] = Registry("toy world")
WORLDS.register_provider(f"{__name__}:provide_worlds")
