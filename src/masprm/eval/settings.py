"""Stage 4's own settings (data, models, the run) and `EvalSettings`, what the runner is given.

The method settings classes live with their searches (``masprm.search.settings``,
``masprm.handoff.settings``); a method declares the ones it reads (``masprm.eval.methods``).
``EvalSettings.from_args`` builds every class from the parsed flags, so each checks
its values before anything loads, and gives each method its own frozen settings.
Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from masprm.answer_checkers import ANSWER_CHECKERS, CHECKER_HELP, DEFAULT_CHECKER, check_checker
from masprm.checks import check_seeds
from masprm.cluster import ClusterSettings
from masprm.config import arg, config_from_args, require, require_each, settings_from_args
from masprm.paths import PathText
from masprm.data import dataset_options
from masprm.dataset_sources import DatasetFields, source_record
from masprm.eval.methods import METHODS, Method, settings_classes
from masprm.models.backends import BackendFlags
from masprm.models.options import SCORER_PRECISIONS, ModelFlags
from masprm.roles import DEFAULT_POLICY, ROLES, role_flags_class
from masprm.scorer_formats import ScorerFormatFlags
from masprm.search.engine import EngineSettings
from masprm.search.settings import AT_LEAST_ONE

DEFAULT_DATASET = "mmlu"
DEFAULT_MODEL = DEFAULT_POLICY


@dataclass(frozen=True)
class DataSettings:
    """What is evaluated: the examples (a condition's data) and the seeds."""

    dataset: str | None = arg(None, flags=("--dataset",),
                              help=f"dataset name (default {DEFAULT_DATASET}; competition_math for handoff methods); "
                                   "or a hub dataset id (owner/name) or a local file or folder, with "
                                   "--question_field / --answer_field")
    split: str = arg("test", flags=("--split",), help="dataset split to evaluate (default: test)")
    sample_n: int | None = arg(None, flags=("--sample_n",), help="evaluate the first N examples after a "
                               "seeded shuffle (default: all; 200 for handoff methods)")
    data_file: PathText | None = arg(None, flags=("--data_file",), help="local JSON/JSONL/Parquet file in the hub schema")
    exclude_questions_file: PathText | None = arg(None, flags=("--exclude_questions_file",),
                                             help="JSONL whose records' prompt (or question) values are left out "
                                                  "before the --sample_n examples are drawn (question-disjoint "
                                                  "development runs; the original newer branch's rule: the rest "
                                                  "in dataset order, shuffled by Python's random with --seed)")
    math_levels: list[int] = arg(flags=("--math_levels",), nargs="+", default_factory=lambda: [4, 5],
                                 help="competition_math levels of handoff runs (static runs use the whole split)")
    math_stratify_by: str = arg("type", flags=("--math_stratify_by",),
                                help="competition_math field handoff runs stratify by")
    answer_checker: str = arg(DEFAULT_CHECKER, flags=("--answer_checker",), choices=tuple(ANSWER_CHECKERS),
                              help=CHECKER_HELP)
    seed: int = arg(42, flags=("--seed",), help="example i is decoded with seed + i")
    seeds: list[int] | None = arg(None, flags=("--seeds",), nargs="+",
                                  help="evaluate each of these seeds in turn instead of --seed, in one process: the "
                                       "same logs as one command per seed, with the models loaded once")
    fields: DatasetFields = field(default_factory=DatasetFields)   # its own flags (--question_field, ...)

    def __post_init__(self) -> None:
        require_each(self, ("sample_n",), lambda v: v >= 1, AT_LEAST_ONE)
        check_seeds(self, ("seed", "seeds"))
        check_checker(self.answer_checker)

    def source_record(self) -> dict:
        """What defines the examples of a dataset given by hub id or path beyond its name (empty otherwise)."""
        return source_record(self.dataset, self.fields)

    def selection_options(self, routing: str) -> dict:
        """Extra data-selection options of handoff runs: --math_levels / --math_stratify_by, for a dataset
        that declares them (competition_math); static runs use the whole split, as in the original."""
        if routing != "handoff":
            return {}
        values = {"levels": self.math_levels, "stratify_by": self.math_stratify_by}
        return {k: v for k, v in values.items() if k in dataset_options(self.dataset)}


@dataclass(frozen=True)
class ModelSettings:
    """The policy, the team, and a folder (and base model) per scorer role (``masprm.roles``)."""

    gen_model_id: str = arg(DEFAULT_MODEL, flags=("--gen_model_id",), help="the agents' policy model")
    mas_config: PathText | None = arg(None, flags=("--mas_config",), help="MAS config (default configs/<dataset>.yaml)")
    scorer_precision: str = arg("auto", flags=("--scorer_precision",), choices=SCORER_PRECISIONS,
                                help="the scorers' own precision, independent of the policy's --load_in_4bit: auto "
                                     "(4-bit NF4 on CUDA as the original, fp32 on CPU), 4bit (on CPU too), bf16, "
                                     "fp16 or fp32")
    judge_model_id: str | None = arg(None, flags=("--judge_model_id",),
                                     help="the LLM judge of pooled_judge / mcts_judge (hub id or model folder; "
                                          "needed by those methods, never shown the gold answer)")
    judge_load_in_4bit: bool = arg(False, flags=("--judge_load_in_4bit",),
                                   help="load the judge in 4-bit (bitsandbytes), whatever the policy's --load_in_4bit")
    # Scorer role -> its folder / base model (None: not given; the base then from the adapter config).
    # Their flags are the roles' (masprm.roles.role_flags_class: --prm_dir, --orm_base_model_id, ...).
    folders: Mapping[str, str | None] = field(
        default_factory=lambda: {r.name: r.default_folder for r in ROLES.values()})
    bases: Mapping[str, str | None] = field(
        default_factory=lambda: {r.name: r.default_base for r in ROLES.values()})
    formats: ScorerFormatFlags = field(default_factory=ScorerFormatFlags)   # --scorer_format and its tokens

    @classmethod
    def from_args(cls, namespace: Any) -> "ModelSettings":
        """The settings from the parsed flags, each role's two flags and the format flags included."""
        flags = config_from_args(role_flags_class(), namespace)
        return config_from_args(cls, namespace, folders={r.name: getattr(flags, r.dir_setting) for r in ROLES.values()},
                                bases={r.name: getattr(flags, r.base_setting) for r in ROLES.values()},
                                formats=config_from_args(ScorerFormatFlags, namespace))

    def scorer_folders(self) -> dict[str, str | None]:
        """Scorer role -> its folder (None: not given)."""
        return {role: self.folders.get(role) for role in ROLES}

    def scorer_bases(self) -> dict[str, str | None]:
        """Scorer role -> its base model (None: from the adapter config)."""
        return {role: self.bases.get(role) for role in ROLES}


@dataclass(frozen=True)
class RunSettings:
    """What runs, where its workers run and where its logs go; none of it changes what a condition computes."""

    methods: list[str] = arg(flags=("--methods",), nargs="+", metavar="METHOD",
                             default_factory=lambda: ["single_pass", "mcts_prm"],
                             help="conditions to run: " + ", ".join(sorted(METHODS)))
    workers: int | None = arg(None, flags=("--workers",), help="parallel workers (Ray actors when > 1; default: one "
                              "per GPU x $WORKERS_PER_GPU, or $RAY_NUM_WORKERS, or 1 on a CPU machine)")
    logs_dir: PathText = arg("logs", flags=("--logs_dir",),
                             help="folder of the text logs and their sidecars, one set per condition and seed; the "
                                  "same command resumes from them (default: logs)")
    allow_unfinished_scorer: bool = arg(False, flags=("--allow_unfinished_scorer",),
                                        help="use a scorer folder whose training did not finish "
                                             "(its newest checkpoint)")
    allow_scorer_kind_mismatch: bool = arg(False, flags=("--allow_scorer_kind_mismatch",),
                                           help="use a scorer folder whose training mode is not the role's "
                                                "(an ORM as --prm_dir, a plain model as a scorer) on purpose")
    cluster: ClusterSettings = field(default_factory=ClusterSettings)   # where the workers run (its own flags)

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m not in METHODS]
        require(not unknown, "methods", f"unknown {', '.join(unknown)} (known: {', '.join(sorted(METHODS))})")
        # a method listed twice runs once, in its first place, as the original's dict.fromkeys(methods)
        object.__setattr__(self, "methods", list(dict.fromkeys(self.methods)))
        require(len({METHODS[m].routing for m in self.methods}) == 1, "methods",
                "handoff and static methods cannot be mixed in one run")
        require_each(self, ("workers",), lambda v: v >= 1, AT_LEAST_ONE)

    @property
    def routing(self) -> str:
        """The run's routing (``masprm.eval.methods.ROUTINGS``), shared by all its methods."""
        return METHODS[self.methods[0]].routing


