"""Generation backends: what runs the policy behind `masprm.interfaces.Policy`, chosen by `--backend`.

    BACKENDS["hf"]     the project's own decoding loop on a Hugging Face model (`masprm.models.policy`)
    BACKENDS["vllm"]   a vLLM engine (`masprm.models.vllm_policy`), in its own environment (docs/backends.md)

A backend is one module and one row here. The row names two functions of its
module ("module:function", imported on use), both called with the model id,
the loading options (`ModelOptions`) and these flags (`BackendFlags`):

    load(model_id, options, flags, *, setting, max_batch_tokens)   the policy
    check(model_id, options, flags, setting)   optional: refuse what the backend cannot serve, in one
                                               line, before anything loads (no model library imported)

Search code never sees a backend: stages 1 and 4 and the step benchmark call
`load_policy`, and the name joins stage 1's `.run_settings` and stage 4's
fingerprint (`identity`) only when it is not the default, so runs made before
backends existed keep their folders and fingerprints. Pure Python: no torch import.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, fields
from typing import Any

from masprm.config import arg, require, require_each
from masprm.registry import Registry

DEFAULT_BACKEND = "hf"


@dataclass(frozen=True)
class Backend:
    """A generation backend: its loader and check ("module:function") and the engine flags it reads."""

    name: str
    load: str                              # "masprm.models.policy:load": imported only when the backend is used
    check: str | None = None               # its refusals before loading (None: the stage's own checks suffice)
    engine_options: tuple[str, ...] = ()   # the `BackendFlags` fields it reads; any other given is refused
    help: str = ""


def _function(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


BACKENDS: Registry[Backend] = Registry("generation backend")


def register_backend(backend: Backend) -> Backend:
    return BACKENDS.register(backend.name, backend)


ENGINE_OPTIONS = ("gpu_memory_utilization", "max_model_len", "tensor_parallel_size", "enforce_eager",
                  "no_prefix_caching")

register_backend(Backend("hf", "masprm.models.policy:load",
                         help="the project's own decoding loop on a Hugging Face model (any device)"))
register_backend(Backend("vllm", "masprm.models.vllm_policy:load", "masprm.models.vllm_policy:check",
                         ENGINE_OPTIONS, help="a vLLM engine with prefix caching (its own environment: make setup-vllm)"))


@dataclass(frozen=True)
class BackendFlags:
    """Which backend generates, and the engine options of backends that run an engine (vLLM's names)."""

    backend: str = arg(DEFAULT_BACKEND, flags=("--backend",),
                       help="generation backend: hf (default: the project's own loop on a Hugging Face model) "
                            "or vllm (a vLLM engine in its own environment, docs/backends.md)")
    gpu_memory_utilization: float | None = arg(
        None, flags=("--gpu_memory_utilization",),
        help="vllm: the share of GPU memory the engine may take (default: 0.9, times the Ray actor's GPU share "
             "on Ray)")
    max_model_len: int | None = arg(None, flags=("--max_model_len",),
                                    help="vllm: the longest prompt + completion in tokens (default: the model's)")
    tensor_parallel_size: int = arg(1, flags=("--tensor_parallel_size",),
                                    help="vllm: GPUs one engine spans (default: 1)")
    enforce_eager: bool = arg(False, flags=("--enforce_eager",),
                              help="vllm: no compilation and no CUDA graphs (starts faster, runs slower)")
    no_prefix_caching: bool = arg(False, flags=("--no_prefix_caching",),
                                  help="vllm: turn off automatic prefix caching (on by default: tree search "
                                       "resends the question and earlier messages)")

    def __post_init__(self) -> None:
        chosen = BACKENDS[self.backend]   # an unknown name lists the valid ones
        require_each(self, ("max_model_len", "tensor_parallel_size"), lambda v: v >= 1, "must be at least 1")
        require_each(self, ("gpu_memory_utilization",), lambda v: 0 < v <= 1, "must be in (0, 1]")
        for f in fields(self):
            if f.name in ENGINE_OPTIONS and f.name not in chosen.engine_options:
                require(getattr(self, f.name) == f.default, f.name,
                        f"{f.name} is an engine option the {self.backend} backend does not take "
                        f"(it is vllm's: add `backend` vllm)")


def backend_sources() -> list[str]:
    """The package files (relative to src/masprm) of every registered backend's functions: the registry
    names them by string, so no import finds them, yet they are on every evaluation's code path."""
    modules = {target.partition(":")[0] for b in BACKENDS.values() for target in (b.load, b.check) if target}
    return sorted(m.removeprefix("masprm.").replace(".", "/") + ".py" for m in modules if m.startswith("masprm."))


def identity(flags: BackendFlags | None) -> dict:
    """What a run records of its backend: nothing for the default (runs made before backends keep their
    fingerprints), else its name. Engine options are left out: they change speed and memory, not samples."""
    if flags is None or flags.backend == DEFAULT_BACKEND:
        return {}
    return {"backend": flags.backend}


def check_backend(flags: BackendFlags | None, model_id: str, options: Any, setting: str = "model_id") -> None:
    """The backend's own refusals (a combination it cannot serve), before anything loads."""
    flags = flags or BackendFlags()
    check = BACKENDS[flags.backend].check
    if check is not None:
        _function(check)(model_id, options, flags, setting)


class CheckedPolicy:
    """A backend's policy as every caller gets it: no NaN or inf log-prob leaves it, whichever backend
    computed it (one ``ModelOutputError`` naming the setting, as a scorer's NaN is). Checked here, once,
    so a new backend cannot forget it; everything else is the backend's own (attributes pass through)."""

    def __init__(self, policy: Any, setting: str, model_id: str):
        self.policy, self.setting, self.model_id = policy, setting, model_id

    def reseed(self, seed: int) -> None:
        self.policy.reseed(seed)

    def sample(self, prompts, n, **kwargs):
        return self.policy.sample(prompts, n, **kwargs)

    def logprob(self, requests):
        from masprm.models.model_checks import check_finite_outputs

        results = self.policy.logprob(requests)
        check_finite_outputs((r.logprob for r in results), self.setting, self.model_id,
                             "a completion's log-probability")
        return results

    def __getattr__(self, name: str) -> Any:   # the backend's own attributes (its model, tokenizer, engine)
        if name == "policy":   # not yet set (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.policy, name)


def load_policy(flags: BackendFlags | None, model_id: str, options: Any, setting: str = "model_id",
                max_batch_tokens: int | None = None) -> CheckedPolicy:
    """The policy ``flags`` names on ``model_id`` (``options``: `masprm.models.loading.ModelOptions`),
    its outputs checked (``CheckedPolicy``)."""
    flags = flags or BackendFlags()
    policy = _function(BACKENDS[flags.backend].load)(model_id, options, flags, setting=setting,
                                                      max_batch_tokens=max_batch_tokens)
    return CheckedPolicy(policy, setting, model_id)
