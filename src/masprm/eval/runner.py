"""The per-condition evaluation loop: plan, skip/resume, run on workers, write logs.

A condition is one method under the run's settings. For each condition the
runner names its log files (`masprm.eval.logs`), skips it when its log says
COMPLETED, and otherwise resumes from the records it already has. The
examples of every pending condition go to `masprm.parallel.map_examples` as
one stream of (condition, example) items, so each worker loads a model once
and keeps it for every condition of the run (only the models a condition
needs are loaded, on first use). Each example is seeded with `seed + idx`
before decoding, so the records do not depend on the number of workers.
"""

from __future__ import annotations

import gc
import os
import random
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from functools import partial
from itertools import groupby
from typing import Any, Callable, Iterator, Sequence

from masprm.answer_checkers import ANSWER_CHECKERS, DEFAULT_CHECKER, checker_record
from masprm.cluster import local_folders
from masprm.errors import MasprmError, ModelOutputError, OutputError
from masprm.eval.naming import condition_label
from masprm.eval.lab_jobs import append_ask, with_ask
from masprm.eval.paired_conditions import Comparison, finisher
from masprm.eval.pool_metrics import with_pool_verdicts
from masprm.eval.settings import EvalSettings
from masprm.eval.logs import (LogFiles, PartialLog, code_version, is_completed, log_every, manifest_hash_of,
                              path_identity, progress_line, read_records, render_log, resumable_records, stable_hash,
                              start_line, write_condition)
from masprm.eval.methods import METHODS, method_facts
from masprm.eval.metrics import USAGE_KEYS, pass_at_k_hits, pass_candidates, summarize_records
from masprm.graph import MASGraph
from masprm.io import read_json
from masprm.models.backends import identity as backend_identity, load_policy
from masprm.scorer_folder import ScorerFolder, read_scorer_folder
from masprm.scorer_formats import scorer_identity
from masprm.parallel import describe_error, map_examples
from masprm.search.context import SearchContext
from masprm.search.engine import LoadedModels, RequestKeys, run_batched
from masprm.search.samples import SampleStore

# --------------------------------------------------------------------------- models


@dataclass(frozen=True)
class ModelSpec:
    model_type: str                   # "policy" or "scorer" (MODEL_LOADERS)
    model_id: str                     # hub id / model folder, or the scorer's adapter folder
    base_model_id: str | None = None  # a scorer's base model (None: from its adapter config)
    options: Any = None               # masprm.models.loading.ModelOptions
    max_length: int | None = None     # a scorer's token limit (None: its training --max-length)
    setting: str | None = None        # the setting that named it, for error messages (default by model type)
    max_batch_tokens: int | None = None  # a policy's cap on the padded tokens of one call (None: its default)
    scorer: ScorerFolder | None = None   # a scorer folder as stage 4 read it (None: read when needed)
    backend: Any = None               # a policy's backend (masprm.models.backends.BackendFlags; None: hf)


def _load_scorer(spec: ModelSpec) -> Any:
    from masprm.models.scorer import load_scorer   # imports torch
    return load_scorer(spec.model_id, spec.base_model_id, spec.options, max_length=spec.max_length,
                       setting=spec.setting or "prm_dir", record=spec.scorer)


MODEL_LOADERS: dict[str, Callable[[ModelSpec], Any]] = {   # the policy by its generation backend (models.backends)
    "policy": lambda s: load_policy(s.backend, s.model_id, s.options, s.setting or "gen_model_id", s.max_batch_tokens),
    "scorer": _load_scorer}
_LOADED: dict[tuple, Any] = {}   # this process's models, kept while a condition needs them


def _model_key(spec: ModelSpec) -> tuple:
    return (spec.model_type, spec.model_id, spec.base_model_id, repr(spec.options), spec.max_length,
            spec.max_batch_tokens, repr(spec.backend), spec.scorer and repr(scorer_identity(spec.scorer)))


def load_model(spec: ModelSpec) -> Any:
    key = _model_key(spec)
    if key not in _LOADED:
        _LOADED[key] = MODEL_LOADERS[spec.model_type](spec)
    return _LOADED[key]


