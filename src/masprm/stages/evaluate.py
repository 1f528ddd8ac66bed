"""Stage 4: compare search methods and scorers on a dataset, one logged condition per method.

    python src/experiments/compare_sbs_mcts.py --dataset gsm8k --split test --seed 14 \
        --prm_dir checkpoints/MASPRM-GSM8K-1.5B --prm_base_model_id Qwen/Qwen2.5-1.5B-Instruct \
        --gen_model_id Qwen/Qwen2.5-1.5B-Instruct --mas_config configs/gsm8k.yaml \
        --methods single_pass sbs_logprob sbs_prm mcts_logprob mcts_prm

Each method is one condition with its own log in --logs_dir
(`{dataset}_{method}_{fingerprint}_{model}_{seed}.txt` + `.jsonl` records,
`.manifest.json`, `.summary.json`); a condition whose log already says
COMPLETED is loaded instead of rerun, an interrupted one resumes. Exit code 1
when a condition is marked FAILED (some examples raised errors). Started by the
lab, with $MASPRM_LAB_JOB naming its job, it records that job in each
condition's manifest, a loaded one's included (`masprm.eval.lab_jobs`).
"""

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from masprm.checks import (check_known_dataset, check_local_model, check_no_outside_links, check_output_dir,
                           check_scorer_folder,
                           check_scorer_role, check_text_data_file)
from masprm.cli import ArgumentParser, check, run_cli, with_flags
from masprm.outputs import missing_folders, remove_empty_folders
from masprm.cluster import ClusterSettings
from masprm.config import Groups, add_settings_args, config_from_args
from masprm.data import load_examples
from masprm.dataset_sources import DatasetFields
from masprm.excluded_questions import exclude_questions, read_excluded_questions
from masprm.eval.lab_jobs import lab_job_from_env
from masprm.eval.logs import log_every
from masprm.eval.methods import METHODS, method_flag_needs, settings_classes
from masprm.eval.metrics import results_table
from masprm.errors import ModelOutputError
from masprm.eval.runner import Comparison, ModelSpec, run_conditions
from masprm.eval.vs_masprm import VS_MASPRM, compare_with_masprm, configured_pairs, vs_masprm_lines
from masprm.eval.settings import DEFAULT_DATASET, DataSettings, EvalSettings, ModelSettings, RunSettings
from masprm.graph import load_mas_config
from masprm.handoff.methods import format_paired_comparison, paired_comparison, paired_log_lines, prefix_table
from masprm.handoff.settings import (GSM8K_HANDOFF_CONFIG, HANDOFF_CONFIG, HANDOFF_DATASET, HANDOFF_FLAGS,
                                     HANDOFF_SAMPLE_N, HandoffPRMSettings, check_team)
from masprm.models.backends import BackendFlags, check_backend
from masprm.models.model_checks import check_policy
from masprm.models.scorer_checks import check_scorer_fits
from masprm.models.options import ModelFlags
from masprm.roles import ROLES, ModelRole, role_flags_class
from masprm.run_folder import default_config_path
from masprm.scorer_folder import ScorerFolder, read_scorer_folder
from masprm.scorer_formats import ScorerFormatFlags, choose_format
from masprm.search.engine import EngineSettings
from masprm.search.judge import JUDGE_ROLE
from masprm.search.oracles import default_step_oracle
from masprm.search.settings import MCTS_OPTIONS, MCTSSettings, ORMLeafSettings, StepOracleSettings, ViewSettings
from masprm.log import RESULT, get_logger

log = get_logger(__name__)


def groups() -> Groups:
    """Every settings class of stage 4, by --help group: its flags' one list (the search group holds
    the classes every registered method declares, so a new method's settings are flags at once)."""
    elsewhere = {ViewSettings, *HANDOFF_FLAGS}
    return (("data", (DataSettings, DatasetFields)),
            ("models", (ModelSettings, role_flags_class(), ScorerFormatFlags, ViewSettings)),
            ("model loading", (ModelFlags,)),
            ("generation backend", (BackendFlags,)),
            ("search", tuple(c for c in settings_classes() if c not in elsewhere)),
            ("run", (RunSettings, EngineSettings, ClusterSettings)),
            ("dynamic handoff (handoff_* methods)", HANDOFF_FLAGS))


