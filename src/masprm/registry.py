"""One generic registry of named things: datasets, methods, scorer objectives, route modes, ...

    METHODS: Registry[Method] = Registry("method")
    METHODS.register("single_pass", Method(...))       # direct
    @DATASETS.register("toy")                           # or as a decorator: returns the object unchanged
    def load_toy(...): ...
    DATASETS.register_lazy("toy", "masprm.worlds.toy.task:load_toy")   # imported on first use
    DATASETS.register_provider("masprm.worlds:provide_datasets")      # more entries, asked for on first need
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
  imports no lazy entry;
- a provider ``"package.module:function"`` completes the registry with entries the
  core does not spell (a world's dataset, from its own folder): ``function()`` gives
  ``(name, entry)`` pairs (or a mapping), a ``"module:attribute"`` string added as a
  lazy entry and any other entry as it is. It is called once, on the first need of a
  name the registry does not hold: a lookup or ``in`` of such a name, or a listing
  (``names``, iteration, ``len``, the unknown-name message); a name already held is
  never a reason to call it. What it gives follows the rule above: a name held twice
  is an error, unless both name the same thing (the module the lazy entry names
  registered itself on import). A provider that raises adds nothing and is asked
  again at the next need; one whose module is not installed is an optional part left
  out (nothing added, asked again at the next need).

Pure Python: no torch import.
"""

from __future__ import annotations

import difflib
import importlib
import sys
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
        self._providers: list[str] = []       # "module:function" not asked yet (or whose module is absent)
        self._asked: set[str] = set()         # providers asked already, each asked once

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
        _check_target(target, f"lazy {self.kind} {name!r}")
        if name in self._items or name in self._lazy:
            raise ConfigError(f"{self.kind} {name!r} registered twice")
        self._lazy[name] = target

    def register_provider(self, target: str) -> None:
        """Complete the registry from ``"module:function"``, asked once on first need (see the module docstring)."""
        _check_target(target, f"{self.kind} provider")
        if target in self._providers or target in self._asked:
            raise ConfigError(f"{self.kind} provider {target!r} registered twice")
        self._providers.append(target)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that register a throwaway entry clean up with this)."""
        self._items.pop(name, None)
        self._lazy.pop(name, None)

    # -- looking up -------------------------------------------------------
    def __getitem__(self, name: str) -> T:
        if not self._holds(name):
            self._provide()
        if name in self._items:
            return self._items[name]
        if name in self._lazy:
            return self._load(name)
        raise UnknownNameError(self.unknown_message(name))

    def get(self, name: str, default: T | None = None) -> T | None:
        return self[name] if name in self else default

    def _load(self, name: str) -> T:
        obj = _resolve(self._lazy[name])
        # Importing the module may itself have registered the name (decorator style); either way it is resolved now.
        self._lazy.pop(name, None)
        return self._items.setdefault(name, obj)

    def _holds(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def _provide(self) -> None:
        """Ask each pending provider once; all its entries are added, or none (it raised: asked again next time)."""
        pending, self._providers = self._providers, []   # taken first: a lookup while one runs does not re-ask it
        for k, target in enumerate(pending):
            try:
                entries = self._provided(target, _resolve(target)())
            except ModuleNotFoundError as err:
                module = target.partition(":")[0]
                if not (err.name and (module == err.name or module.startswith(err.name + "."))):
                    self._providers[:0] = pending[k:]
                    raise
                self._providers.append(target)   # an optional part not installed: nothing to add, ask again later
                continue
            except BaseException:
                self._providers[:0] = pending[k:]
                raise
            self._asked.add(target)
            for name, entry in entries.items():
                if isinstance(entry, str):
                    self._lazy[name] = entry
                else:
                    self._items[name] = entry

    def _provided(self, target: str, pairs) -> dict[str, object]:
        """The entries a provider gave that the registry does not hold yet; a name held twice is a ConfigError."""
        entries: dict[str, object] = {}
        for name, entry in (pairs.items() if hasattr(pairs, "items") else pairs):   # pairs, or a mapping
            if isinstance(entry, str):
                _check_target(entry, f"{self.kind} {name!r} from provider {target!r}")
            if name in entries:
                same = entries[name] == entry if isinstance(entry, str) else entries[name] is entry
            elif name in self._lazy:
                same = self._lazy[name] == entry
            elif name in self._items:
                same = (_imported(entry) if isinstance(entry, str) else entry) is self._items[name]
            else:
                entries[name] = entry
                continue
            if not same:
                raise ConfigError(f"{self.kind} {name!r} registered twice (again by the provider {target!r})")
        return entries

    def unknown_message(self, name: str) -> str:
        """``unknown <kind> 'x' (valid: a, b, c; did you mean 'b'?)``."""
        valid = self.names()
        close = difflib.get_close_matches(str(name), valid, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r} (valid: {', '.join(valid) or 'none registered'}{hint})"

    # -- listing (never imports a lazy entry) -----------------------------
    def names(self) -> list[str]:
        if self._providers:
            self._provide()
        return sorted({*self._items, *self._lazy})

    def __contains__(self, name: object) -> bool:
        if not self._holds(name) and self._providers:
            self._provide()
        return self._holds(name)

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

    def __repr__(self) -> str:   # asks no provider: a repr has no side effects
        pending = f", providers={self._providers}" if self._providers else ""
        return f"Registry({self.kind!r}, {sorted({*self._items, *self._lazy})}{pending})"


def _check_target(target: str, what: str) -> None:
    module, sep, attribute = target.partition(":")
    if not (module and sep and attribute):
        raise ConfigError(f"{what}: {target!r} is not 'module:attribute'")


def _resolve(target: str):
    """The object ``"module:attribute"`` names, importing its module."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _imported(target: str):
    """The object ``"module:attribute"`` names if its module is imported already, else a sentinel (imports nothing)."""
    module, _, attribute = target.partition(":")
    return getattr(sys.modules.get(module), attribute, _MISSING)