def release_model(spec: ModelSpec) -> None:
    """Drop this process's copy of a model and give its (GPU) memory back."""
    if _LOADED.pop(_model_key(spec), None) is None:
        return
    gc.collect()
    torch = sys.modules.get("torch")   # only when a model was loaded: the core never imports torch
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def for_workers(specs: dict[str, ModelSpec]) -> tuple[dict[str, ModelSpec], dict[str, str]]:
    """The specs with their local folders as absolute paths (a Ray worker's folder is not the driver's), and
    those folders by the setting that named them (gen_model_id, prm_dir, prm_base_model_id, ...)."""
    absolute, folders = {}, {}
    for role, spec in specs.items():
        setting = spec.setting or ("gen_model_id" if spec.model_type == "policy" else "prm_dir")
        local = local_folders({"model_id": spec.model_id, "base_model_id": spec.base_model_id})
        absolute[role] = replace(spec, **local)
        folders.update({setting if key == "model_id" else setting.removesuffix("_dir") + "_base_model_id": path
                        for key, path in local.items()})
    return absolute, folders


class WorkerModels:
    """A worker's models by role ('policy', 'masprm', 'orm', 'handoff_masprm'), loaded on first use.

    `keep_only(roles)` frees the models no longer needed before a condition loads others, so a
    worker never holds policy + PRM + ORM when a condition needs two of them. A worker's items come
    condition by condition, so a model is loaded at most once per condition that needs it.
    """

    def __init__(self, specs: dict[str, ModelSpec], loader: Callable[[ModelSpec], Any] = load_model,
                 release: Callable[[ModelSpec], None] | None = None):
        self.specs = specs
        self.loader = loader
        self.release = release or release_model
        self.held: set[str] = set()

    def keep_only(self, roles: Sequence[str]) -> None:
        keep = {_model_key(self.specs[r]) for r in roles}
        for role in sorted(self.held - set(roles)):
            self.held.discard(role)
            if _model_key(self.specs[role]) not in keep:   # two roles may share one model
                self.release(self.specs[role])

    def get(self, role: str) -> Any:
        self.held.add(role)
        return self.loader(self.specs[role])


# --------------------------------------------------------------------------- one example


@dataclass(frozen=True)
class WorkItem:
    condition: int        # index into the run's pending conditions
    method: str
    roles: tuple[str, ...]  # scorer roles this condition needs
    settings: Any         # the method's frozen settings (its ctx.settings)
    example: Any          # masprm.data.Example
    samples: SampleStore | None = None   # sampled passes shared with the run's other conditions
    answer_checker: str = DEFAULT_CHECKER   # --answer_checker: how pass@k judges the answers


def example_search(models: WorkerModels, item: WorkItem, *, seed: int, graph: MASGraph) -> Any:
    """Run one method on one example (a search generator); a crash becomes a record with its error."""
    ex = item.example
    example_seed = seed + ex.idx
    # Load (on first use) before seeding: loading initialises weights and would move the RNG.
    models.keep_only(("policy",) + item.roles)
    policy, scorers = models.get("policy"), {role: models.get(role) for role in item.roles}
    policy.reseed(example_seed)
    # Each sampling request draws from its own stream keyed by (seed, example, request), so an
    # example's draws do not depend on which examples share its model calls.
    ctx = SearchContext(policy=policy, graph=graph, settings=item.settings, rng=random.Random(example_seed),
                        keys=RequestKeys(seed, ex.idx), samples=item.samples, example=ex, scorers=scorers)
    record = {"index": ex.idx, "condition": item.method, "question": ex.question, "gold": ex.gold}
    try:
        result = yield from METHODS[item.method].search(ctx, ex)
    except (OutputError, ModelOutputError):   # a full disk, or a model giving NaN, ends the run in one line
        raise
    except Exception as err:  # one bad example must not stop the condition
        return {**record, "prediction": None, "correct": False, "candidates": [],
                "metrics": ctx.usage.as_dict(), "extra": {}, "error": describe_error(err)}
    checker = ANSWER_CHECKERS[item.answer_checker]
    hits = pass_at_k_hits(result.prediction, result.candidates, ex.gold, is_correct=checker)
    metrics = {**{f"pass@{k}": h for k, h in enumerate(hits, start=1)}, **ctx.usage.as_dict()}
    # Every final answer the search generated, returned or not (sorted: the misses split reads it).
    generated = {"generated_answers": sorted(set(ctx.finished))} if ctx.finished else {}
    # The record keeps the list pass@k was computed over, as the original's records do.
    return {**record, "prediction": result.prediction, "correct": bool(hits[0]),
            "candidates": pass_candidates(result.prediction, result.candidates), "metrics": metrics,
            "extra": {**with_pool_verdicts(result.extra, checker, ex.gold), **generated}, "error": None}


