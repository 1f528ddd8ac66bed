"""What `make demo` and `make lab` need of a toy world, one record per world (``WORLD=`` / ``--world``).

    WORLD_RUNS["toy"]        the toy world: `make demo`, `make lab` (every path and command as before)
    WORLD_RUNS["toy_deep"]   the deep toy world: `make demo WORLD=toy_deep`, `make lab WORLD=toy_deep`

A record names the world's dataset (the world's own name), its team config, how its policy is built
(`python -m masprm.worlds.build`, into artifacts/<world>/policy), the flags its evaluation commands add
(its step labeller, its declared MCTS options), the train questions its stage 1 searches, its test
split's size (read when asked: toy_deep's is sized by the power computation of `masprm.worlds.toy_deep.data`
and is empty until then) and its lab's family (`LabFamily`: which scorer rows and conditions). Every
path follows from the world's name: logs under logs/<world>_demo and logs/<world>_lab, results under
results/<world>_*, scorers under checkpoints/<world>-*; a replica training seed's trees under `seed_roots`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from masprm.cli import check
from masprm.config import require
from masprm.provenance import code_commit, preregistration_commit
from masprm.registry import Registry
from masprm.lab import compute_match
from masprm.published.blocks import block_body   # the docs' generated blocks, in the report's own syntax


@dataclass(frozen=True)
class LabFamily:
    """The scorer lab's family on a world: its rows and conditions, as data (a pre-registration fixes them)."""

    rows: tuple[str, ...] | None      # slugs of `lab_rows.LAB_SCORERS` (None: every row)
    bon_aggs: tuple[str, ...]         # best-of-N's step aggregations; the first one's no-scorer command draws
    bon_objectives: tuple[str, ...] | None   # the rows ranking best-of-N passes, by objective (None: every row)
    sweep: Mapping | None             # the compute-matched sweep's plan; None: its settings not measured yet
    benchmarks: bool = True           # the step and label benchmarks (masprm.instruments.stepbench / labelbench)
    masprm_tested: bool = True        # the comparisons against the MASPRM join the Holm family (False: shown only)
    notes: tuple[str, ...] = ()       # what the family leaves out on purpose, one line each (printed by --dry_run)
    train_seeds: tuple[int, ...] | None = None    # the lab's --train_seeds default (None: lab_rows.TRAIN_SEEDS)
    search_seeds: tuple[int, ...] | None = None   # the lab's --seeds default (None: the demo's, demo.SEEDS)
    exploratory: bool = False         # no primary comparison (every learned row's under Holm), run after the
                                      # world's own lab has written its report (`WorldRun.explored`)

    def has_row(self, slug: str) -> bool:
        return self.rows is None or slug in self.rows

    def ranks_passes(self, objective: str) -> bool:
        return self.bon_objectives is None or objective in self.bon_objectives


@dataclass(frozen=True)
class WorldRun:
    name: str                         # the world (masprm.worlds) and its dataset (--dataset)
    config: str                       # its team
    world_flags: tuple[str, ...]      # the toy tools' flag naming the world (masprm.worlds.build, stepbench, labelbench)
    eval_flags: tuple[str, ...]       # every evaluation command's world flags (--step_oracle)
    n_train: int                      # train questions stage 1 searches (the whole train split)
    target_nodes: int                 # stage 2's --target-nodes: the question and one node per agent
    test_size: Callable[[], int]      # its test split's questions (read when asked)
    family: LabFamily
    seed_roots: str                   # a replica training seed's trees and stage-2 files ("{seed}")
    preregistration: str | None = None   # the file whose commit the lab's report records
    demo_scorer_flags: tuple[str, ...] = ()   # added to the demo's scorer training (its MASPRM and ORM)
    mcts_flags: tuple[str, ...] = ()  # the world's declared MCTS options, on the evaluations that run MCTS
                                      # only (stage 4 refuses them elsewhere); (): the defaults, the toy world's
    pilot: bool = False               # its test split is sized by a dev pilot (`lab --pilot`, masprm.lab.pilot)
    explore: LabFamily | None = None  # an exploratory family beside the lab's (`lab --explore`, `explored`)
    lab: str = "lab"                  # the lab's name in its logs and results paths ("explore": `explored`)
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

    def explored(self) -> "WorldRun":
        """The world's exploratory lab (`lab --explore`): its `explore` family under logs/<world>_explore and
        results/<world>_explore*, beside the lab's own, never in them. Its scorers share the lab's folders
        (checkpoints/<world>-lab-*: a row both run is trained once), its report records no pre-registration
        (the family is not in it), and it runs only once the lab's own report exists (`check_explore_order`).
        A user's --explore on a world without one is refused by the lab's settings (`LabArgs`) first."""
        if self.explore is None:
            raise ValueError(f"the {self.name} world has no exploratory family")
        return replace(self, family=self.explore, lab="explore", preregistration=None, pilot=False, explore=None)

    def check_explore_order(self, own: "WorldRun", root: Path) -> None:
        """An exploratory run starts only after the world's own lab wrote its report (`own`: the world's record;
        `root`: the folder the lab writes under): the exploratory family repeats some of the lab's comparisons
        at fewer seeds, and those are not to be seen before the pre-registered ones. The report's claims
        published in docs/scorer_lab.md (`make report`) count too: a checkout that never ran the lab itself
        comes after them all the same."""
        report = Path(own.lab_files["report"]).with_suffix(".json")
        block = f"{own.name}-lab-claims"
        check((root / report).is_file() or published(root / "docs" / "scorer_lab.md", block),
              f"--explore: {report} is not there and docs/scorer_lab.md has no {block} block: the exploratory "
              f"family runs after the {self.name} lab's own report ({make_command('lab', own)})")

    def report_record(self) -> dict:
        """What the lab's report says of the world: its name, its test questions and, where it has one, the
        commit of its pre-registration (recorded in the report's JSON)."""
        found: dict[str, Any] = {"name": self.name, "test_questions": self.test_size()}
        if self.preregistration:
            found["preregistration"] = {"file": self.preregistration,
                                        "commit": preregistration_commit(self.preregistration)}
            found["code"] = code_commit()   # what ran: the pre-registration's commit must be among its ancestors
        return found

    def seed_root(self, seed: int) -> str:
        return self.seed_roots.format(seed=seed)

    def check_test_split(self) -> None:
        """A run evaluates the test split: stop before any work when the world has none yet."""
        check(self.test_size() > 0, f"--world {self.name}: its test split is empty (0 questions: its size comes "
                                    "from the dev pilot's power computation, DEV_POWER in masprm/worlds/toy_deep/data.py, "
                                    f"not measured yet: {make_command('lab-pilot', self)}); nothing to evaluate")