@dataclass(frozen=True)
class EvalSettings:
    """One evaluation run as the runner sees it: data, models, batching, and every method settings class's values."""

    data: DataSettings = field(default_factory=DataSettings)
    models: ModelSettings = field(default_factory=ModelSettings)
    loading: ModelFlags = field(default_factory=ModelFlags)
    engine: EngineSettings = field(default_factory=EngineSettings)
    method_values: Mapping[type, Any] = field(default_factory=dict)   # settings class -> its checked instance
    backend: BackendFlags = field(default_factory=BackendFlags)       # which generation backend runs the policy

    @classmethod
    def from_args(cls, namespace: Any) -> "EvalSettings":
        """Every class built from the parsed flags (and so checked); a method settings class for each
        class a registered method declares."""
        data = config_from_args(DataSettings, namespace, fields=config_from_args(DatasetFields, namespace))
        return cls(data, ModelSettings.from_args(namespace),
                   config_from_args(ModelFlags, namespace), config_from_args(EngineSettings, namespace),
                   settings_from_args(settings_classes(), namespace), config_from_args(BackendFlags, namespace))

    def method_settings(self, method: str | Method) -> Any:
        """The frozen settings a method reads (``ctx.settings``): exactly the classes it declares."""
        return _method(method).settings_for(self.method_values)

    def roles(self, method: str | Method) -> tuple[str, ...]:
        """The scorer roles a condition of ``method`` loads under these settings."""
        return _method(method).roles(self.method_values)

    def with_data(self, **changes: Any) -> "EvalSettings":
        return replace(self, data=replace(self.data, **changes))

    def with_models(self, **changes: Any) -> "EvalSettings":
        return replace(self, models=replace(self.models, **changes))


def _method(method: str | Method) -> Method:
    return METHODS[method] if isinstance(method, str) else method
