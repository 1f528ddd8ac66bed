"""Model roles: which trained scorer a search reads, as one registered record per role.

    ROLES["masprm"]          # ModelRole(name="masprm", flag_stem="prm", modes=("ppm", "prm", "traj", ...), ...)
    register_role(ModelRole("judge", "judge", modes=("orm",), help_name="outcome judge"))

A role is what a scorer *does* at test time (docs/glossary.md): the MASPRM
valuing partial states, the ORM valuing finished ones, the MASPRM ranking
handoff transcripts. Its record is everything the rest of the code needs:

- ``name``: the role's key everywhere: ``Method.needs``, ``ScorerKind.needs``,
  the context slot (``SearchContext.scorers[name]``), stage 4's model specs and
  the condition manifest's ``models`` keys;
- ``flag_stem``: the original's spelling, giving stage 4's flags
  ``--{stem}_dir`` / ``--{stem}_base_model_id`` and the tag of a condition label
  (``[prm: MASPRM-GSM8K-1.5B]``); the seed README's ``--prm_dir`` is the stem ``prm``;
- ``modes``: the training objectives (``--mode``, ``objective`` in
  ``masprm_scorer.json``) whose scorer may serve the role (an ORM is no MASPRM);
- ``default_folder`` / ``default_base``: the folder and base model when the flags
  are not given (only the MASPRM has any, as in the original); a default base
  gives way to the base model the adapter names;
- ``help_name``: how ``--help`` and messages call it.

Adding a role is one ``register_role`` call: stage 4's flags
(``role_flags_class``), its checks, model specs, labels and manifest read the
registry. Pure Python: no torch import.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

from masprm.config import arg
from masprm.objective_facts import objective_modes
from masprm.paths import PathText
from masprm.registry import Registry

DEFAULT_POLICY = "Qwen/Qwen2.5-1.5B-Instruct"   # the original's policy, and the MASPRM's default base


@dataclass(frozen=True)
class ModelRole:
    name: str                          # the role's key (also its slot in SearchContext.scorers)
    flag_stem: str                     # --{stem}_dir, --{stem}_base_model_id, the label tag
    modes: tuple[str, ...]             # training objectives that make a scorer of this role
    default_folder: str | None = None  # the folder when --{stem}_dir is not given (None: no default)
    default_base: str | None = None    # the base model when --{stem}_base_model_id is not given
    help_name: str = ""                # its name in --help and messages (default: the name, upper case)

    @property
    def dir_setting(self) -> str:
        return f"{self.flag_stem}_dir"

    @property
    def base_setting(self) -> str:
        return f"{self.flag_stem}_base_model_id"

    @property
    def title(self) -> str:
        return self.help_name or self.name.upper()


ROLES: Registry[ModelRole] = Registry("scorer role")


def register_role(role: ModelRole, *, replace: bool = False) -> ModelRole:
    """Add a role (a name is registered once; ``replace=True`` on purpose only)."""
    return ROLES.register(role.name, role, replace=replace)


# Every objective whose scorer the lab reads at each step may be the MASPRM: the paper's pairs, the step
# labels, and the related work's objectives, outcome-trained ones built to be read per prefix included
# (traj, implicit, gorm; biprm refuses partial transcripts itself). Only the plain ORM head is refused: it
# serves there on purpose only, with `allow_scorer_kind_mismatch` (the lab's ORM-under-SBS row).
STEP_MODES = objective_modes(serves_steps=True)
register_role(ModelRole("masprm", "prm", STEP_MODES, "checkpoints/Qwen2.5-1.5B-RM", DEFAULT_POLICY,
                        help_name="MASPRM"))
register_role(ModelRole("orm", "orm", ("orm", "gorm"), help_name="ORM"))
register_role(ModelRole("handoff_masprm", "handoff_prm", STEP_MODES, help_name="HANDOFF_MASPRM"))


def role_of_setting(setting: str) -> ModelRole | None:
    """The role whose folder or base flag is ``setting`` (``prm_dir`` -> masprm), else None."""
    return next((r for r in ROLES.values() if setting in (r.dir_setting, r.base_setting)), None)


def role_flags_class() -> type:
    """The dataclass of every role's two flags (``--{stem}_dir``, ``--{stem}_base_model_id``), in name order.

    Built from the registry as it is now, so a role registered later is a flag at once.
    """
    return _flags_class(tuple(ROLES.values()))


@lru_cache(maxsize=8)
def _flags_class(roles: tuple[ModelRole, ...]) -> type:
    fields = []
    for r in roles:
        where = f"default: {r.default_folder}" if r.default_folder else "default: none"
        base = f"default: {r.default_base}, or the base the adapter config names" if r.default_base else \
            "default: the base the adapter config names"
        fields += [(r.dir_setting, PathText | None, arg(r.default_folder, flags=(f"--{r.dir_setting}",),
                                                   help=f"{r.title} adapter folder ({where}; read only by methods "
                                                        "that use this scorer)")),
                   (r.base_setting, str | None, arg(r.default_base, flags=(f"--{r.base_setting}",),
                                                    help=f"{r.title} base model ({base})"))]
    return dataclasses.make_dataclass("RoleFlags", fields, frozen=True)
