"""Scorer formats: how the model in a scorer folder becomes a value in [-1, 1], one registered record per format.

    SCORER_FORMATS["trl_reward"]                   # ScorerFormat(name="trl_reward", objective="orm", ...)
    record = choose_format(read_scorer_folder(path), ScorerFormatFlags(), ROLES["orm"])
    record.scorer_format, record.format_options    # "trl_reward", {}

- ``masprm``: the project's own scorer folders (``masprm_scorer.json``; a LoRA
  token classifier, or a merged one), read by ``masprm.models.scorer`` exactly as
  before formats existed;
- ``trl_reward``: a TRL ``RewardTrainer`` model, a sequence classifier with one
  output (a full model or a PEFT ``SEQ_CLS`` adapter). An outcome scorer: its
  reward r of the text plus EOS, read where the model pools (the last non-pad
  token), served as 2 sigmoid(r) - 1;
- ``step_tag_classifier`` (Qwen2.5-Math-PRM style): a token classifier with two
  labels, read as P(good) at the last step tag, served as 2p - 1;
- ``causal_lm_good_bad`` (Math-Shepherd style): a causal LM, read by the
  next-token logits of a "good" and a "bad" token at the last step tag,
  p = P(good) / (P(good) + P(bad)), served as 2p - 1.

A public format sees the project's scorer text with its step tag as the
separator: ``prompt + step_1 + TAG + step_2 + TAG + ...`` (a ``trl_reward`` model
keeps ``</step>``, which its training pairs carry, and gets the EOS that
``RewardTrainer`` appends). The value of a (partial) transcript is read at its
last tag, as the project's own scorers read theirs at the last separator.

The format is detected from the folder (``detect``: the record, the adapter's
``task_type``, ``config.json``'s architecture and label count) or named with
stage 4's ``--scorer_format``; a name that contradicts what the folder shows is
refused. A plain causal LM is never taken for a ``causal_lm_good_bad`` PRM (every
policy folder looks the same): that format is named. The chosen format and its
options go into the condition's fingerprint (``scorer_identity``); the project's
own format adds nothing there, so its fingerprints stay as they were.
Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from masprm.config import arg, require
from masprm.errors import ModelError
from masprm.registry import Registry
from masprm.roles import ROLES, ModelRole
from masprm.scorer_folder import ScorerFolder
from masprm.scorer_meta import CAUSAL_LM_OBJECTIVES

OWN = "masprm"
GOOD_LABEL_NAMES = ("good", "positive", "correct", "+", "label_1")   # an id2label name that means P(good)


@dataclass(frozen=True)
class ScorerFormat:
    name: str
    title: str                          # how messages call it
    objective: str | None               # what it serves as, in masprm.roles' modes (None: its own record says)
    model: str | None = None            # transformers head: sequence_classification, token_classification, causal_lm
    num_labels: int | None = None       # outputs of that head (None: the LM's vocabulary)
    options: tuple[str, ...] = ()       # the ScorerFormatFlags values it reads
    step_tag: str | None = None         # its default step tag
    detect: Callable[[ScorerFolder], str | None] | None = None   # the folder's evidence for it (None: named only)


SCORER_FORMATS: Registry[ScorerFormat] = Registry("scorer format")


def register_format(fmt: ScorerFormat, *, replace: bool = False) -> ScorerFormat:
    return SCORER_FORMATS.register(fmt.name, fmt, replace=replace)


# --------------------------------------------------------------------------- what a folder shows


def architecture(record: ScorerFolder) -> str:
    """The first architecture config.json names ("" without one)."""
    names = (record.config or {}).get("architectures") or [""]
    return str(names[0])


def label_count(config: dict[str, Any]) -> int:
    """transformers' rule: as many labels as id2label names, else num_labels, else 2 (it stores no id2label for 2)."""
    return len(config.get("id2label") or {}) or int(config.get("num_labels") or 2)


def _own(record: ScorerFolder) -> str | None:
    return "masprm_scorer.json" if record.meta or record.meta_error else None