def served_models(models: WorkerModels, roles: Sequence[str]) -> LoadedModels:
    """The models a condition's requests go to: the policy and the condition's scorers, by role."""
    return LoadedModels(models.get("policy"), {role: models.get(role) for role in roles})


def evaluate_batch(models: WorkerModels, items: list[WorkItem], *, seed: int, graph: MASGraph,
                   batch_size: int = 1) -> Iterator[tuple[WorkItem, dict | None, str | None]]:
    """Records of `items` as they finish, up to `batch_size` examples of a condition in flight.

    A condition's examples share model calls; the next condition starts once
    they are done, so a worker never needs the models of two conditions at once.
    """
    for _, group in groupby(items, key=lambda it: it.condition):
        group = list(group)
        models.keep_only(("policy",) + group[0].roles)
        served = served_models(models, group[0].roles)
        jobs = ((it, partial(example_search, models, it, seed=seed, graph=graph)) for it in group)
        for item, record, error in run_batched(served, jobs, batch_size):
            if isinstance(error, (OutputError, ModelOutputError)):   # a full disk, a model giving NaN: the run stops
                raise error
            yield item, record, None if error is None else describe_error(error)


def error_record(item: WorkItem, error: str) -> dict:
    """A record for an example whose worker failed outside the method (e.g. the worker died)."""
    ex = item.example
    return {"index": ex.idx, "condition": item.method, "question": ex.question, "gold": ex.gold,
            "prediction": None, "correct": False, "candidates": [],
            "metrics": {k: 0 for k in USAGE_KEYS}, "extra": {}, "error": error}


# --------------------------------------------------------------------------- conditions


@dataclass
class Condition:
    method: str
    files: LogFiles
    manifest: dict
    n: int
    label: str = ""                   # readable name for the table and the log header
    records: dict[int, dict] = field(default_factory=dict)
    summary: dict | None = None       # set once finished (or loaded from a COMPLETED log)
    reused: bool = False              # loaded from an earlier COMPLETED run
    log: PartialLog | None = None
    fresh: bool = False               # its log files were first made by this run (none from an earlier one)

    @property
    def manifest_hash(self) -> str:
        return manifest_hash_of(self.manifest)


def _model_identity(spec: ModelSpec) -> dict:
    identity = {"id": spec.model_id, "base": spec.base_model_id, "content": path_identity(spec.model_id, model=True),
                "base_content": path_identity(spec.base_model_id, model=True),
                "load_in_4bit": bool(spec.options is not None and spec.options.load_in_4bit)}
    if spec.options is not None and spec.options.dtype is not None:
        identity["dtype"] = spec.options.dtype   # only when asked for, so the default's fingerprints stay as they were
    if spec.model_type == "policy" and identity["load_in_4bit"]:   # its 4-bit format (fp4 or nf4) changes its samples
        identity["quant_type"] = spec.options.quant_type
    identity.update(backend_identity(spec.backend) if spec.model_type == "policy" else {})   # hf: nothing
    return identity


def _scorer_training(spec: ModelSpec) -> dict:
    """A scorer's label scheme and objective (also in its folder's content hash) and a format other than the
    project's own with its options (``masprm.scorer_formats``), said in the manifest."""
    return scorer_identity(spec.scorer or read_scorer_folder(spec.model_id)) if spec.model_type == "scorer" else {}


def condition_manifest(method: str, settings: EvalSettings, graph: MASGraph, data: Any,
                       specs: dict[str, ModelSpec]) -> dict:
    """Everything that defines the condition; `definition` (seed-free) gives the fingerprint.

    Its settings are exactly those the method declares (what its search can read).
    """
    chosen = settings.data
    data_def = {"dataset": chosen.dataset, "split": chosen.split, "sample_n": chosen.sample_n,
                "data_file": path_identity(chosen.data_file), **chosen.selection_options(METHODS[method].routing),
                **checker_record(chosen.answer_checker), **chosen.source_record()}   # the last: a source's only
    if chosen.exclude_questions_file:   # only when set, so the fingerprints of runs without it stay as they were
        data_def["exclude_questions_file"] = path_identity(chosen.exclude_questions_file)
    roles = ("policy",) + settings.roles(method)
    definition = {
        "method": method,
        "settings": METHODS[method].recorded_settings(settings.method_values),   # options left off not recorded
        "data": data_def,
        "mas_config": path_identity(graph.source),
        "models": {role: {**_model_identity(specs[role]), **_scorer_training(specs[role])} for role in roles},
        "code_version": code_version(METHODS[method].source_file),
    }
    examples = data.examples
    return {"condition": method, "fingerprint": stable_hash(definition), "seed": chosen.seed,
            "definition": definition, "mas_config_path": str(graph.source),
            "selection": {"n": len(examples), "skipped_no_gold": data.skipped,
                          "examples": stable_hash([[e.idx, e.question, e.gold] for e in examples])}}


