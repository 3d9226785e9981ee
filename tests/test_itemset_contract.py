"""ItemSet's contract, now that it keeps its answers as columns and builds an Answer only when asked: the same
loaders give the same items, fingerprints (run ids) and snapshot bytes as the object-per-answer set did, and
every accessor agrees with the Answer it stands for."""

from __future__ import annotations

import hashlib
import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from knockout.data import Answer, ItemSet, Question, load_items
from knockout.errors import ConfigError, InputError
from knockout.metrics._analysis import analyse, build_rows
from knockout.storage._snapshots import pack_records
from knockout.storage._store import Store, pack_items, unpack_items
from tests.conftest import ROOT

FIX = Path(__file__).resolve().parent / "fixtures"

#: (path, format, fingerprint, sha256 prefixes of the line-per-answer snapshot and of the columnar one; source
#: "pinned", figures relative to the checkout): the fingerprints and line-per-answer snapshots as the
#: object-per-answer ItemSet gave them (main at dbd5b8a, on these fixture files), the columnar snapshots as
#: first written (run ids hash the fingerprint; the store keeps the snapshot bytes, older stores the old format)
PINNED = [
    (ROOT / "src/knockout/examples/demo_exam.jsonl", "auto", "8f9b6df246ef37bd", "c2ca883f4d40acdb",
     "bd7dca6207c0a0a4"),
    (FIX / "tiny.jsonl", "auto", "c0e9f418cad8ca7a", "fc3b696b5f6fd2ce", "7e14726f7232ce09"),
    (FIX / "tiny.csv", "auto", "e4e5d6629330f43f", "849744a8c447bd99", "f4fba988ed949019"),
    (FIX / "sciex/tiny_exam", "sciex", "43d715cfab8b61d9", "e1c67c2331dbc5b3", "bc7cdeab90a5da92"),
    (FIX / "saf", "saf", "d35a8cae8c5fa2d9", "80b605967be9eb4d", "c1715fb0c2932d82"),
    (FIX / "mqm", "mqm", "122ae064cf92d909", "b2cd3beb8ff2e21b", "f55074762ad3435f"),
]


def reference_fingerprint(questions: list[Question], answers: list[Answer]) -> str:
    """The fingerprint as the object-per-answer set computed it (every model_dump, keys sorted)."""
    h = hashlib.sha256()
    for q in questions:  # rubrics came later: a question without one hashes as before
        h.update(json.dumps(q.model_dump(exclude={"rubric"} if q.rubric is None else None), sort_keys=True).encode())
    for a in answers:
        h.update(json.dumps(a.model_dump(), sort_keys=True).encode())
    return h.hexdigest()[:16]


def odd_answers() -> tuple[list[Question], list[Answer]]:
    """Answers with every shape a field can take: no examinee, graders in different orders, no grade, meta
    nested and flat, a field given as its default, human scores given as ints."""
    qs = [Question(id="q1", text="Q one?", max_points=4), Question(id="q2", text="Q two?", max_points=2,
                                                                   human_scale="mqm")]
    answers = [
        Answer(id="a1", question_id="q1", examinee="x", text="one", human_scores={"h1": 3, "h2": 2.5}),
        Answer(id="a2", question_id="q2", text="two", human_scores={"h2": -7.0, "h1": 1.0}, meta={"k": [1, {"z": 2}]}),
        Answer(id="a3", question_id="q1", examinee="y", text="three", meta={"role": "a"}),
        Answer(id="a4", question_id="q1", examinee="x", text="four", human_scores={}, meta={}),
        Answer(id="a5", question_id="q2", examinee="y", text="ünï «five»", human_scores={"h1": 0.1}),
    ]
    return qs, answers


@pytest.mark.parametrize(("path", "fmt", "fingerprint", "records", "snapshot"), PINNED, ids=lambda p: str(p)[-24:])
def test_loaders_give_the_pinned_fingerprint_and_snapshot(path: Path, fmt: str, fingerprint: str, records: str,
                                                          snapshot: str) -> None:
    loaded = load_items(path, fmt)
    # the snapshot holds the source and the figures as absolute paths: pinned with the source "pinned" and each
    # figure relative to the checkout, so that a clone anywhere gives these bytes
    items = ItemSet([q.model_copy(update={"images": [str(Path(i).relative_to(ROOT)) for i in q.images]})
                     for q in loaded.questions.values()], list(loaded), source="pinned")
    assert items.fingerprint() == fingerprint
    assert hashlib.sha256(pack_items(items)).hexdigest()[:16] == snapshot
    assert reference_fingerprint(list(items.questions.values()), list(items)) == fingerprint
    back = unpack_items(pack_items(items))
    assert back.fingerprint() == fingerprint and list(back) == list(items) and back.source == items.source
    # a store written before the columnar format holds line-per-answer snapshots: they read as they did
    old = pack_records(items)
    assert hashlib.sha256(old).hexdigest()[:16] == records
    back = unpack_items(old)
    assert back.fingerprint() == fingerprint and list(back) == list(items) and back.source == items.source


