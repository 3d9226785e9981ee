"""Answer groups (issue 61): clustering, the store's groups, grades given through a group, the group-grades
import, undo, and ``knockout groups``.  The judge is the scripted SIMULATION, not an LLM; the sentence encoder is
the real packaged one."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

from knockout.errors import InputError
from tests.conftest import ROOT, needs_shared
from tests.test_gradebook import LENIENT, TEACHER, cli  # the teacher's exam, its lenient judge, the CLI in process


@pytest.fixture(scope="module")
def graded_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("groups") / "t.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", ["knockout", "grade"])
        cli("grade", str(TEACHER), "--judge", LENIENT, "--reference", "--out", str(db), "--json", "--quiet")
    return db


@pytest.fixture()
def graded(graded_once: Path, tmp_path: Path) -> Path:
    db = tmp_path / "t.db"
    src, dst = sqlite3.connect(graded_once), sqlite3.connect(db)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return db


# -- clustering ---------------------------------------------------------------------------------------------------

def test_identical_and_near_identical_answers_are_always_one_group() -> None:
    from knockout.groups import cluster

    rng = np.random.default_rng(0)
    base = rng.normal(size=(6, 16))
    vecs = base / np.linalg.norm(base, axis=1, keepdims=True)
    vecs = np.vstack([vecs, vecs[0] + 1e-4, vecs[3]])  # a near copy of 0, an exact copy of 3 (other text)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    texts = [f"answer {i}" for i in range(6)] + ["answer 0 again", "Answer  3"]
    texts[5] = "ANSWER 1"  # the same text as answer 1 up to case: together whatever its vector
    shares = np.array([0.1, 0.9, 0.5, 0.2, 0.8, 0.9, 0.1, 0.2])
    labels = cluster(texts, vecs, shares)
    assert labels[6] == labels[0] and labels[7] == labels[3] and labels[5] == labels[1]


def test_a_group_never_spans_more_draft_grade_than_allowed() -> None:
    """The draft grade is the second axis: answers alike in meaning but far apart in draft are separated."""
    from knockout.groups import cluster
    from knockout.groups._build import MAX_RANGE

    rng = np.random.default_rng(1)
    v = rng.normal(size=(1, 32)) + rng.normal(scale=0.3, size=(12, 32))  # one meaning, no two near-identical
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    shares = np.linspace(0, 1, 12)
    labels = cluster([f"t{i}" for i in range(12)], v, shares)
    for g in set(labels.tolist()):
        assert np.ptp(shares[labels == g]) <= MAX_RANGE + 1e-9
    assert len(set(labels.tolist())) < 12  # and not one group per answer


def test_groups_of_a_run_have_draft_spread_representative_and_members(graded: Path) -> None:
    from knockout.groups import run_groups
    from knockout.storage import Store

    with Store.open_existing(graded) as store:
        run = store.runs()[-1].id
        found = run_groups(store, run)
        again = run_groups(store, run)  # kept in the store: the same ids and members
    assert set(found.questions) == {"teach/1", "teach/2", "teach/3"}
    for qid, gs in found.questions.items():
        assert sorted(a for g in gs for a in g.members) == sorted(a for g in again.questions[qid] for a in g.members)
        assert [len(g.members) for g in gs] == sorted((len(g.members) for g in gs), reverse=True)
        for g in gs:
            assert g.representative in g.members and g.draft is not None and g.spread is not None
            assert g.id.startswith(qid + "#")
    assert found.as_dict() == again.as_dict()


# -- grades through groups, import, undo ----------------------------------------------------------------------------

def test_a_group_grade_is_its_representatives_teacher_grade_and_undo_reverts_it(graded: Path) -> None:
    from knockout.annotations import add_web_grades
    from knockout.groups import alike, grade_group, override, run_groups, teacher_grades, undo
    from knockout.storage import Store

    with Store.open_existing(graded) as store:
        run = store.runs()[-1].id
        by_size = sorted((g for gs in run_groups(store, run).questions.values() for g in gs),
                         key=lambda g: -len(g.members))
        g, h = by_size[0], by_size[1]
        assert len(g.members) >= 2
        member = g.representative
        override(store, run, member, 0.5, "teacher")  # graded one by one first: the group grade keeps it
        kept = grade_group(store, run, g.id, 1.0, "teacher")
        taking = alike(store, run, g)
        assert kept.kept == [member] and sorted(kept.graded) == sorted(set(taking) - {member})
        assert sorted(kept.adapted) == sorted(set(g.members) - set(taking))  # left to the adaptation
        done = grade_group(store, run, h.id, 1.0, "teacher")
        assert h.representative in done.graded and sorted(done.graded + done.adapted) == sorted(h.members)
        stored = teacher_grades(store, run)
        assert all(stored[a]["via_group"] == h.id and stored[a]["score"] == 1.0 for a in done.graded)
        assert not set(done.adapted) & set(stored)  # the other members keep their drafts
        assert stored[member]["via_group"] is None and stored[member]["score"] == 0.5
        items = store.items_for_run(run)
        assert items is not None
        with_web, sources = add_web_grades(store, items)  # what report and gradebook read
        assert sources["web"] == ["web:teacher"]
        assert with_web.answer(done.graded[0]).human_scores["web:teacher"] == 1.0
        assert undo(store, "teacher") == {"action": done.action, "reverted": len(done.graded), "changed_since": 0}
        if kept.graded:
            assert undo(store, "teacher") == {"action": kept.action, "reverted": len(kept.graded),
                                              "changed_since": 0}
        after = teacher_grades(store, run)
        assert set(after) == {member}  # the group's grades are gone, the override stays
        assert (undone := undo(store, "teacher")) is not None and undone["reverted"] == 1  # then the override
        assert teacher_grades(store, run) == {} and undo(store, "teacher") is None
        history = store.annotations.grade_history()
        assert [h["via_group"] for h in history if h["action"] == done.action] == [h.id] * len(done.graded)


def test_a_group_grade_moves_the_other_members_own_drafts_and_near_identical_ones_take_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 61 (the group grade as adaptation evidence): the teacher's grade of a group's representative is stored
    on it and on its near-identical copy only; a member that differs keeps its own draft, moved by the adaptation
    (gradebook source ``calibrated``), not the representative's grade; the group counts as one judgement."""
    from knockout.calibration._run import calibrate_loaded, group_weights
    from knockout.groups import grade_group, run_groups, teacher_grades
    from knockout.reports._runs import read_run
    from knockout.storage import Store

    lines = [json.loads(x) for x in TEACHER.read_text().splitlines() if x.strip()]
    ada = next(x for x in lines if x.get("id") == "teach/1/ada")
    copy = {k: v for k, v in ada.items() if k != "human_scores"}
    copy.update(id="teach/1/zoe", examinee="zoe", text="  " + ada["text"].upper(), meta={"email": "zoe@x.example"})
    data = tmp_path / "exam.jsonl"
    data.write_text("".join(json.dumps(x) + "\n" for x in [*lines, copy]))
    db = tmp_path / "t.db"
    monkeypatch.setattr(sys, "argv", ["knockout", "grade"])
    cli("grade", str(data), "--judge", LENIENT, "--reference", "--out", str(db), "--json", "--quiet")
    with Store.open_existing(db) as store:
        run = store.runs()[-1].id
        found = run_groups(store, run)
        ours = ["teach/1/ada", "teach/1/zoe", "teach/1/ben"]  # one group of three, ada its representative
        rest = sorted(a for g in found.questions["teach/1"] for a in g.members if a not in ours)
        rows = [(a, g.question_id, g.id, a == g.representative) for q, gs in found.questions.items()
                if q != "teach/1" for g in gs for a in g.members]
        rows += [(a, "teach/1", "teach/1#1", i == 0) for i, a in enumerate(ours)]
        rows += [(a, "teach/1", "teach/1#2", i == 0) for i, a in enumerate(rest)]
        store.annotations.save_groups(run, rows, 0.0)
        g = run_groups(store, run).group("teach/1#1")
        assert g is not None and g.representative == "teach/1/ada"
        draft = g.drafts["teach/1/ben"]
        assert draft is not None and abs(draft - 2.0) > 0.2
        done = grade_group(store, run, g.id, 2.0, "teacher")
        assert sorted(done.graded) == ["teach/1/ada", "teach/1/zoe"] and done.adapted == ["teach/1/ben"]
        assert {a for a, v in teacher_grades(store, run).items() if v["via_group"]} == {"teach/1/ada", "teach/1/zoe"}
        loaded = read_run(store, store.find_run(run), details=True, web_grades=True)
    assert group_weights(db, {"teach/1/ada", "teach/1/zoe", "teach/1/ben"}) == {"teach/1/ada": 0.5,
                                                                                "teach/1/zoe": 0.5}
    section = calibrate_loaded(loaded, resamples=0)
    assert abs(section["grades"]["teach/1/ben"] - draft) < abs(2.0 - draft) / 2  # its own draft, moved a little
    book = json.loads(cli("gradebook", str(db), "--json", "--output", str(tmp_path / "b.csv"))[0])
    assert book["sources"]["expert"] >= 2 and book["sources"]["calibrated"] >= 1