def label_of(method: str, settings: EvalSettings, specs: dict[str, ModelSpec] | None = None) -> str:
    """The condition's readable name (``masprm.eval.naming``); scorer folders as ``specs`` carry them."""
    folders = {role: (specs[role].scorer if specs and role in specs and specs[role].scorer else folder)
               for role, folder in settings.models.scorer_folders().items()}
    return condition_label(METHODS[method], settings.method_settings(method), settings.roles(method), folders)


def sample_store(cond: Condition, logs_dir: str | Path) -> SampleStore:
    """Where the condition's sampled passes are kept, shared by every condition that samples the same ones:
    the policy, team, data, seed and code (the sampling settings and the example complete the key)."""
    definition = cond.manifest["definition"]
    return SampleStore(Path(logs_dir) / "sampled_passes",
                       {"policy": definition["models"]["policy"], "mas_config": definition["mas_config"],
                        "data": definition["data"], "seed": cond.manifest["seed"], "code": code_version()})


def plan_condition(method: str, settings: EvalSettings, graph: MASGraph, data: Any, specs: dict[str, ModelSpec],
                   logs_dir: str | Path, lab_job: dict | None = None) -> Condition:
    """The condition, loaded when COMPLETED, else with the records an earlier run left; `lab_job`: the lab job
    asking for it (`masprm.eval.lab_jobs`), recorded in its manifest, a COMPLETED one's included."""
    manifest = condition_manifest(method, settings, graph, data, specs)
    files = LogFiles.for_condition(logs_dir, settings.data.dataset, method, manifest["fingerprint"],
                                   settings.models.gen_model_id, settings.data.seed)
    label = label_of(method, settings, specs)
    # What the reports read (family, scorer roles, budget keys, label): facts, not decoded from names.
    manifest["facts"] = {**method_facts(method, settings.roles(method)), "label": label}
    cond = Condition(method, files, manifest, len(data.examples), label)
    # The file name leaves the seed (and so the seeded selection) out; reuse also needs the same
    # selected examples and seed, which the full manifest records.
    stored = _stored_manifest(files)
    same = stored is not None and manifest_hash_of(stored) == cond.manifest_hash
    if is_completed(files) and same:
        cond.summary, cond.reused = read_json(files.summary), True
        if lab_job:   # its log stays what it is; its manifest gains this ask
            append_ask(files.manifest, lab_job)
        return cond
    # the asks an earlier run of the same condition recorded, then this one (written when it finishes)
    cond.manifest = with_ask(cond.manifest, stored if same else None, lab_job)
    wanted = {e.idx for e in data.examples}
    cond.records = {i: r for i, r in resumable_records(files, cond.manifest_hash).items() if i in wanted}
    resumed = [f"[resume] {len(cond.records)} examples kept from an earlier run"] if cond.records else []
    cond.fresh = not (os.path.lexists(files.partial) or os.path.lexists(files.log))
    cond.log = PartialLog(files, cond.manifest_hash, log_header(cond) + resumed, list(cond.records.values()))
    return cond


def _stored_manifest(files: LogFiles) -> dict | None:
    try:
        found = read_json(files.manifest)
    except (OSError, MasprmError):   # missing or unreadable: not the same run
        return None
    return found if isinstance(found, dict) else None


def log_header(cond: Condition) -> list[str]:
    selection = cond.manifest["selection"]
    return [start_line(cond.label, cond.manifest["definition"]["data"]["dataset"], cond.n, cond.manifest_hash),
            f"[data] examples={selection['n']} skipped_no_gold={selection['skipped_no_gold']}"]


def sorted_records(cond: Condition) -> list[dict]:
    """A condition's records by example index (a reused condition's from its records file)."""
    return read_records(cond.files.records) if cond.reused else [cond.records[i] for i in sorted(cond.records)]


