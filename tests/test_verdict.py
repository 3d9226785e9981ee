"""The one verdict vocabulary (knockout.Verdict): members, labels, swap, legacy spellings."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import knockout
from knockout._verdict import META_SPELLING, Verdict
from knockout.annotations import SHOWN, VERDICT_LABELS, Assignments, PairAnnotations
from knockout.data._records import PairItem
from knockout.engine import Outcome
from knockout.jury._aggregate import majority, table8
from knockout.meta._parsers import parse_better, parse_debate
from knockout.meta._verdicts import load_verdicts
from knockout.methods._match import Game, Match
from knockout.sbs._data import SbsItem
from knockout.sbs._ensemble import ensemble
from knockout.sbs._verdicts import parse_sbs, to_candidate
from knockout.storage._migrations import applied, version
from knockout.storage._store import Store


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


# -- the annotations' verdicts: stored as the enum's values, old spellings migrated by schema step 12 ----
def _old_store(path: Path) -> None:
    """A store whose pair verdicts were written by knockout before step 12 (both_good / both_bad)."""
    Store(path).close()
    db = sqlite3.connect(path)
    with db:
        db.execute("DELETE FROM schema_migrations WHERE version = 12")
        db.execute("PRAGMA user_version = 11")
        for pair, shown, swapped, verdict in (("p1", "both_good", 0, "both_good"), ("p2", "both_bad", 1, "both_bad"),
                                              ("p3", "left", 1, "B")):
            db.execute("INSERT INTO pair_verdicts (pairset, pair_id, annotator, shown, swapped, verdict, comment, "
                       "version, created, updated) VALUES ('s', ?, 'ann', ?, ?, ?, '', 1, 0, 0)",
                       (pair, shown, swapped, verdict))
    db.close()


def test_migration_12_rewrites_old_pair_verdicts(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_store(path)
    with Store(path) as store:
        assert 12 in applied(store.db) and version(store.db) >= 12
        got = {v["pair_id"]: v["verdict"] for v in PairAnnotations(store).verdicts("s")}
    assert got == {"p1": Verdict.C, "p2": Verdict.D, "p3": Verdict.B}
    assert all(type(v) is Verdict for v in got.values())
    raw = sqlite3.connect(path).execute("SELECT verdict FROM pair_verdicts ORDER BY pair_id").fetchall()
    assert raw == [("C",), ("D",), ("B",)]


def test_pair_annotation_produces_members(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        ann = PairAnnotations(store)
        ann.import_pairs([PairItem(id=f"p{i}", question="q", answer_a="a", answer_b="b") for i in range(4)], "s",
                         overlap=1)
        Assignments(store).assign("u", "pairset", "s")
        want = {}
        for view, choice in zip(ann.queue("s", "u"), SHOWN, strict=True):
            ann.save_verdict(view, "s", "u", choice, base_version=0)
            want[view.pair.id] = SHOWN[choice].swap() if view.swapped else SHOWN[choice]
        got = {v["pair_id"]: v["verdict"] for v in ann.verdicts("s")}
    assert got == want and {Verdict.C, Verdict.D} <= set(got.values())
    assert all(type(v) is Verdict for v in got.values())
    assert VERDICT_LABELS[Verdict.C] == "both good"


# -- meta-evaluation: verdicts read as members, the verdict set's identity unchanged ----------------------
def _verdict_files(folder: Path) -> None:
    labels = ["1", "2", "0", "1", "2"]
    for evaluator, winners in {"judgeA": ["1", "2", "0", "", "AnswerA"], "judgeB": ["2", "2", "tie", "1", "b"]}.items():
        with (folder / f"merged_eval_results_{evaluator}_pairwise.jsonl").open("w") as f:
            for i, w in enumerate(winners):
                f.write(json.dumps({"question": f"q{i}", "answer1": "x", "answer2": "y", "winner": w,
                                    "explanation": "e", "label": labels[i]}) + "\n")


def test_meta_verdicts_are_members_and_the_fingerprint_is_unchanged(tmp_path: Path) -> None:
    _verdict_files(tmp_path)
    vs = load_verdicts(tmp_path)
    assert [i.human for i in vs.items] == [Verdict.A, Verdict.B, Verdict.TIE, Verdict.A, Verdict.B]
    assert [i.assessments["judgeA"].verdict for i in vs.items] == [Verdict.A, Verdict.B, Verdict.TIE, None, Verdict.A]
    assert all(type(i.human) is Verdict for i in vs.items)
    # the value written by knockout before Verdict (it is part of meta run ids)
    assert vs.fingerprint() == "ee57f2a86fef04bb"


def test_meta_judge_parsers_give_members() -> None:
    reply = "<Better_answer>AnswerB</Better_answer><Better_assistant>equally good</Better_assistant>"
    value = parse_better(reply).value
    assert value == {"winner": Verdict.TIE, "answer": Verdict.B} and type(value["winner"]) is Verdict
    assert parse_debate("<Better_assistant>Assistant1</Better_assistant>").value["winner"] is Verdict.A


# -- pairwise matches, side-by-side and jury producers ----------------------------------------------------
def _game(first: str, second: str, scores: tuple[float, float] | None) -> Game:
    return Game(first, second, Outcome(scores, scores is not None, []))


def test_match_verdicts() -> None:
    assert _game("a", "b", (4.0, 2.0)).verdict is Verdict.A and _game("a", "b", None).verdict is Verdict.E
    # debiased: b shown first in the second game; a's mean 3.5 against b's 3.0
    m = Match("a", "b", [_game("a", "b", (4.0, 2.0)), _game("b", "a", (4.0, 3.0))], step=1)
    assert m.verdict is Verdict.A and m.result_for("a") == 1.0 and m.result_for("b") == 0.0
    tie = Match("a", "b", [_game("a", "b", (3.0, 3.0))], step=1)
    assert tie.verdict is Verdict.TIE and tie.result_for("b") == 0.5
    bad = Match("a", "b", [_game("a", "b", None)], step=1)
    assert bad.verdict is Verdict.E and bad.result_for("a") is None


def test_sbs_and_jury_producers_give_members() -> None:
    assert type(parse_sbs("Final verdict: [[c]]").value) is Verdict
    assert parse_sbs("answer: b").value is Verdict.B  # a lower-case label is read as its class
    assert to_candidate("A", 1) is Verdict.B and to_candidate(Verdict.C, 1) is Verdict.C
    assert ensemble(["A", "B", "C"]) is Verdict.C and ensemble(["A", "A"]) is Verdict.A
    assert majority(["A", "A", "E"]) is Verdict.A and majority(["A", "B"]) is None
    assert table8(["B", "C", "C", "E"]) is Verdict.B  # Table 8: B C C -> B
    item = SbsItem(id="1", question="q", candidate="c", baseline="b", human_verdicts={"x": "A", "y": "A", "z": "D"})
    assert item.human is Verdict.A and all(type(v) is Verdict for v in item.human_verdicts.values())
    with pytest.raises(ValueError, match="must be A, B, C or D"):
        SbsItem(id="1", question="q", candidate="c", baseline="b", human_verdicts={"x": "E"})