def test_undo_restores_the_grade_before_and_leaves_a_grade_changed_since(graded: Path) -> None:
    from knockout.groups import alike, grade_group, run_groups, teacher_grades, undo
    from knockout.storage import Store

    with Store.open_existing(graded) as store:
        run = store.runs()[-1].id
        g = max((g for gs in run_groups(store, run).questions.values() for g in gs), key=lambda g: len(g.members))
        n = len(alike(store, run, g))  # the representative and its near-identical members
        grade_group(store, run, g.id, 1.0, "teacher")
        grade_group(store, run, g.id, 1.5, "teacher")
        assert {v["score"] for v in teacher_grades(store, run).values()} == {1.5}
        assert (first := undo(store, "teacher")) is not None and first["reverted"] == n
        assert {v["score"] for v in teacher_grades(store, run).values()} == {1.0}  # the first group grade
        assert (second := undo(store, "teacher")) is not None and second["reverted"] == n
        assert teacher_grades(store, run) == {}
        grade_group(store, run, g.id, 2.0, "teacher")
        cur = store.annotations.grade(g.representative, "teacher")
        assert cur is not None
        store.annotations.save_grade(answer_id=g.representative, grader="teacher", question_id=g.question_id,
                                     exam_id="teach", score=0.5, comment="", base_version=cur["version"], now=0.0)
        third = undo(store, "teacher")  # the answer graded again one by one since keeps that grade
        assert third is not None and (third["reverted"], third["changed_since"]) == (n - 1, 1)
        assert {a: v["score"] for a, v in teacher_grades(store, run).items()} == {g.representative: 0.5}


