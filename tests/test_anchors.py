"""Reference anchors (issue 41): each question's expected grades read on the line through the judge's grades of
its reference answer (full points) and of a null answer (none).  The run-level tests use the scripted judge, a
SIMULATION (it grades a reference anchor as full points and a null anchor as none, plus its noise); the last one
grades with the real 0.5B GGUF."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.judges import make_judge
from knockout.methods._anchors import MIN_GAP, NULL_ANSWER, Anchors, anchored_words, resolve_anchors
from knockout.methods._base import MethodOptions
from knockout.methods._run import RunConfig, run, run_id_for
from knockout.storage._store import Store
from tests.conftest import SMALL_MODEL
from tests.fake_server import Reply, chat_body, fake_api


def _items(reference: bool = True) -> ItemSet:
    qs = [Question(id="q1", text="What does DNS do?", max_points=4, reference="It maps domain names to IP "
                   "addresses." if reference else None),
          Question(id="q2", text="What does a router do?", max_points=2, reference="It forwards packets between "
                   "networks.")]
    answers = [Answer(id=f"{q.id}/a{i}", question_id=q.id, text=f"Answer {i} to {q.id}.", examinee=f"e{i}",
                      human_scores={"g": float(i % 3) * q.max_points / 2}) for q in qs for i in range(4)]
    return ItemSet(qs, answers, source="test")


def test_the_line_through_the_anchors() -> None:
    a = Anchors(reference=3.5, null=1.0, max_points=5)
    assert a.read(3.5) == 5 and a.read(1.0) == 0 and a.read(2.25) == pytest.approx(2.5)
    assert a.read(4.5) == 5 and a.read(0.2) == 0  # clipped to the scale
    assert a.scale == pytest.approx(2.0)
    flat = Anchors(reference=2.0, null=2.0, max_points=5)  # a judge that cannot tell them apart
    assert flat.scale == pytest.approx(1 / MIN_GAP)
    assert a.record(2.25) == {"grade_raw": 2.25, "reference": 3.5, "null": 1.0, "scale": 2.0}


def test_anchors_are_off_unless_asked_and_only_for_individual_grading(tmp_path: Path) -> None:
    assert resolve_anchors("off", "knockout") == "off" and resolve_anchors("on", "individual") == "on"
    with pytest.raises(ConfigError, match="individual grading"):
        resolve_anchors("on", "knockout")
    with pytest.raises(ConfigError, match="unknown anchors mode"):
        resolve_anchors("auto", "individual")
    items = _items()
    judge = make_judge("scripted?slot=true&noise=0")  # a simulation
    default = RunConfig(options=MethodOptions(reference=True))
    assert run_id_for(items, judge, default) == run_id_for(items, judge, RunConfig(options=MethodOptions(
        reference=True, anchors="off")))  # the run ids of before
    with pytest.raises(ConfigError, match="individual grading"):
        run_id_for(items, judge, RunConfig(method="knockout", options=MethodOptions(anchors="on")))
    with Store(tmp_path / "s.db") as store:
        report = run(items, judge, store, default)
    assert report.summary()["judge_calls"] == 8 and "anchors" not in report.summary()
    assert all("anchored" not in r.details for r in report.results)


def test_a_run_asks_two_anchors_per_question_and_reads_every_grade_on_them(tmp_path: Path) -> None:
    items = _items()
    judge = make_judge("scripted?slot=true&noise=0.05")  # a simulation
    cfg = RunConfig(options=MethodOptions(reference=True, anchors="on"))
    with Store(tmp_path / "s.db") as store:
        first = run(items, judge, store, cfg)
        again = run(items, judge, store, cfg)
        off = run(items, judge, store, RunConfig(options=MethodOptions(reference=True)))
    s = first.summary()
    assert s["status"] == "complete" and s["valid"] == 8 and s["judge_calls"] == 8 + 2 * 2
    assert s["anchors"] == {"questions": 2, "unread": 0}
    assert again.summary()["judge_calls"] == 0 and again.run_id == first.run_id  # resumed from the cache
    assert off.summary()["judge_calls"] == 0 and off.run_id != first.run_id  # the same answers' requests
    raw = {r.answer_id: r.score for r in off.results}
    for r in first.results:
        d = r.details["anchored"]
        q = items.questions[r.question_id]
        assert d["grade_raw"] == raw[r.answer_id]
        assert r.score == Anchors(d["reference"], d["null"], q.max_points).read(d["grade_raw"])
        assert 0 <= r.score <= q.max_points and d["null"] < d["reference"]


def test_the_shift_moves_by_the_gap_between_full_points_and_the_reference() -> None:
    a = Anchors(reference=3.5, null=None, max_points=5)
    assert a.scale == 1.0 and a.shift == pytest.approx(1.5)
    assert a.read(2.0) == pytest.approx(3.5) and a.read(3.5) == 5 and a.read(4.5) == 5  # clipped to the scale
    assert Anchors(reference=5.0, null=None, max_points=5).read(2.0) == 2.0  # a reference at full points: unmoved
    assert a.record(2.0) == {"grade_raw": 2.0, "reference": 3.5, "null": None, "scale": 1.0, "shift": 1.5}
    assert anchored_words(a.record(2.0)) == ("the judge's grade 2.00, moved by +1.50: the gap between full points "
                                             "and its grade of the reference (3.50)")
    line = Anchors(reference=3.5, null=1.0, max_points=5)
    assert anchored_words(line.record(2.25)) == ("the judge's grade 2.25, read on the line through its grades of the "
                                                 "reference (3.50: full points) and of a null answer (1.00: none)")
    assert resolve_anchors("shift", "individual") == "shift"
    with pytest.raises(ConfigError, match="--anchors shift: reference anchors are for individual grading"):
        resolve_anchors("shift", "knockout")


def test_a_shift_run_asks_the_reference_alone_and_moves_every_grade_of_its_question(tmp_path: Path) -> None:
    items = _items()
    judge = make_judge("scripted?slot=true&noise=0.05")  # a simulation
    with Store(tmp_path / "s.db") as store:
        off = run(items, judge, store, RunConfig(options=MethodOptions(reference=True)))
        line = run(items, judge, store, RunConfig(options=MethodOptions(reference=True, anchors="on")))
        first = run(items, judge, store, RunConfig(options=MethodOptions(reference=True, anchors="shift")))
    s = first.summary()
    assert s["status"] == "complete" and s["judge_calls"] == 0  # the answers' and references' requests are cached
    assert s["anchors"] == {"questions": 2, "unread": 0}
    assert len({off.run_id, line.run_id, first.run_id}) == 3
    raw = {r.answer_id: r.score for r in off.results}
    for r in first.results:
        d = r.details["anchored"]
        q = items.questions[r.question_id]
        assert d["grade_raw"] == raw[r.answer_id] and d["null"] is None and d["scale"] == 1.0
        assert d["shift"] == pytest.approx(q.max_points - d["reference"])
        assert r.score == pytest.approx(min(max(d["grade_raw"] + d["shift"], 0.0), q.max_points))
    with Store(tmp_path / "t.db") as store:  # alone: one call per question
        assert run(items, judge, store, RunConfig(options=MethodOptions(reference=True, anchors="shift"))
                   ).summary()["judge_calls"] == 8 + 2


def test_only_questions_with_a_reference_shown_are_anchored(tmp_path: Path) -> None:
    judge = make_judge("scripted?slot=true&noise=0")
    with Store(tmp_path / "s.db") as store:
        one = run(_items(reference=False), judge, store, RunConfig(options=MethodOptions(reference=True,
                                                                                         anchors="on")))
        hidden = run(_items(), judge, store, RunConfig(options=MethodOptions(reference=False, anchors="on")))
    assert one.summary()["judge_calls"] == 8 + 2
    assert {r.question_id for r in one.results if "anchored" in r.details} == {"q2"}
    assert all("anchored" not in r.details for r in hidden.results)


def _serve(broken: list[bool], garbled: list[bool]) -> Any:
    def answer(body: dict[str, Any], n: int) -> Reply:
        shown = json.dumps(body.get("messages"))
        if NULL_ANSWER.replace("'", "\\u0027") in shown or NULL_ANSWER in shown:
            if broken[0]:
                return 500, b'{"error": {"message": "internal error"}}'
            if garbled[0]:
                return 200, chat_body("I cannot say.")
        return 200, chat_body("Score: 1/2")
    return fake_api(answer)


def test_an_anchor_that_got_no_reply_leaves_its_question_failed_and_the_run_incomplete(tmp_path: Path) -> None:
    """A real OpenAI SDK against a loopback server that fails the null anchor's request: that question's answers
    have no grade and the run is ``incomplete``; once the server answers, running it again asks only that request
    and every grade is read on the anchors."""
    items = ItemSet([_items().questions["q2"]], [a for a in _items() if a.question_id == "q2"], source="test")
    broken, garbled = [True], [False]
    cfg = RunConfig(options=MethodOptions(reference=True, anchors="on", readers="judge"))  # the judge's own grade
    with _serve(broken, garbled) as server, Store(tmp_path / "s.db") as store:
        spec = f"openai:fake-model?base_url={server.url}&retries=0&backoff=0"
        report = run(items, make_judge(spec), store, cfg)
        assert report.status == "incomplete" and report.summary()["failed"] == 1
        assert all(not r.valid and r.score is None and "anchor" in (r.details["error"] or "")
                   for r in report.results)
        broken[0] = False
        hits = server.hits
        again = run(items, make_judge(spec), store, cfg)
        assert again.status == "complete" and server.hits - hits == 1
        assert all(r.valid and r.details["anchored"]["null"] == 1 for r in again.results)


def test_an_anchor_reply_that_cannot_be_read_leaves_the_judges_own_grade_and_says_so(tmp_path: Path) -> None:
    items = ItemSet([_items().questions["q2"]], [a for a in _items() if a.question_id == "q2"], source="test")
    cfg = RunConfig(options=MethodOptions(reference=True, anchors="on", readers="judge"))  # the judge's own grade
    with _serve([False], [True]) as server, Store(tmp_path / "s.db") as store:
        report = run(items, make_judge(f"openai:fake-model?base_url={server.url}&retries=0&backoff=0"), store, cfg)
    assert report.status == "complete"
    assert report.summary()["anchors"] == {"questions": 0, "unread": 1}
    for r in report.results:
        assert r.valid and r.score == 1 and "the grade is the judge's own" in r.details["anchored"]["error"]


def test_the_embedded_judge_grades_the_reference_above_the_null_answer(small_gguf: Path, tmp_path: Path) -> None:
    judge = make_judge(f"llamacpp:{SMALL_MODEL}")
    items = _items()
    with Store(tmp_path / "s.db") as store:
        report = run(items, judge, store, RunConfig(options=MethodOptions(reference=True, anchors="on")))
    s = report.summary()
    assert s["verdict"] == "expected" and s["status"] == "complete" and s["judge_calls"] == 8 + 4
    for r in report.results:
        d = r.details["anchored"]
        assert d["reference"] > d["null"] and 0 <= r.score <= items.questions[r.question_id].max_points


def test_a_squeezed_judge_stays_squeezed_for_the_question_reliability() -> None:
    """The ``needs expert`` mark reads the judge's own grades: anchors that stretch a judge's grades 20-fold do
    not make a question it barely tells apart look graded."""
    from knockout.calibration._trust import NEEDS_EXPERT, own_grade, trust_marks

    items = _items()
    raw = [2.0, 2.01, 1.99, 2.0]  # q1 (4 points): every answer about the same grade
    a = Anchors(reference=2.1, null=1.9, max_points=4)
    results = [{"item_id": f"q1/a{i}", "score": a.read(g), "valid": True, "details": {"anchored": a.record(g)}}
               for i, g in enumerate(raw)]
    assert own_grade(results[1]["details"], results[1]["score"]) == (2.01, a.scale)
    assert own_grade({}, 3.0) == (3.0, 1.0)
    trust = trust_marks(items, results)
    assert trust.questions["q1"].spread == pytest.approx(float(np.std(raw)) / 4)
    assert NEEDS_EXPERT in trust.marks("q1/a0")


def test_a_flagged_answers_guard_grades_are_on_the_anchored_scale(tmp_path: Path) -> None:
    """The persuasion guard's grade of the whole answer (the one it "would have had", shown beside a flagged
    grade) and of the answer without the flagged parts are read on the same anchors as the grade itself."""
    from tests.test_guard import _items as attacked

    judge = make_judge("scripted?slot=true&noise=0.3&seed=4")  # a simulation: its noise grades the answer without
    # the flagged part lower than the whole answer (seed 4)
    with Store(tmp_path / "s.db") as store:
        on = run(attacked(), judge, store, RunConfig(options=MethodOptions(reference=True, anchors="on")))
        off = run(attacked(), judge, store, RunConfig(options=MethodOptions(reference=True)))
    raw = next(r for r in off.results if r.answer_id == "a0").details["guard"]
    r = next(r for r in on.results if r.answer_id == "a0")
    g, d = r.details["guard"], r.details["anchored"]
    assert g["flagged"] and raw["grade_stripped"] < raw["grade_full"]
    a = Anchors(d["reference"], d["null"], attacked().questions[r.question_id].max_points)
    m = attacked().questions[r.question_id].max_points  # the lower grade, at most the removed share of max below
    assert d["grade_raw"] == pytest.approx(max(raw["grade_stripped"], raw["grade_full"] - raw["removed_share"] * m))
    assert r.score == a.read(d["grade_raw"])
    assert g["grade_full"] == a.read(raw["grade_full"]) and g["grade_stripped"] == a.read(raw["grade_stripped"])
    assert g["grade_stripped"] <= r.score < g["grade_full"] and on.summary()["guard"]["lowered"] == 1