def finish_condition(cond: Condition, paired: tuple[Comparison, Condition] | None = None) -> None:
    records = sorted_records(cond)
    every = log_every()   # a progress line after every LOG_EVERY examples, as the original writes them
    progress = [progress_line(summarize_records(records[:m]), m, cond.n) for m in range(every, cond.n + 1, every)]
    summary = summarize_records(records)
    method = METHODS[cond.method]
    # Every record, crashed ones included: a method's summary may count them (e.g. Hit@T as misses).
    summary["extra"] = method.summarize(records) if method.summarize else {}
    summary.update(condition=cond.method, label=cond.label, dataset=cond.manifest["definition"]["data"]["dataset"],
                   seed=cond.manifest["seed"], fingerprint=cond.manifest["fingerprint"],
                   manifest=cond.manifest_hash, log=cond.files.log.name,
                   status="FAILED" if summary["errors"] else "COMPLETED")
    report = method.report(summary) if method.report else []
    closing = []
    if paired:
        comparison, partner = paired
        summary[comparison.key], closing = comparison.compare(records, sorted_records(partner),
                                                              cond.manifest["seed"], partner.files.log.name)
    write_condition(cond.files, render_log(log_header(cond), progress, summary, report, closing), records,
                    cond.manifest, summary)
    cond.summary = summary


def run_conditions(methods: Sequence[str], settings: EvalSettings, graph: MASGraph, data: Any,
                   specs: dict[str, ModelSpec], *, logs_dir: str | Path = "logs", workers: int | None = 1,
                   use_ray: bool = False, num_gpus_per_worker: float | None = 0.0,
                   loader: Callable[[ModelSpec], Any] = load_model,
                   announce: Callable[[str], None] = print, cluster: Any = None,
                   comparisons: dict[str, Comparison] | None = None, lab_job: dict | None = None) -> list[Condition]:
    """Run every condition (skipping COMPLETED ones); returns them with their summaries. Records come back
    from the workers (``cluster``, ``workers``: see ``masprm.parallel.map_examples``); files are written here,
    a compared condition's once its partner is done (``masprm.eval.paired_conditions``); ``lab_job``: the lab
    job that asked (`masprm.eval.lab_jobs.lab_job_from_env`), recorded in every condition's manifest."""
    conditions = [plan_condition(m, settings, graph, data, specs, logs_dir, lab_job) for m in methods]
    finish = finisher(conditions, comparisons or {}, finish_condition)
    for cond in conditions:
        if cond.reused:
            announce(f"{cond.method}: already COMPLETED in {cond.files.log}, loading it")
        elif cond.records:
            announce(f"{cond.method}: resuming, {len(cond.records)}/{cond.n} examples already done")
    pending = [c for c in conditions if not c.reused]
    stores = [sample_store(c, logs_dir) for c in pending]
    items = [WorkItem(k, c.method, settings.roles(c.method), settings.method_settings(c.method), ex, stores[k],
                      settings.data.answer_checker)
             for k, c in enumerate(pending) for ex in data.examples if ex.idx not in c.records]
    left = Counter(it.condition for it in items)
    for k, cond in enumerate(pending):
        if left[k] == 0:
            finish(cond)
    worker_specs, folders = for_workers(specs)
    setup = partial(WorkerModels, worker_specs, loader)
    batch_size = settings.engine.search_batch_size
    task = partial(evaluate_batch, seed=settings.data.seed, graph=graph, batch_size=batch_size)
    every = log_every()
    try:
        _collect(pending, finish, left, every, map_examples(
            setup, task, items, workers=workers, use_ray=use_ray, num_gpus_per_worker=num_gpus_per_worker,
            desc="evaluating", batched=batch_size, cluster=cluster, shared_paths=folders))
    except ModelOutputError:   # refused at a model's output: a condition that got no record leaves no files
        for cond in pending:
            if cond.fresh and not cond.records:
                cond.files.partial.unlink(missing_ok=True)
                cond.files.log.unlink(missing_ok=True)
        raise
    return conditions


def _collect(pending: list[Condition], finish: Callable[[Condition], None], left: Counter, every: int,
             results: Iterator[tuple[WorkItem, dict | None, str | None]]) -> None:
    """Each record into its condition's log as it arrives; a condition is finished once its last one is in."""
    for item, record, error in results:
        cond = pending[item.condition]
        record = record if error is None else error_record(item, error)
        cond.records[record["index"]] = record
        cond.log.add(record)
        left[item.condition] -= 1
        if len(cond.records) % every == 0:
            cond.log.progress(progress_line(summarize_records(list(cond.records.values())),
                                            len(cond.records), cond.n))
        if left[item.condition] == 0:
            finish(cond)
