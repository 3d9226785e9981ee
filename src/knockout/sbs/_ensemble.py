"""Ensembling three annotators' verdicts into one, as Table 8 of Titova et al. maps them.

Table 8 lists all 20 unordered combinations of three verdicts over the classes 1..4 (= A..D:
candidate better, baseline better, both good, both bad) with the final verdict.  A unanimous or
two-to-one majority mostly wins, with these readings of the table:

* one preference plus two "both good" keeps the preference (``133 -> 1``, ``233 -> 2``): both answers
  are acceptable and one annotator saw a difference;
* one preference plus two "both bad" gives "both bad" (``144 -> 4``, ``244 -> 4``);
* three different verdicts: ``123 -> 3``, ``124 -> 4``, ``134 -> 1``, ``234 -> 2``.

The table is applied verbatim to the sorted triple (the order of annotators does not matter).
Other numbers of verdicts: one verdict is itself; two or more than three give the strict majority,
or None when there is none.  Invalid verdicts (``E``) are not annotator verdicts and are rejected.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from knockout._verdict import Verdict
from knockout.errors import InputError
from knockout.sbs._verdicts import CLASSES

#: Table 8, digits 1..4 = A..D, key = the three verdicts sorted.
TABLE8_DIGITS: dict[str, int] = {
    "111": 1, "222": 2, "333": 3, "444": 4,
    "112": 1, "113": 1, "114": 1,
    "122": 2, "223": 2, "224": 2,
    "133": 1, "233": 2, "334": 3,
    "144": 4, "244": 4, "344": 4,
    "123": 3, "124": 4, "134": 1, "234": 2,
}  # fmt: skip

TABLE8: dict[tuple[Verdict, Verdict, Verdict], Verdict] = {
    (CLASSES[int(k[0]) - 1], CLASSES[int(k[1]) - 1], CLASSES[int(k[2]) - 1]): CLASSES[v - 1]
    for k, v in TABLE8_DIGITS.items()
}


def ensemble(verdicts: Iterable[str]) -> Verdict | None:
    """One verdict (A-D) from several annotators' verdicts (A-D); Table 8 for three."""
    given = list(verdicts)
    for v in given:
        if v not in CLASSES:
            raise InputError(f"annotator verdict must be one of {', '.join(CLASSES)}, got {str(v)!r}")
    vs = [Verdict(v) for v in given]
    if len(vs) == 3:
        a, b, c = sorted(vs)
        return TABLE8[(a, b, c)]
    if not vs:
        return None
    top, n = Counter(vs).most_common(1)[0]
    return top if n * 2 > len(vs) else None
