"""Calibration: the model's grades adapted to the teacher's (``knockout calibrate``, ``report --calibrate``, the
``calibrated`` tidy table) and the review queue (``knockout review``).

The stored runs use the scripted judge, a SIMULATION with a known bias: it adds ``inflation`` (a share of max
points) to every human grade, so that the adaptation must move the grades back towards the teacher's."""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from knockout.calibration import Graded, calibrate, first_per_question
from knockout.calibration._review import boundary_closeness, rank
from knockout.cli import register_extensions
from knockout.cli._main import app
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.judges import make_judge
from knockout.methods._run import RunConfig, run
from knockout.storage._store import Store

register_extensions(app)
RUNNER = CliRunner()


def knockout(*args: str) -> tuple[int, str, str]:
    r = RUNNER.invoke(app, list(args))
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


def biased_rows(n_q: int = 6, per_q: int = 8, seed: int = 0) -> list[Graded]:
    """Judge = 0.5 x expert + 3 points (max 10) + small noise: compressed and inflated."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_q):
        for a in range(per_q):
            expert = float(rng.integers(0, 21)) / 2
            judge = float(np.clip(0.5 * expert + 3 + rng.normal(0, 0.2), 0, 10))
            rows.append(Graded(f"q{q}/a{a}", f"q{q}", 10.0, judge, expert))
    return rows


def test_a_compressed_model_is_moved_towards_the_teacher() -> None:
    """expert = 2 x model - 6 points: 48 teacher grades move the slope above 1 (the shipped prior keeps it short of
    2) and cut the held-out RMSE by more than a fifth (plain cross-validation: nothing is chosen, so nothing is
    nested)."""
    rows = biased_rows()
    cal = calibrate(rows, seed=0, resamples=200, refits=50)
    assert cal.map == "adapt" and cal.adaptation["exams"][""]["slope"] > 1.25
    assert "on 48 teacher grades" in cal.description and cal.label == (
        "adapted to the teacher's level on 48 teacher grades")
    f = cal.figures
    assert cal.heldout == "cross-validation" and f["n"] == len(rows)
    assert f["rmse_raw"] > 1.4 and f["rmse_calibrated"] < 0.8 * f["rmse_raw"]
    assert f["rmse_difference_ci"][1] < 0  # the improvement's CI excludes 0
    assert f["pearson_calibrated"] > 0.95 and f["kappa_calibrated"] > f["kappa_raw"]
    # every answer with a valid model grade has an adapted grade, on the points scale
    assert set(cal.grades) == {r.id for r in rows} and all(0 <= g <= 10 for g in cal.grades.values())
    assert all(s > 0 for s in cal.sd.values())  # the spread over refits


def test_the_held_out_figures_measure_the_grades_written() -> None:
    """Issue 58's friction: "RMSE 1.978 -> 1.978" in the table while the grades written moved by 2.7 points.  On a
    holdout the adapted grades measured are exactly the grades written for those answers, and the table says how
    far the written grades moved; under cross-validation it says that it measures other grades than those
    written."""
    from knockout.calibration._run import calibration_tables

    rows = biased_rows()
    fit = first_per_question(rows, 2, seed=1)
    cal = calibrate(rows, fit_ids=fit, seed=0, resamples=0, refits=0)
    assert cal.heldout_grades and all(cal.heldout_grades[i] == cal.grades[i] for i in cal.heldout_grades)
    held = [r for r in rows if r.id in cal.heldout_grades]
    rmse = float(np.sqrt(np.mean([(cal.grades[r.id] - (r.expert or 0.0)) ** 2 for r in held])))
    assert cal.figures["rmse_calibrated"] == pytest.approx(rmse)
    move = [abs(cal.grades[r.id] - (r.judge or 0.0)) for r in rows]
    assert cal.moved["max"] == pytest.approx(max(move)) and cal.moved["mean"] == pytest.approx(np.mean(move))
    sec = {**cal.to_dict(), "label": cal.label, "per_question": 2}
    t1, t2 = calibration_tables(sec)
    said = dict((r[0], r[1]) for r in t1.rows)
    assert said["grades written"] == (f"48 answers' grades: moved by {np.mean(move):.2f} points on average, at "
                                      f"most {max(move):.2f} (adapted minus the model's grade)")
    assert "exactly the grades written for them" in said["figures computed on"]
    assert "adapted: the grades written for the held-out answers" in t2.note
    cv = calibrate(rows, seed=0, resamples=0, refits=0)
    t1, t2 = calibration_tables({**cv.to_dict(), "label": cv.label})
    assert "not the grades written" in t2.note and "5-fold cross-validation" in dict(
        (r[0], r[1]) for r in t1.rows)["figures computed on"]


def test_a_steep_teacher_on_six_grades_cannot_give_keyword_lists_full_marks() -> None:
    """Issue 58: a linear map of slope ~6 fitted on 6 grades gave keyword lists full marks.  The frozen model is
    the adaptation's prior: 6 grades of a teacher six times as steep move a low model grade a little, never to
    the top."""
    x = np.array([0.4, 0.45, 0.5, 0.5, 0.55, 0.6])
    teacher = np.clip(6 * (x - 0.5) + 0.5, 0, 1)  # 0.4 -> 0, 0.6 -> 1
    rows = [Graded(f"q{i}/a0", f"q{i}", 10.0, float(10 * xi), float(10 * ti))
            for i, (xi, ti) in enumerate(zip(x, teacher, strict=True))]
    keywords = [Graded(f"q{i}/kw", f"q{i}", 10.0, 1.0, None) for i in range(6)]  # a keyword list: 1 of 10
    cal = calibrate(rows + keywords, seed=0, resamples=0, refits=20, heldout=False)
    assert cal.adaptation["exams"][""]["slope"] < 1.5
    assert all(cal.grades[r.id] < 2.5 for r in keywords), [cal.grades[r.id] for r in keywords]


def test_holdout_figures_never_use_fit_answers() -> None:
    rows = biased_rows()
    fit = first_per_question(rows, 2, seed=1)
    assert len(fit) == 12 and len({i.split("/")[0] for i in fit}) == 6
    cal = calibrate(rows, fit_ids=fit, seed=0, resamples=100, refits=20)
    assert cal.heldout == "holdout" and cal.expert_grades == 12
    assert set(cal.heldout_grades).isdisjoint(fit) and len(cal.heldout_grades) == 36
    # 2 grades per question move the grades part of the way: below raw, not all the way
    assert cal.figures["rmse_calibrated"] < 0.9 * cal.figures["rmse_raw"]


def test_a_model_that_does_not_rank_is_not_helped_much() -> None:
    rng = np.random.default_rng(3)
    rows = [Graded(f"q{i % 6}/{i}", f"q{i % 6}", 10.0, float(rng.integers(0, 11)), float(rng.integers(0, 11)))
            for i in range(48)]
    cal = calibrate(rows, seed=0, resamples=100, refits=10)
    # a model unrelated to the teacher: at best the teacher's mean, Pearson stays near 0
    assert abs(cal.figures["pearson_raw"]) < 0.4
    assert cal.figures["rmse_calibrated"] > 2.0


def test_too_few_teacher_grades_are_refused() -> None:
    """One grade is refused (nothing to hold out); two are enough: the prior, not a count, keeps them from moving
    the grades far."""
    rows = biased_rows()
    few = [r if i < 1 else Graded(r.id, r.question_id, r.max_points, r.judge, None) for i, r in enumerate(rows)]
    with pytest.raises(ConfigError, match=r"too few teacher grades to calibrate: 1 answers .* at least 2"):
        calibrate(few)
    two = [r if i < 2 else Graded(r.id, r.question_id, r.max_points, r.judge, None) for i, r in enumerate(rows)]
    cal = calibrate(two, seed=0, resamples=0, refits=0)
    assert cal.expert_grades == 2 and cal.moved["max"] < 1.0  # 2 grades: a small part of what they say
    flat = [Graded(r.id, r.question_id, 10.0, 5.0, r.expert) for r in rows]  # a model that does not rank
    assert calibrate(flat, seed=0, resamples=0, refits=0).adaptation["exams"][""]["slope"] == 1.0
    invalid = [Graded(r.id, r.question_id, 10.0, None, r.expert) for r in rows]
    with pytest.raises(ConfigError, match="0 answers have both"):
        calibrate(invalid)


def test_review_ranks_ungraded_answers() -> None:
    rows = biased_rows()
    # experts graded every answer of q0..q4 but none of q5
    half = [r if r.question_id != "q5" else Graded(r.id, r.question_id, 10.0, r.judge, None) for r in rows]
    cal = calibrate(half, seed=0, resamples=0, refits=30)
    queue = rank(half, {"flips": {"q5/a3": 1.0}}, cal)
    assert {q["answer_id"] for q in queue} == {f"q5/a{i}" for i in range(8)}
    assert queue[0]["answer_id"] == "q5/a3" and queue[0]["signals"]["flips"] == 1.0
    assert all(q["signals"]["coverage"] == 1.0 and q["calibrated_sd"] is not None for q in queue)
    assert boundary_closeness(2.5, 1.0) == pytest.approx(1.0) and boundary_closeness(3.0, 1.0) == 0.0


# -- the CLI on a stored run of the scripted judge (a SIMULATION with a known bias) --------------------------
def exam(graded: int | None = None) -> ItemSet:
    """6 questions x 8 answers, max 10 points, human grades 1..6 (so that the bias does not clip)."""
    rng = np.random.default_rng(7)
    qs, answers = [], []
    for q in range(6):
        qs.append(Question(id=f"q{q}", text=f"Question {q}?", reference="ref", max_points=10))
        for a in range(8):
            n = q * 8 + a
            human = {"expert": float(rng.integers(2, 13)) / 2} if graded is None or n < graded else {}
            answers.append(Answer(id=f"q{q}/a{a}", question_id=f"q{q}", text=f"answer {a}", examinee=f"e{a}",
                                  human_scores=human))
    return ItemSet(qs, answers)


@pytest.fixture(scope="module")
def biased_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    db = tmp_path_factory.mktemp("cal") / "cal.db"
    with Store(db) as store:
        full = run(exam(), make_judge("scripted?noise=0.02&inflation=0.3"), store, RunConfig(format_retries=0))
        few = run(exam(graded=1), make_judge("scripted?noise=0.02&inflation=0.3&seed=1"), store,
                  RunConfig(format_retries=0))
    return db, full.run_id, few.run_id


def test_calibrate_cli_moves_the_grades_back(biased_store: tuple[Path, str, str], tmp_path: Path) -> None:
    db, rid, _ = biased_store
    code, out, err = knockout("calibrate", f"{db}:{rid}", "--json", "--resamples", "100")
    assert code == 0, err
    sec = json.loads(out)
    f = sec["figures"]
    assert sec["expert_grades"] == 48 and sec["heldout"] == "cross-validation"
    assert f["rmse_raw"] == pytest.approx(3.0, abs=0.4)  # inflation 0.3 x 10 points
    assert f["rmse_calibrated"] < 0.4 * f["rmse_raw"] and f["rmse_difference_ci"][1] < 0
    assert sec["label"] == "adapted to the teacher's level on 48 teacher grades"
    code, out, err = knockout("calibrate", f"{db}:{rid}", "--per-question", "2", "--resamples", "50",
                              "--output", str(tmp_path / "cal.csv"))
    assert code == 0, err
    out = " ".join(out.split())
    for words in ("held-out", "holdout", "2 teacher grades per question", "RMSE (points)", "SIMULATION",
                  "grades written", "exactly the grades written for them"):
        assert words in out, words
    rows = list(csv.DictReader(io.StringIO((tmp_path / "cal.csv").read_text())))
    assert len(rows) == 48 and rows[0]["calibration_label"].endswith("on 12 teacher grades")
    # 12 grades move the inflated grades most of the way back (3 points off before)
    assert np.mean([abs(float(r["calibrated_score"]) - float(r["expert_score"])) for r in rows]) < 1.5


def test_calibrate_refuses_too_few(biased_store: tuple[Path, str, str]) -> None:
    db, _, few = biased_store
    code, _, err = knockout("calibrate", f"{db}:{few}")
    assert code == 2 and "too few teacher grades to calibrate: 1 answers" in err
    code, out, err = knockout("report", f"{db}:{few}", "--calibrate", "--resamples", "0")
    assert code == 0 and "not calibrated" in out and "too few teacher grades" in out


def test_report_and_export_show_calibrated_grades(biased_store: tuple[Path, str, str]) -> None:
    db, rid, _ = biased_store
    code, out, err = knockout("report", f"{db}:{rid}", "--calibrate", "--json", "--resamples", "50")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["calibrated"]["figures"]["rmse_calibrated"] < rep["calibrated"]["figures"]["rmse_raw"]
    code, out, err = knockout("report", f"{db}:{rid}", "--calibrate-per-question", "2", "--resamples", "50")
    assert code == 0 and "adapted - raw" in out and "RMSE (points)" in out
    code, out, err = knockout("export", f"{db}:{rid}", "--table", "calibrated", "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 48 and {"score", "calibrated_score", "calibration_label"} <= set(rows[0])
    assert rows[0]["calibration_label"].startswith("adapted to the teacher's level on 48") and rows[0][
        "calibration_expert_grades"] == "48"


def test_review_cli(biased_store: tuple[Path, str, str]) -> None:
    db, _, few = biased_store
    code, out, err = knockout("review", f"{db}:{few}", "--next", "3", "--json")
    assert code == 0, err
    q = json.loads(out)
    assert len(q["queue"]) == 3 and q["calibration"] is None  # 1 teacher grade: not adapted
    assert q["grades"]["label"].startswith("the model's grade (not adapted: 1 answers have both")
    assert all(x["why"] and x["priority_words"] and x["calibrated_words"].startswith("- (the model's grade")
               for x in q["queue"])
    assert all(x["answer_id"] != "q0/a0" for x in q["queue"])
    code, out, _ = knockout("review", f"{db}:{few}", "--next", "2")
    assert code == 0 and "grade these next" in out and "coverage" in out


def test_viewer_shows_calibrated_grades_labelled(biased_store: tuple[Path, str, str]) -> None:
    from knockout.methods._kind import GradeKind

    db, rid, few = biased_store
    with Store.open_existing(db) as store:
        kind = GradeKind()
        record = store.find_run(rid)
        cols = kind.columns(store, record)
        assert [c.header for c in cols][4] == "adapted to the teacher's level on 48 teacher grades"
        rows = kind.listing(store, record, store.results(rid))
        assert all(abs(r["calibrated"] - r["human"]) < 1.5 for r in rows)
        assert not any(c.field == "calibrated" for c in kind.columns(store, store.find_run(few)))  # too few


def test_viewer_reads_a_run_once_while_its_expert_grades_stay(biased_store: tuple[Path, str, str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A viewer page asks for its columns and its rows: the run is read once, and again after an expert grade
    is saved in the web app."""
    import knockout.reports._runs as runs_mod
    from knockout.methods._kind import GradeKind, viewer_calibration

    reads: list[str] = []
    real = runs_mod.read_run

    def counted(*a: Any, **k: Any) -> Any:
        reads.append("read")
        return real(*a, **k)

    monkeypatch.setattr(runs_mod, "read_run", counted)
    db, rid, _ = biased_store
    with Store.open_existing(db) as store:
        record, kind = store.find_run(rid), GradeKind()
        kind.columns(store, record)
        kind.listing(store, record, store.results(rid))
        kind.columns(store, record)
        assert len(reads) <= 1  # once, or not at all when an earlier test of this store read it
        before = len(reads)
        row = store.results(rid)[0]
        store.annotations.save_grade(answer_id=row["item_id"], grader="web:t", question_id=row["question_id"],
                                     exam_id="e", score=1.0, comment="", base_version=0, now=1.0)
        assert viewer_calibration(store, record) is not None and len(reads) == before + 1
        viewer_calibration(store, record)
        assert len(reads) == before + 1
        # a result written again (a rerun read with a newer parser): same count, read again
        from knockout.storage._store import ResultRow

        store.put_results(rid, [ResultRow(row["item_id"], row["question_id"], row["score"], bool(row["valid"]),
                                          row["details"])])
        assert viewer_calibration(store, record) is not None and len(reads) == before + 2


