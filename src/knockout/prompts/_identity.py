"""The identity of a parser's code: what lets a stored parse of a reply stand in for parsing it again.

A reply is stored with what the parse of its request made of it (:class:`knockout.engine.CallRecord`).
A cache hit may use that stored parse instead of reading the reply again only when the parse that would
read it now is the same: the same parser function, the same source of every knockout module it runs
(its own module and, transitively, the knockout modules that module imports), the same arguments.  A
parser fix changes the source, so it reaches every stored reply; a parser whose source cannot be read
(not a plain function, not part of knockout: a plugin's) has no identity and is always called again.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import types
from collections.abc import Callable
from pathlib import Path

#: the folder of the knockout package: module names are resolved to files under it, nothing is imported
_ROOT = Path(__file__).resolve().parent.parent

#: part of every identity: a change to how identities are made (or to how a stored parse is read back)
#: makes every stored parse stale
SCHEME = "knockout-parse-1"


def code_identity(func: Callable[..., object]) -> str | None:
    """A digest of ``func``'s name and the source of its module and of every knockout module that module
    imports (transitively); None when ``func`` is not a plain function of a knockout module or a source
    file cannot be read.  Known once per function."""
    if not isinstance(func, types.FunctionType):
        return None
    return _function_identity(func)


@functools.cache
def _function_identity(func: types.FunctionType) -> str | None:
    module = getattr(func, "__module__", "") or ""
    if module != "knockout" and not module.startswith("knockout."):
        return None
    digest = _module_closure_digest(module)
    if digest is None:
        return None
    return hashlib.sha256(f"{SCHEME}\0{module}:{func.__qualname__}\0{digest}".encode()).hexdigest()


@functools.cache
def _module_closure_digest(module: str) -> str | None:
    h = hashlib.sha256()
    for name in sorted(_closure(module)):
        source = _source(name)
        if source is None:
            return None
        h.update(f"{name}\0{len(source)}\0".encode())
        h.update(source)
    return h.hexdigest()


def _closure(module: str) -> set[str]:
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        source = _source(name)
        if source is not None:
            todo.extend(_knockout_imports(name, source))
    return seen


def _file(module: str) -> Path | None:
    """The source file of knockout module ``module`` (a module or a package's ``__init__``), or None."""
    parts = module.split(".")
    if parts[0] != "knockout" or not all(p.isidentifier() for p in parts):
        return None
    base = _ROOT.joinpath(*parts[1:])
    for path in (base.with_suffix(".py") if len(parts) > 1 else None, base / "__init__.py"):
        if path is not None and path.is_file():
            return path
    return None


@functools.cache
def _source(module: str) -> bytes | None:
    path = _file(module)
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError:
        return None


def _knockout_imports(module: str, source: bytes) -> list[str]:
    """The knockout modules ``module`` imports (absolute or relative, at any depth of its code)."""
    path = _file(module)
    package = module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found.append(base)
            # ``from knockout.x import y``: y may itself be a module
            found.extend(f"{base}.{a.name}" for a in node.names if a.name != "*")
    return [n for n in found if (n == "knockout" or n.startswith("knockout.")) and _source(n) is not None]
