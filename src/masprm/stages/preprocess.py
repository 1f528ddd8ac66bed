"""Stage 2: MAS-MCTS trees -> PRM samples and Bradley-Terry preference pairs.

    python src/train/preprocess_data.py --input results/<run> --target-nodes 5 \\
        --make-ppm --ppm-max-pairs 8 --ppm-pos-topk 4 --ppm-neg-topk 4 \\
        --view full --mas_config configs/gsm8k.yaml

Writes next to the tree folder: results/prm_samples[_local]_<run>.jsonl and,
with --make-ppm, results/ppm_pairs[_local]_<run>.jsonl. With --labels NAME it
writes one label scheme's records instead (``masprm.labels.LABEL_SCHEMES``):
results/labels_<NAME>[_local]_<run>.jsonl. --export trl adds each output in
TRL's format (trl_<name>.jsonl, masprm.labels.trl). Trees are read one at a
time and the outputs are streamed into temporary files that replace the old
outputs only when the whole pass succeeds.
"""

import argparse
import json
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from masprm.answer_checkers import ANSWER_CHECKERS, DEFAULT_CHECKER, check_checker
from masprm.checks import check_local_model, check_output_file, check_scorer_folder, check_seeds, file_identity
from masprm.cli import ArgumentParser, UsageError, check, run_cli
from masprm.config import add_config_args, arg, config_from_args, flag_fields, flag_names, require_each
from masprm.errors import ConfigError
from masprm.graph import MASGraph, load_mas_config, resolve_config_path
from masprm.io import AtomicJsonlWriter
from masprm.labels import LABEL_SCHEMES, LabelScheme
from masprm.labels.mining import Options, Preprocessor, window_tag
from masprm.labels.progress import TreeProgress, partial_path
from masprm.labels.scheme import LabelRunner
from masprm.search.rollouts import RolloutSource
from masprm.search.settings import SamplingSettings
from masprm.identity import code_version, path_identity, stable_hash
from masprm.models.model_checks import check_policy
from masprm.models.scorer_checks import check_scorer_fits
from masprm.run_folder import SETTINGS_FILE, read_settings
from masprm.scorer_folder import read_scorer_folder
from masprm.scorer_meta import training_of
from masprm.state_text import join_steps
from masprm.labels.trl import EXPORT_FORMATS, export_trl, trl_path
from masprm.outputs import lexical_path
from masprm.paths import path_status
from masprm.progress import progress_bar
from masprm.log import RESULT, get_logger

log = get_logger(__name__)


