"""The typed settings of the stage-4 method families: the one home of their flags.

A method registers the settings classes that define it (its family's, plus
its scorer kind's); the log fingerprint of a condition is the union of their
``asdict`` read from the run's flags, so a setting that is not a field is an
error where the method is registered, never a silent ``None``. The same
classes build the flags of ``src/experiments/compare_sbs_mcts.py``
(`add_method_args`), spelled as the seed README spells them (``--top_p``).
Pure Python: no torch import.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

from masprm.config import add_config_args, arg, config_from_args
from masprm.search.expand import LOGPROB_AGGS
from masprm.search.scorer_kinds import STEP_AGGS
from masprm.state_text import VIEWS


@dataclass(frozen=True)
class SamplingSettings:
    """What every method's agents sample with."""

    top_p: float = arg(0.95, flags=("--top_p",), help="nucleus sampling (default 0.95)")
    max_new_tokens: int = arg(1024, flags=("--max_new_tokens",), help="cap per agent output")


@dataclass(frozen=True)
class PassSettings(SamplingSettings):
    """single_pass: one trajectory."""

    sbs_temperature: float = arg(1.0, flags=("--sbs_temperature",),
                                 help="sampling temperature of single passes, SBS and voters")


@dataclass(frozen=True)
class SBSSettings(PassSettings):
    """sbs_*: step-level beam search."""

    b1: int = arg(3, flags=("--b1",), help="SBS beam width")
    b2: int = arg(5, flags=("--b2",), help="SBS candidates per beam")


@dataclass(frozen=True)
class VoterSettings(PassSettings):
    """voter_*: k single passes and a weighted vote."""

    voter_k: int = arg(5, flags=("--voter_k",), help="single passes per voter")


@dataclass(frozen=True)
class BoNSettings(PassSettings):
    """bon_*: N single passes, every step scored, the best aggregate first."""

    bon_n: int = arg(8, flags=("--bon_n",), help="best-of-N: complete transcripts sampled per question (default 8)")
    step_agg: str = arg("min", flags=("--step_agg",), choices=STEP_AGGS,
                        help="best-of-N: a transcript's score from its step values: the smallest (min, default), "
                             "their product (prod, in log space), mean, or the last step's (last: an outcome reranker)")


@dataclass(frozen=True)
class MCTSSettings(SamplingSettings):
    """mcts_*: inference MCTS."""

    n_simulations: int = arg(10, flags=("--n_simulations",), help="MCTS simulations per example")
    max_children: int = arg(3, flags=("--max_children",), help="candidates per MCTS expansion")
    c_uct: float = arg(2.0, flags=("--c_uct",), help="exploration constant")
    uct_type: str = arg("uct", flags=("--uct_type",), choices=("uct", "puct"),
                        help="selection rule: uct or puct (prior: step log-prob)")
    mcts_temperature: float = arg(0.6, flags=("--mcts_temperature",), help="sampling temperature of MCTS expansions")


@dataclass(frozen=True)
class ORMLeafSettings:
    """mcts_prm only: value the leaves with the ORM instead of the PRM."""

    orm_leaf: bool = arg(False, flags=("--orm_leaf",), help="mcts_prm: value leaves with the ORM")


@dataclass(frozen=True)
class ViewSettings:
    """A trained scorer's input: what it sees of a state."""

    view_mode: str = arg("full", flags=("--view_mode",), choices=VIEWS,
                         help="what the PRM sees: the routed transcript (full) or the agent's inbox (local)")


@dataclass(frozen=True)
class LogProbSettings:
    """The policy's log-prob as a score."""

    logprob_agg: str = arg("sum", flags=("--logprob_agg",), choices=LOGPROB_AGGS,
                           help="log-prob of a step/path: sum, per token (avg_token) or per step (avg_step)")


SEARCH_FAMILIES = (PassSettings, SBSSettings, VoterSettings, BoNSettings, MCTSSettings, ORMLeafSettings,
                   LogProbSettings)


def check_settings_classes(classes: Sequence[type]) -> tuple[type, ...]:
    """Settings must be dataclasses (a method names its settings by class, never by string)."""
    for cls in classes:
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise TypeError(f"method settings must be dataclass types, got {cls!r}")
    return tuple(classes)


def setting_values(classes: Sequence[type], flags: Any) -> dict[str, Any]:
    """The fingerprint's settings: the union of each class's ``asdict`` built from the flags."""
    values: dict[str, Any] = {}
    for cls in classes:
        values.update(dataclasses.asdict(config_from_args(cls, flags)))
    return values


def add_method_args(group: Any, classes: Sequence[type]) -> None:
    """Each settings field as a flag, once (families share fields, e.g. top_p)."""
    seen: set[str] = set()
    for cls in classes:
        names = {f.name for f in dataclasses.fields(cls)}
        add_config_args(group, cls, skip=seen & names)
        seen |= names
