"""Identity: the one home of the hashes that say whether two runs used the same things.

    stable_hash(obj)              a short hash of a JSON-able value (manifests, definitions, fingerprints)
    file_identity(path)           the content hash of one file (stage 1's config and data file)
    path_identity(path, model=)   the content hash of a local file or folder (None for a hub id)
    code_version(module_file)     the hash of the code on stage 4's evaluation path, by syntax
    syntax_text / code_digest     the identity of code by what it does (the toy build's key too)

Stage 1's run settings, stage 4's manifests and fingerprints and the toy world's build key all
use these; nothing else hashes files or code.

The identity of code by what it does: its syntax tree, without docstrings or comments.

A fingerprint that hashed source bytes would change when a docstring or a
comment is edited: stage-4 logs would be renamed (and their conditions
recomputed), and the shipped toy policy would no longer match its build. So
code is identified by ``syntax_text``: the module's syntax tree (comments are
not in it), docstrings of the module, classes and functions removed, written
out node by node. Line numbers and layout do not enter; every statement and
expression does.

The text is written here rather than with ``ast.dump``, whose output changes
between Python versions (3.12 lists ``type_params=[]``, 3.13 leaves empty
fields out): fields that are empty or None are always left out, so the same
code has the same text on every supported Python. Pure Python.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path
from typing import Any

_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _is_docstring(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def _write(node: Any, out: list[str]) -> None:
    if isinstance(node, ast.AST):
        out.append(type(node).__name__ + "(")
        body = getattr(node, "body", None)
        skip_docstring = isinstance(node, _DOCUMENTED) and body and _is_docstring(body[0])
        for name, value in ast.iter_fields(node):
            if name == "body" and skip_docstring:
                value = value[1:]
            if value is None or (isinstance(value, list) and not value):
                continue
            out.append(name + "=")
            _write(value, out)
            out.append(",")
        out.append(")")
    elif isinstance(node, list):
        out.append("[")
        for item in node:
            _write(item, out)
            out.append(",")
        out.append("]")
    else:
        out.append(repr(node))


def syntax_text(source: str) -> str:
    """The module's syntax tree as text, without docstrings and comments (same code, same text)."""
    out: list[str] = []
    _write(ast.parse(source), out)
    return "".join(out)


_digests: dict[tuple[str, int, int], str] = {}


def code_digest(path: str | Path) -> str:
    """sha256 of a Python file's ``syntax_text`` (cached while the file's size and modification time stay)."""
    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        _digests[key] = hashlib.sha256(syntax_text(path.read_text(encoding="utf-8")).encode()).hexdigest()
    return _digests[key]


def file_identity(path: str | os.PathLike) -> str:
    """A content hash of one file (16 hex digits)."""
    digest = hashlib.sha1()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


# --------------------------------------------------------------------------- paths and stage 4's code

SRC = Path(__file__).resolve().parent   # src/masprm
_HASH_WHOLE_FILE_BYTES = 256 * 1024 * 1024  # bigger weight files are identified by name and size


def stable_hash(obj: Any, length: int = 10) -> str:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:length]


_identity_cache: dict[tuple, str] = {}


def _training_by_product(rel: str) -> bool:
    top = rel.split("/", 1)[0]
    return top.startswith("checkpoint-") or top in ("runs", "map_cache", "training_args.bin")


def path_identity(path: str | os.PathLike | None, *, model: bool = False) -> str | None:
    """A content hash of a local file or folder (None when the path is not local, e.g. a hub id).

    Hidden files are ignored; files over 256 MB count by name and size only.
    With `model`, a folder that holds a model at its top level is identified by
    what loads: training by-products (checkpoint-*/, the event logs in runs/, the data cache
    map_cache/ and training_args.bin, which hold run times and paths) are left out, so the same
    weights trained twice, or in another folder, give one identity.
    Hashes are cached per (path, file sizes and modification times).
    """
    if not path:
        return None
    root = Path(path).expanduser()
    if not root.exists():
        return None
    files = [(root.name, root)] if root.is_file() else sorted(
        (p.relative_to(root).as_posix(), p) for p in root.rglob("*") if p.is_file())
    files = [(rel, f, f.stat()) for rel, f in files if not (rel.startswith(".") or "/." in rel)]
    if model and any((root / name).is_file() for name in ("config.json", "adapter_config.json")):
        files = [item for item in files if not _training_by_product(item[0])]
    key = (str(root.resolve()), tuple((rel, st.st_size, st.st_mtime_ns) for rel, _, st in files))
    if key not in _identity_cache:
        digest = hashlib.sha1()
        for rel, f, st in files:
            digest.update(f"{rel}\0{st.st_size}\0".encode())
            if st.st_size <= _HASH_WHOLE_FILE_BYTES:
                with open(f, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        digest.update(block)
        _identity_cache[key] = digest.hexdigest()[:16]
    return _identity_cache[key]


def _module_file(root: Path, module: str) -> Path | None:
    """src/masprm/a/b.py (or a/b/__init__.py) for 'masprm.a.b', if it exists under root."""
    parts = module.split(".")[1:]
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


_imports_cache: dict[tuple, set[Path]] = {}


def masprm_imports(path: Path, root: Path) -> set[Path]:
    """The masprm modules a file imports (function-level imports included), with their packages.

    Cached while the file's size and modification time stay.
    """
    stat = path.stat()
    key = (str(path), str(root), stat.st_size, stat.st_mtime_ns)
    if key not in _imports_cache:
        _imports_cache[key] = _find_masprm_imports(path, root)
    return _imports_cache[key]


def _find_masprm_imports(path: Path, root: Path) -> set[Path]:
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # "from masprm.eval import methods" imports the submodule masprm.eval.methods
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for module in modules:
            if module == "masprm" or module.startswith("masprm."):
                parts = module.split(".")
                for i in range(1, len(parts) + 1):   # importing a.b.c runs a/__init__ and a/b/__init__
                    f = _module_file(root, ".".join(parts[:i]))
                    if f is not None:
                        found.add(f)
    return found


_code_version_cache: dict[tuple, str] = {}


def code_files(entry: tuple[str, ...], module_file: str | None = None, root: Path = SRC) -> list[Path]:
    """The package files a run executes: the ``entry`` modules (paths under ``root``), ``module_file``,
    and everything they import from masprm."""
    todo = [root / rel for rel in entry if (root / rel).is_file()]
    if module_file:
        todo.append(Path(module_file).resolve())
    seen: set[Path] = set()
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        todo.extend(masprm_imports(f, root) - seen)
    return sorted(seen)


def code_version(entry: tuple[str, ...], module_file: str | None = None, root: Path = SRC) -> str:
    """A hash of the code a run executes (`code_files`), e.g. stage 4's for a method defined in `module_file`.

    Each file counts by its syntax (``syntax_text``), so editing a docstring or a
    comment keeps every log's name; editing a statement renames the logs it may change.
    """
    key = (entry, module_file or "", str(root))
    if key not in _code_version_cache:
        digest = hashlib.sha1()
        for f in code_files(entry, module_file, root):
            name = f.relative_to(root).as_posix() if f.is_relative_to(root) else f.name
            digest.update(name.encode() + b"\0" + code_digest(f).encode())
        _code_version_cache[key] = digest.hexdigest()[:12]
    return _code_version_cache[key]
