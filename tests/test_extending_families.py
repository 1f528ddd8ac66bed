"""Adding a search family is one file (its search) and one row (its record), and a method on it one row more:
the runner, the manifest's facts and stage 5's budget read the record. Registries are restored afterwards."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import FakePolicy
from helpers_eval_world import FakeScorer, make_ctx, prefers_good, run_method, scripted_solver
from masprm.eval.aggregate import condition_of
from masprm.eval.methods import FAMILIES, METHODS, SearchFamily, method_facts, register_family, register_scored_method
from masprm.search.context import SearchResult
from masprm.search.samples import sample_passes
from masprm.search.scorer_kinds import SCORER_KINDS
from masprm.search.settings import BoNSettings, ViewSettings


# --------------------------------------------------------------------------- the one file: the search


def worst_of_n(ctx, example, kind):
    """N passes ranked by the value of their finished transcript, worst first (a family no method has)."""
    runs = yield from sample_passes(ctx, example, ctx.settings.bon_n)
    values = yield from SCORER_KINDS[kind].steps(ctx, [replace(b, trail=b.trail[-1:]) for b in runs])
    answers = [b.state.final_answer() for b in runs]
    order = sorted(range(len(runs)), key=lambda i: (values[i][-1], i))
    return SearchResult(answers[order[0]], [answers[i] for i in order])


@pytest.fixture
def worst_family():
    """The one row of the family and the one row of a method on it; both removed afterwards."""
    register_family(SearchFamily("worst", worst_of_n, ("bon_n",), "N={bon_n}"))
    register_scored_method("worst_prm", "worst", "masprm", (BoNSettings, ViewSettings))
    yield
    METHODS.unregister("worst_prm")
    FAMILIES.unregister("worst")


def test_a_family_is_one_file_and_one_row(worst_family):
    # passes: "bad" -> Answer: 5 (scored -0.9), "good plan" -> Answer: 7 (0.9); worst first, then by pass
    pattern = ["good plan", "bad", "good plan"]
    ctx = make_ctx("worst_prm", FakePolicy(scripted_solver(pattern)), masprm=FakeScorer(prefers_good), bon_n=3)
    result = run_method("worst_prm", ctx)
    assert result.prediction == "Answer: 5" and result.candidates == ["Answer: 5", "Answer: 7", "Answer: 7"]
    assert ctx.usage.scorer_calls == 3                   # one finished transcript each
    # the manifest's facts and stage 5's budget come from the record, not from the method's name
    facts = method_facts("worst_prm", ("masprm",))
    assert facts == {"family": "worst", "scorer_kind": "masprm", "routing": "static", "scorer_roles": ["masprm"],
                     "budget_keys": ["bon_n"]}
    manifest = {"condition": "worst_prm", "facts": facts,
                "definition": {"method": "worst_prm", "settings": {"bon_n": 3, "step_agg": "min"}}}
    plotted = condition_of("Worst-of-N", manifest, None)
    assert (plotted.method, plotted.budget, plotted.settings) == ("worst_prm", "N=3", {"step_agg": "min"})


def test_the_registries_are_as_before_once_the_test_is_done():
    assert "worst" not in FAMILIES and "worst_prm" not in METHODS
    assert FAMILIES.names() == ["bon", "mcts", "sbs", "voter"]