def test_grade_calibrate_and_bad_input(tmp_path: Path) -> None:
    from importlib import resources

    db = tmp_path / "g.db"
    with resources.as_file(resources.files("knockout.examples") / "demo_exam.jsonl") as demo:
        code, out, err = knockout("grade", str(demo), "--judge", "scripted?inflation=0.3", "-o", str(db),
                                  "--calibrate", "--json", "--quiet")
    assert code == 0, err
    sec = json.loads(out)["calibrated"]
    assert sec["expert_grades"] == 24 and sec["label"].endswith("24 teacher grades")
    for args, msg in [(("calibrate", str(tmp_path / "none.db")), "store not found"),
                      (("calibrate", f"{db}:nope"), "no run 'nope'"),
                      (("review", str(tmp_path / "none.db")), "store not found")]:
        code, _, err = knockout(*args)
        assert code == 2 and msg in err, (args, err)
    code, _, err = knockout("calibrate", str(db), "--per-question", "0")
    assert code == 2 and "per-question" in err


def test_review_reads_order_flips_of_a_debiased_knockout(tmp_path: Path) -> None:
    from knockout.calibration._review import review_loaded
    from knockout.methods._base import MethodOptions
    from knockout.reports._runs import read_run

    db = tmp_path / "ko.db"
    with Store(db) as store:  # a position-biased SIMULATION: the first-shown answer gets half the scale more
        rep = run(exam(graded=10), make_judge("scripted?noise=0.1&bias=0.5"), store,
                  RunConfig(method="knockout", options=MethodOptions(debias=True), format_retries=0))
        queue = review_loaded(read_run(store, store.find_run(rep.run_id), web_grades=True))
    flips = [q["signals"]["flips"] for q in queue["queue"]]
    assert len(flips) == 38 and max(flips) > 0  # 48 answers, 10 graded by experts
    assert queue["calibration"] is not None and queue["calibration"]["expert_grades"] == 10


