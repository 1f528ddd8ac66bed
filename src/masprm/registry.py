"""One generic registry of named things: datasets, methods, scorer objectives, route modes, ...

    METHODS: Registry[Method] = Registry("method")
    METHODS.register("single_pass", Method(...))       # direct
    @DATASETS.register("toy")                           # or as a decorator: returns the object unchanged
    def load_toy(...): ...
    DATASETS.register_lazy("toy", "masprm.worlds.toy.task:load_toy")   # imported on first use
    METHODS["single_pass"]; METHODS.get("x"); "x" in METHODS; sorted(METHODS); METHODS.names()

Rules, the same for every kind:
- a name is registered once: a second ``register`` of the same name raises
  ``ConfigError`` (``replace=True`` is the explicit way to overwrite, e.g. in a test);
  a lazy entry is replaced by the object its own import registers under that name;
- an unknown name raises ``UnknownNameError`` (a ``ConfigError`` and a ``KeyError``)
  whose message lists the valid names and the closest one ("did you mean ...");
- a lazy entry ``"package.module:attribute"`` is imported when it is first looked
  up, so optional parts (toy world, handoff) cost nothing until they are asked for
  and the core never imports them. Listing names (``names``, ``in``, iteration)
  does not import anything.

Pure Python: no torch import.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Callable, Generic, Iterator, TypeVar, overload

from masprm.errors import ConfigError, UnknownNameError

T = TypeVar("T")
_MISSING = object()


class Registry(Generic[T]):
    """Named objects of one kind; see the module docstring for the rules."""

    def __init__(self, kind: str):
        self.kind = kind                      # used in messages: "unknown {kind} 'x'"
        self._items: dict[str, T] = {}
        self._lazy: dict[str, str] = {}       # name -> "module:attribute", not imported yet

    # -- adding -----------------------------------------------------------
    @overload
    def register(self, name: str, obj: T, *, replace: bool = False) -> T: ...
    @overload
    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]: ...

    def register(self, name, obj=_MISSING, *, replace=False):
        """Register ``obj`` under ``name`` and return it; without ``obj``, a decorator that does so."""
        if obj is _MISSING:
            return lambda target: self.register(name, target, replace=replace)
        if name in self._items and not replace:
            raise ConfigError(f"{self.kind} {name!r} registered twice")
        self._lazy.pop(name, None)
        self._items[name] = obj
        return obj

    def register_lazy(self, name: str, target: str) -> None:
        """Register ``"module:attribute"`` under ``name``; imported on first lookup."""
        module, sep, attribute = target.partition(":")
        if not (module and sep and attribute):
            raise ConfigError(f"lazy {self.kind} {name!r}: {target!r} is not 'module:attribute'")
        if name in self._items or name in self._lazy:
            raise ConfigError(f"{self.kind} {name!r} registered twice")
        self._lazy[name] = target

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that register a throwaway entry clean up with this)."""
        self._items.pop(name, None)
        self._lazy.pop(name, None)

    # -- looking up -------------------------------------------------------
    def __getitem__(self, name: str) -> T:
        if name in self._items:
            return self._items[name]
        if name in self._lazy:
            return self._load(name)
        raise UnknownNameError(self.unknown_message(name))

    def get(self, name: str, default: T | None = None) -> T | None:
        return self[name] if name in self else default

    def _load(self, name: str) -> T:
        module, _, attribute = self._lazy[name].partition(":")
        obj = getattr(importlib.import_module(module), attribute)
        # Importing the module may itself have registered the name (decorator style); either way it is resolved now.
        self._lazy.pop(name, None)
        return self._items.setdefault(name, obj)

    def unknown_message(self, name: str) -> str:
        """``unknown <kind> 'x' (valid: a, b, c; did you mean 'b'?)``."""
        valid = self.names()
        close = difflib.get_close_matches(str(name), valid, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r} (valid: {', '.join(valid) or 'none registered'}{hint})"

    # -- listing (never imports a lazy entry) -----------------------------
    def names(self) -> list[str]:
        return sorted({*self._items, *self._lazy})

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def items(self) -> list[tuple[str, T]]:
        """Every (name, object), importing lazy entries."""
        return [(name, self[name]) for name in self.names()]

    def values(self) -> list[T]:
        return [obj for _, obj in self.items()]

    def keys(self) -> list[str]:
        return self.names()

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"