@dataclass
class Inputs:
    """The script's own flags (what to read, how to route); the mining settings are ``masprm.labels.mining.Options``."""

    input: Path = arg(Path("results/mmlu_res_train_Qwen_Qwen2.5-1.5B-Instruct"),
                      help="a folder of tree JSON files (searched recursively) or a single tree file (default: "
                           "results/mmlu_res_train_Qwen_Qwen2.5-1.5B-Instruct, the original's)")
    config: Path | None = arg(None, flags=("--mas_config",), help="team (MAS) config YAML for --view local and the "
                              "rollout schemes (default configs/<dataset>.yaml, <dataset> the input folder's name "
                              "before '_res_'); the old --config FILE, given a team config, is read as this flag")
    force: bool = arg(False, help="--view local and the rollout-based label schemes: route and sample with "
                                  "--mas_config even when the trees record another MAS config")
    seed: int = arg(42, help="seed of the rollout-based label schemes' fresh samples; everything else stage 2 "
                             "writes is deterministic and uses no randomness")
    rollout_policy: Path | None = arg(None, help="the policy model folder the rollout-based label schemes "
                                                 "(mc_rollouts, first_error_search, step_consistency, shapley, "
                                                 "mc_rollouts_uniform, mc_rollouts_active) "
                                                 "sample from, with the team of --mas_config")
    rollout_temperature: float = arg(0.7, help="sampling temperature of those fresh samples, > 0 (default 0.7, "
                                               "stage 1's)")
    rollout_ensemble: Path | None = arg(None, help="a trained ensemble scorer folder (--mode ensemble) whose heads' "
                                                   "spread ranks the prefixes of --labels mc_rollouts_active")
    labels: str | None = arg(None, help="write one label scheme's records instead of the PRM samples and pairs: "
                                        "results/labels_<NAME>[_local]_<run>.jsonl (schemes: "
                                        + ", ".join(LABEL_SCHEMES.names()) + "; their own flags below)")
    export: str | None = arg(None, choices=EXPORT_FORMATS,
                             help="also write the outputs in another library's format: trl writes "
                                  "trl_prm_samples_*.jsonl (stepwise supervision) and trl_ppm_pairs_*.jsonl "
                                  "(preference) next to them (docs/sharing.md)")

    def __post_init__(self) -> None:
        check_seeds(self)
        require_each(self, ("rollout_temperature",), lambda v: v > 0, "must be > 0")   # stage 1's rule


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = ArgumentParser(description="Turn MAS-MCTS trees into PRM samples and PPM (Bradley-Terry) pairs.")
    add_config_args(ap, Inputs, only=["input"])
    add_config_args(ap, Options)
    add_config_args(ap, Inputs, skip=["input"])
    added: set[str] = set()   # a flag several schemes share (--rollout-budget) is added once
    for name, scheme in LABEL_SCHEMES.items():   # each scheme's own flags; None = not given (its default applies)
        if scheme.settings is not None:
            fields = [f.name for f in flag_fields(scheme.settings)]
            add_config_args(ap.add_argument_group(f"--labels {name}"), scheme.settings, skip=added & set(fields),
                            defaults={f: None for f in fields if f not in added})
            added.update(fields)
    args = ap.parse_args(argv)
    config_from_args(Inputs, args)   # its checks
    if args.labels is not None:
        check(args.labels in LABEL_SCHEMES, f"--labels: {LABEL_SCHEMES.unknown_message(args.labels)}")
        check(not args.make_ppm, "--make-ppm writes the paper's pairs next to the PRM samples; with --labels only "
                                 "labels_<NAME>_<run>.jsonl is written (--labels masprm gives the same pairs)")
        needs = LABEL_SCHEMES[args.labels].needs_rollouts
        check(not needs or args.rollout_policy is not None,
              f"--labels {args.labels} needs fresh policy samples: give --rollout-policy FOLDER (the team's policy)")
        check(needs or args.rollout_policy is None,
              f"--rollout-policy is read only by the rollout-based label schemes, not by --labels {args.labels}")
        spreads = LABEL_SCHEMES[args.labels].needs_spreads
        check(not spreads or args.rollout_ensemble is not None,
              f"--labels {args.labels} ranks prefixes by an ensemble's spread: give --rollout-ensemble FOLDER "
              "(a scorer trained with --mode ensemble)")
        check(spreads or args.rollout_ensemble is None,
              f"--rollout-ensemble is read only by --labels mc_rollouts_active, not by --labels {args.labels}")
    else:
        check(args.rollout_policy is None and args.rollout_ensemble is None,
              f"--rollout-{'policy' if args.rollout_policy else 'ensemble'} is read only by the rollout-based "
              "label schemes (add --labels NAME)")
    args.scheme_settings = scheme_settings(args)
    check(args.target_nodes != 1, "--target-nodes 1 is the root alone: use 2 or more, or <= 0 for variable depth")
    for flag in ("ppm_max_pairs", "ppm_pos_topk", "ppm_neg_topk"):
        check(getattr(args, flag) >= 1, f"--{flag.replace('_', '-')} must be at least 1")
    for flag in ("ppm_root_window", "prm_root_window"):
        lo, hi = getattr(args, flag)
        check(lo <= hi, f"--{flag.replace('_', '-')}: LO ({lo:g}) must not exceed HI ({hi:g})")
    check(window_tag(args.prm_root_window) == "" or args.labels is None or LABEL_SCHEMES[args.labels].kind == "steps",
          f"--prm-root-window is the window of the PRM samples and the steps label schemes; --labels {args.labels} "
          "writes pairs, whose window is --ppm-root-window")
    return args


