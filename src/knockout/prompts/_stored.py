"""A stored parse is checked like a fresh one (issue 34): what each parser's valid value looks like once stored
(JSON read back), so that a reply's stored parse is used only when the request's parse could have made it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any


def is_grade(x: Any, low: float, high: float) -> bool:
    """A grade as a parser makes it: a float (not an int, a bool or a string), finite, within low..high."""
    return type(x) is float and low <= x <= high + 1e-9


def is_score(v: Any, max_points: float, criteria: Sequence[float]) -> bool:
    return is_grade(v, 0.0, max_points)


def _is_pair(v: Any, max_points: float, criteria: Sequence[float]) -> bool:
    return type(v) is list and len(v) == 2 and all(is_grade(x, 0.0, max_points) for x in v)


def _is_criteria(v: Any, max_points: float, criteria: Sequence[float]) -> bool:
    if type(v) is not dict or set(v) != {"grade", "criteria"}:
        return False
    awarded = v["criteria"]
    if type(awarded) is not list or len(awarded) != len(criteria) or not criteria:
        return False
    if not all(is_grade(x, 0.0, p) for x, p in zip(awarded, criteria, strict=True)):
        return False
    total = sum(awarded)
    return total <= max_points + 1e-9 and is_grade(v["grade"], 0.0, max_points) and v["grade"] == min(total, max_points)


def is_text(v: Any, max_points: float, criteria: Sequence[float]) -> bool:
    return type(v) is str and bool(v) and v == v.strip()


def is_texts(v: Any, max_points: float, criteria: Sequence[float]) -> bool:
    return type(v) is list and 1 <= len(v) <= 5 and all(is_text(x, max_points, criteria) for x in v)


_Shape = Callable[[Any, float, Sequence[float]], bool]
#: What each knockout parser's valid value looks like once stored (JSON read back), by the parser's
#: ``module:name`` (other features add theirs with :func:`stored_shape`); a value of a parser not here
#: (side-by-side verdicts hold enum members and are never stored for reuse; plugins have no parse identity) is
#: never used: the reply is read again.
STORED_SHAPES: dict[str, _Shape] = {
    "knockout.prompts._parsers:parse_score": is_score,
    "knockout.prompts._parsers:parse_pairwise": _is_pair,
    "knockout.prompts._parsers:parse_criteria": _is_criteria,
}


def stored_shape(parser: Callable[..., Any], shape: _Shape) -> None:
    """Declare what a parser's valid value looks like once stored (:data:`STORED_SHAPES`): the features that own
    parsers (SciEx, meta-evaluation) declare theirs beside them."""
    STORED_SHAPES[f"{parser.__module__}:{parser.__qualname__}"] = shape


def stored_value_ok(parse: Any, value: Any) -> bool:
    """``value``, a request's stored parse read back from the store, is one the request's parse
    (:class:`knockout.prompts._render.OwnVerdict`) could have made: of its parser's exact types, shape and
    ranges (:data:`STORED_SHAPES`: a grade a float within ``0..max_points``, not ``"2"``, ``99``, ``-5`` or
    ``{"grade": 2}``; a pair two of them; criteria one per criterion within its points, adding up to the
    grade).  False for anything else, and for a parse whose parser has no known shape."""
    parser = getattr(parse, "parse", None)
    max_points = getattr(parse, "max_points", None)
    criteria = getattr(parse, "criteria", ())
    if parser is None or not isinstance(max_points, int | float) or not math.isfinite(max_points):
        return False
    shape = STORED_SHAPES.get(f"{getattr(parser, '__module__', '')}:{getattr(parser, '__qualname__', '')}")
    try:
        return shape is not None and bool(shape(value, float(max_points), tuple(criteria)))
    except (TypeError, ValueError):
        return False
