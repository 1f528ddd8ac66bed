"""What `make demo` and `make lab` need of a toy world, one record per world (``WORLD=`` / ``--world``).

    WORLD_RUNS["toy"]        the toy world: `make demo`, `make lab` (masprm/worlds/toy/world.py)
    WORLD_RUNS["toy_deep"]   the deep toy world: `make demo WORLD=toy_deep`, `make lab WORLD=toy_deep`
                             (masprm/worlds/toy_deep/world.py)

A record names the world's dataset (the world's own name), its team config, how its policy is built
(`python -m masprm.worlds.build`, into artifacts/<world>/policy), the flags its evaluation commands add
(its step labeller, its declared MCTS options), the train questions its stage 1 searches, its test
split's size (read when asked: toy_deep's is sized by the power computation of `masprm.worlds.toy_deep.data`
and is empty until then) and the seconds its commands were measured to take (`costs`, its folder's costs.yaml).
Each world's record is spelt in its own folder and registered by `masprm.worlds`; which rows and conditions
the lab runs on it are the lab's recipes (`masprm.lab.recipes`), not the world's. Every
path follows from the world's name: logs under logs/<world>_demo and logs/<world>_lab, results under
results/<world>_*, scorers under checkpoints/<world>-*; a replica training seed's trees under `seed_roots`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from masprm.cli import check
from masprm.config import require
from masprm.errors import ConfigError
from masprm.provenance import code_commit, preregistration_commit
from masprm.registry import Registry


@dataclass(frozen=True)
class WorldRun:
    name: str                         # the world (masprm.worlds) and its dataset (--dataset)
    config: str                       # its team
    world_flags: tuple[str, ...]      # the toy tools' flag naming the world (masprm.worlds.build, stepbench, labelbench)
    eval_flags: tuple[str, ...]       # every evaluation command's world flags (--step_oracle)
    n_train: int                      # train questions stage 1 searches (the whole train split)
    target_nodes: int                 # stage 2's --target-nodes: the question and one node per agent
    test_size: Callable[[], int]      # its test split's questions (read when asked)
    seed_roots: str                   # a replica training seed's trees and stage-2 files ("{seed}")
    preregistration: str | None = None   # the file whose commit the lab's report records
    demo_scorer_flags: tuple[str, ...] = ()   # added to the demo's scorer training (its MASPRM and ORM)
    mcts_flags: tuple[str, ...] = ()  # the world's declared MCTS options, on the evaluations that run MCTS
                                      # only (stage 4 refuses them elsewhere); (): the defaults, the toy world's
    pilot: bool = False               # its test split is sized by a dev pilot (`lab --pilot`, masprm.lab.pilot)
    lab: str = "lab"                  # the lab's name in its logs and results paths (a recipe's `lab`, e.g.
                                      # "explore"; the lab sets it, `masprm.lab.recipes`)
    eval_batch: int = 32              # an evaluation's --search_batch_size: examples searched together, their
                                      # model calls batched (the records do not depend on it; only the speed)

    @property
    def artifacts(self) -> str:
        return f"artifacts/{self.name}"

    @property
    def policy(self) -> str:
        return f"{self.artifacts}/policy"

    def scorer_dir(self, objective: str) -> str:
        """The demo's scorer of an objective (ppm: the MASPRM, orm: the ORM)."""
        return f"checkpoints/{self.name}-{objective}"

    @property
    def lab_checkpoints(self) -> str:
        return f"checkpoints/{self.name}-lab-"

    @property
    def demo_logs(self) -> str:
        return f"logs/{self.name}_demo"

    @property
    def lab_logs(self) -> str:
        return f"logs/{self.name}_{self.lab}"

    @property
    def pilot_logs(self) -> str:
        return f"logs/{self.name}_pilot"

    def results(self, name: str) -> str:
        return f"results/{self.name}_{name}"

    @property
    def demo_files(self) -> dict[str, str]:
        """The demo's result files: the table, the step-level benchmark and the claims."""
        return {"table": self.results("demo_aggregated_results.csv"), "stepbench": self.results("stepbench.json"),
                "claims": self.results("demo_claims.txt")}

    @property
    def lab_files(self) -> dict[str, str]:
        """The lab's logs folder and report files (the label benchmark: one JSON report per scheme)."""
        lab = self.lab
        return {"logs": self.lab_logs, "report": self.results(f"{lab}.md"), "claims": self.results(f"{lab}_claims.txt"),
                "plot": self.results(f"{lab}.png"), "stepbench": self.results(f"{lab}_stepbench.json"),
                "labelbench": self.results(f"{lab}_labelbench")}

    def report_record(self) -> dict:
        """What the lab's report says of the world: its name, its test questions and, where it has one, the
        commit of its pre-registration (recorded in the report's JSON)."""
        found: dict[str, Any] = {"name": self.name, "test_questions": self.test_size()}
        if self.preregistration:
            found["preregistration"] = {"file": self.preregistration,
                                        "commit": preregistration_commit(self.preregistration)}
            found["code"] = code_commit()   # what ran: the pre-registration's commit must be among its ancestors
        return found

    @property
    def folder(self) -> Path:
        """The world's own folder (masprm/worlds/<name>/): its records, its shipped policy, its costs."""
        return Path(__file__).resolve().parent / self.name

    def costs(self) -> dict | None:
        """The seconds its commands were measured to take (costs.yaml in its folder: ``seconds``, each
        command's CPU seconds, and ``checked``, what checking them against a whole lab found); None where
        none were measured. Read once per process."""
        return _costs(self.folder / "costs.yaml")

    def seed_root(self, seed: int) -> str:
        return self.seed_roots.format(seed=seed)

    def check_test_split(self) -> None:
        """A run evaluates the test split: stop before any work when the world has none yet."""
        check(self.test_size() > 0, f"--world {self.name}: its test split is empty (0 questions: its size comes "
                                    "from the dev pilot's power computation, DEV_POWER in masprm/worlds/toy_deep/data.py, "
                                    f"not measured yet: {make_command('lab-pilot', self)}); nothing to evaluate")


DEFAULT_WORLD = "toy"   # the Makefile's WORLD and every --world flag's default
WORLD_RUNS: Registry[WorldRun] = Registry("world")
WORLD_RUNS.register_provider("masprm.worlds:provide_runs")   # one entry per world folder, found on first need


@functools.lru_cache(maxsize=None)
def _costs(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        found = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: not a readable costs file ({e})") from e
    seconds = found.get("seconds") if isinstance(found, dict) else None
    if not isinstance(seconds, dict) or not all(isinstance(v, (int, float)) for v in seconds.values()):
        raise ConfigError(f"{path}: a costs file holds `seconds:`, a mapping of command kinds to seconds")
    return {"seconds": {str(k): float(v) for k, v in seconds.items()}, "checked": found.get("checked")}


def require_world(settings: Any) -> None:
    """A config's `world` setting is a registered world (one line listing the valid ones, exit 2)."""
    require(settings.world in WORLD_RUNS, "world", f"world: {WORLD_RUNS.unknown_message(settings.world)}")


def make_command(target: str, world: WorldRun) -> str:
    """How a user runs a Makefile target on this world (the Makefile's WORLD defaults to the toy world)."""
    return f"make {target}" + (f" WORLD={world.name}" if world.name != DEFAULT_WORLD else "")
