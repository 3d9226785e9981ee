"""A small name -> object registry with lazy entries and plugins found through entry points.

Backends, methods, parsers and loaders are found by name.  An entry added by knockout itself is
an object or a lazy ``"module:attribute"`` (or ``"module"``) string, imported only when the name is
used, so optional dependencies (``openai``, ``anthropic``, ``llama_cpp``) are imported only by the
backend that needs them.

A registry built with an entry-point ``group`` also finds third-party entries: any installed
distribution that declares, in its ``pyproject.toml``::

    [project.entry-points."knockout.backends"]
    mybackend = "mypkg.judge:MyJudge"

adds ``mybackend`` to :data:`knockout.judges.backends`.  Entry points are read on first use (and
again when a name is not found), and a plugin is imported only when its name is used; a plugin
that fails to import is a :class:`ConfigError` naming the plugin, its distribution and the error.
An entry added with :meth:`Registry.add` wins over a plugin of the same name.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, cast

from knockout.errors import ConfigError

T = TypeVar("T")
log = logging.getLogger(__name__)

#: Entry-point groups of the registries knockout defines.
GROUPS = (
    "knockout.backends",
    "knockout.methods",
    "knockout.loaders",
    "knockout.parsers",
    "knockout.run_kinds",
    "knockout.meta_frameworks",
    "knockout.sbs_modes",
    "knockout.jury_scores",
    "knockout.jury_verdicts",
)

OWN_DISTRIBUTION = "knockout"


@dataclass(frozen=True)
class Plugin:
    """An entry found through an entry point: where it comes from, not yet imported."""

    name: str
    value: str  # "module:attribute" or "module"
    group: str
    distribution: str


def _import(value: str) -> Any:
    return importlib.metadata.EntryPoint(name="", value=value, group="").load()


def _first_line(obj: Any) -> str:
    doc = getattr(obj, "__doc__", None) or ""
    return doc.strip().split("\n", 1)[0].strip()


class Registry(Generic[T]):
    """Objects found by name: entries added by knockout, then plugins of the entry-point ``group``."""

    #: every registry made (a test checks that each one's group is in :data:`GROUPS`)
    made: ClassVar[list[Registry[Any]]] = []

    def __init__(self, kind: str, group: str | None = None) -> None:
        Registry.made.append(self)
        self.kind = kind
        #: the entry-point group third-party packages register in (``knockout.methods``, ...)
        self.group = group
        self._entries: dict[str, T | str] = {}
        self._help: dict[str, str] = {}
        self._plugins: dict[str, Plugin] | None = None  # None: entry points not read yet
        self._loaded: dict[str, T] = {}

    # -- knockout's own entries ------------------------------------------------------------
    def add(self, name: str, obj: T | str, help: str = "") -> None:
        self._entries[name] = obj
        if help:
            self._help[name] = help

    def remove(self, name: str) -> None:
        """Forget an entry added with :meth:`add` (plugins go when their distribution does)."""
        self._entries.pop(name, None)
        self._help.pop(name, None)

    def register(self, name: str, help: str = "") -> Callable[[T], T]:
        def deco(obj: T) -> T:
            self.add(name, obj, help)
            return obj

        return deco

    # -- plugins ---------------------------------------------------------------------------
    def refresh(self) -> None:
        """Read the entry points again (after installing a plugin, or changing ``sys.path``)."""
        found: dict[str, Plugin] = {}
        if self.group:
            for ep in importlib.metadata.entry_points(group=self.group):
                dist = ep.dist.name if ep.dist is not None else "?"
                old = found.get(ep.name)
                if old is not None:  # the first declaration wins; knockout's own come first
                    if old.value != ep.value and dist != OWN_DISTRIBUTION:
                        log.warning(
                            "%s '%s' is declared by %s and by %s; using %s's",
                            self.kind, ep.name, old.distribution, dist, old.distribution,
                        )
                    continue
                found[ep.name] = Plugin(ep.name, ep.value, self.group, dist)
        self._plugins = found
        self._loaded = {k: v for k, v in self._loaded.items() if k in found}

    def plugins(self) -> dict[str, Plugin]:
        """The entries found through entry points (read on first use)."""
        if self._plugins is None:
            self.refresh()
        assert self._plugins is not None
        return self._plugins

    def plugin(self, name: str) -> Plugin | None:
        """Where ``name`` comes from when it is a plugin (None for knockout's own entries)."""
        if name in self._entries:
            return None
        return self.plugins().get(name)

    def _find_plugin(self, name: str) -> Plugin | None:
        found = self.plugins().get(name)
        if found is None and self.group:
            self.refresh()  # installed since the last look?
            found = self.plugins().get(name)
        return found

    # -- lookup ----------------------------------------------------------------------------
    def get(self, name: str) -> T:
        if name in self._entries:
            entry = self._entries[name]
            if isinstance(entry, str):
                obj = cast(T, _import(entry))
                self._entries[name] = obj
                return obj
            return entry
        if name in self._loaded:
            return self._loaded[name]
        plugin = self._find_plugin(name)
        if plugin is None:
            known = ", ".join(self.names()) or "none"
            raise ConfigError(f"unknown {self.kind} '{name}' (known: {known})")
        try:
            loaded = cast(T, _import(plugin.value))
        except Exception as exc:
            raise ConfigError(
                f"{self.kind} '{name}' from plugin {plugin.distribution} (entry point {plugin.group}: "
                f"{name} = {plugin.value}) failed to load: {type(exc).__name__}: {exc}"
            ) from exc
        self._loaded[name] = loaded
        return loaded

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        return name in self._entries or self._find_plugin(name) is not None

    def names(self) -> list[str]:
        return sorted(set(self._entries) | set(self.plugins()))

    def help(self, name: str) -> str:
        """The help text given with the entry, else the first line of the object's docstring."""
        if name in self._help:
            return self._help[name]
        try:
            return _first_line(self.get(name))
        except (ConfigError, ImportError) as exc:
            return f"(failed to load: {exc})"