def test_split_and_move_out_change_the_stored_groups(graded: Path) -> None:
    from knockout.groups import move_out, run_groups, split_group
    from knockout.storage import Store

    with Store.open_existing(graded) as store:
        run = store.runs()[-1].id
        g = max((g for gs in run_groups(store, run).questions.values() for g in gs), key=lambda g: len(g.members))
        assert len(g.members) >= 2
        new = move_out(store, run, g.members[0])
        after = run_groups(store, run)
        moved = after.group(new)
        assert moved is not None and moved.members == [g.members[0]] and moved.representative == g.members[0]
        rest = after.group(g.id)
        assert rest is not None and g.members[0] not in rest.members and rest.representative in rest.members
        if len(rest.members) >= 2:
            a, b = split_group(store, run, g.id)
            split = run_groups(store, run)
            ga, gb = split.group(a), split.group(b)
            assert ga is not None and gb is not None
            assert sorted(ga.members + gb.members) == sorted(rest.members)
            assert ga.representative in ga.members and gb.representative in gb.members


def test_the_group_grades_import_checks_every_row_before_writing(graded: Path, tmp_path: Path) -> None:
    from knockout.groups import import_group_grades, run_groups, teacher_grades
    from knockout.storage import Store

    with Store.open_existing(graded) as store:
        run = store.runs()[-1].id
        gs = run_groups(store, run).questions["teach/1"]
        bad = tmp_path / "bad.csv"
        bad.write_text(f"group,grade\n{gs[0].id},1\nteach/1#99,1\n")
        with pytest.raises(InputError) as e:
            import_group_grades(store, run, bad, "teacher")
        assert (e.value.record, e.value.field) == (3, "group")
        over = tmp_path / "over.json"
        over.write_text(json.dumps({gs[0].id: 7}))
        with pytest.raises(InputError) as e:
            import_group_grades(store, run, over, "teacher")
        assert e.value.field == "grade" and "outside 0..2" in str(e.value)
        assert teacher_grades(store, run) == {}


