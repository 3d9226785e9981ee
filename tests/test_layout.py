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


#: The calls that run SQL on a connection (sqlite3's Connection and Cursor methods).
SQL_CALLS = ("execute", "executemany", "executescript")
#: What a statement begins with (a string argument that starts so is SQL, whatever the receiver is called) ...
SQL_START = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER|PRAGMA|BEGIN|COMMIT|ROLLBACK|"
                       r"WITH|VACUUM|ATTACH)\b", re.IGNORECASE)
#: ... or a clause of one, in capitals, anywhere in it (the tail of a statement built piece by piece).
SQL_CLAUSE = re.compile(r"\b(SELECT|INSERT INTO|UPDATE|DELETE FROM|FROM|WHERE|ORDER BY|GROUP BY|LIMIT|VALUES)\b")
#: Receivers that are a connection or a cursor by name (``store.db``, ``self.db``, ``conn``, ``cur``).
CONNECTION_NAMES = re.compile(r"(^|\.)(db|conn|connection|con|cur|cursor|sqlite3)$")


def _runs_sql(call: ast.Call) -> bool:
    """A call ``X.execute(...)`` / ``executemany`` / ``executescript`` on a database connection: the method
    is ``executemany`` or ``executescript`` (no other object in knockout has them), the receiver is named as a
    connection or cursor, or the first argument is a statement (a string or f-string that begins like SQL)."""
    if not isinstance(call.func, ast.Attribute) or call.func.attr not in SQL_CALLS:
        return False
    if call.func.attr != "execute" or CONNECTION_NAMES.search(ast.unparse(call.func.value)):
        return True
    first = call.args[0] if call.args else None
    text = ""
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        text = first.value
    elif isinstance(first, ast.JoinedStr | ast.BinOp):
        text = "".join(n.value for n in ast.walk(first) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return bool(SQL_START.match(text) or SQL_CLAUSE.search(text)) or isinstance(first, ast.Starred)


def test_sql_only_in_storage() -> None:
    """Storage owns the store: every SQL statement is run by a module of ``knockout.storage`` (the web app's
    annotation, account and session tables included); everything else calls the ``Store``'s methods."""
    found = []
    for f in sorted((SRC / "knockout").rglob("*.py")):
        if f.relative_to(SRC / "knockout").parts[0] == "storage":
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _runs_sql(node):
                found.append(f"{f.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:100]}")
    assert not found, f"{len(found)} SQL calls outside src/knockout/storage/:\n" + "\n".join(found)


def test_sql_check_sees_sql() -> None:
    """The check above finds SQL however the connection is named, and passes a run's ``execute``."""
    calls = [ast.parse(s).body[0].value for s in (  # type: ignore[attr-defined]
        'self.db.execute("SELECT 1")', 'handle.execute("insert into t values (?)", (1,))',
        'x.executemany("INSERT INTO t VALUES (?)", rows)', 'h.execute(f"SELECT {c} FROM t")',
        'h.execute(sql + " ORDER BY id", args)', 'h.execute(*insert)', 'cur.execute(query)')]
    assert [ast.unparse(c) for c in calls if not _runs_sql(c)] == []
    assert not _runs_sql(ast.parse("await run.execute(ctx)").body[0].value.value)  # type: ignore[attr-defined]
