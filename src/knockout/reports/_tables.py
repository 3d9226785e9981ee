"""Tables of strings: what ``report``, ``compare`` and every kind's read hooks print (rendered by the CLI with
rich and by :mod:`knockout.reports._html` as HTML, so both show the same figures), and the number formats."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    note: str = ""


def num(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def points(x: float | None) -> str:
    """A grade in points for display: rounded to 2 decimals, no trailing zeros (``2.22581`` as ``2.23``)."""
    return "-" if x is None else f"{round(float(x), 2):g}"


def pvalue(p: Any) -> str:
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def transpose(t: Table) -> Table:
    """Columns become rows (for printing a wide table with few rows in a terminal)."""
    cols = [t.columns[0]] + [r[0] for r in t.rows]
    rows = [[c] + [r[i] for r in t.rows] for i, c in enumerate(t.columns) if i > 0]
    return Table(t.title, cols, rows, t.note)


def with_ci(d: dict[str, Any] | None, key: str, digits: int = 3) -> str:
    if not d or d.get(key) is None:
        return "-"
    ci = d.get(f"{key}_ci")
    return num(d[key], digits) + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")


def pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def kv(title: str, pairs: list[tuple[str, str]], note: str = "") -> Table:
    """A two-column table: what, value."""
    return Table(title, ["what", "value"], [[k, v] for k, v in pairs], note)


def width_of(t: Table) -> int:
    """The width ``t`` needs printed with rich (each column as wide as its longest line, with borders)."""
    cols = [max([len(c)] + [max((len(x) for x in str(r[i]).splitlines()), default=0) for r in t.rows if i < len(r)])
            for i, c in enumerate(t.columns)]
    return sum(w + 3 for w in cols) + 1


def fit_width(t: Table, width: int) -> list[Table]:
    """``t`` as tables no wider than ``width``: as it is when it fits, else its columns in groups, the first
    column (what each row is) repeated in every group, each titled with the columns it shows."""
    if width_of(t) <= width or len(t.columns) <= 2:
        return [t]
    groups: list[list[int]] = []
    current: list[int] = []
    for i in range(1, len(t.columns)):
        trial = Table(t.title, [t.columns[0], *(t.columns[j] for j in [*current, i])],
                      [[r[0], *(r[j] for j in [*current, i])] for r in t.rows])
        if current and width_of(trial) > width:
            groups.append(current)
            current = []
        current.append(i)
    groups.append(current)
    out = []
    for k, g in enumerate(groups, 1):
        out.append(Table(f"{t.title} ({k}/{len(groups)}: {', '.join(t.columns[j] for j in g)})",
                         [t.columns[0], *(t.columns[j] for j in g)],
                         [[r[0], *(r[j] if j < len(r) else "" for j in g)] for r in t.rows],
                         t.note if k == len(groups) else ""))
    return out