# -- the command --------------------------------------------------------------------------------------------------

def test_knockout_groups_lists_groups_writes_a_sheet_imports_it_and_undoes(graded: Path, tmp_path: Path) -> None:
    out, _ = cli("groups", str(graded), "--json")
    found = json.loads(out)
    assert set(found["questions"]) == {"teach/1", "teach/2", "teach/3"} and found["next"]
    first = found["next"][0]["group"]
    text, _ = cli("groups", str(graded))
    assert "question teach/1" in text and "grade these groups next" in text
    sheet = tmp_path / "sheet.csv"
    cli("groups", str(graded), "--sheet", str(sheet))
    lines = sheet.read_text().splitlines()
    assert lines[0].startswith("group,question,size,draft,spread,representative,text,grade")
    assert len(lines) == 1 + sum(len(v) for v in found["questions"].values())
    filled = tmp_path / "filled.csv"
    filled.write_text("group,grade,comment\n" + f"{first},1,keyword list\n")
    _, err = cli("groups", str(graded), "--import", str(filled))
    assert "imported 1 group grades" in err
    done = json.loads(cli("groups", str(graded), "--json")[0])
    assert 1 <= done["teacher_grades"] <= found["next"][0]["size"]  # its representative (and copies of it)
    assert all(n["group"] != first for n in done["next"])  # the graded group is no longer proposed
    book, _ = cli("gradebook", str(graded))
    assert "expert" in book  # the gradebook carries the grades given through the group
    _, err = cli("groups", str(graded), "--undo")
    assert "undone: import:" in err
    assert json.loads(cli("groups", str(graded), "--json")[0])["teacher_grades"] == 0


def test_propose_puts_the_group_with_most_expected_error_first() -> None:
    from knockout.groups import Group, propose

    big = Group("q#1", "q", ["a", "b", "c", "d"], "a", 1.0, 0.1, 2.0, dict.fromkeys("abcd", 1.0))
    small = Group("q#2", "q", ["e"], "e", 1.0, 0.1, 2.0, {"e": 1.0})
    mixed = Group("q#3", "q", ["f", "g", "h", "i"], "f", 1.0, 1.0, 2.0, {"f": 0.0, "g": 2.0, "h": 0.0, "i": 2.0})
    order = [p["group"] for p in propose({"q": [big, mixed, small]}, {})]
    assert order == ["q#1", "q#2", "q#3"]  # alike members first; a group whose members differ gains least
    assert [p["group"] for p in propose({"q": [big, small]}, {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0})] == ["q#2"]
    hooked = propose({"q": [big, small]}, {}, expected_error=lambda a: 10.0 if a == "e" else 0.0)
    assert hooked[0]["group"] == "q#2"  # the grade model's expected error replaces the prior
    # a graded group is not proposed again, though its members other than the representative have no grade
    assert [p["group"] for p in propose({"q": [big, small]}, {"a": 1.0}, graded={"q#1"})] == ["q#2"]