def _reward_model(record: ScorerFolder) -> str | None:
    if _own(record):
        return None
    if (record.adapter or {}).get("task_type") == "SEQ_CLS":
        return "adapter_config.json: task_type SEQ_CLS"
    arch = architecture(record)
    if record.adapter is None and arch.endswith("ForSequenceClassification") and label_count(record.config) == 1:
        return f"config.json: {arch} with 1 label"
    return None


def _step_tag_classifier(record: ScorerFolder) -> str | None:
    arch = architecture(record)
    if _own(record) or record.adapter is not None or not arch.endswith("ForTokenClassification"):
        return None
    return f"config.json: {arch} with 2 labels" if label_count(record.config) == 2 else None


register_format(ScorerFormat(OWN, "masprm scorer", None, detect=_own))
register_format(ScorerFormat("trl_reward", "TRL reward model", "orm", "sequence_classification", 1,
                             detect=_reward_model))
register_format(ScorerFormat("step_tag_classifier", "step-tag classifier PRM", "prm", "token_classification", 2,
                             ("step_tag", "good_label"), "<extra_0>", _step_tag_classifier))
register_format(ScorerFormat("causal_lm_good_bad", "good/bad-token PRM", "prm", "causal_lm", None,
                             ("step_tag", "good_token", "bad_token"), "ки"))


def detected_format(record: ScorerFolder) -> tuple[ScorerFormat, str] | None:
    """(the format the folder shows, the evidence) or None (nothing says: the project's own is assumed)."""
    return next(((f, why) for f in SCORER_FORMATS.values() if f.detect and (why := f.detect(record))), None)


# --------------------------------------------------------------------------- naming it: stage 4's flags


@dataclass(frozen=True)
class ScorerFormatFlags:
    """Stage 4's format flags: which format each scorer folder is read in, and the tokens the formats read."""

    scorer_format: list[str] | None = arg(None, flags=("--scorer_format",), nargs="+", metavar="[STEM=]NAME",
                                          help="read the scorer folders in this format instead of the detected "
                                               "one: NAME for every folder, or prm=NAME, orm=NAME, "
                                               "handoff_prm=NAME for one role's ("
                                               + ", ".join(SCORER_FORMATS.names()) + "; docs/sharing.md)")
    step_tag: str | None = arg(None, flags=("--step_tag",),
                               help="the step tag a step_tag_classifier / causal_lm_good_bad scorer reads at "
                                    "(default: <extra_0> / ки)")
    good_token: str = arg("+", flags=("--good_token",), help="causal_lm_good_bad: the token of a good step")
    bad_token: str = arg("-", flags=("--bad_token",), help="causal_lm_good_bad: the token of a bad step")
    good_label: int | None = arg(None, flags=("--good_label",), choices=(0, 1), type=int,
                                 help="step_tag_classifier: the label of a good step (default: the one "
                                      "config.json's id2label calls good or positive, else 1)")
    named: dict[str, str] = field(default_factory=dict, init=False, repr=False)   # flag stem ("" all) -> name

    def __post_init__(self) -> None:
        stems = {r.flag_stem for r in ROLES.values()}
        named: dict[str, str] = {}
        for entry in self.scorer_format or ():
            stem, _, name = entry.rpartition("=")
            require(not stem or stem in stems, "scorer_format",
                    f"scorer_format {entry}: no scorer role {stem!r} (valid: {', '.join(sorted(stems))})")
            require(name in SCORER_FORMATS, "scorer_format",
                    f"scorer_format {entry}: {SCORER_FORMATS.unknown_message(name)}")
            require(stem not in named, "scorer_format", f"scorer_format names {stem or 'every folder'}'s format twice")
            named[stem] = name
        object.__setattr__(self, "named", named)
        require(not self.good_token or not self.bad_token or self.good_token != self.bad_token, "good_token",
                f"good_token and `bad_token` must differ, both are {self.good_token!r}")

    def name_for(self, role: ModelRole) -> str | None:
        """The format named for the role's folder (its own entry, else the one for every folder), or None."""
        return self.named.get(role.flag_stem, self.named.get(""))

    def options_for(self, fmt: ScorerFormat, record: ScorerFolder) -> dict[str, Any]:
        """The values of the options ``fmt`` reads, defaults filled in."""
        values = {"step_tag": self.step_tag or fmt.step_tag, "good_token": self.good_token,
                  "bad_token": self.bad_token,
                  "good_label": self.good_label if self.good_label is not None else good_label_of(record.config)}
        return {key: values[key] for key in fmt.options}