def test_review_reads_repeated_draws() -> None:
    from types import SimpleNamespace

    from knockout.calibration._review import run_signals

    items = exam()
    results = [{"item_id": a.id, "question_id": a.question_id, "score": 5.0, "valid": True,
                "details": {"draws": [2.0, 8.0, None]} if a.id == "q1/a1" else {"draws": [5.0, 5.0]}}
               for a in items]
    sig = run_signals(SimpleNamespace(items=items, results=results, matches=[]))
    assert sig["samples"]["q1/a1"] == pytest.approx(0.3) and sig["samples"]["q0/a0"] == 0.0


# -- issue 34 item 7: the adaptation never reverses the model's order ----------------------------------------------
def inverted_rows(seed: int = 0) -> list[Graded]:
    """A model that ranks the answers backwards: model = 10 - teacher (+ noise)."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(6):
        for a in range(8):
            e = float(rng.integers(0, 11))
            rows.append(Graded(f"q{q}/a{a}", f"q{q}", 10.0, float(round(np.clip(10 - e + rng.normal(0, 0.5), 0, 10))),
                               e))
    return rows


def test_the_adaptation_never_reverses_the_models_order() -> None:
    """48 grades saying the order is backwards hold the exam's slope at 0 (every answer of a question the same
    grade, the question's level), never below: an answer the model graded higher is never graded lower."""
    rows = inverted_rows()
    for fit in (None, first_per_question(rows, 2, seed=0)):
        cal = calibrate(rows, fit_ids=fit, seed=0, resamples=0, refits=10)
        assert cal.adaptation["exams"][""]["slope"] >= 0.0
        for q in ("q0", "q3"):
            got = sorted((r.judge or 0.0, cal.grades[r.id]) for r in rows if r.question_id == q)
            assert all(b[1] >= a[1] - 1e-9 for a, b in itertools.pairwise(got)), got
    assert calibrate(rows, seed=0, resamples=0, refits=0).adaptation["exams"][""]["slope"] == 0.0


