"""--mode pqm: PQM's comparative ranking loss, its gradient by hand, and a trained pqm scorer."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from masprm.train.objectives import MODES, OBJECTIVES
from masprm.train.qvalue_ranking import first_errors, pqm_loss, ranking_accuracy

from helpers_training import train_tiny

LN2, LN3 = math.log(2.0), math.log(3.0)


def loss_and_grad(q, labels, margin, mask=None):
    q = torch.tensor(q, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor(labels, dtype=torch.float64)
    mask = torch.ones_like(labels, dtype=torch.bool) if mask is None else torch.tensor(mask)
    loss = pqm_loss(q, labels, mask, margin)
    loss.backward()
    return loss.item(), q.grad.tolist()


def test_pqm_loss_and_gradient_on_a_three_step_transcript_by_hand():
    # Q = (ln 2, ln 3, 0), the third step is the first error, margin ζ = ln 2; c_0 is the question (Q 0, e^Q = 1)
    # e^Q of c_1, c_2: 2, 3; e^{Q_w + ζ} = 2. Denominators D_0 = 1 + 2 = 3, D_1 = 1 + 2 + 2 = 5, D_2 = 1 + 2 + 3 + 2 = 8
    # L = (log(3/1) + log(5/2) + log(8/3)) / 3 = log(20) / 3
    loss, grad = loss_and_grad([[LN2, LN3, 0.0]], [[1.0, 1.0, -1.0]], LN2)
    assert loss == pytest.approx(math.log(20.0) / 3, rel=1e-12)
    # dL/dQ_j = (Σ_t [j in D_t] e^{Q_j(+ζ)} / D_t - [j = c_t]) / 3
    # c_1: (2/5 - 1) + 2/8;  c_2: 3/8 - 1;  w: 2/3 + 2/5 + 2/8
    assert grad[0] == pytest.approx([(-1 + 2 / 5 + 2 / 8) / 3, (3 / 8 - 1) / 3, (2 / 3 + 2 / 5 + 2 / 8) / 3],
                                    rel=1e-12)
    assert grad[0] == pytest.approx([-7 / 60, -5 / 24, 79 / 180], rel=1e-12)


def test_pqm_rows_without_an_error_or_starting_with_one():
    # no error: the t = 0 term is left out; t = 1: -log(2/(1+2)), t = 2: -log(3/(1+2+3)); mean of the two
    loss, grad = loss_and_grad([[LN2, LN3]], [[1.0, 1.0]], 4.0)
    assert loss == pytest.approx((math.log(3 / 2) + math.log(2)) / 2, rel=1e-12)
    assert grad[0] == pytest.approx([(2 / 3 - 1 + 2 / 6) / 2, (3 / 6 - 1) / 2], rel=1e-12)
    # the first step wrong (and the one after it): only t = 0, -log(1 / (1 + e^{0+ζ} + e^{ln2+ζ})), ζ = ln 3
    loss, grad = loss_and_grad([[0.0, LN2]], [[-1.0, 1.0]], LN3)
    assert loss == pytest.approx(math.log(1 + 3 + 6), rel=1e-12)
    assert grad[0] == pytest.approx([3 / 10, 6 / 10], rel=1e-12)   # every step from the first error on is wrong


def test_pqm_batch_is_the_mean_over_rows_and_padding_changes_nothing():
    one, _ = loss_and_grad([[LN2, LN3, 0.0]], [[1.0, 1.0, -1.0]], LN2)
    two, _ = loss_and_grad([[LN2, LN3]], [[1.0, 1.0]], LN2)
    both, grad = loss_and_grad([[LN2, LN3, 0.0], [LN2, LN3, 9.0]], [[1.0, 1.0, -1.0], [1.0, 1.0, -1.0]], LN2,
                               mask=[[True, True, True], [True, True, False]])
    assert both == pytest.approx((one + two) / 2, rel=1e-12)
    assert grad[1][2] == 0.0 and all(math.isfinite(g) for row in grad for g in row)


def test_the_margin_only_raises_the_loss_where_there_are_wrong_steps():
    lo, _ = loss_and_grad([[1.0, -1.0]], [[1.0, -1.0]], 0.0)
    hi, _ = loss_and_grad([[1.0, -1.0]], [[1.0, -1.0]], 4.0)
    assert hi > lo
    assert loss_and_grad([[1.0, 2.0]], [[1.0, 1.0]], 0.0)[0] == loss_and_grad([[1.0, 2.0]], [[1.0, 1.0]], 4.0)[0]


def test_first_errors_and_ranking_accuracy():
    labels = torch.tensor([[1.0, -1.0, 1.0], [1.0, 1.0, 1.0], [-0.5, 1.0, 0.0]])
    assert first_errors(labels, torch.ones_like(labels, dtype=torch.bool)).tolist() == [1, 3, 0]
    pad = -100.0
    q = np.array([[2.0, 1.0, 3.0], [0.5, 0.7, pad], [1.0, 2.0, 3.0]])
    y = np.array([[1.0, -1.0, 1.0], [1.0, 1.0, pad], [-1.0, 1.0, 1.0]])
    # row 1: correct {2.0} vs wrong {1.0, 3.0}: 1 of 2 in order; row 2: no wrong step; row 3: no correct step
    assert ranking_accuracy(q, y) == {"ranking_accuracy": 0.5, "ranked_pairs": 2.0}


def test_pqm_is_a_registered_mode_with_its_margin_flag():
    from masprm.errors import ConfigError
    from masprm.train.config import TrainConfig

    assert "pqm" in MODES and OBJECTIVES["pqm"].records == "steps"
    assert OBJECTIVES["pqm"].meta(TrainConfig(mode="pqm", pqm_margin=2.0)) == {"pqm_margin": 2.0}
    with pytest.raises(ConfigError, match="pqm_margin"):
        TrainConfig(mode="pqm", pqm_margin=-1.0).validate()


@pytest.mark.slow
def test_a_pqm_scorer_trains_and_records_its_margin(tmp_path, tiny_model_dir):
    from masprm.models.scorer import load_scorer

    result = train_tiny(tmp_path, tiny_model_dir, "pqm", 5, scheme="first_error", pqm_margin=2.0)
    meta = json.loads((result.output_dir / "masprm_scorer.json").read_text())
    assert (meta["objective"], meta["label_scheme"], meta["pqm_margin"]) == ("pqm", "first_error", 2.0)
    values = load_scorer(result.output_dir).score_batch(["Q: 1 plus 2? 1 + 2.<step>"])
    assert len(values) == 1 and -1.0 <= values[0] <= 1.0
