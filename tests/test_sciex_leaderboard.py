"""knockout leaderboard (and knockout demo --sciex): examinees ranked by expert then judge grades, German grades,
the student average, judges against the experts; JSON, CSV and HTML.  Judges and examinees here are the
scripted judge: a SIMULATION, not an LLM."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from knockout.annotations import ExamGrades
from knockout.data import Answer, ItemSet, load_items
from knockout.judges import make_judge
from knockout.methods._run import GradeRun, RunConfig
from knockout.runs import execute
from knockout.sciex import build_leaderboard, gather, leaderboard_csv, leaderboard_html, leaderboard_tables
from knockout.storage import Store

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "src" / "knockout" / "examples" / "sciex"
EN, DE = EXAMPLES / "cs-basics-en", EXAMPLES / "cs-basics-de"


def cli(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KNOCKOUT_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "knockout.cli", *args], capture_output=True, text=True, timeout=300,
                          env=env)


def test_solve_grade_leaderboard_end_to_end(tmp_path: Path) -> None:
    db, out = tmp_path / "s.db", tmp_path / "solved"
    solved = cli("solve", str(EN), str(DE), "--model", "sim=scripted", "--model", "noisy=scripted?noise=0.4",
                 "-o", str(db), "-d", str(out), "--json", "-q", cache=tmp_path)
    assert solved.returncode == 0, solved.stderr
    graded = cli("grade", str(out / "solved.jsonl"), "--judge", "scripted", "--figures", "none", "--prompt",
                 "sciex-system", "--reference",
                 "-o", str(db), "--json", "-q", cache=tmp_path)
    assert graded.returncode == 0, graded.stderr
    assert json.loads(graded.stdout)["answers"] == 5 * 12
    html, csv_file = tmp_path / "lb.html", tmp_path / "lb.csv"
    done = cli("leaderboard", str(db), "--json", "--resamples", "200", "--html", str(html), "--csv", str(csv_file),
               cache=tmp_path)
    assert done.returncode == 0, done.stderr
    board = json.loads(done.stdout)
    names = [r["examinee"] for r in board["examinees"]]
    assert set(names) == {"sample-a", "sample-b", "sample-c", "sim", "noisy"}
    by = {r["examinee"]: r for r in board["examinees"]}
    (judge,) = board["judges"]
    assert judge["simulated"] and judge["question_level"]["n"] == 36 and judge["question_level"]["pearson"] > 0.8
    assert judge["exam_level"]["n"] == 6 and judge["exam_level"]["pearson_ci"] is not None
    for name in ("sim", "noisy"):  # new examinees: judge-graded only, with CI and German grade
        row = by[name]
        assert row["expert"] is None and row["ranked_by"] == "judge"
        res = row["judges"][judge["key"]]
        assert res["percent"] is not None and res["percent_ci"] is not None and 1.0 <= res["german"] <= 5.0
        assert {e["exam"] for e in res["exams"]} == {"cs-basics-en", "cs-basics-de"}
    assert by["sample-a"]["expert"]["percent"] == round(100 * (16 / 16 + 15.5 / 16) / 2, 2)
    assert by["sample-a"]["rank"] == 1 and by["sample-c"]["rank"] == 5  # 3.1% by the experts
    ranks = [(r["expert"] or r["judges"][judge["key"]])["percent"] for r in board["examinees"]]
    assert ranks == sorted(ranks, reverse=True)
    assert board["students"]["percent"] == round(100 * (9.7 / 16 + 9.9 / 16) / 2, 2)
    assert board["german_default"] is False and board["notes"] == []
    rows = list(csv.DictReader(io.StringIO(csv_file.read_text())))
    assert [r["examinee"] for r in rows] == [*names, "student average"]
    page = html.read_text()
    assert page.count("data:image/png;base64,") >= 4 and "SciEx leaderboard" in page and "SIMULATION" in page


def _graded_store(tmp_path: Path, exam: Path) -> Path:
    db = tmp_path / "s.db"
    with Store(db) as store:
        execute(GradeRun(load_items(exam), make_judge("scripted"), RunConfig(figures="none")), store)
    return db


def test_default_german_mapping_is_flagged_in_every_output(tmp_path: Path) -> None:
    import shutil

    exam = tmp_path / "no-bounds"
    shutil.copytree(EN, exam)
    info = json.loads((exam / "additional_info.json").read_text())
    for key in ("GradeBoundaries", "MedianStudentGradeGermanScale"):
        info.pop(key)
    (exam / "additional_info.json").write_text(json.dumps(info))
    g = gather(_graded_store(tmp_path, exam))
    board = build_leaderboard(g.items, g.judges, resamples=0)
    assert board["german_default"] and "default mapping" in board["notes"][0]
    assert all(r["expert"]["german_default"] for r in board["examinees"]) and board["students"]["german_default"]
    table = leaderboard_tables(board)[0]
    assert "*" in table.rows[0][3] and "default mapping" in table.note
    assert "True" in leaderboard_csv(board).splitlines()[1]
    assert "default mapping" in leaderboard_html(board)


def test_grades_entered_in_the_web_app_count_as_expert_grades(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    items = load_items(EN)
    extra = Answer(id="cs-basics-en/1/late", question_id="cs-basics-en/1", examinee="late", text="TCP has a handshake.")
    with_late = ItemSet(items.questions.values(), [*items.answers, extra], source=items.source)
    with Store(db) as store:
        execute(GradeRun(with_late, make_judge("scripted"), RunConfig(figures="none")), store)
        ann = ExamGrades(store)
        ann.import_items(with_late)
        ann.save_grade(answer=extra, question=with_late.question_of(extra), exam_id="cs-basics-en", grader="prof",
                       score=1.5, comment="", base_version=0)
    g = gather(db)
    assert g.human_grades["web_grades"] == 1 and g.items.answer("cs-basics-en/1/late").human_scores == {"web:prof": 1.5}
    board = build_leaderboard(g.items, g.judges, resamples=0)
    late = next(r for r in board["examinees"] if r["examinee"] == "late")
    assert late["ranked_by"] == "expert" and late["expert"]["counts"]["graded"] == 1


def test_leaderboard_of_a_store_without_grade_runs_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with Store(db):
        pass
    done = cli("leaderboard", str(db), cache=tmp_path)
    assert done.returncode == 2 and "no complete grade run" in done.stderr


def test_demo_sciex_solves_grades_and_ranks_the_example_exam(tmp_path: Path) -> None:
    done = cli("demo", "--sciex", "--judge", "scripted", "--out", str(tmp_path / "demo.db"), "--json", "-q",
               cache=tmp_path)
    assert done.returncode == 0, done.stderr
    board = json.loads(done.stdout)
    assert {r["examinee"] for r in board["examinees"]} == {"sample-a", "sample-b", "sample-c", "scripted"}
    assert board["judges"][0]["simulated"]
    assert (tmp_path / "demo-solved" / "solved.jsonl").is_file()
    again = cli("demo", "--sciex", "--judge", "scripted", "--out", str(tmp_path / "demo.db"), "-q", cache=tmp_path)
    assert again.returncode == 0 and "SciEx leaderboard" in again.stdout
