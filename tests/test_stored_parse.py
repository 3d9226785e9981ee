"""A cache hit uses the parse stored with its reply only when the same parse made it (scripted judge =
simulation): the same parser code, the same arguments, the same texts shown; anything else reads the
reply again, so a parser fix reaches every stored reply and no stored value stands for another request."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from knockout._verdict import Verdict
from knockout.engine._engine import _plain
from knockout.judges import make_judge
from knockout.methods._run import RunConfig, run
from knockout.prompts import _identity
from knockout.prompts._parsers import parse_pairwise, parse_score
from knockout.prompts._render import OwnVerdict, own_verdict
from knockout.storage._store import Store
from tests.test_engine import ReplayJudge, _items


@pytest.fixture
def parse_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every reply a request's parse reads."""
    seen: list[str] = []
    real = OwnVerdict.__call__

    def counting(self: OwnVerdict, text: str):  # type: ignore[no-untyped-def]
        seen.append(text)
        return real(self, text)

    monkeypatch.setattr(OwnVerdict, "__call__", counting)
    return seen


def _parse_ids(store: Store) -> list[bytes | None]:
    return [r[0] for r in store.db.execute("SELECT parse_id FROM calls ORDER BY created")]


def test_rerun_uses_the_stored_parse_and_gets_the_same_results(tmp_path: Path, parse_calls: list[str]) -> None:
    store = Store(tmp_path / "s.db")
    first = run(_items(), make_judge("scripted"), store, RunConfig())
    assert len(parse_calls) == 6  # each live reply read once
    assert all(isinstance(p, bytes) and len(p) == 16 for p in _parse_ids(store))
    parse_calls.clear()
    again = run(_items(), make_judge("scripted"), store, RunConfig())
    assert again.stats["cache_hits"] == 6 and again.stats["judge_calls"] == 0
    assert parse_calls == []  # no stored reply read again
    assert [(r.answer_id, r.score, type(r.score), r.valid) for r in again.results] == \
           [(r.answer_id, r.score, type(r.score), r.valid) for r in first.results]
    def uncached(details: dict[str, object]) -> dict[str, object]:
        return {**details, "attempts": [{**a, "cached": None} for a in details["attempts"]]}  # type: ignore[attr-defined]

    assert [uncached(r.details) for r in again.results] == [uncached(r.details) for r in first.results]


