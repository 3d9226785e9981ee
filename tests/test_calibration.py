"""Calibration of judge grades to expert grades (``knockout calibrate``, ``report --calibrate``, the ``calibrated``
tidy table) and the review queue (``knockout review``).

The stored runs use the scripted judge, a SIMULATION with a known bias: it adds ``inflation`` (a share of max
points) to every human grade, so that calibration must find the map back."""

from __future__ import annotations

import csv
import io
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


def test_linear_bias_is_recovered() -> None:
    rows = biased_rows()
    cal = calibrate(rows, seed=0, resamples=200, refits=50)
    assert cal.map in ("linear", "linear+offset", "isotonic")
    assert cal.cv_rmse["raw"] > 2 * cal.cv_rmse["linear"]
    if cal.map == "linear":  # expert = 2 x judge - 6 points: on the share scale, 2 x judge - 0.6
        assert "2.0" in cal.description or "1.9" in cal.description
    f = cal.figures
    assert cal.heldout == "nested cross-validation" and f["n"] == len(rows)
    assert f["rmse_raw"] > 1.4 and f["rmse_calibrated"] < 0.7
    assert f["rmse_difference_ci"][1] < 0  # the improvement's CI excludes 0
    assert f["pearson_calibrated"] > 0.95 and f["kappa_calibrated"] > f["kappa_raw"]
    # every answer with a valid judge grade has a calibrated grade, on the points scale
    assert set(cal.grades) == {r.id for r in rows} and all(0 <= g <= 10 for g in cal.grades.values())
    r0 = rows[0]
    assert cal.grades[r0.id] == pytest.approx(2 * r0.judge - 6, abs=0.8) or cal.grades[r0.id] in (0.0, 10.0)


def test_holdout_figures_never_use_fit_answers() -> None:
    rows = biased_rows()
    fit = first_per_question(rows, 2, seed=1)
    assert len(fit) == 12 and len({i.split("/")[0] for i in fit}) == 6
    cal = calibrate(rows, fit_ids=fit, seed=0, resamples=100, refits=20)
    assert cal.heldout == "holdout" and cal.expert_grades == 12
    assert set(cal.heldout_grades).isdisjoint(fit) and len(cal.heldout_grades) == 36
    assert cal.figures["rmse_calibrated"] < cal.figures["rmse_raw"] / 2


def test_a_judge_that_does_not_rank_is_not_helped_much() -> None:
    rng = np.random.default_rng(3)
    rows = [Graded(f"q{i % 6}/{i}", f"q{i % 6}", 10.0, float(rng.integers(0, 11)), float(rng.integers(0, 11)))
            for i in range(48)]
    cal = calibrate(rows, seed=0, resamples=100, refits=10)
    # a judge unrelated to the experts: at best a map to the experts' mean, Pearson stays near 0
    assert abs(cal.figures["pearson_raw"]) < 0.4
    assert cal.figures["rmse_calibrated"] > 2.0


def test_too_few_expert_grades_are_refused() -> None:
    rows = biased_rows()
    few = [r if i < 5 else Graded(r.id, r.question_id, r.max_points, r.judge, None) for i, r in enumerate(rows)]
    with pytest.raises(ConfigError, match=r"too few expert grades to calibrate: 5 answers .* at least 6"):
        calibrate(few)
    flat = [Graded(r.id, r.question_id, 10.0, 5.0, r.expert) for r in rows]
    with pytest.raises(ConfigError, match="same grade"):
        calibrate(flat)
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
        few = run(exam(graded=5), make_judge("scripted?noise=0.02&inflation=0.3&seed=1"), store,
                  RunConfig(format_retries=0))
    return db, full.run_id, few.run_id


def test_calibrate_cli_recovers_the_bias(biased_store: tuple[Path, str, str], tmp_path: Path) -> None:
    db, rid, _ = biased_store
    code, out, err = knockout("calibrate", f"{db}:{rid}", "--json", "--resamples", "100")
    assert code == 0, err
    sec = json.loads(out)
    f = sec["figures"]
    assert sec["expert_grades"] == 48 and sec["heldout"] == "nested cross-validation"
    assert f["rmse_raw"] == pytest.approx(3.0, abs=0.4)  # inflation 0.3 x 10 points
    assert f["rmse_calibrated"] < 0.6 and f["rmse_difference_ci"][1] < 0
    assert sec["label"] == f"calibrated ({sec['map']}, 48 expert grades)"
    code, out, err = knockout("calibrate", f"{db}:{rid}", "--per-question", "2", "--resamples", "50",
                              "--output", str(tmp_path / "cal.csv"))
    assert code == 0, err
    for words in ("held-out", "holdout", "2 expert grades per question", "RMSE (points)", "SIMULATION"):
        assert words in out, words
    rows = list(csv.DictReader(io.StringIO((tmp_path / "cal.csv").read_text())))
    assert len(rows) == 48 and rows[0]["calibration_label"].endswith("12 expert grades)")
    assert abs(float(rows[0]["calibrated_score"]) - float(rows[0]["expert_score"])) < 1.0


