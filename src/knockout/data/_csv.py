"""The one CSV writer: every CSV that knockout writes (the gradebooks, ``knockout export``, the tidy tables,
``knockout calibrate -O``, ``knockout annotations export``, the SciEx leaderboard) goes through :func:`rows_text`,
:func:`dicts_text` or :class:`Writer`, and so through one formula neutralisation (:func:`neutralise`).
``tests/test_csv_writers.py`` finds every CSV writer in ``src/`` and fails on one that bypasses this module.

* Formulas (OWASP, "CSV Injection", https://owasp.org/www-community/attacks/CSV_Injection, and ASVS 1.2.10):
  a spreadsheet runs a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a CR (ASVS adds NUL) as a
  formula.  A text cell that would be read so is prefixed with a single quote (OWASP's advice: the spreadsheet
  then shows it as text).  Numbers (``int``, ``float`` or a :class:`Number`, which only a number makes) are
  written as they are: ``-1.5`` is a number to the spreadsheet, not a formula; a text ``-1.5`` is quoted like
  any other text.
* A formula look-alike: spreadsheets (and people) skip leading blanks (a space, NBSP, VT, FF, LF, BOM, ZWSP)
  and read the fullwidth and small forms of ``= + - @`` (``＝``, ``﹦``, ``⁼``, ``＋``, ``＠``, ``−``) as
  those characters when they convert a cell; :func:`formula_lead` looks past the one to the other.
"""

from __future__ import annotations

import csv
import io
import numbers
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

#: a cell starting with one of these is read as a formula by spreadsheets (OWASP; ASVS 1.2.10 adds NUL)
FORMULA_LEAD = ("=", "+", "-", "@", "\t", "\r", "\0")
#: letters drawn as nothing (Hangul and braille fillers): blank to a reader, not to ``str.isspace``
FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
#: what ``= + - @`` become under NFKC (the fullwidth, small, superscript and subscript forms), and the minus
#: sign that the superscript and subscript minus become
_FORMULA_FORMS = frozenset("=+-@\u2212")


def blank(ch: str) -> bool:
    """A character a reader does not see: a space of any kind, a control or format character (ZWSP, BOM, the
    directional marks), a filler."""
    return ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Zs", "Zl", "Zp") or ch in FILLERS


def formula_lead(cell: str) -> str | None:
    """The character that makes ``cell`` a formula to a spreadsheet, or None: a formula character first (OWASP,
    CSV Injection), or, after any blank or invisible characters (:func:`blank`, combining marks), ``= + - @`` in
    any of their compatibility forms (``＝``, ``﹦``, ``⁼``, ``＋``, ``＠``, ``−``...)."""
    if cell.startswith(FORMULA_LEAD):
        return cell[0]
    for ch in cell:
        if blank(ch) or unicodedata.category(ch) in ("Mn", "Me"):
            continue
        return ch if unicodedata.normalize("NFKC", ch) in _FORMULA_FORMS else None
    return None


def neutralise(cell: str) -> str:
    """``cell`` as a spreadsheet shows it as text: prefixed with a single quote when it is read as a formula
    (:func:`formula_lead`; OWASP, CSV Injection)."""
    return "'" + cell if formula_lead(cell) is not None else cell


class Number(str):
    """A number formatted as text (``format(x, spec)``, ``g`` by default): written as it is.  Made from a number
    only, so no text passes the neutralisation as one."""

    def __new__(cls, x: float, spec: str = "g") -> Number:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise TypeError(f"Number needs an int or a float, not {type(x).__name__}")
        return super().__new__(cls, format(x, spec))


def safe_cell(value: Any) -> Any:
    """One cell as the writer writes it: None empty, numbers, booleans and :class:`Number` as they are, any
    other value as its text neutralised (:func:`neutralise`)."""
    if value is None:
        return ""
    if isinstance(value, (bool, numbers.Real, Number)):  # numpy's numbers too
        return value
    return neutralise(str(value))


class Writer:
    """``csv.writer`` whose every cell goes through :func:`safe_cell`, each row ended by ``lineterminator``
    (``\r\n`` by default).  Every cell holding a CR, a LF, a quote or a comma is quoted whatever the terminator
    (csv quotes only its terminator's characters: a bare CR left unquoted starts a new row in Moodle's reader)."""

    def __init__(self, out: TextIO, *, lineterminator: str = "\r\n") -> None:
        self._out = out
        self._end = lineterminator
        self._buf = io.StringIO()
        self._w = csv.writer(self._buf, lineterminator="\r\n")

    def writerow(self, row: Iterable[Any]) -> None:
        self._buf.seek(0)
        self._buf.truncate()
        self._w.writerow([safe_cell(c) for c in row])
        self._out.write(self._buf.getvalue()[:-2] + self._end)

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for r in rows:
            self.writerow(r)


def write_rows(out: TextIO, rows: Iterable[Iterable[Any]], *, lineterminator: str = "\r\n") -> None:
    Writer(out, lineterminator=lineterminator).writerows(rows)


def write_dicts(out: TextIO, rows: Sequence[Mapping[str, Any]], fieldnames: Sequence[str] | None = None, *,
                lineterminator: str = "\r\n") -> None:
    """A header and one row per mapping (the header: ``fieldnames``, else the first row's keys; a key missing
    from a row is an empty cell)."""
    names = list(fieldnames) if fieldnames is not None else list(rows[0]) if rows else []
    if not names:
        return
    w = Writer(out, lineterminator=lineterminator)
    w.writerow(names)
    w.writerows([r.get(n) for n in names] for r in rows)


def rows_text(rows: Iterable[Iterable[Any]], *, lineterminator: str = "\r\n") -> str:
    buf = io.StringIO()
    write_rows(buf, rows, lineterminator=lineterminator)
    return buf.getvalue()


def dicts_text(rows: Sequence[Mapping[str, Any]], fieldnames: Sequence[str] | None = None, *,
               lineterminator: str = "\r\n") -> str:
    buf = io.StringIO()
    write_dicts(buf, rows, fieldnames, lineterminator=lineterminator)
    return buf.getvalue()


def csv_line(cells: Sequence[Any]) -> str:
    """One CSV row ending in ``\\n``, every cell through :func:`safe_cell`, every cell holding a CR, LF, quote or
    comma quoted."""
    return rows_text([cells], lineterminator="\n")
