"""`masprm-archive` / `python -m masprm.archive`: pack, verify, unpack, list and push a run's archive.

Exit codes: 0 done; 1 `verify` found a file missing, changed or not listed, or a stage-4 log whose fingerprint
its record or recorded command does not reproduce (each named on one line of stderr, like `make report-check`'s
1 for a doc that differs); 2 bad input in one line, nothing written:
a flag, an archive that cannot be read safely (a link, a path that leaves its folder, a pickle, a kind of
file not listed, a malformed manifest), `unpack` or `push` of an archive that does not verify, a file
`unpack` would replace, a push while offline.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from masprm.archive.commands import stage4_argv
from masprm.archive.format import LEVELS, MANIFEST
from masprm.archive.pack import pack
from masprm.archive.read import check, read_manifest, unpack, verified, versions
from masprm.cli import ArgumentParser, UsageError, run_cli
from masprm.config import add_config_args, arg, config_from_args
from masprm.errors import first_line
from masprm.paths import PathText, check_input_dir
from masprm.provenance import code_commit, preregistration_commit

ARCHIVES = "archives"   # where a checkout keeps its archives (`make report` reads them)


@dataclass
class PackArgs:
    run: str = arg(positional=True, help="the run's name (toy_demo, toy_lab, ...): the archive is <out>/<run>-v<N>")
    paths: list[str] = arg(positional=True, nargs="+", help="the run's files and folders, relative to --root "
                           "(a folder gives its own files, not its sub-folders)")
    out: PathText = arg(ARCHIVES, help=f"folder the archive is written into (default {ARCHIVES})")
    level: str = arg("tables", choices=LEVELS, help="tables: stage-4 logs, tables and benchmark and lab reports "
                     "(what the published tables are computed from); full: also trees, stage-2 records and "
                     "scorer folders (default tables)")
    root: PathText = arg(".", help="the folder the paths are relative to, and where unpack puts them back "
                         "(default: the current folder)")
    command: str | None = arg(None, help="the command that made the run, recorded in the card (e.g. 'make demo')")
    seeds: list[int] | None = arg(None, nargs="+", help="the run's seeds, recorded in the card")
    preregistration: str | None = arg(None, help="the run's pre-registration file: its last commit is recorded")


@dataclass
class VerifyArgs:
    archive: PathText = arg(positional=True, help="the archive folder (<run>-v<N>)")


@dataclass
class UnpackArgs:
    archive: PathText = arg(positional=True, help="the archive folder (<run>-v<N>)")
    to: PathText = arg(".", help="folder the run's files are put back under, at their paths (default: the "
                       "current folder, a checkout: stage 5, make report and a resumed lab then read them)")


@dataclass
class ListArgs:
    archive: PathText = arg(positional=True, help=f"an archive, or a folder of archives (e.g. {ARCHIVES})")


@dataclass
class PushArgs:
    archive: PathText = arg(positional=True, help="the archive folder (<run>-v<N>)")
    repo_id: str = arg(flags=("--repo_id",), help="the Hub dataset repository, 'user/name' or 'org/name'")
    private: bool = arg(False, help="create the repository private (when it does not exist yet)")


COMMANDS = {"pack": (PackArgs, "pack a run's outputs into a new version of its archive"),
            "verify": (VerifyArgs, "check every file's size and SHA-256, that the manifest lists them all, and "
                       "that each stage-4 log's record and recorded command reproduce its fingerprint"),
            "unpack": (UnpackArgs, "put an archive's files back at their paths (nothing written unless it verifies)"),
            "list": (ListArgs, "what an archive holds, or the archives of a folder"),
            "push": (PushArgs, "upload an archive to the Hugging Face Hub as a dataset repository")}


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="masprm-archive", description="Versioned archives of a run's outputs, laid out as "
                       "Hugging Face dataset repositories (docs/sharing.md).")
    sub = p.add_subparsers(dest="command_name", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for name, (cls, text) in COMMANDS.items():
        add_config_args(sub.add_parser(name, help=text, description=text), cls)
    return p


def _size(n: int) -> str:
    return f"{n / 2**20:.2f} MB" if n >= 2**20 else f"{n / 2**10:.1f} kB"


def run_pack(a: PackArgs) -> int:
    meta = {"command": a.command, "code": code_commit(), "seeds": a.seeds}
    if a.preregistration:
        meta["preregistration"] = {"file": a.preregistration, "commit": preregistration_commit(a.preregistration)}
    done = pack(a.run, a.paths, root=a.root, out=a.out, level=a.level, meta={k: v for k, v in meta.items() if v},
                commands={p: a.command for p in a.paths} if a.command else {})
    report_packed(done)
    return 0


def report_packed(done) -> None:
    """What a pack did, in two lines (the demo and the lab print the same)."""
    if not done.created:
        print(f"archive: {done.path} already holds these files (level {done.manifest.level}): nothing written")
        return
    print(f"archive: wrote {done.path} ({len(done.manifest.files)} files, {_size(done.size())}, level "
          f"{done.manifest.level})" + (f"; left out {len(done.left_out)}: {', '.join(done.left_out[:4])}"
                                       f"{' ...' if len(done.left_out) > 4 else ''}" if done.left_out else ""))


def run_verify(a: VerifyArgs) -> int:
    manifest, problems = check(a.archive)
    for line in problems:
        print(f"masprm-archive: verify: {line}", file=sys.stderr)
    if problems:
        return 1
    logs = sum(1 for e in manifest.files if e.part == "logs" and e.fingerprint)
    commands = sum(1 for e in manifest.files if e.part == "logs" and e.fingerprint and stage4_argv(e.command or ""))
    print(f"{a.archive}: {len(manifest.files)} files, every size and SHA-256 as listed, {logs} log files' "
          f"fingerprints checked against their conditions' records, {commands} of them also against their stage-4 "
          f"command (run "
          f"{manifest.run}, version {manifest.version}, level {manifest.level})")
    return 0


def run_unpack(a: UnpackArgs) -> int:
    written, same = unpack(a.archive, a.to)
    print(f"unpacked {a.archive} into {a.to}: {len(written)} files written, {len(same)} already there")
    return 0


def run_list(a: ListArgs) -> int:
    check_input_dir(a.archive, "archive")
    if (Path(a.archive) / MANIFEST).exists():
        m = read_manifest(a.archive)
        print(f"{m.name}: level {m.level}, {len(m.files)} files, made by {m.meta.get('command') or '(not recorded)'}"
              f" at {(m.meta.get('code') or {}).get('commit', 'none')}")
        for e in m.files:
            made = " ".join(f"{k}={v}" for k, v in (("fingerprint", e.fingerprint),) if v)
            print(f"  {e.part:<8} {e.size:>10,}  {e.path}{'  ' + made if made else ''}")
        return 0
    found = versions(a.archive)
    if not found:
        print(f"{a.archive}: no archives (<run>-v<N> folders holding {MANIFEST})")
    for run, vs in found.items():
        for version, path in vs:
            m = read_manifest(path)
            print(f"{path}: level {m.level}, {len(m.files)} files, {m.meta.get('command') or '(command not recorded)'}")
    return 0


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


def offline_reason() -> str | None:
    """Why nothing can reach the Hub now (None: it answers): the offline switch, or no connection."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{name} is set"
    url = urlparse(hub_endpoint())
    try:
        socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=5).close()
    except OSError as err:
        return f"{url.hostname} cannot be reached ({first_line(err, limit=120)})"
    return None


