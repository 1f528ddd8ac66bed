"""An objective's facts are spelt once (masprm.objective_facts) and every reader follows them."""

import pytest

from masprm.objective_facts import OBJECTIVE_FACTS, ObjectiveFacts, objective_modes, register_objective
from masprm.roles import ROLES
from masprm.scorer_meta import CAUSAL_LM_OBJECTIVES
from masprm.lab.estimate import job_seconds, world_seconds
from masprm.lab.job import Job
from masprm.lab.rows import LabScorer
from masprm.train.config import CALIBRATED_MODES
from masprm.train.objectives import MODES, OBJECTIVES

DEEP = world_seconds("toy_deep")   # the deep world's measured seconds (masprm/worlds/toy_deep/costs.yaml)


def test_the_modes_keep_their_help_order():
    assert MODES == ("ppm", "prm", "orm", "traj", "pqm", "implicit", "gorm", "gprm", "ensemble", "biprm")


def test_every_reader_derives_from_the_facts():
    assert CALIBRATED_MODES == ("ppm", "prm", "orm")
    assert CAUSAL_LM_OBJECTIVES == ("implicit", "gorm", "gprm")
    assert "orm" not in ROLES["masprm"].modes and set(ROLES["masprm"].modes) == set(MODES) - {"orm"}
    outcome = {m for m in MODES if LabScorer("mc", m).outcome_only}
    assert outcome == {"orm", "traj", "implicit", "gorm", "biprm"}
    assert [m for m in MODES if LabScorer("mc", m).finished_only] == ["biprm"]


@pytest.mark.parametrize("mode", MODES)
def test_calibratable_means_the_recipe_can_fit_platt(mode):
    # the config refuses --calibrate from the facts before training; the recipe is what fits: they must agree
    assert OBJECTIVE_FACTS[mode].calibratable == (OBJECTIVES[mode].calibration_pairs is not None)


def test_a_causal_lm_row_is_priced_at_its_kind_factor():
    # DEEP: an MCTS condition of one seed is 273 s; a causal-LM scorer's searches cost 852.5 / 369 times it
    def seconds(row):
        job = Job(f"eval_{row}", "eval", list, objective=row.split("-")[1], seeds=(14,), methods=("mcts_prm",),
                  logs="l")
        return job_seconds(job, "demo_logs", DEEP)
    assert seconds("mc-prm") == pytest.approx(273.0)
    assert seconds("mc-gprm") == pytest.approx(273.0 * 852.5 / 369.0)


def test_a_new_objective_is_one_record():
    try:
        register_objective(ObjectiveFacts("toyobj", "masprm.train.stepwise:STEPWISE", outcome_only=True))
        assert objective_modes()[-1] == "toyobj" and "toyobj" in objective_modes(outcome_only=True)
        assert LabScorer("mc", "toyobj").outcome_only
    finally:
        OBJECTIVE_FACTS.unregister("toyobj")
    assert "toyobj" not in objective_modes()