def scheme_settings(args: argparse.Namespace) -> Any:
    """The chosen scheme's settings from its flags; a flag of another scheme is a usage error."""
    chosen, settings = args.labels, None
    own = {f.name for f in flag_fields(LABEL_SCHEMES[chosen].settings)} \
        if chosen and LABEL_SCHEMES[chosen].settings else set()
    for name, scheme in LABEL_SCHEMES.items():
        if scheme.settings is None:
            continue
        given = {f.name: getattr(args, f.name) for f in flag_fields(scheme.settings)
                 if getattr(args, f.name) is not None and (name == chosen or f.name not in own)}
        if name == chosen:
            settings = scheme.settings(**given)
        elif given:
            field = next(iter(given))
            owners = [n for n, sc in LABEL_SCHEMES.items() if sc.settings and field in {f.name for f in
                                                                                       flag_fields(sc.settings)}]
            raise UsageError(f"{flag_names(scheme.settings, field)[0]} is a setting of --labels "
                             + " and --labels ".join(owners)
                             + (f", not of --labels {chosen}" if chosen else " (add --labels NAME)"))
    return settings


def find_trees(input_path: Path) -> list[Path]:
    check(path_status(input_path, "input") is not None, f"--input: {input_path} does not exist")
    if input_path.is_file():
        return [input_path]
    files = sorted(p for p in input_path.rglob("*.json") if p.is_file())
    check(bool(files), f"--input: no tree files (*.json) under {input_path}")
    return files


def output_paths(input_path: Path, view: str, window: str = "") -> tuple[Path, Path]:
    """results/<run> -> results/prm_samples[_local][<window>]_<run>.jsonl, results/ppm_pairs[_local]_<run>.jsonl
    (``window``: the PRM root window's tag, `masprm.labels.mining.window_tag`; '' for the original's)."""
    # worked out lexically: an --input that is a link gets its outputs next to the link, never next to
    # the link's target (a folder the user did not name)
    where = lexical_path(input_path)
    run = where.stem if where.is_file() else where.name
    tag = "" if view == "full" else f"_{view}"
    return (where.with_name(f"prm_samples{tag}{window}_{run}.jsonl"),
            where.with_name(f"ppm_pairs{tag}_{run}.jsonl"))


def labels_path(input_path: Path, view: str, scheme: str, window: str = "") -> Path:
    """results/<run> -> results/labels_<scheme>[_local][<window>]_<run>.jsonl (a steps scheme's window tag)."""
    prm_path, _ = output_paths(input_path, view, window)
    return prm_path.with_name(prm_path.name.replace("prm_samples", f"labels_{scheme}", 1))


def load_graph(args: argparse.Namespace) -> MASGraph | None:
    """The MAS graph the local view routes inboxes through (a given --mas_config is always checked)."""
    path = args.config
    if path is None:
        if args.view != "local" and args.rollout_policy is None:   # the rollouts sample the team too
            return None
        folder = lexical_path(args.input)
        folder = folder.parent if folder.is_file() else folder
        check("_res_" in folder.name,
              f"--mas_config: cannot derive the MAS config from the folder name {folder.name!r} "
              f"(expected '<dataset>_res_...'); pass --mas_config")
        derived = Path("configs") / f"{folder.name.split('_res_')[0]}.yaml"
        try:
            path = resolve_config_path(derived)   # a checkout's configs/, else the shipped copy
        except ConfigError:
            raise UsageError(f"--mas_config: {derived} (derived from the input folder name) not found; "
                             "pass --mas_config") from None
    graph = load_mas_config(path)
    # what a team other than the trees' would do here (--force lets it)
    harm = [why for why, used in (("the local view would route inboxes through another team", args.view == "local"),
                                  ("the rollouts would sample another team", args.rollout_policy is not None)) if used]
    if harm and not args.force:
        check_recorded_config(args.input, path, " and ".join(harm))
    return graph