def test_gradebook_says_in_one_line_when_grades_rest_on_no_teacher_grade(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 61 item 6: nothing warned before export that the grades going to Moodle were the judge's as they are
    (here the teacher's exam without its 6 file grades: no calibration, every grade the judge's)."""
    data = tmp_path / "exam.jsonl"
    data.write_text("".join(json.dumps({k: v for k, v in json.loads(x).items() if k != "human_scores"}) + "\n"
                            for x in TEACHER.read_text().splitlines() if x.strip()))
    db = tmp_path / "t.db"
    monkeypatch.setattr(sys, "argv", ["knockout", "grade"])
    cli("grade", str(data), "--judge", LENIENT, "--reference", "--out", str(db), "--json", "--quiet")
    _, err = cli("gradebook", str(db), "--format", "moodle", "--id-column", "email", "-o", str(tmp_path / "m.csv"))
    warning = [line for line in err.splitlines() if "rest on no teacher grade" in line]
    assert len(warning) == 1 and "18 of 18 grades" in warning[0], err
    found = json.loads(cli("groups", str(db), "--json")[0])
    sheet = tmp_path / "all.json"
    # the teacher agrees with the drafts (half points): each group's representative graded, the rest adapted
    sheet.write_text(json.dumps({g["id"]: round(2 * g["drafts"][g["representative"]]) / 2
                                 for gs in found["questions"].values() for g in gs}))
    cli("groups", str(db), "--import", str(sheet))
    _, err = cli("gradebook", str(db), "-o", str(tmp_path / "g.csv"))
    assert "rest on no teacher grade" not in err, err  # the teacher's, or adapted to the teacher's


def test_the_review_queue_proposes_the_group_to_grade_next_once_the_run_is_grouped(graded: Path) -> None:
    before = json.loads(cli("review", str(graded), "--json")[0])
    assert before["groups"] == []  # nobody grouped the run: nothing is built
    cli("groups", str(graded))
    after = json.loads(cli("review", str(graded), "--json")[0])
    assert after["groups"] and after["groups"][0]["gain"] >= after["groups"][-1]["gain"]
    text, _ = cli("review", str(graded))
    assert "or grade these answer groups next" in text


def test_a_group_grade_counts_as_one_teacher_judgement_in_the_adaptation() -> None:
    """Issue 61 item 4: a grade given to a 10-member group moves the model as one teacher grade does, not as 10
    (its members' grades weigh 1/10 each); without the weights the group outweighs the 4 grades given one by one."""
    from knockout.calibration import Graded, calibrate

    group = [Graded(f"g/a{i}", "g", 5.0, 2.5, 4.0, "e") for i in range(10)]
    alone = [Graded(f"o/a{i}", "o", 5.0, j, j, "e") for i, j in enumerate((1.0, 2.0, 3.0, 4.0))]
    weights = {r.id: 0.1 for r in group}
    weighted = calibrate(group + alone, weights=weights, heldout=False, refits=0)
    one = calibrate(group[:1] + [Graded(r.id, r.question_id, r.max_points, r.judge, None, r.exam) for r in group[1:]]
                    + alone, heldout=False, refits=0)
    assert weighted.grades == pytest.approx(one.grades)
    flat = calibrate(group + alone, heldout=False, refits=0)
    assert flat.grades["o/a1"] - 2.0 > 2 * (weighted.grades["o/a1"] - 2.0) > 0  # 10 grades pull the exam up more


def test_calibrate_weighs_the_grades_given_through_a_group_as_one(graded: Path) -> None:
    from knockout.calibration._run import calibrate_loaded, calibration_tables, group_weights
    from knockout.groups import grade_group, override, run_groups
    from knockout.reports._runs import read_run
    from knockout.storage import Store

    with Store.open_existing(graded) as store:
        run = store.runs()[-1].id
        g = max((g for gs in run_groups(store, run).questions.values() for g in gs), key=lambda g: len(g.members))
        taking = grade_group(store, run, g.id, 1.0, "teacher").graded
        other = next(a.id for a in store.items_for_run(run) or [] if a.id not in g.members)
        override(store, run, other, 0.5, "teacher")
        loaded = read_run(store, store.find_run(run), details=True, web_grades=True)
    assert group_weights(graded, set(g.members) | {other}) == {a: 1 / len(taking) for a in taking}
    section = calibrate_loaded(loaded, resamples=0)
    assert section["group_grades"] == {"answers": len(taking), "judgements": 1.0}
    words = " ".join(str(c) for t in calibration_tables(section) for row in t.rows for c in row)
    assert f"{len(taking)} answers' grades, counted as 1 teacher judgements" in words


@needs_shared
@pytest.mark.slow
def test_the_groups_bench_runs_on_the_grade_models_cross_validated_drafts(tmp_path: Path) -> None:
    """``bench/groups.py --draft model``: the exams hold the answers ``bench/grade_model/cv_grades.json`` grades (8 per
    SAF training question), their drafts the grade model's cross-validated grades, moved by the grade model's
    adaptation; the group's grade is the representative's, as the product's (``--group-grade adapt``)."""
    import subprocess

    out = tmp_path / "adapt.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "groups.py"), "--sets", "SAF", "--draft", "model",
                        "--draws", "1", "--share", "0.05", "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert ("SAF (draft: model, group grade: adapt, adaptation: model, first groups: propose): 48 answers per exam"
            in r.stdout)
    assert set(json.loads(out.read_text())["SAF"]["strategies"]) == {"groups", "random", "queue"}
