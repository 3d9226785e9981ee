"""The layout docs/architecture.md describes: no import circle between knockout's modules (the imports inside
functions included, those for type checkers left out), and no run-kind name switch outside the kinds' own
folders."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

SRC = ROOT / "src"
KIND_FOLDERS = ("methods", "sbs", "meta", "sciex", "jury")


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST, here: str, modules: set[str]) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child, typing_only)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("knockout"):
            for alias in node.names:  # a submodule imported by name, else the module itself
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("knockout"))
        for child in ast.iter_child_nodes(node):
            visit(child, typing_only)

    visit(tree, False)
    return {m for m in found if m in modules and m != here}


def test_no_import_circle() -> None:
    files = sorted((SRC / "knockout").rglob("*.py"))
    modules = {_module(f) for f in files}
    graph = {_module(f): _imports(ast.parse(f.read_text(encoding="utf-8")), _module(f), modules) for f in files}
    # a package's __init__ stands for its package: importing a package's private module also runs its
    # __init__, so an edge into any module of a package is an edge into its __init__ too
    index, low, stack, on, circles = {}, {}, [], set(), []

    def strong(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    import sys

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            strong(v)
    # a package __init__ that re-exports its own modules, imported back by one of them, is not a circle
    # of the code's structure (Python loads the __init__ first); only circles among private modules count
    real = [c for c in circles if len([m for m in c if not _is_init(m)]) > 1]
    assert not real, real


def _is_init(module: str) -> bool:
    return (SRC / Path(*module.split(".")) / "__init__.py").is_file()


def test_no_kind_name_switch_outside_the_kinds() -> None:
    switch = re.compile(r'kind ?[!=]= ?["\'](grade|sbs|meta|solve|jury)["\']')
    found = []
    for f in sorted((SRC / "knockout").rglob("*")):
        if f.suffix not in (".py", ".html") or f.relative_to(SRC / "knockout").parts[0] in KIND_FOLDERS:
            continue
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if switch.search(line):
                found.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
