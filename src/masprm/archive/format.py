"""The archive's format: which files it may hold, the manifest that lists them, and the dataset card.

An archive is a folder laid out as a Hugging Face dataset repository:

    <run>-v<N>/
        README.md        the dataset card: YAML front matter (the run's command, code commit, seeds,
                         pre-registration, licence, the manifest's SHA-256), then what it holds
        manifest.json    every data file: path, part, size, SHA-256, and the command and fingerprint
                         that made it where the run recorded them
        data/<path>      each file of the run at its path in the checkout (data/logs/toy_demo/...);
                         JSON-lines records and trees are stored gzip-compressed (<path>.gz)

Everything here reads text and bytes only: the checks of an untrusted archive (a path that escapes,
a kind of file not listed, a pickle) are pure functions. Pure Python: no torch.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import Any

import yaml

from masprm.errors import MasprmError, quoted

FORMAT = 1
MANIFEST = "manifest.json"
CARD = "README.md"
DATA = "data"
META_FILES = (CARD, MANIFEST, ".gitattributes")   # beside data/: the card, the manifest, the Hub's LFS rules
LICENSE = "mit"   # the project's licence (LICENSE); a run's outputs are shared under it

LEVELS = ("tables", "full")
# What a run made, by part, and the level that first holds it: `tables` is what the published tables are
# computed from (stage-4 logs, the aggregator's CSV, benchmark and lab reports); `full` adds what a
# re-scoring or a resumed run needs (stage-1 trees, stage-2 records, scorer folders).
PARTS = {"logs": "tables", "results": "tables", "trees": "full", "stage2": "full", "scorer": "full"}

# The kinds of file an archive may hold, by suffix; anything else (a pickle, torch's .bin/.pt, an
# optimizer state, an executable) is left out when packing and refused when reading.
KINDS = {".json": "JSON", ".jsonl": "JSON lines", ".txt": "text", ".csv": "CSV", ".md": "Markdown",
         ".png": "picture", ".safetensors": "safetensors weights", ".jinja": "chat template", ".yaml": "YAML"}
HIDDEN_KINDS = {".run_settings": "a tree folder's settings (JSON)"}   # the only hidden name a run keeps
GZIP = ".gz"
# A file the Hub takes: it stores files over 10 MB through LFS (huggingface_hub does that by itself) and
# refuses any over 50 GB.
HUB_FILE_LIMIT = 50 * 10**9
MANIFEST_LIMIT = 64 * 2**20   # a manifest larger than this is no run's: refused before it is parsed


class ArchiveError(MasprmError):
    """An archive cannot be read or written safely (an unsafe path, a link, a pickle, a malformed
    manifest); one line, exit 2."""


@dataclass(frozen=True)
class Entry:
    """One data file of an archive, as the manifest lists it."""

    path: str               # its path in the run's checkout (logs/toy_demo/x.txt), and under data/
    part: str               # PARTS
    size: int               # bytes of the file as the run wrote it
    sha256: str
    gzip: bool = False      # stored as data/<path>.gz
    stored_size: int | None = None      # of the .gz (gzip only)
    stored_sha256: str | None = None
    command: str | None = None          # the command that made it, where the run recorded one
    fingerprint: str | None = None      # the condition's / tree run's / scorer's fingerprint
    mtime_ns: int | None = None         # its modification time: readers that keep the newest of two conditions
                                        # (the lab's cells, the claims) choose as they did in the run

    @property
    def stored(self) -> str:
        """The stored file's path inside the archive."""
        return f"{DATA}/{self.path}{GZIP if self.gzip else ''}"

    def record(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None and (k != "gzip" or v)}


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def compressed(path: str, part: str) -> bool:
    """JSON-lines records (stage-4 records, stage-2 files) and trees compress about tenfold; the rest is
    small or compressed already (pictures, weights), and stays readable on the Hub as it is."""
    return path.endswith(".jsonl") or (part == "trees" and path.endswith(".json"))


def kind_of(path: str) -> str | None:
    """The kind of a file by its name (KINDS, HIDDEN_KINDS), or None: not a kind an archive holds."""
    name = PurePosixPath(path).name
    if name in HIDDEN_KINDS:
        return HIDDEN_KINDS[name]
    if name.startswith("."):
        return None
    return KINDS.get(PurePosixPath(name).suffix.lower())