# -- issue 36 items 5 and 13: the review queue's numbers in plain words -----------------------------------------
def test_review_queue_says_what_its_numbers_mean() -> None:
    from knockout.calibration._review import grade_words

    rows = biased_rows()
    half = [r if r.question_id != "q5" and not r.id.endswith("/a7") else
            Graded(r.id, r.question_id, 10.0, r.judge, None) for r in rows]
    cal = calibrate(half, seed=0, resamples=0, refits=30)
    queue = rank(half, {"flips": {"q5/a3": 0.5}}, cal)
    top = queue[0]
    assert top["answer_id"] == "q5/a3"
    why = " | ".join(top["why"])
    assert "few expert grades on this question: 0 of its 8 answers (coverage 1.00 = 1 / (1 + 0))" in why
    assert "the winner of 50% of its knockout matches changes with the order shown (flips 0.50)" in why
    assert "points over refits of the adaptation" in why
    q0 = next(q for q in queue if q["question_id"] == "q0")
    assert "7 of its 8 answers (coverage 0.12 = 1 / (1 + 7))" in " | ".join(q0["why"])
    assert top["priority_words"].startswith(f"{top['priority']:.2f} = ") and "1 x 0.50 (flips)" in top[
        "priority_words"]
    b = next((q for q in queue if q["signals"]["boundary"] > 0), None)
    assert b is not None and "near a grade boundary" in " | ".join(b["why"]) and "1.00 = half-way" in " | ".join(
        b["why"])
    words = {"label": cal.label}
    assert grade_words({**top, "calibrated_sd": 0.0}, words).endswith(
        "(every refit of the adaptation gives this grade)")


