"""Reading an archive: checking it whole, putting its files back, a checked temporary copy.

    manifest, problems = check("archives/toy_demo-v1")   # problems: [] when every file is there, whole, listed
    unpack("archives/toy_demo-v1", ".")                  # the run's files back at their paths
    with opened("archives/toy_demo-v1") as root:         # a checked copy in a temporary folder, removed after
        ...

Reading trusts nothing in the archive: a link or anything but a plain file or folder, a path that leaves
the folder, a file of a kind not listed or with a pickle's bytes is an `ArchiveError` (one line, exit 2);
a file that is missing, changed or not in the manifest is a problem `check` lists (`verify`: exit 1).
`unpack` writes nothing unless the whole archive checks, refuses to replace a file that differs, and
removes what it wrote when it fails. Pure Python: no torch.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from masprm.archive.commands import MANIFEST_SUFFIX, fingerprint_problems
from masprm.archive.format import (CARD, DATA, GZIP, MANIFEST, MANIFEST_LIMIT, META_FILES, ArchiveError, Entry,
                                   Manifest, card_manifest_sha, kind_of, looks_pickled, parse_manifest, sha256_of,
                                   split_name)
from masprm.io import atomic_write_bytes
from masprm.outputs import check_outside_inputs


def versions(folder: str | os.PathLike, run: str | None = None) -> dict[str, list[tuple[int, Path]]]:
    """The archives in `folder` by run, each run's versions in order (only folders holding a manifest)."""
    found: dict[str, list[tuple[int, Path]]] = {}
    folder = Path(folder)
    if not folder.is_dir():
        return found
    for child in folder.iterdir():
        named = split_name(child.name)
        if named and (run is None or named[0] == run) and not child.is_symlink() and (child / MANIFEST).is_file():
            found.setdefault(named[0], []).append((named[1], child))
    return {r: sorted(v) for r, v in sorted(found.items())}


def newest(folder: str | os.PathLike) -> list[Path]:
    """Each run's newest archive in `folder`."""
    return [vs[-1][1] for vs in versions(folder).values()]



# --------------------------------------------------------------------------- reading


def _scan(archive: Path) -> set[str]:
    """Every file of the archive (relative POSIX paths), refusing links and anything but files and folders."""
    if archive.is_symlink() or not archive.is_dir():
        raise ArchiveError(f"{archive}: not an archive folder" + (" (a link)" if archive.is_symlink() else ""))
    files = set()
    for here, dirs, names in os.walk(archive):   # links are listed, never followed
        for name in dirs + names:
            full = Path(here) / name
            rel = full.relative_to(archive).as_posix()
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                raise ArchiveError(f"{archive}: {rel} is a link; an archive holds plain files only, refused")
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise ArchiveError(f"{archive}: {rel} is not a plain file or folder; refused")
            if stat.S_ISREG(mode):
                files.add(rel)
    return files


def read_manifest(archive: str | os.PathLike) -> Manifest:
    path = Path(archive) / MANIFEST
    st = os.lstat(path) if os.path.lexists(path) else None
    if st is None or not stat.S_ISREG(st.st_mode):
        raise ArchiveError(f"{archive}: no {MANIFEST} (a plain file) in it: not an archive")
    if st.st_size > MANIFEST_LIMIT:
        raise ArchiveError(f"{path}: {st.st_size:,} bytes, over {MANIFEST_LIMIT:,}: refused")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ArchiveError(f"{path}: not UTF-8 text") from None
    return parse_manifest(text, str(path))


def _content(archive: Path, e: Entry) -> tuple[bytes | None, str | None]:
    """A listed file's bytes as the run wrote them (decompressed, never past its listed size), or the
    problem that makes it not the listed file."""
    stored = archive / e.stored
    if not stored.is_file():
        return None, "missing"
    size = stored.stat().st_size
    if size != (e.stored_size if e.gzip else e.size):   # never read more than the manifest lists
        return None, f"differs from the manifest ({size:,} bytes, listed {e.stored_size if e.gzip else e.size:,})"
    data = stored.read_bytes()
    if e.gzip:
        if (len(data), sha256_of(data)) != (e.stored_size, e.stored_sha256):
            return None, f"differs from the manifest ({len(data):,} bytes, SHA-256 {sha256_of(data)[:12]}…)"
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as fh:
                data = fh.read(e.size + 1)   # a bomb stops one byte past what the manifest lists
        except (OSError, EOFError):
            return None, "not a gzip file"
    if len(data) != e.size or sha256_of(data) != e.sha256:
        return None, f"differs from the manifest ({len(data):,} bytes, SHA-256 {sha256_of(data)[:12]}…)"
    if looks_pickled(data[:8]):
        raise ArchiveError(f"{stored}: holds a pickle or a zip file; refused")
    return data, None