_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def safe_path(value: Any, where: str) -> str:
    """A path from an archive's manifest that stays inside the folder it is unpacked to: relative, POSIX
    separators, no empty, '.' or '..' component, no NUL or backslash, no drive."""
    problem = None
    if not isinstance(value, str) or not value:
        problem = "not a path"
    elif "\0" in value or "\\" in value:
        problem = "a NUL byte or a backslash"
    elif value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        problem = "an absolute path"
    elif any(part in ("", ".", "..") for part in value.split("/")):
        problem = "a '..', '.' or empty component (it would leave the folder it is unpacked to)"
    elif len(value) > 1024:
        problem = "longer than 1,024 characters"
    if problem:
        raise ArchiveError(f"{where}: path {quoted(value)} is {problem}; refused")
    return value


def looks_pickled(head: bytes) -> bool:
    """A pickle (protocol 2-5 starts with 0x80 and its protocol) or a zip file (torch.save's format holds
    a pickle): neither is read from an archive, whatever its name."""
    return (len(head) >= 2 and head[0] == 0x80 and head[1] in (2, 3, 4, 5)) or head.startswith(b"PK\x03\x04")


def entry_from(record: Any, where: str) -> Entry:
    """One manifest record checked: a safe path of a listed kind, a known part, sizes and hashes well formed."""
    if not isinstance(record, dict):
        raise ArchiveError(f"{where}: a file record must be an object")
    path = safe_path(record.get("path"), where)
    if kind_of(path) is None:
        raise ArchiveError(f"{where}: {path}: not a kind of file an archive holds "
                           f"({', '.join(sorted(KINDS))}, .run_settings); refused")
    if record.get("part") not in PARTS:
        raise ArchiveError(f"{where}: {path}: part {quoted(record.get('part'))} is not one of {', '.join(PARTS)}")
    gz = record.get("gzip", False)
    fields = ("size", "sha256") + (("stored_size", "stored_sha256") if gz is True else ())
    for name in fields:
        value = record.get(name)
        ok = (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= HUB_FILE_LIMIT
              if name.endswith("size") else isinstance(value, str) and bool(_HEX64.match(value)))
        if not ok:
            raise ArchiveError(f"{where}: {path}: {name} {quoted(value)} is not a "
                               f"{'size in bytes' if name.endswith('size') else 'SHA-256 (64 hex digits)'}")
    for name in ("command", "fingerprint"):
        if record.get(name) is not None and not isinstance(record[name], str):
            raise ArchiveError(f"{where}: {path}: {name} must be text")
    mtime = record.get("mtime_ns")
    if mtime is not None and (not isinstance(mtime, int) or isinstance(mtime, bool) or not 0 <= mtime < 2**63):
        raise ArchiveError(f"{where}: {path}: mtime_ns {quoted(mtime)} is not a time in nanoseconds")
    if not isinstance(gz, bool):
        raise ArchiveError(f"{where}: {path}: gzip must be true or false")
    return Entry(path, record["part"], record["size"], record["sha256"], gz, record.get("stored_size"),
                 record.get("stored_sha256"), record.get("command"), record.get("fingerprint"), mtime)


@dataclass(frozen=True)
class Manifest:
    run: str
    version: int
    level: str
    meta: dict            # the run's command, code commit, seeds, pre-registration (the card's front matter)
    files: tuple[Entry, ...]

    @property
    def name(self) -> str:
        return archive_name(self.run, self.version)

    def text(self) -> str:
        return json.dumps({"format": FORMAT, "run": self.run, "version": self.version, "level": self.level,
                           "meta": self.meta, "files": [e.record() for e in self.files]},
                          ensure_ascii=False, indent=1, sort_keys=False) + "\n"

    def contents(self) -> set[tuple[str, str]]:
        """What the run's files are, whatever the version: (path, SHA-256) of each."""
        return {(e.path, e.sha256) for e in self.files}


def archive_name(run: str, version: int) -> str:
    return f"{run}-v{version}"


