"""Adding a label scheme is one registration: its flags join the command line and --labels writes its file."""

from __future__ import annotations

import json
from dataclasses import dataclass

from masprm.config import arg
from masprm.labels import LABEL_SCHEMES, LabelScheme
from masprm.labels.scheme import LabelContext, step_records
from masprm.stages import preprocess as preprocess_data
from masprm.tree_schema import TreeStep, Tree

from helpers_trees import gsm8k_tree, write_trees


# --------------------------------------------------------------------------- the one place it is added


@dataclass
class OutcomeSettings:
    outcome_scale: float = arg(1.0, help="outcome: the label's size (default 1)")


def outcome_records(tree: Tree, ctx: LabelContext) -> list[dict]:
    """Every step labelled with its path's final outcome, times --outcome-scale."""
    def label(root: TreeStep, path: list[TreeStep]) -> list[float]:
        ctx.notes["paths"] += 1
        return [ctx.settings.outcome_scale * path[-1].value] * len(path)

    return step_records(tree, ctx, label)


if "outcome" not in LABEL_SCHEMES:
    LABEL_SCHEMES.register("outcome", LabelScheme("outcome", "steps", outcome_records, settings=OutcomeSettings,
                                                  source="a test: the final outcome on every step"))


# --------------------------------------------------------------------------- through the CLI


def test_a_new_scheme_is_one_registration_and_runs_through_the_cli(tmp_path, capsys):
    run = tmp_path / "results" / "gsm8k_res_x"
    write_trees(run, [gsm8k_tree()])
    preprocess_data.main(["--input", str(run), "--labels", "outcome", "--outcome-scale", "0.5"])
    recs = [json.loads(line) for line in (tmp_path / "results" / "labels_outcome_gsm8k_res_x.jsonl").open()]
    assert [r["labels"] for r in recs] == [[0.5] * 4, [-0.5] * 4, [-0.5] * 4]
    assert {r["meta"]["label_scheme"] for r in recs} == {"outcome"}
    out = capsys.readouterr().out
    assert "[preprocess][labels outcome] files=1 trees=1" in out and "| paths=3 |" in out
