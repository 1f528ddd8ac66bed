"""The compute-matched sweep's settings: each search at the largest setting its budget of agent samples allows.

Fixed in docs/scorer_lab.md ("Compute-matched sweep") before any run: budgets of 4, 8, 12 and 24 agent
samples per question (agent messages the policy generated, a record's ``agent_runs``). Best-of-N + ORM
runs N = budget / 4 passes of the 4-agent team. SBS and MCTS each run the setting of their budget flag
(SBS B1 x B2 from the grid 1 x 1 ... 4 x 6, MCTS simulations 1 ... 20) whose mean agent samples per
question, measured on the *train* questions, is the largest not above the budget: SBS once (its count does
not depend on the scorer), MCTS once per scorer (the tree it grows does). The measured means are below
(`MEASURED_SBS`, `MEASURED_MCTS`, from `python -m masprm.lab.compute_match --logs_dir DIR` over the
measurement's logs) and `SWEEP` is the plan they give, which `make lab` runs on the test split and its
report tabulates (`masprm.lab.sweep_report`). Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from masprm.cli import ArgumentParser, check, run_cli
from masprm.config import add_config_args, arg, config_from_args
from masprm.paths import PathText, check_input_dir

BUDGETS = (4, 8, 12, 24)          # agent samples per question
TEAM_AGENTS = 4                   # Reader, Planner, Solver, Verifier: one best-of-N pass is 4 samples
SBS_GRID = tuple((b1, b2) for b1 in range(1, 5) for b2 in range(1, 7))   # (B1, B2), 1 x 1 ... 4 x 6
MCTS_GRID = tuple(range(1, 21))   # simulations
MAX_CHILDREN = 3                  # MCTS children per expansion: the demo's, at every budget
# The sweep's conditions, (search family, row): best-of-N + ORM is each budget's reference; each search runs
# with the demo's MASPRM and with its ORM (under SBS valuing each prefix, under MCTS valuing the leaves).
REFERENCE = ("bon", "orm")
CONDITIONS = (REFERENCE, ("sbs", "masprm"), ("sbs", "orm"), ("mcts", "masprm"), ("mcts", "orm"))


def bon_n(budget: int) -> int:
    """Best-of-N passes at a budget: every pass is one sample per agent."""
    if budget % TEAM_AGENTS:
        raise ValueError(f"a budget of {budget} agent samples is not a whole number of {TEAM_AGENTS}-agent passes")
    return budget // TEAM_AGENTS


def matched_setting(measured: Mapping, grid: Sequence, budget: float):
    """The setting of `grid` whose measured mean agent samples per question is the largest not above `budget`
    (ties: the first in grid order, the cheaper search); None when even the smallest is above it.
    `measured` maps a setting to its mean; a setting not measured is not chosen."""
    fits = [(measured[s], -i, s) for i, s in enumerate(grid) if s in measured and measured[s] <= budget]
    return max(fits)[2] if fits else None


def sweep_settings(sbs_samples: Mapping, mcts_samples: Mapping,
                   budgets: Sequence[int] = BUDGETS) -> dict[int, dict[str, object]]:
    """Per budget, the setting of each method: {"bon_n": N, "sbs": (B1, B2) or None, "mcts": simulations or None}."""
    return {budget: {"bon_n": bon_n(budget), "sbs": matched_setting(sbs_samples, SBS_GRID, budget),
                     "mcts": matched_setting(mcts_samples, MCTS_GRID, budget)} for budget in budgets}


def sbs_samples(b1: int, b2: int, agents: int = TEAM_AGENTS) -> int:
    """Agent samples of SBS B1 x B2 through a chain of `agents` agents: every kept beam proposes B2 candidates
    of each agent and min(B1, candidates) beams are kept; the scorer only chooses which."""
    beams = total = 0
    for _ in range(agents):
        proposed = max(beams, 1) * b2
        total, beams = total + proposed, min(b1, proposed)
    return total


Setting = dict[str, object]   # a condition's settings as its stage-4 manifest records them


def sweep_plan(sbs_samples_measured: Mapping, mcts_samples_measured: Mapping[str, Mapping],
               budgets: Sequence[int] = BUDGETS) -> dict[int, dict[tuple[str, str], Setting | None]]:
    """Per budget, each condition's settings (None: no setting of its search fits the budget). The MCTS means
    are per row ("masprm", "orm"); SBS's one table serves both rows."""
    plan: dict[int, dict[tuple[str, str], Setting | None]] = {}
    for budget in budgets:
        sbs = matched_setting(sbs_samples_measured, SBS_GRID, budget)
        plan[budget] = {REFERENCE: {"bon_n": bon_n(budget), "step_agg": "last"}}
        for family, row in CONDITIONS[1:]:
            if family == "sbs":
                plan[budget][(family, row)] = None if sbs is None else {"b1": sbs[0], "b2": sbs[1]}
            else:
                n = matched_setting(mcts_samples_measured.get(row, {}), MCTS_GRID, budget)
                plan[budget][(family, row)] = None if n is None else {"n_simulations": n,
                                                                      "max_children": MAX_CHILDREN}
    return plan