def good_label_of(config: dict[str, Any] | None) -> int:
    """The label config.json's id2label calls good (good, positive, correct, +), else 1 (Qwen2.5-Math-PRM's)."""
    names = {str(name).lower(): int(i) for i, name in ((config or {}).get("id2label") or {}).items()}
    return next((names[n] for n in GOOD_LABEL_NAMES if n in names and names[n] in (0, 1)), 1)


def choose_format(record: ScorerFolder, flags: ScorerFormatFlags | None = None, role: ModelRole | None = None,
                  setting: str = "prm_dir") -> ScorerFolder:
    """The record with its format chosen: the one named for ``role`` in ``flags``, else the detected one, else
    the project's own. A name the folder contradicts, and a model that needs its own code, are one line."""
    if record.scorer_format is not None and flags is None:
        return record
    flags = flags or ScorerFormatFlags()
    where = f"`{setting}` {record.path}"
    if record.config_error:   # the labels the formats read come from it: never guessed past a bad value
        raise ModelError(f"{where}: {record.config_error}", setting=setting)
    if architecture(record).endswith("ForProcessRewardModel"):
        raise ModelError(f"{where}: config.json names {architecture(record)}, a model that runs its own code (a "
                         "custom head) and that masprm does not load; save it as a token classifier with two labels "
                         "to read it as step_tag_classifier", setting=setting)
    named = flags.name_for(role) if role is not None else None
    found = detected_format(record)
    if named is not None and found is not None and found[0].name != named:
        stem = f"{role.flag_stem}=" if role.flag_stem in flags.named else ""   # the entry as it was given
        raise ModelError(f"scorer_format {stem}{named}: {where} holds a {found[0].name} scorer ({found[1]}); leave "
                         f"`scorer_format` out to read it so", setting="scorer_format")
    fmt = SCORER_FORMATS[named] if named is not None else (found[0] if found else SCORER_FORMATS[OWN])
    return replace(record, scorer_format=fmt.name, format_options=flags.options_for(fmt, record))


def head_of(record: ScorerFolder) -> tuple[str, int | None]:
    """(the transformers head the folder's model is read with, its outputs): a public format's own, else the
    project's: the causal LM of a generative or implicit scorer (None: the vocabulary), else a token classifier
    of one output (two for biprm, one per head of an ensemble). The loader and the folder check both read it."""
    fmt = SCORER_FORMATS[record.scorer_format or OWN]
    if fmt.name != OWN:
        return fmt.model, fmt.num_labels
    objective = record.training.get("objective")
    if objective in CAUSAL_LM_OBJECTIVES:
        return "causal_lm", None
    return "token_classification", 2 if objective == "biprm" else record.meta.get("ensemble_heads", 1)


def scorer_identity(record: ScorerFolder) -> dict[str, Any]:
    """What a condition's fingerprint says of a scorer besides its files: how it was trained (the project's
    record) and a format other than the project's own, with its options."""
    record = choose_format(record)
    identity: dict[str, Any] = {"training": record.training} if record.training else {}
    if record.scorer_format != OWN:
        identity["scorer_format"] = {"name": record.scorer_format, **record.format_options}
    return identity


def role_problem(record: ScorerFolder, role: ModelRole) -> str | None:
    """Why a public format cannot serve ``role`` (its objective is not one of the role's modes), else None."""
    fmt = SCORER_FORMATS[record.scorer_format or OWN]
    if fmt.objective is None or fmt.objective in role.modes:
        return None
    what = ("an outcome scorer, trained on finished transcripts" if fmt.objective == "orm" else
            "a process scorer, read at every step")
    return (f"holds a {fmt.title} (scorer format {fmt.name}), {what}, but the {role.name} role needs a "
            f"--mode {' or '.join(role.modes)} scorer")