def build_parser() -> ArgumentParser:
    p = ArgumentParser(description="Compare single pass, SBS, MCTS and voters guided by a MASPRM, an ORM "
                                   "or policy log-probs (and the handoff conditions) on a dataset.")
    add_settings_args(p, groups(), needs=method_flag_needs())   # a method flag needs a method that reads it
    return p


def parse_command(argv: list[str] | None = None) -> tuple[RunSettings, EvalSettings]:
    """The run's own settings and the evaluation's, each checked as it is built (the method list first)."""
    args = build_parser().parse_args(argv)
    run = config_from_args(RunSettings, args, cluster=config_from_args(ClusterSettings, args))
    return run, EvalSettings.from_args(args)


# --------------------------------------------------------------------------- checks across settings


def validate(run: RunSettings, settings: EvalSettings) -> dict[str, ScorerFolder]:
    """What no single settings class can check: the methods against the flags and the scorer folders.
    Returns the scorer folders' records (``read_scorers``), read once for the checks and the models."""
    # the parser refuses these when given; set another way (a caller's settings) they are refused by value
    needs, off = method_flag_needs(), settings.method_values[MCTSSettings].unrecorded()
    unset = {"orm_leaf": not settings.method_values[ORMLeafSettings].orm_leaf, **{n: n in off for n in MCTS_OPTIONS}}
    for name, left_off in unset.items():
        check(left_off or needs[name].ok(run), with_flags(needs[name].problem(name)))
    folders = settings.models.scorer_folders()
    for role in ROLES.values():
        users = [m for m in run.methods if role.name in settings.roles(m)]
        folder = folders[role.name]
        need = f"{', '.join(users)} need{'s' if len(users) == 1 else ''}"
        check(not users or folder, f"{need} --{role.dir_setting}")
        if users:
            default = folder == role.default_folder
            check(Path(folder).is_dir(), f"--{role.dir_setting} {folder}: no such folder" +
                  (f" (the default: {need} a trained scorer there, or pass --{role.dir_setting})" if default else ""))
    judged = [m for m in run.methods if JUDGE_ROLE in settings.roles(m)]
    check(not judged or bool(settings.models.judge_model_id),
          f"{', '.join(judged)} need{'s' if len(judged) == 1 else ''} --judge_model_id (the LLM judge)")
    log_every()   # a bad $LOG_EVERY fails here, before any model loads
    scorers = read_scorers(run, settings)
    check_scorer_roles(run, settings, scorers)
    return scorers


def read_scorers(run: RunSettings, settings: EvalSettings) -> dict[str, ScorerFolder]:
    """Each scorer folder a method of the run reads, by role, in its format (named or detected): read once
    here, carried to the checks, the condition labels, the manifests and the loader (``masprm.scorer_folder``)."""
    needed = {role for m in run.methods for role in settings.roles(m)}
    formats = settings.models.formats
    return {role: choose_format(read_scorer_folder(folder), formats, ROLES[role], ROLES[role].dir_setting)
            for role, folder in settings.models.scorer_folders().items() if folder and role in needed}


def check_scorer_roles(run: RunSettings, settings: EvalSettings, scorers: dict[str, ScorerFolder]) -> None:
    """Each scorer folder a method reads holds a scorer of its role's kind (an ORM is no --prm_dir)."""
    for role, record in scorers.items():
        check_scorer_role(record, role, ROLES[role].dir_setting, allow_any=run.allow_scorer_kind_mismatch)


def input_paths(settings: EvalSettings) -> dict:
    """Everything the run reads, by setting: the logs may not go into (or inside) any of them."""
    models = settings.models
    folders, bases = models.scorer_folders(), models.scorer_bases()
    scorers = {setting: value for role in ROLES.values()
               for setting, value in ((role.dir_setting, folders[role.name]), (role.base_setting, bases[role.name]))}
    return {"gen_model_id": models.gen_model_id, "judge_model_id": models.judge_model_id,
            "data_file": settings.data.data_file,
            "exclude_questions_file": settings.data.exclude_questions_file,
            "mas_config": models.mas_config, **scorers}


