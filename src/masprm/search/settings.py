"""The typed settings of the stage-4 search methods: the one home of their flags and checks.

A method declares the settings classes that define it (its family's, plus its
scorer kind's); ``combined_settings`` makes one frozen object from exactly those
classes, which is what the method's search reads as ``ctx.settings``: a setting the
method did not declare is an AttributeError, never a silent default. The same
object, as a dict, is the condition's settings in its log fingerprint. The classes
build the flags of ``src/experiments/compare_sbs_mcts.py``, spelled as the seed
README spells them (``--top_p``), and check their values in ``__post_init__``.
Pure Python: no torch import.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping, Sequence

from masprm.config import Needs, arg, require, require_each
from masprm.search.expand import LOGPROB_AGGS
from masprm.search.judge import PROMPT_ID as JUDGE_PROMPT_ID
from masprm.search.oracles import STEP_ORACLES
from masprm.search.scorer_kinds import STEP_AGGS
from masprm.state_text import VIEWS

AT_LEAST_ONE = "must be at least 1"


@dataclass(frozen=True)
class MethodSettings:
    """Base of a method's settings classes."""

    def extra_scorers(self) -> frozenset[str]:
        """Scorer roles these values add to the method's own (e.g. ``--orm_leaf`` adds the ORM)."""
        return frozenset()

    def unrecorded(self) -> frozenset[str]:
        """Fields left out of the condition's fingerprint: opt-in options left off, so that the
        fingerprints of runs without them stay as they were (``recorded_settings``)."""
        return frozenset()


@dataclass(frozen=True)
class SamplingSettings(MethodSettings):
    """What every method's agents sample with."""

    top_p: float = arg(0.95, flags=("--top_p",), help="nucleus sampling (default 0.95)")
    max_new_tokens: int | None = arg(1024, flags=("--max_new_tokens",), help="cap per agent output")

    def __post_init__(self) -> None:
        require(0 < self.top_p <= 1, "top_p", f"top_p must be in (0, 1], got {self.top_p}")
        require_each(self, ("max_new_tokens",), lambda v: v >= 1, AT_LEAST_ONE)


@dataclass(frozen=True)
class PassSettings(SamplingSettings):
    """single_pass: one trajectory."""

    sbs_temperature: float = arg(1.0, flags=("--sbs_temperature",),
                                 help="sampling temperature of single passes, SBS and voters")

    def __post_init__(self) -> None:
        super().__post_init__()
        require_each(self, ("sbs_temperature",), lambda v: v > 0, "must be > 0")


@dataclass(frozen=True)
class SBSSettings(PassSettings):
    """sbs_*: step-level beam search."""

    b1: int = arg(3, flags=("--b1",), help="SBS beam width")
    b2: int = arg(5, flags=("--b2",), help="SBS candidates per beam")

    def __post_init__(self) -> None:
        super().__post_init__()
        require_each(self, ("b1", "b2"), lambda v: v >= 1, AT_LEAST_ONE)


@dataclass(frozen=True)
class VoterSettings(PassSettings):
    """voter_*: k single passes and a weighted vote."""

    voter_k: int = arg(5, flags=("--voter_k",), help="single passes per voter")

    def __post_init__(self) -> None:
        super().__post_init__()
        require_each(self, ("voter_k",), lambda v: v >= 1, AT_LEAST_ONE)


@dataclass(frozen=True)
class JudgeSettings(MethodSettings):
    """pooled_judge / mcts_judge: how the LLM judge (--judge_model_id) generates its reply."""

    judge_max_new_tokens: int = arg(512, flags=("--judge_max_new_tokens",),
                                    help="cap on the judge's reply (default 512)")
    judge_temperature: float = arg(0.0, flags=("--judge_temperature",),
                                   help="the judge's sampling temperature (default 0: greedy, as the original)")
    judge_prompts: str = JUDGE_PROMPT_ID   # not a flag: the prompts' hash, so they are in the fingerprint too

    def __post_init__(self) -> None:
        require_each(self, ("judge_max_new_tokens",), lambda v: v >= 1, AT_LEAST_ONE)
        require(self.judge_temperature >= 0, "judge_temperature", f"must be >= 0, got {self.judge_temperature}")


