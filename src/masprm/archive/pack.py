"""Packing a run's outputs into a versioned archive (`masprm.archive.read` checks and unpacks one).

    pack("toy_demo", ["logs/toy_demo", "results/toy_stepbench.json", ...], root=".", out="archives",
         level="tables", meta={"command": "make demo", ...}, commands={"logs/toy_demo": "masprm-eval ..."})

A path given to `pack` is a file or a folder of the run; a folder contributes its own files, never its
sub-folders (a scorer's checkpoint-*/ and runs/, a logs folder's command outputs), and only files of the
kinds an archive holds (`format.KINDS`): torch's pickles (training_args.bin, optimizer states) stay out.
An archive is written whole into a temporary folder and renamed into place; a pack whose files are those
of the newest version already there writes nothing and names that version. Pure Python: no torch.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

from masprm.archive.format import (CARD, HUB_FILE_LIMIT, LEVELS, MANIFEST, PARTS, ArchiveError, Entry, Manifest,
                                   archive_name, card_text, compressed, kind_of, looks_pickled, safe_path,
                                   sha256_of, split_name)
from masprm.archive.read import read_manifest, versions
from masprm.identity import path_identity, stable_hash
from masprm.outputs import check_output_dir, check_plain_name

SCORER_META = "masprm_scorer.json"   # a scorer folder's metadata (masprm.scorer_meta.SCORER_META_FILE)
TREE_SETTINGS = ".run_settings"       # a tree folder's settings (masprm.run_folder.SETTINGS_FILE)
LOG_SUFFIXES = (".manifest.json", ".summary.json", ".partial.jsonl", ".jsonl", ".txt")


# --------------------------------------------------------------------------- packing


def part_of(path: Path) -> str:
    """What a path given to `pack` is: a scorer folder, a stage-1 tree folder, a stage-4 logs folder, a
    stage-2 records file, or results (tables, benchmark and lab reports)."""
    if path.is_dir():
        if (path / SCORER_META).is_file():
            return "scorer"
        if (path / TREE_SETTINGS).is_file():
            return "trees"
        if any(path.glob("*.summary.json")) or any(path.glob("*.manifest.json")):
            return "logs"
        return "results"
    return "stage2" if path.suffix == ".jsonl" else "results"


def _log_stem(name: str) -> str:
    return next((name[: -len(s)] for s in LOG_SUFFIXES if name.endswith(s)), name)


def _fingerprints(folder: Path, part: str) -> dict[str, str]:
    """file name -> the fingerprint that made it, where the run recorded one: a condition's (its
    .manifest.json), a tree run's (its settings, paths left out), a scorer's (what loads of it)."""
    if part == "logs":
        found = {}
        for manifest in folder.glob("*.manifest.json"):
            try:
                value = json.loads(manifest.read_text(encoding="utf-8")).get("fingerprint")
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(value, str):
                found[_log_stem(manifest.name)] = value
        return {f.name: found[_log_stem(f.name)] for f in folder.iterdir() if _log_stem(f.name) in found}
    if part == "trees":
        try:
            settings = json.loads((folder / TREE_SETTINGS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

        def no_paths(value):   # an absolute path names the machine, not the run
            if isinstance(value, dict):
                return {k: no_paths(v) for k, v in value.items() if k != "path"}
            return value
        return {"*": stable_hash(no_paths(settings), 16)}
    if part == "scorer":
        return {"*": path_identity(folder, model=True) or ""}
    return {}


@dataclass(frozen=True)
class Found:
    """A file of the run to pack: its path in the checkout and its part."""

    path: str
    part: str
    fingerprint: str | None


def collect(root: Path, paths: Sequence[str], level: str) -> tuple[list[Found], list[str]]:
    """The files `pack` archives at `level` and the ones it leaves out (by kind or level), each path
    relative to `root`. A path that is missing, absolute or leaves `root` is refused."""
    found, left = [], []
    for given in paths:
        rel = safe_path(Path(given).as_posix().rstrip("/") if not os.path.isabs(given) else given, f"pack {given}")
        path = root / rel
        if not os.path.lexists(path):
            raise ArchiveError(f"pack {given}: not found under {root}")
        if path.is_symlink():
            raise ArchiveError(f"pack {given}: is a link; an archive holds a run's own files, never a link")
        part = part_of(path)
        if LEVELS.index(PARTS[part]) > LEVELS.index(level):
            left.append(f"{rel}/ ({part}: level full)" if path.is_dir() else f"{rel} ({part}: level full)")
            continue
        if path.is_file():
            if kind_of(rel):
                found.append(Found(rel, part, None))
            else:
                left.append(f"{rel} (kind)")
            continue
        prints = _fingerprints(path, part)
        for child in sorted(path.iterdir()):
            name = f"{rel}/{child.name}"
            if child.is_symlink() or not child.is_file():
                continue   # sub-folders (checkpoints, command outputs) are no part of the run's results
            if kind_of(name) is None or child.name.endswith(".partial.jsonl"):
                left.append(f"{name} (kind)" if kind_of(name) is None else f"{name} (unfinished)")
                continue
            found.append(Found(name, part, prints.get(child.name) or prints.get("*")))
    return found, left


def _gzipped(data: bytes) -> bytes:
    """gzip with no name and no time in its header, so the same file gives the same bytes."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9, mtime=0, filename="") as fh:
        fh.write(data)
    return buffer.getvalue()