def test_review_labels_the_models_grades_when_there_is_nothing_to_adapt_to() -> None:
    from knockout.calibration._review import calibration_words, grade_words, queue_tables

    rows = [Graded(f"q{q}/a{a}", f"q{q}", 4.0, float((q + a) % 5), float((q + a) % 5) if a + q == 0 else None)
            for q in range(3) for a in range(6)]  # one teacher grade
    queue = rank(rows, {}, None)
    words = calibration_words(None, rows)
    assert all(q["calibrated"] is None for q in queue) and not words["calibrated"]
    assert grade_words(queue[0], words) == ("- (the model's grade (not adapted: 1 answers have both a teacher grade "
                                           "and a valid model grade; calibration needs at least 2))")
    table = queue_tables({"queue": queue, "grades": words, "weights": {"boundary": 0.5}}, 3)[0]
    assert "adapted to" not in table.note and "not adapted" in table.note


def test_review_ties_are_ordered_and_said() -> None:
    from knockout.calibration._review import calibration_words, grade_words, queue_tables, tie_note

    # no expert grades, every judge grade on the grid: only coverage, 1.00 for every answer
    rows = [Graded(f"q{q}/a{a}", f"q{q}", 3.0, float(a % 4), None) for q in (2, 1, 0) for a in (3, 1, 2, 0)]
    queue = rank(rows, {}, None)
    assert [q["answer_id"] for q in queue] == sorted(r.id for r in rows)  # by question, then answer id
    assert all(q["ties"] == 12 for q in queue)
    assert "every answer listed ties at priority 1.00" in tie_note(queue[:5])
    words = calibration_words(None, rows)
    for q in queue:
        q["calibrated_words"] = grade_words(q, words)
    t = queue_tables({"queue": queue, "grades": words, "weights": {"coverage": 1.0}}, 5)[0]
    assert "(tie: 12 answers)" in t.rows[0][5] and "every answer listed ties" in t.note
    assert t.rows[0][4].startswith("- (the model's grade (not adapted: 0 answers have both")
    # float noise in the weighted sum does not break a tie
    a = {"priority": 0.1 + 0.2, "question_id": "q1", "answer_id": "x"}
    b = {"priority": 0.3, "question_id": "q0", "answer_id": "y"}
    from knockout.calibration._review import mark_ties

    mark_ties([a, b])
    assert a["ties"] == b["ties"] == 2


