"""The scorer lab's rows: a label scheme trained with an objective, at the lab's --seed or a replica seed.

`make lab` (`masprm.lab.command`) trains, benchmarks and searches with each `LabScorer`
of `LAB_SCORERS` its world's family keeps (`world_rows`), at every training seed of
`TRAIN_SEEDS`; a replica seed grows its own trees (`seed_run_folder`) and writes its
scorers into folders of their own. A row's folders are its world's (`masprm.worlds.runs.WorldRun`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from masprm.objective_facts import OBJECTIVE_FACTS
from masprm.scorer_meta import SCORER_META_FILE
from masprm.stages import demo
from masprm.running.commands import ROOT
from masprm.lab.job import Job
from masprm.lab.estimate import rollout_label_seconds, world_seconds
from masprm.worlds.runs import DEFAULT_WORLD, WORLD_RUNS, WorldRun

# Training seeds, fixed in docs/scorer_lab.md ("The instruments"): every row is trained at each, its trees
# grown at the same seed; 42 is the demo's (its trees, its MASPRM and ORM), the others get their own trees
# under results/train_seed_<S>/ and their own scorer folders (`LabScorer.replica`).
TRAIN_SEEDS = (42, 7, 99)


def seed_root(seed: int, world: WorldRun = demo.TOY_RUN) -> str:
    """Where a replica seed's trees and stage-2 files go (the demo's seed uses results/ itself)."""
    return world.seed_root(seed)


def seed_run_folder(seed: int | None, world: WorldRun = demo.TOY_RUN) -> str:
    """The stage-1 tree folder of a training seed (None: the demo's)."""
    run = demo.run_folder(world)
    return run if seed is None else f"{seed_root(seed, world)}/{Path(run).name}"


@dataclass(frozen=True)
class LabScorer:
    """One row of the lab: a label scheme trained with an objective (traj: with its step aggregation)."""

    scheme: str
    objective: str
    agg: str | None = None
    demo_folder: str | None = None   # the demo's scorer, trained by `make demo`
    train_seed: int | None = None    # a replica's tree and training seed (None: the lab's --seed, the demo's trees)
    world: str = DEFAULT_WORLD       # the world whose trees train it and whose folders hold it (`in_world`)

    @property
    def slug(self) -> str:
        return "-".join(p for p in (self.scheme, self.objective, self.agg) if p)

    @property
    def key(self) -> str:
        """The row at its training seed: the slug, with _s<S> for a replica (task names, report cells)."""
        return self.slug + (f"_s{self.train_seed}" if self.train_seed is not None else "")

    def replica(self, seed: int) -> "LabScorer":
        """The same row trained by the lab at another seed, on that seed's trees."""
        return replace(self, demo_folder=None, train_seed=seed)

    def in_world(self, world: WorldRun) -> "LabScorer":
        """The same row on another world: the demo's scorer of its objective there, the lab's folders there."""
        return replace(self, world=world.name,
                       demo_folder=world.scorer_dir(self.objective) if self.demo_folder else None)

    @property
    def name(self) -> str:
        """The row's name in tables and claims."""
        return {"ppm": "MASPRM" if self.scheme == "masprm" else f"{self.scheme}+ppm", "orm": "ORM"}.get(
            self.objective, f"{self.scheme}+{self.objective}" + (f"-{self.agg}" if self.agg else ""))

    @property
    def folder(self) -> str:
        suffix = f"-s{self.train_seed}" if self.train_seed is not None else ""
        return self.demo_folder or f"{WORLD_RUNS[self.world].lab_checkpoints}{self.slug}{suffix}"

    @property
    def outcome_only(self) -> bool:
        """Trained on final correctness alone (no step labels: no label quality to measure)."""
        return OBJECTIVE_FACTS[self.objective].outcome_only

    @property
    def finished_only(self) -> bool:
        """Scores finished transcripts only (biprm): best-of-N with the last step's value, no step benchmark."""
        return OBJECTIVE_FACTS[self.objective].finished_only

    @property
    def own_labels(self) -> bool:
        """Trains on a stage-2 file of its own scheme (`preprocess_data.py --labels`)."""
        return self.scheme != "masprm" and not self.outcome_only   # the paper's pairs come with stage 2

    @property
    def root(self) -> str:
        """The folder of its trees' stage-2 files."""
        return "results" if self.train_seed is None else seed_root(self.train_seed, WORLD_RUNS[self.world])

    def data(self, run: str) -> str:
        """The stage-2 records it trains on (`run`: the name of the demo's stage-1 folder)."""
        if self.scheme == "masprm":
            return f"{self.root}/ppm_pairs_{run}.jsonl"
        if self.outcome_only:
            return f"{self.root}/prm_samples_{run}.jsonl"
        return scheme_records_path(self.scheme, run, self.root)


def scheme_records_path(scheme: str, run: str, root: str = "results") -> str:
    """Where `preprocess_data.py --labels NAME` writes a scheme's records (LAB_INTERFACE.md)."""
    return f"{root}/labels_{scheme}_{run}.jsonl"


# The rows: the paper's MASPRM and the ORM from `make demo`, each label scheme with the objective
# its records suit, and the trajectory-level objective with each aggregation on the prm samples.
LAB_SCORERS = (
    LabScorer("masprm", "ppm", demo_folder=demo.PPM_DIR),
    LabScorer("mc", "orm", demo_folder=demo.ORM_DIR),
    LabScorer("mc", "prm"), LabScorer("first_error", "prm"), LabScorer("advantage", "prm"),
    LabScorer("margin_pairs", "ppm"), LabScorer("balanced_pairs", "ppm"), LabScorer("majority_outcome", "ppm"),
    *(LabScorer("mc", "traj", agg) for agg in ("min", "softmin", "prod", "mean")),
    # issue 37: the related work's remaining methods, each on the records its source trains on
    LabScorer("first_error", "pqm"),    # PQM ranks the steps around the outcome-derived first error
    LabScorer("mc", "implicit"),        # PRIME: trained on final correctness alone, like traj
    LabScorer("mc", "gorm"),            # Multi-RM's generative verifiers: the outcome after a transcript,
    LabScorer("first_error", "gprm"),   # the step label after each step
    LabScorer("mc", "ensemble"),        # ActPRM's heads, trained where they disagree on the Monte Carlo labels
    LabScorer("mc", "biprm"),           # BiPRM: a re-ranker of finished transcripts (best-of-N, last step only)
    # the rollout-based schemes: their stage 2 samples the policy afresh; planned only with --rollout_rows
    *(LabScorer(scheme, "prm") for scheme in ("mc_rollouts", "first_error_search", "step_consistency", "shapley")),
    # ActPRM's active estimation against its uniform control, one rollout budget (the ensemble row ranks)
    LabScorer("mc_rollouts_uniform", "prm"), LabScorer("mc_rollouts_active", "prm"),
)


def world_rows(world: WorldRun, family) -> list[LabScorer]:
    """The rows of a lab family on a world (`family`: its recipe, `masprm.lab.recipe.Recipe`), in LAB_SCORERS
    order, on that world."""
    return [s.in_world(world) for s in LAB_SCORERS if family.has_row(s.slug)]


def row_at(objective: str, seed: int | None, world: str = DEFAULT_WORLD) -> LabScorer:
    """The row of `objective` (the first, in LAB_SCORERS) on a world, trained at `seed` (None: the lab's --seed)."""
    row = next(s for s in LAB_SCORERS if s.objective == objective).in_world(WORLD_RUNS[world])
    return row if seed is None else row.replica(seed)


def role_flags(role: str, folder: str, world: WorldRun = demo.TOY_RUN) -> tuple[str, ...]:
    return (f"--{role}_dir", folder, f"--{role}_base_model_id", world.policy)


def orm_of(scorer: LabScorer) -> LabScorer:
    """The ORM row trained at the same seed (and on the same world) as `scorer`."""
    return row_at("orm", scorer.train_seed, scorer.world)


def ensemble_of(seed: int | None, world: str = DEFAULT_WORLD) -> LabScorer:
    """The ensemble row (`mc + ensemble`) at a training seed: its heads' spread ranks mc_rollouts_active's prefixes."""
    return row_at("ensemble", seed, world)


def missing(scorer: LabScorer) -> str | None:
    """Why a row cannot run with this checkout (one line), or None."""
    from masprm.train.objectives import OBJECTIVES
    if scorer.objective not in OBJECTIVES:
        return (f"{scorer.name}: objective {scorer.objective!r} is not registered (masprm.train.objectives); "
                "row left out")
    from masprm.labels import LABEL_SCHEMES
    if scorer.own_labels and scorer.scheme not in LABEL_SCHEMES:
        return f"{scorer.name}: label scheme {scorer.scheme!r} is not registered (masprm.labels); row left out"
    return None


def needs_rollouts(scheme: str) -> bool:
    """The scheme's stage 2 samples from the policy (`--rollout-policy`): a cost the lab plans only when asked."""
    from masprm.labels import LABEL_SCHEMES
    return scheme in LABEL_SCHEMES and getattr(LABEL_SCHEMES[scheme], "needs_rollouts", False)


def left_out(scorer: LabScorer, rollout_rows: bool) -> str | None:
    """Why a row is not planned (one line), or None: `missing`, or a rollout row without --rollout_rows."""
    why = missing(scorer)
    if why is None and scorer.own_labels and needs_rollouts(scorer.scheme) and not rollout_rows:
        minutes = rollout_label_seconds(scorer.scheme, world_seconds(scorer.world) or {}) / 60
        return (f"{scorer.name}: label scheme {scorer.scheme!r} needs fresh policy samples (its stage 2 about "
                f"{minutes:.0f} CPU minutes per training seed); row left out (add --rollout_rows)")
    return why


def chosen_rows(rows: list[LabScorer], names: list[str] | None) -> list[LabScorer]:
    """The rows `--rows` names (by table name or slug) with the ones they are measured against (the MASPRM and the
    ORM, which every claim compares with) and the ones they need (the ensemble whose heads' spread ranks
    mc_rollouts_active's prefixes, trained first); every row when none are named."""
    if not names:
        return rows
    from masprm.labels import LABEL_SCHEMES
    wanted = set(names)
    for s in rows:
        if wanted & {s.name, s.slug} and getattr(LABEL_SCHEMES.get(s.scheme), "needs_spreads", False):
            wanted.add(ensemble_of(None, s.world).slug)
    return [s for s in rows if s.objective == "orm" or s.scheme == "masprm" or wanted & {s.name, s.slug}]


def replica_trees(args, seed: int) -> tuple[Job, bool]:
    """Stage 1 at a replica seed: the demo's tree search with that seed, under the world's seed root
    (results/train_seed_<S>/ for the toy world)."""
    world = WORLD_RUNS[args.world]
    cmd = demo.commands(demo.DemoArgs(seeds=args.seeds, seed=seed, n_train=args.n_train, world=args.world)).trees
    return Job(f"trees_s{seed}", "trees", partial(list, [*cmd, "--out_root", seed_root(seed, world)])), \
        demo.trees_done(args.n_train, seed, seed_run_folder(seed, world), world)


def replica_stage2(seed: int, world: WorldRun = demo.TOY_RUN) -> tuple[Job, bool]:
    """Stage 2 at a replica seed: the demo's pairs and PRM samples of that seed's trees."""
    cmd = demo.commands(demo.DemoArgs(seed=seed, world=world.name)).pairs
    at = cmd.index("--input") + 1
    run = Path(demo.run_folder(world)).name
    outputs = [ROOT / seed_root(seed, world) / f"{kind}_{run}.jsonl" for kind in ("prm_samples", "ppm_pairs")]
    return Job(f"stage2_s{seed}", "stage2", partial(list, [*cmd[:at], seed_run_folder(seed, world), *cmd[at + 1:]]),
               needs=(f"trees_s{seed}",)), \
        all(path.is_file() for path in outputs)


def scorer_calibrated(folder: Path) -> bool:
    """The finished scorer in `folder` recorded the Platt scaling of --calibrate."""
    try:
        return "platt" in json.loads((folder / SCORER_META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return False


def stepbench_done(path: Path, scorers: dict[str, str]) -> bool:
    try:
        return json.loads(path.read_text(encoding="utf-8"))["settings"]["scorers"] == scorers
    except (OSError, ValueError, KeyError, TypeError):
        return False