def test_a_changed_parser_reads_every_stored_reply_again(tmp_path: Path, parse_calls: list[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "s.db")
    first = run(_items(), make_judge("scripted"), store, RunConfig())
    parse_calls.clear()
    real = _identity._source

    def edited(module: str) -> bytes | None:  # the parser module as a fix would leave it
        src = real(module)
        return src + b"\n# a fix\n" if src is not None and module == "knockout.prompts._parsers" else src

    monkeypatch.setattr(_identity, "_source", edited)
    _identity._module_closure_digest.cache_clear()
    _identity._function_identity.cache_clear()
    try:
        again = run(_items(), make_judge("scripted"), store, RunConfig())
    finally:
        _identity._module_closure_digest.cache_clear()
        _identity._function_identity.cache_clear()
    assert again.stats["judge_calls"] == 0 and len(parse_calls) == 6
    assert [r.score for r in again.results] == [r.score for r in first.results]


def test_replies_stored_without_a_parse_identity_are_read_again(tmp_path: Path, parse_calls: list[str]) -> None:
    """Rows written before ``calls.parse_id`` existed (or by a parse without one) are parsed as before."""
    store = Store(tmp_path / "s.db")
    first = run(_items(), make_judge("scripted"), store, RunConfig())
    store.db.execute("UPDATE calls SET parse_id = NULL, parsed = '123.0'")  # an old row's parse is never used
    parse_calls.clear()
    again = run(_items(), make_judge("scripted"), store, RunConfig())
    assert len(parse_calls) == 6
    assert [r.score for r in again.results] == [r.score for r in first.results]


def test_an_invalid_reply_is_stored_without_a_parse_and_read_again(tmp_path: Path, parse_calls: list[str]) -> None:
    store = Store(tmp_path / "s.db")
    judge = ReplayJudge(["Looks fine to me.", "Score: 3/4"])
    first = run(_items(1), judge, store, RunConfig())
    assert first.results[0].score == 3.0 and judge.calls == 2
    assert _parse_ids(store)[0] is None and _parse_ids(store)[1] is not None
    parse_calls.clear()
    again = run(_items(1), ReplayJudge(["unused"]), store, RunConfig())
    assert again.stats["judge_calls"] == 0 and again.results[0].score == 3.0
    assert set(parse_calls) == {"Looks fine to me."}  # the invalid one read again; the retry's stored parse used
    assert [a["reply"] for a in again.results[0].details["attempts"]] == ["Looks fine to me.", "Score: 3/4"]


def test_the_identity_covers_every_argument_of_the_parse() -> None:
    base = own_verdict(parse_score, 4, ("answer one", "reference"))
    assert base.parse_identity is not None and base.parse_identity == own_verdict(
        parse_score, 4, ("answer one", "reference")).parse_identity
    others = [
        own_verdict(parse_score, 5, ("answer one", "reference")),  # other points
        own_verdict(parse_score, 4, ("answer one", "reference!")),  # another text shown
        own_verdict(parse_score, 4, ("answer on", "ereference")),  # the same characters, split elsewhere
        own_verdict(parse_score, 4, ("answer one",)),
        own_verdict(parse_pairwise, 4, ("answer one", "reference")),  # another parser
    ]
    ids = {o.parse_identity for o in others}
    assert base.parse_identity not in ids and len(ids) == len(others)


def test_a_parser_outside_knockout_has_no_identity() -> None:
    def plugin(text: str, max_points: float) -> object:
        return parse_score(text, max_points)

    assert own_verdict(plugin, 4, ("x",)).parse_identity is None  # type: ignore[arg-type]
    assert _identity.code_identity(len) is None  # not a plain function
    assert _identity.code_identity(lambda t: t) is None


def test_the_code_identity_follows_knockout_imports() -> None:
    """A parser is identified with the source of the knockout modules its module imports (the meta parsers
    reuse the score parser's copy check)."""
    assert _identity._closure("knockout.meta._parsers") >= {"knockout.meta._parsers", "knockout.prompts._parsers",
                                                            "knockout._verdict"}
    assert "knockout.prompts._parsers" in _identity._closure("knockout.sbs._verdicts")
    # the copy checks every free-text parser shares (prompts/_copies.py) are part of each parser's identity
    assert all("knockout.prompts._copies" in _identity._closure(m)
               for m in ("knockout.prompts._parsers", "knockout.meta._parsers", "knockout.sbs._verdicts"))


def test_only_plain_json_values_are_kept_for_reuse() -> None:
    """A stored parse must read back as the value the parse made: an enum member, a tuple, a non-finite number
    would not."""
    assert _plain(1.5) and _plain(3) and _plain([1.0, 2.0]) and _plain({"grade": 1.0, "criteria": [1.0, None]})
    assert _plain({"winner": "A", "answer": "x", "own": True})
    assert not _plain(Verdict.A) and not _plain((1.0, 2.0)) and not _plain(math.nan) and not _plain({1: 2.0})
    assert not _plain([Verdict.B]) and not _plain(math.inf)


# -- issue 34 item 3: a stored parse is checked like a fresh one before it is used ---------------------------
def _one(store: Store, judge: ReplayJudge) -> float | None:
    r = run(_items(1), judge, store, RunConfig()).results[0]
    return r.score if r.valid else None


@pytest.mark.parametrize("planted", ["99", "-5", '"2"', '{"grade": 2}', "2", "true", "NaN", "Infinity", "null",
                                     "[2.0]", '"Score: 2/4"'])
def test_a_stored_parse_the_parse_could_not_have_made_is_not_used(tmp_path: Path, parse_calls: list[str],
                                                                   planted: str) -> None:
    """A store edited so that ``calls.parsed`` holds an out-of-range, negative, string, dict, int, bool or
    non-finite value (the parse identity left as it was) reads the reply again: the grade is the reply's."""
    store = Store(tmp_path / "s.db")
    assert _one(store, ReplayJudge(["Explanation: weak. Score: 1/4"])) == 1.0
    store.db.execute("UPDATE calls SET parsed = ?", (planted,))
    parse_calls.clear()
    assert _one(store, ReplayJudge(["unused"])) == 1.0
    assert parse_calls == ["Explanation: weak. Score: 1/4"]


def test_a_stored_parse_in_range_is_used_without_reading_the_reply(tmp_path: Path, parse_calls: list[str]) -> None:
    store = Store(tmp_path / "s.db")
    assert _one(store, ReplayJudge(["Score: 1/4"])) == 1.0
    parse_calls.clear()
    assert _one(store, ReplayJudge(["unused"])) == 1.0 and parse_calls == []


def test_an_edited_reply_is_read_again(tmp_path: Path, parse_calls: list[str]) -> None:
    store = Store(tmp_path / "s.db")
    assert _one(store, ReplayJudge(["Score: 1/4"])) == 1.0
    store.db.execute("UPDATE calls SET reply = 'Score: 0/4'")
    assert _one(store, ReplayJudge(["unused"])) == 0.0


def test_the_stored_shapes_of_every_parser() -> None:
    from knockout.meta._parsers import parse_argument, parse_criteria, parse_debate
    from knockout.meta._parsers import parse_score as meta_score
    from knockout.prompts._parsers import parse_criteria as criteria
    from knockout.prompts._stored import stored_value_ok
    from knockout.sbs._verdicts import parse_sbs
    from knockout.sciex._parse import parse_answer, parse_sciex_score

    def ok(parser: object, value: object, max_points: float = 2, crit: tuple[float, ...] = ()) -> bool:
        return stored_value_ok(own_verdict(parser, max_points, ("shown",), crit), value)  # type: ignore[arg-type]

    assert ok(parse_score, 2.0) and ok(parse_score, 0.0) and ok(parse_score, 1.5)
    assert not any(ok(parse_score, v) for v in (2, 99.0, -5.0, "2", {"grade": 2.0}, True, math.nan, math.inf, None))
    assert ok(parse_pairwise, [1.0, 2.0]) and not ok(parse_pairwise, [1.0]) and not ok(parse_pairwise, [3.0, 1.0])
    assert not ok(parse_pairwise, [1, 2.0]) and not ok(parse_pairwise, {"0": 1.0, "1": 1.0})
    c = (1.0, 1.0)
    assert ok(criteria, {"grade": 1.5, "criteria": [1.0, 0.5]}, 2, c)
    assert not ok(criteria, {"grade": 2.0, "criteria": [1.0, 0.5]}, 2, c)  # not their sum
    assert not ok(criteria, {"grade": 2.0, "criteria": [2.0, 0.0]}, 2, c)  # above a criterion's points
    assert not ok(criteria, {"grade": 1.0, "criteria": [1.0]}, 2, c)  # one criterion short
    assert not ok(criteria, {"grade": 1.0, "criteria": [1.0, 0.0], "x": 1}, 2, c)
    assert not ok(criteria, 1.0, 2, c)
    assert ok(parse_sciex_score, 2.0) and not ok(parse_sciex_score, 3.0)
    assert ok(parse_answer, "It maps names.") and not ok(parse_answer, " x") and not ok(parse_answer, "")
    assert ok(meta_score, {"score": 2.0, "own": None}, 5) and not ok(meta_score, {"score": 0.0, "own": None}, 5)
    assert ok(parse_criteria, ["a", "b"]) and not ok(parse_criteria, ["a"] * 6) and not ok(parse_criteria, [])
    assert ok(parse_argument, "x") and not ok(parse_argument, 1.0)
    assert ok(parse_debate, {"winner": None, "question": "why?"}) and not ok(parse_debate, {"winner": "A",
                                                                                             "question": None})
    assert not ok(parse_sbs, "A")  # side-by-side verdicts are enum members: never stored for reuse

    def plugin(text: str, max_points: float) -> object:
        return parse_score(text, max_points)

    assert not ok(plugin, 1.0)


@pytest.mark.parametrize("planted", ["[5.0, 0.0]", "[4.0]", "[4, 0]", '["4", "0"]', '{"grade": 4}'])
def test_a_stored_pair_the_parse_could_not_have_made_is_not_used(tmp_path: Path, parse_calls: list[str],
                                                                  planted: str) -> None:
    store = Store(tmp_path / "s.db")
    first = run(_items(4), make_judge("scripted"), store, RunConfig(method="knockout"))
    store.db.execute("UPDATE calls SET parsed = ?", (planted,))
    parse_calls.clear()
    again = run(_items(4), make_judge("scripted"), store, RunConfig(method="knockout"))
    assert again.stats["judge_calls"] == 0 and len(parse_calls) == first.stats["judge_calls"]
    assert [(r.answer_id, r.score) for r in again.results] == [(r.answer_id, r.score) for r in first.results]
