"""Whether an archived stage-4 log's recorded command reproduces its fingerprint, without running anything.

    problems = fingerprint_problems(archive, manifest.files, sidecars)   # [] when every command checks

A condition's fingerprint is `stable_hash(definition)` (`masprm.eval.runner.condition_manifest`), and the
definition, recorded in the condition's `.manifest.json`, holds the method, its settings, the data (dataset,
split, sample size, ...), the team's content hash, each model's id and content hash, and the code version.
For each log file the archive's manifest lists with a fingerprint, `verify` checks:

- that the condition's recorded definition hashes to the fingerprint, that its `.manifest.json` records the
  same one, and that the file's name carries it (`<dataset>_<method>_<fingerprint>_<model>_<seed>`);
- where the manifest lists the file with a command (none: no error) and the command is stage 4's
  (`masprm-eval`, `compare_sbs_mcts.py`, `-m masprm.stages.evaluate`), what its flags determine, parsed by
  stage 4's own settings classes and never run: the method is one of `--methods`, the method's recorded
  settings are those the flags give, the split, and the dataset, sample size and team path where the
  command names them, the policy's id, and the seed is one the command runs.

The rest of the definition names what an archive cannot hold (the models' and the team file's contents,
the data file's, the code version): for those the log's own record is taken, and the first check is what
ties them to the fingerprint. A command that is not stage 4's (`make demo`, a lab's) or that reads a run
file (`--config`) gets the first check only. Pure Python: no torch.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping

from masprm.archive.format import Entry
from masprm.cli import ArgumentParser
from masprm.cluster import ClusterSettings
from masprm.config import add_settings_args, config_from_args, settings_from_args
from masprm.dataset_sources import DatasetFields
from masprm.errors import MasprmError
from masprm.eval.logs import LOG_FILE_SUFFIXES
from masprm.eval.methods import METHODS, settings_classes
from masprm.eval.settings import DataSettings, ModelSettings, RunSettings
from masprm.identity import stable_hash
from masprm.roles import role_flags_class
from masprm.scorer_formats import ScorerFormatFlags

# How a recorded command names stage 4: the console script, the checkout's script, the package module.
STAGE4_PROGRAMS = ("masprm-eval", "compare_sbs_mcts.py", "masprm.stages.evaluate")
MANIFEST_SUFFIX = LOG_FILE_SUFFIXES["manifest"]


class _Unparsed(Exception):
    """A recorded command stage 4's flags do not accept (a problem line, never an exit)."""


class _Parser(ArgumentParser):
    def error(self, message: str):   # argparse would print and exit; verify reports it on the file's line
        raise _Unparsed(message)


def _parser() -> ArgumentParser:
    """Stage 4's flags that a fingerprint reads: the data, the models, every method's settings, the run's
    methods. Its other flags (loading, backend, engine, workers) change no fingerprint and are passed over."""
    p = _Parser(prog="masprm-eval", add_help=False)
    add_settings_args(p, ((None, (DataSettings, DatasetFields, ModelSettings, role_flags_class(), ScorerFormatFlags,
                                  *settings_classes(), RunSettings, ClusterSettings)),))
    return p


def stage4_argv(command: str) -> list[str] | None:
    """The flags of a recorded stage-4 command; None for another command or one that reads a run file."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None
    for i, token in enumerate(tokens):
        if PurePosixPath(token).name in STAGE4_PROGRAMS:
            argv = tokens[i + 1:]
            return None if any(a == "--config" or a.startswith("--config=") for a in argv) else argv
    return None


def _json(value: Any) -> Any:
    """A value as the condition's manifest holds it (tuples as lists, paths as text)."""
    return json.loads(json.dumps(value, default=str))


