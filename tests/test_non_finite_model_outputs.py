"""No non-finite number leaves a model: a scorer, a policy or any backend giving NaN or inf stops in one
error naming the flag that chose the model."""

from __future__ import annotations

import pytest


class _NanModel:
    """A token-classification model whose every logit is NaN (weights that overflowed)."""

    def __init__(self, value=float("nan")):
        import torch

        self.value, self.weight = value, torch.zeros(1)

    def parameters(self):
        return iter([self.weight])

    def __call__(self, input_ids, attention_mask):
        import types

        import torch

        return types.SimpleNamespace(logits=torch.full((*input_ids.shape, 1), self.value))


class _Encoder:
    sep_id, tokenizer = 5, None

    def encode(self, texts):
        return [[1, 2, 5] for _ in texts]


@pytest.mark.parametrize("kind", ["HFScorer", "TrajScorer"])
def test_a_scorer_giving_nan_stops_the_condition_in_one_error_naming_its_flag(tmp_path, kind):
    from test_eval_runner import World

    from masprm.errors import ModelOutputError
    from masprm.eval.logs import log_status
    from masprm.models import scorer as scorers

    world = World()
    world.prm = getattr(scorers, kind)(_NanModel(), _Encoder(), "\n", pad_id=0, setting="prm_dir", source="fake-prm")
    with pytest.raises(ModelOutputError) as caught:
        world.run(tmp_path, ["sbs_prm"])
    assert str(caught.value) == ("prm_dir fake-prm: the model gave nan as a value (not a finite number); its weights "
                                 "or its precision are broken") and caught.value.setting == "prm_dir"
    assert all(log_status(p) != "COMPLETED" for p in tmp_path.glob("*.txt"))   # never a finished condition


def test_a_policy_giving_nan_logits_raises_naming_its_flag(tiny_model_dir):
    import torch

    from masprm.errors import ModelOutputError
    from masprm.models.backends import load_policy
    from masprm.models.options import ModelOptions

    policy = load_policy(None, str(tiny_model_dir), ModelOptions(device_map="cpu"), setting="gen_model_id")
    with torch.no_grad():
        policy.model.get_output_embeddings().weight.fill_(float("nan"))
    messages = [{"role": "user", "content": "What is 3 + 4?"}]
    with pytest.raises(ModelOutputError, match=rf"^gen_model_id {tiny_model_dir}: the model gave nan as logits "
                                               r"\(new token 1\) \(not a finite number\)"):
        policy.sample([messages], 2, temperature=0.7, max_new_tokens=4)
    with pytest.raises(ModelOutputError, match=r"the model gave nan as a completion's log-probability"):
        policy.logprob([(messages, "7")])


def _nan_backend(model_id, options, flags, *, setting="model_id", max_batch_tokens=None):
    """A backend's loader whose policy samples fine and gives one non-finite log-prob per call (as an
    engine on a broken model would): the value after the model id, 'nan', 'inf' or '-inf'."""
    from conftest import FakePolicy

    from masprm.interfaces import LogProb

    class Broken(FakePolicy):
        def logprob(self, requests):
            return [LogProb(-1.5, 3, 2)] + [LogProb(float(model_id.rsplit("/", 1)[1]), 3, 2)
                                             for _ in requests[1:]]

    policy = Broken(lambda messages, k, rng: "Answer: 7")
    policy.engine = "the backend's own"
    return policy


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_non_finite_log_prob_from_any_backend_is_the_same_model_output_error(value):
    """The check sits in the shared policy layer (load_policy), not in a backend: a backend that has none
    (a fake one here, as vLLM's engine has none) still never lets a NaN or inf out."""
    from masprm.errors import ModelOutputError
    from masprm.models.backends import BACKENDS, Backend, BackendFlags, load_policy, register_backend
    from masprm.models.options import ModelOptions

    register_backend(Backend("nan_engine", f"{__name__}:_nan_backend", help="a broken engine"))
    try:
        policy = load_policy(BackendFlags(backend="nan_engine"), f"broken/{value}", ModelOptions(),
                             setting="gen_model_id")
    finally:
        BACKENDS.unregister("nan_engine")
    messages = [{"role": "user", "content": "What is 3 + 4?"}]
    assert policy.sample([messages], 2, temperature=0.7, top_p=1.0, max_new_tokens=4)[0][0].text == "Answer: 7"
    assert policy.engine == "the backend's own"   # the backend's attributes pass through
    assert policy.logprob([(messages, "7")])[0].logprob == -1.5   # finite: returned as the backend gave it
    with pytest.raises(ModelOutputError) as caught:
        policy.logprob([(messages, "7"), (messages, "8")])
    assert str(caught.value) == (f"gen_model_id broken/{value}: the model gave {value} as a completion's "
                                 "log-probability (not a finite number); its weights or its precision are broken")
    assert caught.value.setting == "gen_model_id"