def mixed_exam() -> ItemSet:
    """Questions of 1, 2 and 10 points (Pearson on points and on shares of max points differ)."""
    rng = np.random.default_rng(5)
    qs, answers = [], []
    for q, mx in enumerate((1, 2, 10, 1, 2, 10)):
        qs.append(Question(id=f"q{q}", text=f"Question {q}?", reference="ref", max_points=mx))
        for a in range(6):
            answers.append(Answer(id=f"q{q}/a{a}", question_id=f"q{q}", text=f"answer {a}", examinee=f"e{a}",
                                  human_scores={"expert": float(rng.integers(0, 2 * mx + 1)) / 2}))
    return ItemSet(qs, answers)


def test_report_and_calibrate_agree_on_pearson_and_say_the_unit(tmp_path: Path) -> None:
    db = tmp_path / "mixed.db"
    with Store(db) as store:
        rid = run(mixed_exam(), make_judge("scripted?noise=0.3"), store, RunConfig(format_retries=0)).run_id
    code, out, err = knockout("report", f"{db}:{rid}", "--json", "--resamples", "0")
    assert code == 0, err
    rep = json.loads(out)
    code, out, err = knockout("calibrate", f"{db}:{rid}", "--json", "--resamples", "0")
    assert code == 0, err
    f = json.loads(out)["figures"]
    assert f["pearson_unit"] == "share of max points" and f["n"] == rep["question_level"]["n"] == 36
    assert f["pearson_raw"] == pytest.approx(rep["question_level"]["pearson"], abs=1e-9)
    code, out, _ = knockout("calibrate", f"{db}:{rid}", "--resamples", "0")
    out = " ".join(out.split())
    assert "Pearson (share of max points)" in out and "no CIs: --resamples 0" in out
    assert "the same answers and unit as knockout report's Pearson" in out
    code, out, _ = knockout("report", f"{db}:{rid}", "--resamples", "0")
    assert "Pearson (normalised: share of max points)" in " ".join(out.split())