@dataclass(frozen=True)
class BoNSettings(PassSettings):
    """bon_*: N single passes, every step scored, the best aggregate first."""

    bon_n: int = arg(8, flags=("--bon_n",), help="best-of-N: complete transcripts sampled per question (default 8)")
    step_agg: str = arg("min", flags=("--step_agg",), choices=STEP_AGGS,
                        help="best-of-N: a transcript's score from its step values: the smallest (min, default), "
                             "their product (prod, in log space), mean, or the last step's (last: an outcome reranker)")

    def __post_init__(self) -> None:
        super().__post_init__()
        require_each(self, ("bon_n",), lambda v: v >= 1, AT_LEAST_ONE)


MCTS_OPTIONS = ("distinct_tries", "pw_k", "pw_alpha", "pw_max_children")   # opt-in; off: the original's rule
# --pw_alpha and --pw_max_children shape progressive widening, which only --pw_k turns on
NEEDS_PW_K = Needs("`pw_k` (progressive widening is off without it)", lambda s: getattr(s, "pw_k", None) is not None)


@dataclass(frozen=True)
class MCTSSettings(SamplingSettings):
    """mcts_*: inference MCTS."""

    n_simulations: int = arg(10, flags=("--n_simulations",), help="MCTS simulations per example")
    max_children: int = arg(3, flags=("--max_children",), help="candidates per MCTS expansion")
    c_uct: float = arg(2.0, flags=("--c_uct",), help="exploration constant")
    uct_type: str = arg("uct", flags=("--uct_type",), choices=("uct", "puct"),
                        help="selection rule: uct or puct (prior: step log-prob)")
    mcts_temperature: float = arg(0.6, flags=("--mcts_temperature",), help="sampling temperature of MCTS expansions")
    # Opt-in options (off: the original's rule), in the fingerprint only when set (unrecorded)
    distinct_tries: int = arg(0, flags=("--distinct_tries",),
                              help="MCTS: when an expansion's samples hold fewer distinct texts than asked, sample "
                                   "the number missing again, at most this many more times, every sample counted "
                                   "(default 0: the original's rule, identical samples merged into one child)")
    pw_k: float | None = arg(None, flags=("--pw_k",),
                             help="MCTS progressive widening: a node with children and N visits gains one more, "
                                  "sampled fresh, while it has fewer than pw_k * N^pw_alpha (default: off, a node "
                                  "keeps the children of its one expansion)")
    pw_alpha: float = arg(0.5, flags=("--pw_alpha",), needs=NEEDS_PW_K,
                          help="progressive widening's exponent (default 0.5; needs --pw_k)")
    pw_max_children: int | None = arg(None, flags=("--pw_max_children",), needs=NEEDS_PW_K,
                                      help="progressive widening: at most this many children per node, "
                                           "--max_children being the first expansion's (default: no cap; needs --pw_k)")

    def __post_init__(self) -> None:
        super().__post_init__()
        require_each(self, ("n_simulations", "max_children"), lambda v: v >= 1, AT_LEAST_ONE)
        require_each(self, ("c_uct", "distinct_tries"), lambda v: v >= 0, "must be >= 0")
        require_each(self, ("mcts_temperature", "pw_k"), lambda v: v > 0, "must be > 0")
        require(0 < self.pw_alpha <= 1, "pw_alpha", f"pw_alpha must be in (0, 1], got {self.pw_alpha}")
        for name, off in (("pw_alpha", self.pw_alpha == 0.5), ("pw_max_children", self.pw_max_children is None)):
            require(off or NEEDS_PW_K.ok(self), name, NEEDS_PW_K.problem(name))
        require(self.pw_max_children is None or self.pw_max_children >= self.max_children, "pw_max_children",
                f"pw_max_children must be >= `max_children` ({self.max_children}), got {self.pw_max_children}")

    def unrecorded(self) -> frozenset[str]:
        off = {"distinct_tries"} if self.distinct_tries == 0 else set()
        return frozenset(off | (set(MCTS_OPTIONS[1:]) if self.pw_k is None else set()))


@dataclass(frozen=True)
class ORMLeafSettings(MethodSettings):
    """mcts_prm only: value the leaves with the ORM instead of the MASPRM."""

    orm_leaf: bool = arg(False, flags=("--orm_leaf",), help="mcts_prm: value leaves with the ORM")

    def extra_scorers(self) -> frozenset[str]:
        return frozenset({"orm"}) if self.orm_leaf else frozenset()