def run_push(a: PushArgs) -> int:
    from huggingface_hub.utils import HFValidationError, validate_repo_id
    try:
        validate_repo_id(a.repo_id)
    except HFValidationError as err:
        raise UsageError(f"--repo_id {a.repo_id!r}: not a Hub repository id ({first_line(err, limit=200)})") from None
    if "/" not in a.repo_id:
        raise UsageError(f"--repo_id {a.repo_id!r}: name the owner too, as 'user/name' or 'org/name'")
    manifest = verified(a.archive)   # what goes up is what checks
    later = f"masprm-archive push {a.archive} --repo_id {a.repo_id}" + (" --private" if a.private else "")
    reason = offline_reason()
    if reason:
        raise UsageError(f"push: offline ({reason}): nothing sent; the archive stays complete in {a.archive}: "
                         f"run later `{later}`")
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError
    api = HfApi()
    try:
        api.create_repo(a.repo_id, repo_type="dataset", private=a.private, exist_ok=True)
        info = api.upload_folder(repo_id=a.repo_id, folder_path=str(a.archive), repo_type="dataset",
                                 commit_message=f"masprm archive {manifest.name}")
        # each version is a tag of the one repository (its git history holds them all)
        api.create_tag(a.repo_id, tag=f"v{manifest.version}", repo_type="dataset", exist_ok=True)
    except (OSError, HfHubHTTPError) as err:
        raise UsageError(f"push of {a.archive} to {a.repo_id} failed: {first_line(err, limit=300)}; nothing lost: "
                         f"run `{later}` again") from None
    print(f"pushed {manifest.name} to the Hub dataset {a.repo_id} (tag v{manifest.version}): "
          f"{getattr(info, 'commit_url', info)}")
    return 0


RUNNERS = {"pack": run_pack, "verify": run_verify, "unpack": run_unpack, "list": run_list, "push": run_push}


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    cls = COMMANDS[ns.command_name][0]
    return RUNNERS[ns.command_name](config_from_args(cls, ns))


def cli() -> None:
    """The console script (pyproject.toml): one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