def test_figures_shown_as_a_dash_say_why() -> None:
    from knockout.calibration._fit import heldout_figures
    from knockout.calibration._run import figure

    h = np.array([1.0, 2.0, 3.0, 4.0])
    f = heldout_figures(h + 1, np.full(4, 2.5), h, np.array(["a", "a", "b", "b"]), resamples=0, seed=0)
    assert f["pearson_calibrated"] is None and "calibrated grades gave every held-out answer the same" in \
        figure(f, "pearson_calibrated")
    f = heldout_figures(h[:2], h[:2], h[:2], np.array(["a", "b"]), resamples=10, seed=0)
    assert figure(f, "pearson_raw") == "- (too few answers (2; Pearson needs 3))"
    f = heldout_figures(h + 0.1, h, h + 0.1, np.array(["a"] * 4), resamples=0, seed=0)
    assert "no whole, half or quarter point grid" in figure(f, "kappa_raw")


def test_review_shows_grades_rounded(tmp_path: Path) -> None:
    """Issue 42: a judge grade that is a mean (``--samples 3``: 2.1666...) was shown as ``2.16667 / 3``; the
    queue shows it rounded to 2 decimals (``--json`` keeps the number)."""
    teacher = Path(__file__).resolve().parents[1] / "src" / "knockout" / "examples" / "teacher_exam.jsonl"
    db = tmp_path / "s.db"
    code, _, err = knockout("grade", str(teacher), "--judge", "scripted?inflation=0.2&noise=0.2", "--samples", "3",
                            "-o", str(db), "-q")
    assert code == 0, err
    code, out, _ = knockout("review", str(db), "--next", "12", "--json")
    judged = [q["judge"] for q in json.loads(out)["queue"]]
    assert any(round(j, 2) != j for j in judged)  # means of 3 draws: thirds
    code, out, _ = knockout("review", str(db), "--next", "12")
    shown = re.findall(r"(\d+(?:\.\d+)?) / \d", out)
    assert len(shown) == len(judged) and all(len(s.partition(".")[2]) <= 2 for s in shown), shown
    assert sorted(float(s) for s in shown) == sorted(round(j, 2) for j in judged)