def command_mismatch(argv: list[str], record: Mapping) -> str | None:
    """What of the condition's record (its `.manifest.json`) the command's flags do not give; None: all."""
    try:
        ns, _ = _parser().parse_known_args(argv)
        data = config_from_args(DataSettings, ns, fields=config_from_args(DatasetFields, ns))
        models = ModelSettings.from_args(ns)
        run = config_from_args(RunSettings, ns, cluster=config_from_args(ClusterSettings, ns))
        values = settings_from_args(settings_classes(), ns)
    except (_Unparsed, MasprmError) as err:
        return f"its command is not one stage 4 accepts ({str(err).splitlines()[0][:200]})"
    definition = record["definition"]
    method = definition.get("method")
    if method not in run.methods:
        return f"its command's --methods ({' '.join(run.methods)}) do not hold its method {method}"
    recorded = definition.get("settings") or {}
    given = _json(METHODS[method].recorded_settings(values))
    for name in sorted(set(given) | set(recorded)):
        if name not in given:   # an option the command leaves off is not recorded (`unrecorded`)
            return f"the log records {name}={recorded[name]!r}, its command leaves it off"
        # a setting the command leaves open that stage 4 fills from the dataset (the step oracle) is recorded
        # filled: only a value the command gives is compared
        if given[name] is not None and given[name] != recorded.get(name):
            return f"its command gives {name}={given[name]!r}, the log records {recorded.get(name)!r}"
    recorded_data = definition.get("data") or {}
    for name in ("dataset", "split", "sample_n"):   # open dataset and sample size: stage 4's defaults fill them
        value = getattr(data, name)
        if value is not None and value != recorded_data.get(name):
            return f"its command gives {name}={value!r}, the log records {recorded_data.get(name)!r}"
    policy = ((definition.get("models") or {}).get("policy") or {}).get("id")
    if models.gen_model_id != policy:
        return f"its command gives gen_model_id={models.gen_model_id!r}, the log records {policy!r}"
    if models.mas_config is not None and str(models.mas_config) != record.get("mas_config_path"):
        return (f"its command gives mas_config={str(models.mas_config)!r}, the log records "
                f"{record.get('mas_config_path')!r}")
    seeds = data.seeds or [data.seed]
    if record.get("seed") not in seeds:
        return f"its command runs seed(s) {' '.join(map(str, seeds))}, the log is seed {record.get('seed')}"
    return None


def record_mismatch(stem: str, fingerprint: str, record: Any) -> str | None:
    """Whether the condition's record is what `fingerprint` was computed from, and its file is named by it."""
    if not isinstance(record, dict) or not isinstance(record.get("definition"), dict):
        return "its condition's manifest holds no definition"
    if record.get("fingerprint") != fingerprint:
        return (f"its condition's manifest records fingerprint {record.get('fingerprint')}, the archive's "
                f"{fingerprint}")
    if stable_hash(record["definition"]) != fingerprint:
        return (f"its recorded definition hashes to {stable_hash(record['definition'])}, not its fingerprint "
                f"{fingerprint}")
    name = PurePosixPath(stem).name
    if f"_{record['definition'].get('method')}_{fingerprint}_" not in name or not name.endswith(f"_{record.get('seed')}"):
        return f"its name does not carry its method, fingerprint {fingerprint} and seed {record.get('seed')}"
    return None


def log_stem(path: str) -> str:
    """A condition's file path without its suffix: the path its files share."""
    suffix = max((s for s in LOG_FILE_SUFFIXES.values() if path.endswith(s)), key=len, default="")
    return path[: len(path) - len(suffix)]


def fingerprint_problems(archive: Path, entries: Iterable[Entry], sidecars: Mapping[str, bytes]) -> list[str]:
    """One line per log file listed with a fingerprint that its condition's record (and its command, where
    one is recorded) does not reproduce; `sidecars`: the condition manifests that checked, path -> bytes (one
    that did not check is reported by its checksum already)."""
    entries = list(entries)
    listed = {e.path for e in entries}
    problems = []
    for e in entries:
        if e.part != "logs" or not e.fingerprint:
            continue
        stem = log_stem(e.path)
        sidecar = stem + MANIFEST_SUFFIX
        if sidecar not in sidecars:
            if sidecar not in listed:
                problems.append(f"{archive / e.stored}: its condition's {PurePosixPath(sidecar).name} is not in the "
                                f"archive: fingerprint {e.fingerprint} cannot be checked")
            continue
        try:
            record = json.loads(sidecars[sidecar])
        except ValueError:
            record = None
        problem = record_mismatch(stem, e.fingerprint, record)
        argv = stage4_argv(e.command) if problem is None and e.command else None   # no command: not an error
        problem = problem or (command_mismatch(argv, record) if argv is not None else None)
        if problem:
            problems.append(f"{archive / e.stored}: fingerprint {e.fingerprint} not reproduced: {problem}")
    return problems