def check_recorded_config(input_path: Path, config: Path,
                          harm: str = "the local view would route inboxes through another team") -> None:
    """The local view routes inboxes, and the rollouts sample, through the team that built the trees: compare
    with their record (``harm``: what another team would do)."""
    first = input_path if input_path.is_file() else next(iter(find_trees(input_path)))
    try:
        meta = json.loads(first.read_text(encoding="utf-8")).get("meta") or {}
    except (OSError, ValueError, AttributeError):
        return  # an unreadable tree is reported (and skipped) with the others
    recorded, identity = meta.get("config"), meta.get("config_identity")
    if not isinstance(recorded, str):
        return  # trees from elsewhere: nothing to compare with
    if identity is None and Path(recorded).is_file():
        identity = file_identity(recorded)
    same = file_identity(config) == identity if identity else Path(recorded).resolve() == config.resolve()
    check(same, f"--mas_config {config} is not the MAS config the trees were built with ({recorded}, recorded in "
                f"{first}); {harm}. Pass that config, or --force to use this one anyway")


def stream(files: list[Path], root: Path, paths: list[Path],
           records_of: Callable[[Path, str], list[list[dict]]], prep: Preprocessor,
           progress: TreeProgress | None = None) -> None:
    """One pass over the tree files: ``records_of(file, name)`` gives one list of records per output path.
    With ``progress`` (one output), each finished tree is kept as it finishes and a rerun takes the trees an
    earlier run of the same settings finished from it."""
    names = [str(f.relative_to(root)) for f in files]
    with ExitStack() as stack:
        outs = [stack.enter_context(AtomicJsonlWriter(path)) for path in paths]
        done = progress.resume(names) if progress is not None else []
        # The bar shows on a terminal only and leaves no line behind, so an error stays one line.
        for i, (f, name) in enumerate(progress_bar(list(zip(files, names)), terminal_only=True,
                                                   desc="Processing trees", unit="tree", leave=False)):
            if i < len(done):
                found = [done[i]]
            else:
                found = records_of(f, name)
                if progress is not None:
                    progress.add(name, found[0])
            for out, records in zip(outs, found):
                for rec in records:
                    out.write(rec)
        # Raised inside the writers' block, so the previous outputs stay in place.
        if not prep.counts.trees:
            if progress is not None:
                progress.finish()   # nothing was labelled: nothing to resume
            raise UsageError(f"--input: none of the {len(files)} tree file(s) could be read "
                             f"({prep.counts.malformed_named[0]}); nothing was written")
    if progress is not None:
        progress.finish()   # the output is in place
    for bad in (prep.malformed_summary(), prep.off_config_summary()):
        if bad:
            log.warning(f"[preprocess] warning: {bad}")


def write_labels(args: argparse.Namespace, files: list[Path], root: Path, graph: MASGraph | None) -> None:
    """--labels NAME: the scheme's records in labels_<NAME>[_local]_<run>.jsonl."""
    scheme: LabelScheme = LABEL_SCHEMES[args.labels]
    options = config_from_args(Options, args)
    settings = scheme.check_input(files, args.input) if scheme.check_input else args.scheme_settings
    runner = LabelRunner(scheme, options, settings, graph)
    path = check_output_file(labels_path(args.input, args.view, scheme.name, options.window_tag), "input",
                             label=f"input {args.input}: output")
    if args.export:
        check_output_file(trl_path(path), "input", label=f"input {args.input}: output")
    if scheme.needs_rollouts:   # the progress file beside it (masprm.labels.progress)
        check_output_file(partial_path(path), "input", label=f"input {args.input}: output")
    if graph is not None and args.view == "local":
        log.info(f"[preprocess] local view, routing inboxes with {graph.source}", extra=RESULT)
    if scheme.needs_spreads:   # before the rollout policy loads: a bad folder once cost that load first
        check_ensemble_folder(args.rollout_ensemble)
    source = rollout_source(args, files, graph) if scheme.needs_rollouts else None
    runner.ctx.rollouts = source
    runner.ctx.spreads = ensemble_spreads(args.rollout_ensemble) if scheme.needs_spreads else None
    # the policy's samples are what a stop would lose: each finished tree is kept as it finishes
    progress = None if source is None else TreeProgress(
        path, rollout_fingerprint(args, runner, files, root, graph), {"runner": runner, "source": source},
        say=lambda line: log.info(f"[preprocess][labels {scheme.name}] {line}"))
    stream(files, root, [path], lambda f, name: [runner.label_file(f, name)], runner, progress)
    log.info(runner.summary(path), extra=RESULT)
    if source is not None:   # the policy cost the tree-derived schemes do not pay
        log.info(f"[preprocess][labels {scheme.name}] policy cost: {source.usage.agent_runs} agent runs, "
                 f"{source.usage.generated_tokens} generated tokens", extra=RESULT)
    if runner.why_none():
        log.info(f"[preprocess] {runner.why_none()}", extra=RESULT)
    if args.export:
        report_export(export_trl(path, pairs=scheme.kind == "pairs"))