def resolve_defaults(settings: EvalSettings, routing: str) -> EvalSettings:
    """Fill the defaults that depend on the methods (handoff runs use their own data and team)."""
    handoff = routing == "handoff"
    data = settings.data
    dataset = data.dataset or (HANDOFF_DATASET if handoff else DEFAULT_DATASET)
    sample_n = data.sample_n if data.sample_n is not None or not handoff else HANDOFF_SAMPLE_N
    mas_config = settings.models.mas_config or (HANDOFF_CONFIG if handoff else default_config_path(dataset))
    oracle = settings.method_values.get(StepOracleSettings)
    if oracle is not None and oracle.step_oracle is None:   # the dataset's own step labeller
        resolved = replace(oracle, step_oracle=default_step_oracle(dataset))
        settings = replace(settings, method_values={**settings.method_values, StepOracleSettings: resolved})
    return settings.with_data(dataset=dataset, sample_n=sample_n).with_models(mas_config=mas_config)


def handoff_defaults_line(settings: EvalSettings) -> str:
    """What a handoff run takes when --dataset or --mas_config is left open, said once at its start."""
    resolved = resolve_defaults(settings, "handoff")
    return (f"[info] handoff run on --dataset {resolved.data.dataset} with --mas_config {resolved.models.mas_config} "
            f"(the defaults are the original main branch's {HANDOFF_DATASET} with {HANDOFF_CONFIG}; its newer "
            f"branch's GSM8K run is --dataset gsm8k --mas_config {GSM8K_HANDOFF_CONFIG})")


def resolve_workers(flag: int | None, gpus: int | None = None, *,
                    on_cluster: bool = False) -> tuple[int | None, float | None]:
    """(workers, GPUs per worker), as the original sizes its Ray pool.

    --workers (or $RAY_NUM_WORKERS) workers share the GPUs Ray sees evenly (None: 3 workers on one GPU
    get a third each, see ``masprm.cluster.plan_workers``); otherwise one worker per GPU x
    $WORKERS_PER_GPU, counted on this machine (``gpus``, default: torch's count) or, ``on_cluster``,
    on the Ray cluster once joined (None workers); on a CPU-only machine one worker.
    """
    def env_int(name: str) -> int | None:
        raw = os.environ.get(name, "")
        if not raw:
            return None
        check(raw.isdigit() and int(raw) >= 1, f"${name} must be a positive integer, got {raw!r}")
        return int(raw)

    count = flag or env_int("RAY_NUM_WORKERS")
    if count:
        return count, None
    per_gpu = env_int("WORKERS_PER_GPU") or 1
    if on_cluster:
        return None, 1.0 / per_gpu
    if gpus is None:
        import torch   # the stage stays torch-free until it counts GPUs
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return (gpus * per_gpu, 1.0 / per_gpu) if gpus else (1, 0.0)


def model_specs(settings: EvalSettings, run: RunSettings,
                scorers: dict[str, ScorerFolder] | None = None) -> dict[str, ModelSpec]:
    """The models of the run, each folder checked (weights, tokenizer, a finished scorer) before any loads;
    `scorers`: the records `validate` read (read here when not given)."""
    from masprm.models.loading import scorer_options   # the loaders import torch: after the flags are checked
    from masprm.models.public_scorers import check_format_tokens

    options = settings.loading.options()
    models = settings.models
    policy = check_local_model(models.gen_model_id, "gen_model_id")
    check_policy(policy, "gen_model_id", options)   # its device, attention, config, weights and chat template
    check_backend(settings.backend, policy, options, "gen_model_id")
    specs = {"policy": ModelSpec("policy", policy, None, options, setting="gen_model_id",
                                 max_batch_tokens=settings.engine.max_batch_tokens, backend=settings.backend)}
    scoring = scorer_options(options, models.scorer_precision)   # scorers have their own precision
    bases = models.scorer_bases()
    scorers = read_scorers(run, settings) if scorers is None else scorers
    for role, record in scorers.items():   # a scorer no method uses is neither checked nor loaded
        info = ROLES[role]
        base = scorer_base(record, bases[role], info)
        note = check_scorer_folder(record, info.dir_setting, base_model_id=base, base_setting=info.base_setting,
                                   allow_unfinished=run.allow_unfinished_scorer)
        check_scorer_fits(record, info.dir_setting, base or record.base_model,   # values, head, LoRA shapes vs the base
                          trust_remote_code=scoring.trust_remote_code)
        check_format_tokens(record, base or record.base_model, scoring, info.dir_setting)   # a public PRM's tokens
        if note:
            log.info(with_flags(note))
        if base != bases[role]:
            log.info(f"note: --{info.base_setting} is at its default ({bases[role]}); using {base}, the base "
                     f"model the adapter in {record.path} names")
        # The handoff PRM reads transcripts of up to --prm_context_length tokens (the original's
        # loader setting); the static scorers keep their training length.
        max_length = (settings.method_values[HandoffPRMSettings].prm_context_length
                      if role == "handoff_masprm" else None)
        specs[role] = ModelSpec("scorer", models.scorer_folders()[role], base, scoring, max_length,
                                setting=info.dir_setting, scorer=record)
    if any(JUDGE_ROLE in settings.roles(m) for m in run.methods):
        specs[JUDGE_ROLE] = judge_spec(settings, options)
    return specs