@dataclass(frozen=True)
class StepOracleSettings(MethodSettings):
    """*_oracle_step: which world's step labeller judges each message (masprm.search.oracles.STEP_ORACLES)."""

    step_oracle: str | None = arg(None, flags=("--step_oracle",),
                                  help="the step labeller of oracle_step (default: the dataset's own where it has "
                                       "one, toy or toy_deep; else toy)")

    def __post_init__(self) -> None:
        require(self.step_oracle is None or self.step_oracle in STEP_ORACLES, "step_oracle",
                f"step_oracle: {STEP_ORACLES.unknown_message(self.step_oracle)}")


@dataclass(frozen=True)
class TrueValueSettings(MethodSettings):
    """*_true_value: P(final right | prefix) from fresh single passes of the team."""

    true_value_rollouts: int = arg(8, flags=("--true_value_rollouts",),
                                   help="true_value: single passes per prefix (default 8)")
    true_value_temperature: float = arg(1.0, flags=("--true_value_temperature",),
                                        help="true_value: sampling temperature of the rollouts (default 1.0)")

    def __post_init__(self) -> None:
        require_each(self, ("true_value_rollouts",), lambda v: v >= 1, AT_LEAST_ONE)
        require_each(self, ("true_value_temperature",), lambda v: v > 0, "must be > 0")


@dataclass(frozen=True)
class ViewSettings(MethodSettings):
    """A trained scorer's input: what it sees of a state."""

    view_mode: str = arg("full", flags=("--view_mode",), choices=VIEWS,
                         help="what the PRM sees: the routed transcript (full) or the agent's inbox (local)")


@dataclass(frozen=True)
class LogProbSettings(MethodSettings):
    """The policy's log-prob as a score."""

    logprob_agg: str = arg("sum", flags=("--logprob_agg",), choices=LOGPROB_AGGS,
                           help="log-prob of a step/path: sum, per token (avg_token) or per step (avg_step)")


SEARCH_FAMILIES = (PassSettings, SBSSettings, VoterSettings, BoNSettings, MCTSSettings, ORMLeafSettings,
                   LogProbSettings)


def check_settings_classes(classes: Sequence[type]) -> tuple[type, ...]:
    """A method names its settings by class, never by string: each must be a `MethodSettings` dataclass."""
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, MethodSettings) and dataclasses.is_dataclass(cls)):
            raise TypeError(f"method settings must be MethodSettings dataclass types, got {cls!r}")
    return tuple(classes)


@lru_cache(maxsize=None)
def combined_class(classes: tuple[type, ...]) -> type:
    """One frozen dataclass with the fields of exactly ``classes`` (a field several share, once).

    It pickles by its classes and values (Ray workers rebuild it), though it is made at run time.
    """
    fields: dict[str, tuple[str, Any]] = {}
    for cls in classes:
        for f in dataclasses.fields(cls):
            fields.setdefault(f.name, (f.name, f.type))

    def __reduce__(self):
        return _rebuild, (classes, dataclasses.asdict(self))

    name = "Settings[" + ", ".join(cls.__name__ for cls in classes) + "]"
    return dataclasses.make_dataclass(name, list(fields.values()), frozen=True,
                                      namespace={"__reduce__": __reduce__})


def _rebuild(classes: tuple[type, ...], values: dict[str, Any]) -> Any:
    return combined_class(classes)(**values)


def combined_settings(classes: Sequence[type], instances: Mapping[type, Any]) -> Any:
    """The frozen settings of a method declaring ``classes``, from the run's checked instance of each."""
    values: dict[str, Any] = {}
    for cls in classes:
        values.update(dataclasses.asdict(instances[cls]))
    return _rebuild(tuple(classes), values)


def recorded_settings(classes: Sequence[type], instances: Mapping[type, Any]) -> dict[str, Any]:
    """The settings a condition's fingerprint records: the method's, less the options left off."""
    values = dataclasses.asdict(combined_settings(classes, instances))
    for cls in classes:
        for name in instances[cls].unrecorded():
            values.pop(name, None)
    return values


def extra_scorers(classes: Sequence[type], instances: Mapping[type, Any]) -> frozenset[str]:
    """The scorer roles the declared settings' values add (``MethodSettings.extra_scorers``)."""
    return frozenset().union(*(instances[cls].extra_scorers() for cls in classes))