def rollout_source(args: argparse.Namespace, files: list[Path], graph: MASGraph) -> RolloutSource:
    """The policy, the team and the gold check the rollout-based schemes sample and grade with (the gold of
    each question from its tree file's meta, compared by the rule the trees were graded with)."""
    gold: dict[str, str | None] = {}
    for f in files:
        try:
            tree = json.loads(Path(f).read_text(encoding="utf-8"))
            gold[str(tree["node_text"]).strip()] = (tree.get("meta") or {}).get("gold")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue   # a bad tree file is counted and named when it is labelled
    correct = ANSWER_CHECKERS[trees_checker(args.input)]
    policy = rollout_policy(args.rollout_policy, list(gold), graph, where=str(args.input))
    return RolloutSource(policy, graph, lambda q, answer: 1.0 if correct(answer, gold.get(q.strip())) else -1.0,
                         SamplingSettings(), temperature=args.rollout_temperature, seed=args.seed)


def trees_checker(input_path: Path) -> str:
    """The answer checker the trees were graded with, as their run folder's ``.run_settings`` records it (the
    default when it names none): the rollouts are graded by the same rule, or the run is refused in one line."""
    folder = input_path.parent if input_path.is_file() else input_path
    recorded = (read_settings(folder) or {}).get("answer_checker", DEFAULT_CHECKER)
    where = f"--input {input_path}: its trees were graded with --answer_checker {recorded} (recorded in " \
            f"{folder / SETTINGS_FILE})"
    check(isinstance(recorded, str) and recorded in ANSWER_CHECKERS,
          f"{where}, a checker this version does not have ({', '.join(ANSWER_CHECKERS.names())}); the rollouts "
          "would be graded by another rule")
    try:
        check_checker(recorded)
    except ConfigError as err:
        raise UsageError(f"{where}, the rule the rollouts are graded by, and {err}") from None
    return recorded


def rollout_policy(folder: Path, questions: list[str], graph: MASGraph, where: str) -> Any:
    """--rollout-policy: checked as stage 4's judge is (a full model with weights and a tokenizer, a chat
    template, each question with the team's longest system prompt inside its context), then loaded on the CPU."""
    from masprm.models.options import ModelOptions

    options = ModelOptions(device_map="cpu")
    model = check_local_model(str(folder), "rollout_policy")
    check_policy(model, "rollout_policy", options, questions=questions, where=where,
                 prompts=[agent.system_prompt for agent in graph.agents])
    from masprm.models.backends import load_policy   # the hf backend, with torch, only once it is checked

    return load_policy(None, model, options, setting="rollout_policy")