def _command_for(path: str, commands: Mapping[str, str]) -> str | None:
    """The command recorded for the longest given path that is `path` or holds it."""
    best = max((p for p in commands if path == p or path.startswith(p.rstrip("/") + "/")), key=len, default=None)
    return commands[best] if best is not None else None


@dataclass(frozen=True)
class Packed:
    path: Path
    manifest: Manifest
    created: bool          # False: the newest version already held these files; nothing written
    left_out: tuple[str, ...]

    def size(self) -> int:
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())


def pack(run: str, paths: Sequence[str], *, root: str | os.PathLike, out: str | os.PathLike, level: str,
         meta: Mapping | None = None, commands: Mapping[str, str] | None = None) -> Packed:
    """The run's files (`paths`, relative to `root`) at `level` into `out`/<run>-v<N> (N: one past the
    newest; `meta` goes to the manifest and the card, `commands` names the command that made each path)."""
    check_plain_name(run, "run", "run name")
    if split_name(archive_name(run, 1)) is None:
        raise ArchiveError(f"run {run!r}: a name of letters, digits, '_', '.' and '-', starting with a letter or digit")
    if level not in LEVELS:
        raise ArchiveError(f"level {level!r}: one of {', '.join(LEVELS)}")
    root, out = Path(root), Path(out)
    found, left = collect(root, paths, level)
    if not found:
        raise ArchiveError(f"pack {run}: none of {', '.join(paths) or '(no paths)'} holds a file to archive at "
                           f"level {level}; nothing written")
    check_output_dir(out, "out", inputs={str(i): str(root / p) for i, p in enumerate(paths)})
    entries, blobs = [], {}
    for f in found:
        data, mtime = (root / f.path).read_bytes(), (root / f.path).stat().st_mtime_ns
        if looks_pickled(data[:8]):
            raise ArchiveError(f"pack {f.path}: holds a pickle or a zip file; an archive never does")
        e = Entry(f.path, f.part, len(data), sha256_of(data), command=_command_for(f.path, commands or {}),
                  fingerprint=f.fingerprint, mtime_ns=mtime)
        if compressed(f.path, f.part):
            data = _gzipped(data)
            e = replace(e, gzip=True, stored_size=len(data), stored_sha256=sha256_of(data))
        if len(data) > HUB_FILE_LIMIT:
            raise ArchiveError(f"pack {f.path}: {len(data):,} bytes, over the Hub's {HUB_FILE_LIMIT:,} a file")
        entries.append(e)
        blobs[e.stored] = data
    entries.sort(key=lambda e: e.path)
    existing = versions(out, run).get(run, [])
    if existing:
        last = read_manifest(existing[-1][1])
        candidate = Manifest(run, last.version, level, dict(meta or {}), tuple(entries))
        if last.level == level and last.contents() == candidate.contents():
            return Packed(existing[-1][1], last, False, tuple(left))
    manifest = Manifest(run, (existing[-1][0] if existing else 0) + 1, level, dict(meta or {}), tuple(entries))
    final = out / manifest.name
    made_out = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{manifest.name}.partial-", dir=out))
    try:
        for stored, data in blobs.items():
            target = temp / stored
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (temp / MANIFEST).write_text(manifest.text(), encoding="utf-8")
        (temp / CARD).write_text(card_text(manifest), encoding="utf-8")
        os.chmod(temp, 0o777 & ~_umask())   # mkdtemp makes it private; an archive is for sharing
        os.rename(temp, final)   # a folder appears whole or not at all (a same-named one: the rename fails)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        if made_out and not any(out.iterdir()):   # a refusal leaves no folder behind
            out.rmdir()
        raise
    return Packed(final, manifest, True, tuple(left))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