def read_measurement(logs_dir: str | Path) -> tuple[dict, dict[str, dict]]:
    """The measured means from a measurement's logs: SBS (`sbs_prm`) per (B1, B2), MCTS per row (`mcts_prm`:
    "masprm", `mcts_orm`: "orm") per simulation count; a setting logged twice: the newest."""
    from masprm.lab.cells import read_placed

    def place(manifest: dict):
        method, settings = manifest.get("condition"), (manifest.get("definition") or {}).get("settings") or {}
        if method == "sbs_prm":
            return "sbs", (settings.get("b1"), settings.get("b2"))
        if method in ("mcts_prm", "mcts_orm") and settings.get("max_children") == MAX_CHILDREN:
            return "masprm" if method == "mcts_prm" else "orm", settings.get("n_simulations")
        return None

    sbs: dict = {}
    mcts: dict[str, dict] = {}
    for (what, setting), cell in read_placed([logs_dir], place).items():
        (sbs if what == "sbs" else mcts.setdefault(what, {}))[setting] = cell.samples_mean()
    return sbs, mcts


# Measured on the first 60 train questions, seed 14, the demo's MASPRM and ORM (docs/scorer_lab.md, "Compute-matched
# sweep"): mean agent samples per question of every grid setting. SWEEP is what the rule makes of them.
MEASURED_SBS: dict[tuple[int, int], float] = {
    (1, 1): 4, (1, 2): 8, (1, 3): 12, (1, 4): 16, (1, 5): 20, (1, 6): 24, (2, 1): 4, (2, 2): 14, (2, 3): 21,
    (2, 4): 28, (2, 5): 35, (2, 6): 42, (3, 1): 4, (3, 2): 18, (3, 3): 30, (3, 4): 40, (3, 5): 50, (3, 6): 60,
    (4, 1): 4, (4, 2): 22, (4, 3): 36, (4, 4): 52, (4, 5): 65, (4, 6): 78}
MEASURED_MCTS: dict[str, dict[int, float]] = {
    "masprm": {
        1: 13.75, 2: 16.05, 3: 17.95, 4: 19.2, 5: 19.85, 6: 20.25, 7: 20.8, 8: 21.05, 9: 21.3, 10: 21.5,
        11: 21.65, 12: 21.7, 13: 21.7, 14: 21.75, 15: 21.8, 16: 21.8, 17: 21.8, 18: 21.85, 19: 21.85,
        20: 21.85},
    "orm": {
        1: 12, 2: 16.15, 3: 19.2, 4: 19.85, 5: 20.55, 6: 21.05, 7: 21.15, 8: 21.35, 9: 21.4, 10: 21.45,
        11: 21.55, 12: 21.6, 13: 21.6, 14: 21.65, 15: 21.65, 16: 21.65, 17: 21.75, 18: 21.75, 19: 21.75,
        20: 21.75}}
SWEEP = sweep_plan(MEASURED_SBS, MEASURED_MCTS)
# The measured sweeps a lab recipe names (`sweep:` in masprm/lab/recipes/*.yaml; "none": not measured on its world)
SWEEPS = {"toy": SWEEP}


def plan_lines(plan: Mapping[int, Mapping[tuple[str, str], Setting | None]]) -> list[str]:
    """The plan in words, one line per budget (for the docs and the dry run)."""
    def setting(family: str, s: Setting | None) -> str:
        if s is None:
            return "none fits"
        return {"bon": lambda: f"N = {s['bon_n']}", "sbs": lambda: f"{s['b1']} x {s['b2']}",
                "mcts": lambda: f"{s['n_simulations']} simulation" + "s" * (s['n_simulations'] != 1)}[family]()
    return [f"{budget} agent samples: " + ", ".join(f"{family} + {row}: {setting(family, s)}"
                                                   for (family, row), s in conditions.items())
            for budget, conditions in plan.items()]


@dataclass(frozen=True)
class MeasureArgs:
    logs_dir: PathText = arg(flags=("--logs_dir",), help="the measurement's stage-4 logs (docs/scorer_lab.md)")


def main(argv: list[str] | None = None) -> int:
    """Print the measured means and the sweep plan they give."""
    p = ArgumentParser(description="The compute-matched sweep's settings from a train-split measurement's logs.")
    add_config_args(p, MeasureArgs)
    args = config_from_args(MeasureArgs, p.parse_args(argv))
    check_input_dir(args.logs_dir, "logs_dir")
    sbs, mcts = read_measurement(args.logs_dir)
    # a plan from a part of the measurement would read "none fits" where nothing was measured
    missing = [method for method, means in (("sbs_prm", sbs), ("mcts_prm", mcts.get("masprm")),
                                            ("mcts_orm", mcts.get("orm"))) if not means]
    check(not missing, f"--logs_dir {args.logs_dir}: no COMPLETED {' / '.join(missing)} log of the measurement "
                       f"(MCTS at max_children {MAX_CHILDREN}; docs/scorer_lab.md, \"Compute-matched sweep\"); the "
                       "plan needs SBS and both MCTS rows")
    print("SBS agent samples per question: " + ", ".join(f"{b1}x{b2} {v:.2f}" for (b1, b2), v in sorted(sbs.items())))
    for row, means in sorted(mcts.items()):
        print(f"MCTS ({row}) agent samples per question: " + ", ".join(f"{n} {v:.2f}" for n, v in sorted(means.items())))
    print("\n".join(plan_lines(sweep_plan(sbs, mcts))))
    return 0


if __name__ == "__main__":
    run_cli(main)
