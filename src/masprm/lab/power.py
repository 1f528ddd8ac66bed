"""`python -m masprm.lab.power`: the variance components that size toy_deep's test split, from the dev pilot.

    python -m masprm.lab.power --logs_dir logs/toy_deep_pilot --out results/toy_deep_power.json

The dev pilot (`make lab-pilot WORLD=toy_deep`, `masprm.lab.pilot`) searched the dev questions
with the MASPRM (mcts_prm) and the ORM (mcts_orm) of each training seed. Per training seed s (the seed the
scorer recorded, ``settings.seed`` of its masprm_scorer.json) and dev question q:

    d[s][q] = pass@1 of the MASPRM's mcts_prm − that of the ORM's mcts_orm, each the mean over the search seeds
    sd_q    = the sample standard deviation over questions of mean_s d[s][q]
    tau2    = max(0, var_s(m_s) − mean_s(var_q(d[s][q])) / n),  m_s = mean_q d[s][q]

(sample variances; n common questions; tau2: the spread of the training seeds' mean differences beyond what
their questions' noise gives). `masprm.worlds.toy_deep.data.power_plan` turns (sd_q, tau2) into the test split's
size and its MDE. Only these variance quantities are printed and written, never a mean difference: the
pilot sizes the test split and cannot steer anything else. Pure Python.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from masprm.checks import check_output_file
from masprm.cli import ArgumentParser, check, run_cli
from masprm.config import add_config_args, arg, config_from_args
from masprm.errors import DataError
from masprm.io import atomic_write_json
from masprm.paths import PathText, check_input_dir
from masprm.scorer_meta import read_scorer_meta
from masprm.worlds.toy_deep.data import CAP, FLOOR, LAB_SEEDS, TARGET_MDE, power_plan
from masprm.lab.cells import read_placed
from masprm.lab.claims import question_values

ROLES = {"mcts_prm": "masprm", "mcts_orm": "orm"}   # the primary comparison's conditions, by their scorer role


def dev_power(diffs: Sequence[Mapping[str, float]]) -> tuple[float, float]:
    """(sd_q, tau2) of per-seed, per-question differences (`diffs[s][q]`), on the questions every seed has."""
    common = sorted(set.intersection(*(set(d) for d in diffs))) if diffs else []
    if len(diffs) < 2 or len(common) < 2:
        raise DataError(f"the power rule needs at least 2 training seeds and 2 common questions, got {len(diffs)} "
                        f"seeds and {len(common)} questions")
    rows = [[d[q] for q in common] for d in diffs]
    sd_q = statistics.stdev(statistics.fmean(column) for column in zip(*rows))
    noise = statistics.fmean(statistics.variance(row) for row in rows) / len(common)
    return sd_q, max(0.0, statistics.variance(statistics.fmean(row) for row in rows) - noise)


def training_seed(folder: str) -> int:
    """The seed a scorer folder was trained with (its masprm_scorer.json, ``settings.seed``)."""
    seed = (read_scorer_meta(folder).get("settings") or {}).get("seed")
    if not isinstance(seed, int):
        raise DataError(f"{folder}: its masprm_scorer.json records no training seed (settings.seed); the pilot's "
                        "conditions are paired by their scorers' training seed")
    return seed


def place(manifest: dict) -> tuple[str, int] | None:
    """(condition, training seed) of a pilot log on the dev split; None for any other condition."""
    definition = manifest.get("definition") or {}
    role = ROLES.get(manifest.get("condition") or "")
    if role is None or (definition.get("data") or {}).get("split") != "dev" or \
            (definition.get("settings") or {}).get("orm_leaf"):
        return None
    return manifest["condition"], training_seed(definition["models"][role]["id"])


def pilot_differences(logs_dir: str | Path) -> dict[int, dict[str, float]]:
    """Per training seed with both conditions, d[s][q] (pass@1 per question, mean over the search seeds)."""
    cells = read_placed([logs_dir], place)
    seeds = sorted({seed for _, seed in cells if ("mcts_prm", seed) in cells and ("mcts_orm", seed) in cells})
    found = {}
    for seed in seeds:
        a, b = question_values(cells[("mcts_prm", seed)]), question_values(cells[("mcts_orm", seed)])
        found[seed] = {q: a[q] - b[q] for q in a.keys() & b.keys()}
    return found


def power_record(diffs: Mapping[int, Mapping[str, float]]) -> dict:
    """What the pilot fixes: the variance components, the test split's size and its MDE (no mean difference)."""
    sd_q, tau2 = dev_power(list(diffs.values()))
    plan = power_plan(sd_q, tau2)
    return {"sd_q": sd_q, "tau2": tau2, "training_seeds": sorted(diffs),
            "dev_questions": len(set.intersection(*(set(d) for d in diffs.values()))), "lab_seeds": LAB_SEEDS,
            "target_mde": TARGET_MDE, "floor": FLOOR, "cap": CAP, "test_questions": plan.n, "mde": plan.mde,
            "reached": plan.reached}


def summary(record: dict) -> str:
    lines = [f"sd_q {record['sd_q']:.4f}, tau2 {record['tau2']:.6f} ({len(record['training_seeds'])} training seeds "
             f"{' '.join(map(str, record['training_seeds']))}, {record['dev_questions']} dev questions)",
             f"test questions N = {record['test_questions']}: MDE at 80% power {100 * record['mde']:.2f} points "
             f"with {record['lab_seeds']} training seeds"]
    if not record["reached"]:
        lines.append(f"no N up to the cap {record['cap']} reaches an MDE of {100 * record['target_mde']:.1f} points; "
                     f"the cap achieves {100 * record['mde']:.2f}")
    lines.append(f"DEV_POWER = ({record['sd_q']!r}, {record['tau2']!r})   # masprm/worlds/toy_deep/data.py")
    return "\n".join(lines)


@dataclass(frozen=True)
class PowerArgs:
    logs_dir: PathText = arg("logs/toy_deep_pilot", flags=("--logs_dir",),
                             help="the dev pilot's stage-4 logs (default logs/toy_deep_pilot)")
    out: PathText = arg("results/toy_deep_power.json", help="the JSON record to write")


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description="The variance components of toy_deep's primary comparison on dev, and the "
                                   "test split's size they give (no mean difference is shown).")
    add_config_args(p, PowerArgs)
    args = config_from_args(PowerArgs, p.parse_args(argv))
    check_input_dir(args.logs_dir, "logs_dir")
    check_output_file(args.out, "out", inputs={"logs_dir": args.logs_dir})
    diffs = pilot_differences(args.logs_dir)
    check(len(diffs) >= 2, f"--logs_dir {args.logs_dir}: COMPLETED mcts_prm and mcts_orm on the dev split for "
                           f"{len(diffs)} training seed(s); the power rule needs at least 2")
    record = power_record(diffs)
    atomic_write_json(args.out, record)
    print(f"{summary(record)}\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    run_cli(main)