def test_calibrate_refuses_too_few(biased_store: tuple[Path, str, str]) -> None:
    db, _, few = biased_store
    code, _, err = knockout("calibrate", f"{db}:{few}")
    assert code == 2 and "too few expert grades to calibrate: 5 answers" in err
    code, out, err = knockout("report", f"{db}:{few}", "--calibrate", "--resamples", "0")
    assert code == 0 and "not calibrated" in out and "too few expert grades" in out


def test_report_and_export_show_calibrated_grades(biased_store: tuple[Path, str, str]) -> None:
    db, rid, _ = biased_store
    code, out, err = knockout("report", f"{db}:{rid}", "--calibrate", "--json", "--resamples", "50")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["calibrated"]["figures"]["rmse_calibrated"] < rep["calibrated"]["figures"]["rmse_raw"]
    code, out, err = knockout("report", f"{db}:{rid}", "--calibrate-per-question", "2", "--resamples", "50")
    assert code == 0 and "calibrated - raw" in out and "RMSE (points)" in out
    code, out, err = knockout("export", f"{db}:{rid}", "--table", "calibrated", "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 48 and {"score", "calibrated_score", "calibration_label"} <= set(rows[0])
    assert rows[0]["calibration_label"].startswith("calibrated (") and rows[0]["calibration_expert_grades"] == "48"


def test_review_cli(biased_store: tuple[Path, str, str]) -> None:
    db, _, few = biased_store
    code, out, err = knockout("review", f"{db}:{few}", "--next", "3", "--json")
    assert code == 0, err
    q = json.loads(out)
    assert len(q["queue"]) == 3 and q["calibration"] is None  # 5 expert grades: not calibrated
    assert q["grades"]["label"].startswith("judge's grade (no calibration: 5 answers have both")
    assert all(x["why"] and x["priority_words"] and x["calibrated_words"].startswith("- (judge's grade")
               for x in q["queue"])
    assert all(not x["answer_id"].startswith("q0/a") or int(x["answer_id"][-1]) >= 5 for x in q["queue"])
    code, out, _ = knockout("review", f"{db}:{few}", "--next", "2")
    assert code == 0 and "grade these next" in out and "coverage" in out


def test_viewer_shows_calibrated_grades_labelled(biased_store: tuple[Path, str, str]) -> None:
    from knockout.methods._kind import GradeKind

    db, rid, few = biased_store
    with Store.open_existing(db) as store:
        kind = GradeKind()
        record = store.find_run(rid)
        cols = kind.columns(store, record)
        assert [c.header for c in cols][4].startswith("calibrated (") and cols[4].header.endswith("48 expert grades)")
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
    assert sec["expert_grades"] == 24 and sec["label"].endswith("24 expert grades)")
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


# -- issue 34 item 7: a map never reverses the judge's order; a constant map is labelled ----------------------
def inverted_rows(seed: int = 0) -> list[Graded]:
    """A judge that ranks the answers backwards: judge = 10 - expert (+ noise): an unconstrained linear fit has
    slope about -1."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(6):
        for a in range(8):
            e = float(rng.integers(0, 11))
            rows.append(Graded(f"q{q}/a{a}", f"q{q}", 10.0, float(round(np.clip(10 - e + rng.normal(0, 0.5), 0, 10))),
                               e))
    return rows


def test_a_map_never_reverses_the_judge() -> None:
    from knockout.calibration._fit import CONSTANT, Fitted, _arrays

    rows = inverted_rows()
    free = calibrate(rows, seed=0, resamples=0, refits=0, monotone=False)  # the data are built for this:
    assert free.map == "linear" and free.shapes == {"": "decreasing"} and "-0.9" in free.description
    for fit in (None, first_per_question(rows, 2, seed=0)):
        cal = calibrate(rows, fit_ids=fit, seed=0, resamples=0, refits=10)
        assert "decreasing" not in cal.shapes.values() and cal.constant
        assert cal.label.endswith(f"expert grades; {CONSTANT})") or cal.label.endswith(f"{CONSTANT}, per question)")
        assert CONSTANT in cal.description
        # every answer gets the experts' mean: no answer the judge gave 0 gets more than one it gave 10
        lo = [cal.grades[r.id] for r in rows if r.judge == 0.0 and r.question_id == "q0"]
        hi = [cal.grades[r.id] for r in rows if r.judge == 10.0 and r.question_id == "q0"]
        assert not lo or not hi or max(lo) <= min(hi) + 1e-9
    x, y, q, e, _ = _arrays(rows)
    for name in ("linear", "linear+offset", "isotonic"):
        f = Fitted(name, x, y, q, e)
        assert f.shapes() == {"": "constant"}, name  # isotonic of a reversed judge: one level
        p = f.predict(np.linspace(0, 1, 11), np.array(["q9"] * 11), np.array([""] * 11))
        assert np.all(np.diff(p) >= -1e-12), name
    # a judge that ranks keeps an increasing map, labelled as before
    ok = calibrate(biased_rows(), seed=0, resamples=0, refits=0)
    assert not ok.constant and ok.label == f"calibrated ({ok.map}, 48 expert grades)"


@pytest.fixture(scope="module")
def inverted_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A stored run whose judge grades are 10 - the expert's (written over the scripted judge's results)."""
    from knockout.storage._store import ResultRow

    db = tmp_path_factory.mktemp("inv") / "inv.db"
    items = exam(graded=40)  # 8 answers (of q5) left for the review queue
    with Store(db) as store:
        rep = run(items, make_judge("scripted?noise=0.02"), store, RunConfig(format_retries=0))
        rng = np.random.default_rng(1)
        store.put_results(rep.run_id, [
            ResultRow(a.id, a.question_id, float(np.clip(round(10 - (a.human_score or 5) * 1.5 + rng.normal(0, .5)),
                                                         0, 10)), True, {})
            for a in items])
    return db, rep.run_id


def test_a_constant_map_is_labelled_wherever_its_grades_appear(inverted_store: tuple[Path, str]) -> None:
    from knockout.calibration._fit import CONSTANT
    from knockout.calibration._review import exam_queue
    from knockout.methods._kind import GradeKind

    db, rid = inverted_store
    code, out, err = knockout("calibrate", f"{db}:{rid}", "--json", "--resamples", "0")
    assert code == 0, err
    sec = json.loads(out)
    assert sec["constant"] and CONSTANT in sec["label"] and "decreasing" not in sec["shapes"].values()
    code, out, err = knockout("calibrate", f"{db}:{rid}", "--resamples", "0")
    out = " ".join(out.split())
    assert code == 0 and "the judge does not rank these answers" in out and "gives every answer the same" in out
    from knockout.calibration._run import calibration_tables

    assert "the folds' maps differ only in their means" in calibration_tables(sec)[1].rows[1][2]
    code, out, _ = knockout("report", f"{db}:{rid}", "--calibrate", "--resamples", "0")
    assert code == 0 and "the judge does not rank these answers" in " ".join(out.split())
    code, out, _ = knockout("export", f"{db}:{rid}", "--table", "calibrated", "--format", "csv")
    assert code == 0 and all(CONSTANT in r["calibration_label"] for r in csv.DictReader(io.StringIO(out)))
    code, out, _ = knockout("review", f"{db}:{rid}", "--next", "3")
    assert code == 0 and "the judge does not rank these answers" in " ".join(out.split())
    with Store.open_existing(db) as store:
        header = GradeKind().columns(store, store.find_run(rid))[4].header
        assert CONSTANT in header
        card = exam_queue(store, {f"q5/a{i}" for i in range(8)}, 5)
    assert card is not None and CONSTANT in card["grades"]["label"]
    assert all(CONSTANT in q["calibrated_words"] for q in card["queue"])


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
    assert "points over refits of the map" in why
    q0 = next(q for q in queue if q["question_id"] == "q0")
    assert "7 of its 8 answers (coverage 0.12 = 1 / (1 + 7))" in " | ".join(q0["why"])
    assert top["priority_words"].startswith(f"{top['priority']:.2f} = ") and "1 x 0.50 (flips)" in top[
        "priority_words"]
    b = next((q for q in queue if q["signals"]["boundary"] > 0), None)
    assert b is not None and "near a grade boundary" in " | ".join(b["why"]) and "1.00 = half-way" in " | ".join(
        b["why"])
    words = {"label": cal.label, "constant": False}
    assert grade_words({**top, "calibrated_sd": 0.0}, words).endswith("(every refit of the map gives this grade)")


def test_review_labels_the_judges_grades_when_calibration_declines(tmp_path: Path) -> None:
    from knockout.calibration._review import calibration_words, grade_words, queue_tables

    rows = [Graded(f"q{q}/a{a}", f"q{q}", 4.0, float((q + a) % 5), float((q + a) % 5) if a < 4 else None)
            for q in range(3) for a in range(6)]  # a perfect judge: no map beats it
    cal = calibrate(rows, seed=0, resamples=0, refits=10)
    assert cal.map == "raw" and cal.label.startswith("judge's grade (no calibration: no map beat")
    queue = rank(rows, {}, cal)
    words = calibration_words(cal, rows)
    assert all(q["calibrated"] is None for q in queue) and not words["calibrated"]
    assert grade_words(queue[0], words) == "- (judge's grade (no calibration: no map beat the judge's own grades " \
                                           "in cross-validation on 12 expert grades))"
    few = calibration_words(None, rows[:5])
    assert few["label"].startswith("judge's grade (no calibration: ") and "at least 6" in few["label"]
    table = queue_tables({"queue": queue, "grades": words, "weights": {"boundary": 0.5}}, 3)[0]
    assert "calibrated" not in table.note.split("grades: ")[1].split(";")[0] or "no calibration" in table.note


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
    assert t.rows[0][4].startswith("- (judge's grade (no calibration: 0 answers have both")
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