def test_answers_come_back_as_given() -> None:
    qs, answers = odd_answers()
    items = ItemSet(qs, answers, source="odd")
    assert len(items) == len(items.answers) == 5
    assert list(items) == answers and items.answers == answers and items.answers[1:3] == answers[1:3]
    assert items.answers[-1] == answers[-1]
    with pytest.raises(IndexError):
        items.answers[5]
    for i, a in enumerate(answers):
        b = items.answer(a.id)
        assert b == a and b.model_dump_json() == a.model_dump_json()  # field and key order kept
        assert list(b.human_scores) == list(a.human_scores) and b.model_fields_set == a.model_fields_set
        assert items.index_of(a.id) == items.find(a.id) == i
        assert items.answer_id_at(i) == a.id and items.examinee_at(i) == a.examinee and items.text_at(i) == a.text
        assert items.human_score_at(i) == a.human_score and items.human_scores_at(i) == a.human_scores
        assert items.meta_at(i) == a.meta and items.question_at(i) is items.question_of(a)
    assert items.find("nope") is None
    with pytest.raises(KeyError):
        items.answer("nope")
    assert items.fingerprint() == reference_fingerprint(qs, answers)
    assert items.graders() == ["h1", "h2"] and items.has_human_scores()
    assert [a.id for a in items.answers_for("q1")] == ["a1", "a3", "a4"] and items.answers_for("q9") == []
    assert list(items.indices_for("q2")) == [1, 4] and items.question_ids() == ["q1", "q2"]


def test_columnar_snapshot_keeps_every_shape() -> None:
    """A snapshot gives back every answer as given: graders' order, fields given, meta nested, no examinee, no
    grade; a damaged or cut snapshot is a clear error, never a smaller set."""
    qs, answers = odd_answers()
    items = ItemSet(qs, answers, source="odd")
    data = pack_items(items)
    back = unpack_items(data)
    assert list(back) == answers and back.source == "odd" and back.fingerprint() == items.fingerprint()
    for a, b in zip(answers, back, strict=True):
        assert b.model_dump_json() == a.model_dump_json() and b.model_fields_set == a.model_fields_set
    assert back.graders() == items.graders() and [back.human_score_at(i) for i in range(5)] == \
        [a.human_score for a in answers]
    cut = zlib.compress(zlib.decompress(data).rsplit(b"\n", 3)[0])
    with pytest.raises(ConfigError, match="damaged item-set snapshot"):
        unpack_items(cut)
    with pytest.raises(ConfigError, match="unknown format"):
        unpack_items(zlib.compress(b"something else\n"))


def test_fingerprint_of_awkward_answers_is_the_reference() -> None:
    """The fingerprint, written from the columns, is the hash of each answer's sorted model_dump as json.dumps
    writes it: escapes, non-ASCII, graders out of order, floats that print long, nested meta."""
    qs, answers = odd_answers()
    answers = [*answers,
               Answer(id="b1", question_id="q1", text='quote " back\\ slash \u2028 \x01 tab\t é 😀',
                      human_scores={"zz": 1.5, "aa": 0.25, "Mm": 2.0}, meta={"b": {"y": 1, "x": [1.5, None, True]},
                                                                          "a": "ü"}),
               Answer(id="b2", question_id="q1", examinee="ü", text="x", human_scores={"h": 1e-7}),
               Answer(id="b3", question_id="q1", text="y", human_scores={"h": 0.1 + 0.2})]
    assert ItemSet(qs, answers).fingerprint() == reference_fingerprint(qs, answers)


def test_answers_built_are_copies() -> None:
    qs, answers = odd_answers()
    items = ItemSet(qs, answers)
    a = items.answer("a2")
    a.meta["k"][1]["z"] = 99
    a.human_scores["h1"] = 0.0
    assert items.answer("a2") == answers[1] and items.meta_at(1) == {"k": [1, {"z": 2}]}