def check(archive: str | os.PathLike) -> tuple[Manifest, list[str]]:
    """The archive's manifest and its problems (one line each, naming the file): [] when every listed file is
    there with its size and SHA-256, nothing else is in it, the card records this manifest, and every stage-4
    log listed with a command and a fingerprint is reproduced by them (`masprm.archive.commands`). An archive
    that cannot be read safely is an ArchiveError instead."""
    archive = Path(archive)
    files = _scan(archive)
    manifest = read_manifest(archive)
    problems = []
    listed = {e.stored for e in manifest.files}
    for rel in sorted(files - listed - set(META_FILES)):
        data_path = rel[len(DATA) + 1:] if rel.startswith(DATA + "/") else rel
        if kind_of(data_path.removesuffix(GZIP)) is None:
            raise ArchiveError(f"{archive / rel}: not a kind of file an archive holds; refused")
        problems.append(f"{archive / rel}: not in the manifest")
    sidecars = {}   # the condition manifests that check: what the fingerprints are checked against
    for e in manifest.files:
        data, problem = _content(archive, e)
        if problem:
            problems.append(f"{archive / e.stored}: {problem}")
        elif e.part == "logs" and e.path.endswith(MANIFEST_SUFFIX):
            sidecars[e.path] = data
    problems += fingerprint_problems(archive, manifest.files, sidecars)
    card = archive / CARD
    readable = card.is_file() and card.stat().st_size <= MANIFEST_LIMIT
    recorded = card_manifest_sha(card.read_text(encoding="utf-8", errors="replace")) if readable else None
    if recorded != sha256_of((archive / MANIFEST).read_bytes()):
        problems.append(f"{card}: " + ("missing" if not card.is_file() else
                                       "its manifest_sha256 is not that of manifest.json"))
    return manifest, problems


def verified(archive: str | os.PathLike) -> Manifest:
    """The manifest of an archive that checks whole; an ArchiveError naming its first problem otherwise."""
    manifest, problems = check(archive)
    if problems:
        more = f" (and {len(problems) - 1} more: masprm-archive verify {archive})" if len(problems) > 1 else ""
        raise ArchiveError(f"{problems[0]}{more}; nothing read from it")
    return manifest


def unpack(archive: str | os.PathLike, to: str | os.PathLike) -> tuple[list[str], list[str]]:
    """The archive's files at their paths under `to`: (written, already there with the same bytes). Nothing is
    written unless the archive checks whole and no file there differs; a failure removes what it wrote."""
    archive, to = Path(archive), Path(to)
    manifest = verified(archive)
    if os.path.lexists(to) and not to.is_dir():
        raise ArchiveError(f"--to {to}: is a file, not a folder")
    check_outside_inputs(to, "to", {"archive": str(archive)})
    todo, same = [], []
    for e in manifest.files:
        target = to / e.path
        for parent in list(reversed(target.parents))[len(to.parts):]:   # the folders below `to`
            if os.path.islink(parent) or (os.path.lexists(parent) and not parent.is_dir()):
                raise ArchiveError(f"--to {to}: {parent} is {'a link' if os.path.islink(parent) else 'a file'} "
                                   f"where the archive has the folder of {e.path}; nothing written")
        if os.path.lexists(target):
            st = os.lstat(target)
            if not stat.S_ISREG(st.st_mode):
                raise ArchiveError(f"--to {to}: {target} is not a plain file; nothing written")
            if _sha256_file(target) == e.sha256:
                same.append(e.path)
                continue
            raise ArchiveError(f"--to {to}: {target} exists and differs from the archive's; nothing written "
                               "(move it away, or unpack --to another folder)")
        todo.append(e)
    written, made = [], []
    try:
        for e in todo:
            target = to / e.path
            for parent in reversed(target.parents):
                if not parent.exists():
                    parent.mkdir()
                    made.append(parent)
            data, problem = _content(archive, e)   # read again: the archive may have changed since it checked
            if problem:
                raise ArchiveError(f"{archive / e.stored}: {problem} (changed while unpacking)")
            atomic_write_bytes(target, data)
            written.append(e.path)
            if e.mtime_ns is not None:   # the run's time: readers that keep the newest condition choose as it did
                os.utime(target, ns=(e.mtime_ns, e.mtime_ns))
    except BaseException:
        for rel in written:
            (to / rel).unlink(missing_ok=True)
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                pass
        raise
    return written, same


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def opened(archive: str | os.PathLike) -> Iterator[Path]:
    """A checked copy of the archive's files at their run paths in a temporary folder (removed after): what
    the aggregator and the report read as if the run had just written them."""
    folder = Path(tempfile.mkdtemp(prefix="masprm-archive-"))
    try:
        unpack(archive, folder)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def logs_folders(manifest: Manifest) -> list[str]:
    """The stage-4 logs folders an archive holds (what the aggregator reads)."""
    return sorted({e.path.rsplit("/", 1)[0] for e in manifest.files if e.part == "logs" and "/" in e.path})