def judge_spec(settings: EvalSettings, options: Any) -> ModelSpec:
    """The LLM judge's model (pooled_judge, mcts_judge): --judge_model_id, checked as a policy is."""
    models = settings.models
    judge_options = replace(options, load_in_4bit=models.judge_load_in_4bit)
    judge = check_local_model(models.judge_model_id, "judge_model_id")
    check_policy(judge, "judge_model_id", judge_options)
    # Loaded as the policy is (one copy when it is the policy's model with the same options).
    return ModelSpec("policy", judge, None, judge_options, setting="judge_model_id",
                     max_batch_tokens=settings.engine.max_batch_tokens)


def scorer_base(record: ScorerFolder, base: str | None, role: ModelRole) -> str | None:
    """The scorer's base model: as given, except that the role's default base gives way to the base the
    adapter config names (so a scorer trained on another model is not loaded on the default one)."""
    recorded = record.adapter_base if base is not None and base == role.default_base else None
    return recorded or base


# --------------------------------------------------------------------------- main


def handoff_vs_policy(records: list[dict], policy_records: list[dict], seed: int, policy_log: str):
    """handoff_prm's paired comparison with handoff_policy (the original's T=8 and T=12 lines)."""
    result = paired_comparison(policy_records, records, seed=seed)
    return {"baseline": policy_log, **result}, paired_log_lines(result)


def vs_masprm(reference: str):
    """A condition's paired comparison with ``reference``, the MASPRM-guided method of its family."""
    def compare(records: list[dict], reference_records: list[dict], seed: int, reference_log: str):
        result = compare_with_masprm(records, reference_records, seed=seed)
        return {"reference": reference_log, **result}, vs_masprm_lines(reference, result)
    return compare


# The paired comparisons a condition's log and summary carry when its partner runs in the same command.
COMPARISONS = {"handoff_prm": Comparison("handoff_policy", "paired_comparison", handoff_vs_policy),
               **{method: Comparison(reference, "paired_vs_masprm", vs_masprm(reference))
                  for method, reference in VS_MASPRM.items()}}


def handoff_report(conditions: list) -> None:
    """The printed prefix table of the handoff conditions and, when both handoff_policy and
    handoff_prm ran, their paired comparison on the same examples (kept in handoff_prm's summary and log)."""
    handoff = [c for c in conditions if METHODS[c.method].routing == "handoff"]
    if not handoff:
        return
    names = [c.label or c.method for c in handoff]
    log.info("", extra=RESULT)
    table = prefix_table(list(zip(names, (c.summary for c in handoff))), max(map(len, names)) + 2)
    log.info("\n".join(table), extra=RESULT)
    by_method = {c.method: c for c in handoff}
    if {"handoff_policy", "handoff_prm"} <= set(by_method) and "paired_comparison" in by_method["handoff_prm"].summary:
        log.info("\n".join(format_paired_comparison(by_method["handoff_prm"].summary["paired_comparison"])),
                 extra=RESULT)


def load_data(settings: EvalSettings, routing: str, prompts: list[str] | None = None):
    """The evaluated examples (competition_math levels and strata apply to handoff runs only)."""
    data = settings.data
    excluded = read_excluded_questions(data.exclude_questions_file) if data.exclude_questions_file else None
    loaded = load_examples(data.dataset, data.split, n=None if excluded is not None else data.sample_n,
                           seed=data.seed, data_file=data.data_file, fields=data.fields,
                           **data.selection_options(routing))
    if excluded is not None:
        loaded = exclude_questions(loaded, excluded, data.sample_n, data.seed)
        log.info(f"[info] left out the {len(excluded)} questions of {data.exclude_questions_file}; "
                 f"{len(loaded.examples)} examples selected", extra=RESULT)
    check(bool(loaded.examples), f"--dataset {data.dataset} --split {data.split}: no usable examples "
                                 f"({loaded.skipped} skipped without a gold answer)")
    check_policy(settings.models.gen_model_id, "gen_model_id", settings.loading.options(), questions=loaded.examples,
                 where=data.data_file or f"dataset {data.dataset} split {data.split}", prompts=prompts or ())
    return loaded


