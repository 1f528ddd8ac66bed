"""The identity of code by what it does: its syntax tree, without docstrings or comments.

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