def _toy_test_size() -> int:
    from masprm.worlds.toy.task import TOY
    return TOY.size("test")


def _deep_test_size() -> int:
    from masprm.worlds.toy_deep import data as deep_data
    return deep_data.TOY_DEEP.size("test")


DEFAULT_WORLD = "toy"   # the Makefile's WORLD and every --world flag's default
WORLD_RUNS: Registry[WorldRun] = Registry("world")
# The toy world: the issue-34 lab, every row and condition.
WORLD_RUNS.register("toy", WorldRun(
    "toy", "configs/toy.yaml", (), (), 400, 5, _toy_test_size,
    LabFamily(None, ("min", "last"), None, compute_match.SWEEP), "results/train_seed_{seed}"))
# The deep toy world: the confirmatory family of issue 35 (docs/preregistration.md fixes its values).
WORLD_RUNS.register("toy_deep", WorldRun(
    # MCTS with progressive widening (--pw_k 3, alpha 0.5): the option the world was chosen with (docs/toy_world.md)
    "toy_deep", "configs/toy_deep.yaml", ("--world", "toy_deep"), ("--step_oracle", "toy_deep"),
    400, 9,
    _deep_test_size,
    LabFamily(("masprm-ppm", "mc-orm", "mc-prm"), ("last",), ("orm",), None, masprm_tested=False, notes=(
        "SBS + ORM leaf: --orm_leaf is an option of MCTS only (mcts_prm); the MASPRM + ORM leaf row runs under MCTS",
        "compute-matched sweep: its settings are not measured yet on toy_deep (compute_match measures them on the "
        "train questions); no sweep commands planned")),
    # --calibrate: the demo's MASPRM and ORM are the lab's seed-42 rows, calibrated like its other seeds' rows
    "results/toy_deep_train_seed_{seed}", "docs/preregistration.md", demo_scorer_flags=("--calibrate",), pilot=True,
    mcts_flags=("--pw_k", "3"),
    # 9 agents and 27 samples per simulation: 128 examples together search 1.38x faster than the toy world's
    # 32 (MCTS + mc+prm on 128 dev questions, 2-core CPU, 126 s against 91 s, the records byte-identical)
    eval_batch=128,
    # issue 37's rows on this world (docs/scorer_lab.md, "The exploratory lab on toy_deep"): every row at one
    # training seed and one search seed, after the confirmatory lab; fixed before any of its runs
    explore=LabFamily(None, ("last",), None, None, train_seeds=(42,), search_seeds=(42,), exploratory=True, notes=(
        "exploratory: not in the pre-registered family; training seed 42 and search seed 42 only; no primary "
        "comparison, every learned row's under Holm",))))


def require_world(settings: Any) -> None:
    """A config's `world` setting is a registered world (one line listing the valid ones, exit 2)."""
    require(settings.world in WORLD_RUNS, "world", f"world: {WORLD_RUNS.unknown_message(settings.world)}")


def published(docs: Path, block: str) -> bool:
    """`docs` holds the generated block `block` with something in it (`masprm.published.blocks` fills it)."""
    try:
        text = docs.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return bool((block_body(text, block) or "").strip())


def make_command(target: str, world: WorldRun) -> str:
    """How a user runs a Makefile target on this world (the Makefile's WORLD defaults to the toy world)."""
    return f"make {target}" + (f" WORLD={world.name}" if world.name != DEFAULT_WORLD else "")