def masprm_comparisons(conditions: list) -> None:
    """Prints each configured pair (``masprm.eval.vs_masprm``) whose two conditions ran: the condition against
    the MASPRM-guided one of its family (kept in its summary and log)."""
    by_method = {c.method: c for c in conditions}
    for method, reference in configured_pairs(list(by_method)):
        result = by_method[method].summary.get("paired_vs_masprm")
        if result:
            print("\n".join(f"{method}: {line}" for line in vs_masprm_lines(reference, result)))


def main(argv: list[str] | None = None) -> int:
    run, settings = parse_command(argv)
    lab_job = lab_job_from_env()   # the lab job that started this command, if one did: checked before anything
    scorers = validate(run, settings)
    if run.routing == "handoff" and not (settings.data.dataset and settings.models.mas_config):
        log.info(handoff_defaults_line(settings), extra=RESULT)
    settings = resolve_defaults(settings, run.routing)

    check_known_dataset(settings.data.dataset)
    check_output_dir(run.logs_dir, "logs_dir", inputs=input_paths(settings))
    if os.path.lexists(run.logs_dir):   # the sampled-passes store and the logs are written below it
        check_no_outside_links(run.logs_dir, "logs_dir")
    specs = model_specs(settings, run, scorers)   # bad model or scorer folders fail here, before any data is read
    graph = load_mas_config(settings.models.mas_config)
    if settings.data.data_file:
        check_text_data_file(settings.data.data_file)
    if run.routing == "handoff":
        check_team(settings.method_settings(run.methods[0]), graph, run.methods)
    on_cluster = run.cluster.address is not None   # an address means Ray, sized from the cluster's nodes
    workers, gpus_per_worker = resolve_workers(run.workers, on_cluster=on_cluster)
    sizing = f"{workers} worker(s)" if workers else "workers by the cluster's GPUs"
    failed = []
    made = missing_folders(run.logs_dir)   # removed again, when left empty, by a run refused at a model's output
    try:
        for seed in settings.data.seeds or [settings.data.seed]:
            failed += run_seed(run, settings.with_data(seed=seed), graph, specs, workers, gpus_per_worker, sizing,
                               lab_job)
    except ModelOutputError:
        remove_empty_folders(made)
        raise
    if failed:
        log.warning(f"FAILED conditions (examples raised errors; see the .jsonl records): {', '.join(failed)}")
    return 1 if failed else 0


def run_seed(run: RunSettings, settings: EvalSettings, graph: Any, specs: dict[str, ModelSpec], workers: int | None,
             gpus_per_worker: float | None, sizing: str, lab_job: dict | None = None) -> list[str]:
    """Every condition of the run at the seed of `settings`, reported; the names of the FAILED ones; `lab_job`:
    the lab job asking (`masprm.eval.lab_jobs`), recorded in each condition's manifest."""
    seed = settings.data.seed
    data = load_data(settings, run.routing, [agent.system_prompt for agent in graph.agents])
    log.info(f"seed {seed}: {len(data.examples)} examples ({data.skipped} skipped without gold), "
             f"{len(run.methods)} condition(s), {sizing}; logs in {run.logs_dir}/", extra=RESULT)
    conditions = run_conditions(run.methods, settings, graph, data, specs, logs_dir=run.logs_dir,
                                workers=workers, use_ray=run.cluster.address is not None or workers > 1,
                                num_gpus_per_worker=gpus_per_worker, cluster=run.cluster,
                                comparisons=COMPARISONS, lab_job=lab_job)
    log.info(results_table(conditions), extra=RESULT)
    for c in conditions:
        log.info(f"  {c.method}: {c.files.log}", extra=RESULT)
    handoff_report(conditions)
    masprm_comparisons(conditions)
    return [f"{c.method} (seed {seed})" for c in conditions if c.summary.get("status") == "FAILED"]


def cli() -> None:
    """The console script (pyproject.toml) and the checkout's script: one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