def rollout_fingerprint(args: argparse.Namespace, runner: LabelRunner, files: list[Path], root: Path,
                        graph: MASGraph) -> str:
    """Everything the records of a rollout-based label run depend on: the scheme and its settings, the mining
    flags, the seed and temperature, the policy, the ensemble, the team, the grading rule, each tree file's
    name and content, and the code (a progress file of another is not resumed)."""
    def content(f: Path) -> str | None:
        try:
            return file_identity(f)
        except OSError:
            return None   # an unreadable tree is counted and named when it is labelled

    return stable_hash({
        "scheme": runner.scheme.name, "settings": repr(runner.ctx.settings), "options": repr(runner.options),
        "seed": args.seed, "temperature": args.rollout_temperature, "sampling": repr(SamplingSettings()),
        "policy": path_identity(args.rollout_policy, model=True),
        "ensemble": path_identity(args.rollout_ensemble, model=True),
        "config": content(Path(graph.source)), "checker": trees_checker(args.input),
        "trees": [[str(f.relative_to(root)), content(f)] for f in files],
        # the scheme's module too: the registry names it in a string, which no import scan follows
        "code": code_version(("stages/preprocess.py",), sys.modules[runner.scheme.records.__module__].__file__)},
        length=16)


@dataclass
class EnsembleSpreads:
    """The spread of an ensemble scorer's heads on each prefix (``masprm.labels.mc_budget.Spreads``)."""

    scorer: Any

    def spreads(self, question: str, prefixes) -> list[float]:
        self.scorer.score_batch([join_steps(question, [text for _, text in p], self.scorer.separator)
                                 for p in prefixes])
        return list(self.scorer.last_spread)


def not_an_ensemble(folder: Path) -> str:
    return (f"--rollout-ensemble: {folder} is not an ensemble scorer (trained with --mode ensemble); its heads' "
            "spread ranks the prefixes")


def check_ensemble_folder(folder: Path) -> None:
    """--rollout-ensemble checked whole without loading (``masprm.checks.check_scorer_folder``, then
    ``masprm.models.scorer_checks.check_scorer_fits``: weights, head, adapter against its base), and trained
    with --mode ensemble as its record says."""
    record = read_scorer_folder(folder)
    check_scorer_folder(record, "rollout_ensemble")
    check_scorer_fits(record, "rollout_ensemble", None)
    check(training_of(record.meta).get("objective") == "ensemble", not_an_ensemble(folder))


def ensemble_spreads(folder: Path) -> EnsembleSpreads:
    """--rollout-ensemble (checked by ``check_ensemble_folder``): the scorer, on the CPU."""
    from masprm.models.options import ModelOptions
    from masprm.models.scorer import EnsembleScorer, load_scorer

    scorer = load_scorer(folder, options=ModelOptions(device_map="cpu"), setting="rollout_ensemble")
    check(isinstance(scorer, EnsembleScorer), not_an_ensemble(folder))
    return EnsembleSpreads(scorer)


def report_export(count) -> None:
    log.info(f"[preprocess][TRL] {count.written} rows -> {count.path}"
             + (f" ({count.left_out} pairs without a preference left out)" if count.left_out else ""), extra=RESULT)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    files = find_trees(args.input)
    graph = load_graph(args)
    root = args.input if args.input.is_dir() else args.input.parent
    if args.labels is not None:
        write_labels(args, files, root, graph)
        return 0
    options = config_from_args(Options, args)
    prep = Preprocessor(options, graph)
    prm_path, ppm_path = output_paths(args.input, args.view, options.window_tag)
    outputs = (ppm_path, prm_path) if args.make_ppm else (prm_path,)
    for path in outputs + tuple(trl_path(p) for p in outputs if args.export):
        check_output_file(path, "input", label=f"input {args.input}: output")
    if graph is not None and args.view == "local":
        log.info(f"[preprocess] local view, routing inboxes with {graph.source}", extra=RESULT)
    stream(files, root, [prm_path, ppm_path] if args.make_ppm else [prm_path],
           lambda f, name: list(prep.process_file(f, name)), prep)
    log.info(prep.prm_summary(prm_path), extra=RESULT)
    if args.make_ppm:
        log.info(prep.ppm_summary(ppm_path), extra=RESULT)
    for why in (prep.why_no_prm(), prep.why_no_ppm()):
        if why:
            log.info(f"[preprocess] {why}", extra=RESULT)
    for path in outputs if args.export else ():
        report_export(export_trl(path, pairs=path == ppm_path))
    return 0


def cli() -> None:
    """The console script (pyproject.toml) and the checkout's script: one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
