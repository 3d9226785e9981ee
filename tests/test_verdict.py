"""The one verdict vocabulary (knockout.Verdict): members, labels, swap, legacy spellings."""

from __future__ import annotations

import json

import pytest

import knockout
from knockout._verdict import META_SPELLING, Verdict


def test_exported_and_values_are_the_stored_strings() -> None:
    assert knockout.Verdict is Verdict
    assert "Verdict" in knockout.__all__
    assert [v.value for v in Verdict] == ["A", "B", "C", "D", "TIE", "E"]
    assert Verdict.A == "A" and Verdict("C") is Verdict.C
    assert json.dumps({"v": Verdict.D}) == '{"v": "D"}'


def test_labels_and_validity() -> None:
    assert Verdict.A.label == "A better" and Verdict.C.label == "both good" and Verdict.D.label == "both bad"
    assert Verdict.TIE.label == "tie" and Verdict.E.label == "invalid"
    assert [v.is_valid for v in Verdict] == [True] * 5 + [False]
    assert [v for v in Verdict if v.is_tie] == [Verdict.C, Verdict.D, Verdict.TIE]


def test_swap() -> None:
    assert Verdict.A.swap() is Verdict.B and Verdict.B.swap() is Verdict.A
    for v in (Verdict.C, Verdict.D, Verdict.TIE, Verdict.E):
        assert v.swap() is v
    assert all(v.swap().swap() is v for v in Verdict)


def test_scores() -> None:
    assert [v.score_first() for v in Verdict] == [1.0, 0.0, 0.5, 0.5, 0.5, None]
    assert Verdict.from_scores(3, 2) is Verdict.A and Verdict.from_scores(1, 2.5) is Verdict.B
    assert Verdict.from_scores(2, 2) is Verdict.TIE and Verdict.from_scores(None, 2) is Verdict.E


@pytest.mark.parametrize(("spelling", "verdict"), [
    ("A", Verdict.A), (" b ", Verdict.B), ("c", Verdict.C), ("E", Verdict.E), ("tie", Verdict.TIE),
    ("both_good", Verdict.C), ("both_bad", Verdict.D), ("both good", Verdict.C), ("A better", Verdict.A),
    ("1", Verdict.A), ("2", Verdict.B), ("0", Verdict.TIE), (1, Verdict.A), (0, Verdict.TIE),
    ("Assistant1", Verdict.A), ("AnswerB", Verdict.B), ("answer 2", Verdict.B), ("equally good", Verdict.TIE),
    ("model_a", Verdict.A), ("draw", Verdict.TIE), ("invalid", Verdict.E), (Verdict.D, Verdict.D),
])  # fmt: skip
def test_parse_legacy_spellings(spelling: object, verdict: Verdict) -> None:
    assert Verdict.parse(spelling) is verdict


@pytest.mark.parametrize("bad", ["", "F", "maybe", True, None, 3, [1]])
def test_parse_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match="not a verdict"):
        Verdict.parse(bad)


def test_meta_spelling_round_trips() -> None:
    assert all(Verdict.parse(s) is v for v, s in META_SPELLING.items())