def test_subset_as_before() -> None:
    qs, answers = odd_answers()
    items = ItemSet([*qs, Question(id="q3", text="no answers")], answers)
    same = ItemSet(qs, [answers[i] for i in (0, 2, 3, 1, 4)])  # grouped by question: the old subset's order
    whole = items.subset()
    assert list(whole) == list(same) and list(whole.questions) == ["q1", "q2"]
    assert whole.fingerprint() == same.fingerprint()
    assert same.subset() is same  # nothing to change
    part = items.subset(limit=1, answers_per_question=2)
    assert [a.id for a in part] == ["a1", "a3"] and list(part.questions) == ["q1"]
    assert part.answer("a3") == answers[2] and part.fingerprint() == reference_fingerprint(qs[:1], answers[0:3:2])
    assert part.graders() == ["h1", "h2"] and part.find("a2") is None


def test_checks_in_the_old_order() -> None:
    q = Question(id="q1", text="Q?", max_points=2)
    a = Answer(id="a1", question_id="q1", text="t", human_scores={"h": 1})
    with pytest.raises(InputError, match="duplicate question id"):
        ItemSet([q, q], [a, a])
    with pytest.raises(InputError, match="duplicate answer id"):
        ItemSet([q], [a, a, Answer(id="a2", question_id="q9", text="t")])
    with pytest.raises(InputError, match="unknown question 'q9'"):
        ItemSet([q], [Answer(id="a2", question_id="q9", text="t"), a, a])
    with pytest.raises(InputError, match=r"outside 0\.\.2"):
        ItemSet([q], [Answer(id="a2", question_id="q1", text="t", human_scores={"h": 3})])
    # an answer may come before its question in a file (the records are checked once all are read)
    streamed = ItemSet.from_records([a, q], source="s")
    assert list(streamed) == [a] and streamed.source == "s"


def test_jsonl_streams_into_the_same_set(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    lines: list[dict[str, Any]] = [
        {"type": "answer", "id": "a1", "question_id": "q1", "text": "first", "human_score": 2},
        {"type": "question", "id": "q1", "text": "Q?", "max_points": 4},
        {"type": "answer", "id": "a2", "question_id": "q1", "examinee": "e", "text": "second",
         "human_scores": {"b": 1, "a": 3}, "meta": {"x": 1}},
    ]
    path.write_text("".join(json.dumps(o) + "\n" for o in lines), encoding="utf-8")
    items = load_items(path)
    assert [a.model_dump() for a in items] == [
        {"id": "a1", "question_id": "q1", "examinee": None, "text": "first", "human_scores": {"human": 2.0},
         "meta": {}},
        {"id": "a2", "question_id": "q1", "examinee": "e", "text": "second", "human_scores": {"b": 1.0, "a": 3.0},
         "meta": {"x": 1}}]


def test_result_rows_are_the_light_results(tmp_path: Path) -> None:
    from knockout.judges import make_judge
    from knockout.methods import RunConfig, run

    items = load_items(ROOT / "src/knockout/examples/demo_exam.jsonl")
    with Store(tmp_path / "s.db") as s:
        rep = run(items, make_judge("scripted?noise=0.3"), s, RunConfig(method="knockout"))
        s.put_result(rep.run_id, "not-an-answer", question_id=None, score=None, valid=False, details={})
        light = s.results(rep.run_id, details=False)
        rows = s.result_rows(rep.run_id)
        assert len(rows) == len(light) == 25 and rows == light and list(rows) == light
        assert rows[0] == light[0] and rows[-1] == light[-1] and rows[3:5] == light[3:5]
        assert any(r["details"].get("groups") for r in rows)
        rows[0]["details"].setdefault("groups", {})["round"] = "x"  # a row read is a copy
        assert rows[0] == light[0]
        for results in (light, rows):  # the analysis reads both the same way
            built, unmatched = build_rows(items, results)
            assert unmatched == 1 and len(built) == 24
            assert [r.answer for r in built] == list(items)
            by_id = {x["item_id"]: x for x in light}
            assert [r.score for r in built] == [by_id[r.id]["score"] if by_id[r.id]["valid"] else None for r in built]
        a = analyse(items, light, by=["round"], resamples=50).to_dict()
        b = analyse(items, rows, by=["round"], resamples=50).to_dict()
        assert a == b