_NAME = re.compile(r"^(?P<run>[A-Za-z0-9][\w.-]*?)-v(?P<version>[1-9]\d*)$")


def split_name(name: str) -> tuple[str, int] | None:
    """'toy_demo-v2' -> ('toy_demo', 2); None for a name that is no archive's."""
    m = _NAME.match(name)
    return (m.group("run"), int(m.group("version"))) if m else None


def parse_manifest(text: str, where: str = MANIFEST) -> Manifest:
    """A manifest's text checked whole (ArchiveError at its first problem)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ArchiveError(f"{where}: not valid JSON ({str(err)[:200]})") from None
    if not isinstance(data, dict):
        raise ArchiveError(f"{where}: must be a JSON object")
    if data.get("format") != FORMAT:
        raise ArchiveError(f"{where}: format {quoted(data.get('format'))} is not {FORMAT}, the one this masprm reads")
    run, version, level = data.get("run"), data.get("version"), data.get("level")
    if not isinstance(run, str) or not isinstance(version, int) or split_name(archive_name(run, version)) is None:
        raise ArchiveError(f"{where}: run {quoted(run)} and version {quoted(version)} do not name an archive")
    if level not in LEVELS:
        raise ArchiveError(f"{where}: level {quoted(level)} is not one of {', '.join(LEVELS)}")
    if not isinstance(data.get("meta", {}), dict) or not isinstance(data.get("files"), list):
        raise ArchiveError(f"{where}: needs a `meta` object and a `files` list")
    files = tuple(entry_from(r, f"{where} file {i + 1}") for i, r in enumerate(data["files"]))
    seen: set[str] = set()
    for e in files:
        if e.path in seen or any(e.path.startswith(p + "/") or p.startswith(e.path + "/") for p in seen):
            raise ArchiveError(f"{where}: {e.path} is listed twice, or as a file and a folder")
        seen.add(e.path)
    return Manifest(run, version, level, data.get("meta", {}), files)


# --------------------------------------------------------------------------- the dataset card


def card_text(manifest: Manifest) -> str:
    """README.md: the Hub's YAML front matter (licence, name, tags, no viewer: the files are a run's, not one
    table) with the run's provenance and the manifest's SHA-256, then a page a reader of the Hub understands."""
    meta = manifest.meta
    front = {"license": LICENSE, "pretty_name": f"masprm run {manifest.name} ({manifest.level})",
             "tags": ["masprm", "process-reward-model", "multi-agent"], "viewer": False,
             "masprm_archive": {"format": FORMAT, "run": manifest.run, "version": manifest.version,
                                "level": manifest.level, **meta,
                                "manifest_sha256": sha256_of(manifest.text().encode("utf-8"))}}
    parts: dict[str, list[Entry]] = {}
    for e in manifest.files:
        parts.setdefault(e.part, []).append(e)
    rows = [f"| {part} | {len(es)} | {sum(e.size for e in es):,} |" for part, es in parts.items()]
    command = meta.get("command") or "(not recorded)"
    return ("---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n\n"
            f"# {manifest.name}\n\n"
            f"The outputs of one masprm run at level `{manifest.level}`, made by `{command}` at code commit "
            f"`{(meta.get('code') or {}).get('commit', 'none')}`. `manifest.json` lists every file under `data/` "
            "with its size, SHA-256 and the command and fingerprint that made it; JSON-lines files and trees "
            "are stored gzip-compressed.\n\n"
            "| part | files | bytes |\n|---|--:|--:|\n" + "\n".join(rows) + "\n\n"
            "Check it and put its files back where the run wrote them (from a masprm checkout):\n\n"
            "```bash\n"
            f"masprm-archive verify {manifest.name}\n"
            f"masprm-archive unpack {manifest.name} --to .\n"
            "```\n")


def card_manifest_sha(text: str) -> str | None:
    """The manifest SHA-256 a card's front matter records (None: no front matter or no such field)."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 4)
    if end < 0:
        return None
    try:
        front = yaml.safe_load(text[4:end])
    except yaml.YAMLError:
        return None
    section = front.get("masprm_archive") if isinstance(front, dict) else None
    value = section.get("manifest_sha256") if isinstance(section, dict) else None
    return value if isinstance(value, str) else None
