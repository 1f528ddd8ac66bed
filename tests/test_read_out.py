"""The scorers' read-out: a BCE-trained logit is served as tanh(z / 2) = 2 sigmoid(z) - 1, a Bradley-Terry one as tanh(z)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from masprm.errors import ModelError
from masprm.models.scorer import HFScorer
from masprm.scorer_meta import logit_scale, read_out_of

SEP_ID = 9


def served(scale: float, logit: float) -> float:
    scorer = HFScorer(model=None, encoder=SimpleNamespace(sep_id=SEP_ID), separator="</step>", pad_id=0, scale=scale)
    # one row "5 <sep>": the value is read at the separator (position 1)
    return scorer.row_values(torch.tensor([[0.0, logit]]), [[5, SEP_ID]])[0]


def test_a_trained_probability_of_0_8_is_served_as_0_6():
    z = math.log(4)   # sigmoid(ln 4) = 4 / 5 = 0.8
    # tanh(z / 2) = 2 * 0.8 - 1 = 0.6; the original's tanh(z) = (4 - 1/4) / (4 + 1/4) = 15 / 17 = 0.882
    assert served(0.5, z) == pytest.approx(0.6, abs=1e-6)
    assert served(1.0, z) == pytest.approx(15 / 17, abs=1e-6)


@pytest.mark.parametrize("meta, read_out", [
    ({"objective": "prm", "read_out": "sigmoid"}, "sigmoid"),
    ({"objective": "ppm", "read_out": "tanh"}, "tanh"),
    # folders written before the read-out was recorded: by objective and loss
    ({"objective": "prm"}, "sigmoid"),
    ({"mode": "orm", "settings": {"loss": "bce"}}, "sigmoid"),
    ({"objective": "prm", "settings": {"loss": "mse"}}, "tanh"),   # regressed as atanh(v): tanh is right
    ({"objective": "ppm"}, "tanh"),
    ({"objective": "traj"}, "tanh"),
    ({}, "tanh"),                                                  # a folder trained elsewhere: the original's
])
def test_the_read_out_of_a_scorer_folder(meta, read_out):
    assert read_out_of(meta) == read_out
    assert logit_scale(meta) == {"sigmoid": 0.5, "tanh": 1.0}[read_out]


def test_an_unknown_recorded_read_out_is_refused():
    with pytest.raises(ModelError, match="read_out 'softplus' is not one of tanh, sigmoid"):
        read_out_of({"objective": "prm", "read_out": "softplus"})
