"""Annotation tables (grades, verdicts), web accounts and the web CLI commands."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knockout import Verdict
from knockout.annotations import (
    SHOWN,
    Assignments,
    ExamGrades,
    PairAnnotations,
    StaleWrite,
    check_half_points,
    export_rows,
    format_rows,
    human_grades,
    verdict_from_shown,
    with_human_grades,
)
from knockout.cli import register_extensions
from knockout.cli._main import app
from knockout.data import read_pairs
from knockout.data._records import Answer, ItemSet, PairItem, Question
from knockout.errors import ConfigError, InputError
from knockout.storage._store import Store
from knockout.web import _auth as auth_mod
from knockout.web._auth import Accounts, Sessions, User

pytest.importorskip("argon2")
FIXTURES = Path(__file__).parent / "fixtures"
DEMO = Path(__file__).resolve().parents[1] / "src" / "knockout" / "examples" / "demo_exam.jsonl"


@pytest.fixture(autouse=True)
def _cheap_argon2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth_mod, "ARGON2_PARAMS", {"time_cost": 1, "memory_cost": 1024, "parallelism": 1})


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "s.db")
    yield s
    s.close()


def small_items() -> ItemSet:
    q = Question(id="q1", text="Q?", max_points=2.0)
    return ItemSet([q], [Answer(id="a1", question_id="q1", examinee="m", text="x", human_scores={"file": 1.0}),
                         Answer(id="a2", question_id="q1", examinee="n", text="y")], source="/x/exam7.jsonl")


def test_users_and_passwords(store: Store) -> None:
    accounts = Accounts(store)
    accounts.add_user("alice", "s3cret-password")
    row = store.db.execute("SELECT password_hash FROM web_users").fetchone()[0]
    assert row.startswith("$argon2id$") and "s3cret" not in row
    assert accounts.authenticate("alice", "s3cret-password") == User("alice", "grader")
    assert accounts.authenticate("alice", "wrong") is None
    assert accounts.authenticate("nobody", "s3cret-password") is None
    with pytest.raises(ConfigError, match="exists"):
        accounts.add_user("alice", "another-password")
    with pytest.raises(ConfigError, match="8 to 1024 characters"):
        accounts.add_user("bob", "short")
    with pytest.raises(ConfigError, match="role"):
        accounts.add_user("bob", "long-enough", "admin")
    with pytest.raises(ConfigError, match="user name"):
        accounts.add_user("x" * 129, "long-enough")
    with pytest.raises(ConfigError, match="no exam"):
        Assignments(store).assign("alice", "exam", "nope")
    sessions = Sessions(store)
    sessions.create("alice", 1)
    sessions.create("alice", 1)
    assert accounts.set_password("alice", "new-password") == 2  # both sessions ended
    assert accounts.authenticate("alice", "new-password") is not None
    token, _ = sessions.create("alice", 1)
    accounts.remove_user("alice")
    assert accounts.users() == [] and sessions.get(token) is None


def test_anonymisation_salt_is_generated_once(store: Store) -> None:
    s = store.annotations.setting("anonymise_salt")
    assert len(s) >= 40 and store.annotations.setting("anonymise_salt") == s


def test_exam_without_exam_id_uses_file_stem(store: Store) -> None:
    exams = ExamGrades(store)
    assert exams.import_items(small_items()).exams == ["exam7"]
    exam = exams.exam("exam7")
    assert exam is not None and len(exam.examinees) == 2 and [q.id for q in exam.questions] == ["q1"]
    assert {e.key for e in exam.examinees} == {"m", "n"}
    assert exams.import_items(small_items(), default_exam="other").exams == ["other"]


def test_grades_per_grader_with_versions(store: Store) -> None:
    items = small_items()
    exams = ExamGrades(store)
    exams.import_items(items)
    q, a = items.questions["q1"], items.answer("a1")

    def save(grader: str, score: float, base: int) -> int:
        return exams.save_grade(answer=a, question=q, exam_id="exam7", grader=grader, score=score, comment="",
                                base_version=base)

    assert save("g1", 1.5, 0) == 1
    assert save("g2", 2.0, 0) == 1  # another grader: own row, nothing overwritten
    with pytest.raises(StaleWrite) as e:
        save("g1", 0.5, 0)  # second tab still on version 0
    assert e.value.current is not None and e.value.current["score"] == 1.5 and e.value.current["version"] == 1
    assert save("g1", 0.5, 1) == 2
    with pytest.raises(StaleWrite):
        save("g1", 1.0, 1)
    with pytest.raises(InputError, match="version"):
        save("g1", 1.0, 2**63)
    assert human_grades(store) == {"a1": {"g1": 0.5, "g2": 2.0}}
    assert len(export_rows(store, "history")) == 3
    merged = with_human_grades(items, human_grades(store))
    assert merged.answer("a1").human_scores == {"file": 1.0, "g1": 0.5, "g2": 2.0}
    assert with_human_grades(items, human_grades(store), replace=True).answer("a1").human_scores == {
        "g1": 0.5, "g2": 2.0}
    csv_text = format_rows(export_rows(store, "grades"), "csv")
    assert csv_text.splitlines()[0].startswith("answer_id,grader,question_id,exam_id,score,comment,version")
    assert csv_text.splitlines()[0].endswith(",max_points,out_of_range")
    with pytest.raises(ConfigError):
        format_rows([], "xml")


def test_human_grades_on_a_store_without_tables(tmp_path: Path) -> None:
    store = Store(tmp_path / "judge-only.db")
    assert human_grades(store) == {}
    store.close()


@pytest.mark.parametrize("bad", [-0.5, 2.5, 0.25, float("nan")])
def test_half_points(bad: float) -> None:
    assert check_half_points(1.5, 2) == 1.5
    with pytest.raises(InputError):
        check_half_points(bad, 2)


def test_verdict_mapping() -> None:
    assert verdict_from_shown("left", False) == "A"
    assert verdict_from_shown("left", True) == "B"
    assert verdict_from_shown("right", True) == "A"
    assert verdict_from_shown("both_bad", True) is Verdict.D
    assert verdict_from_shown("both_good", False) is Verdict.C
    assert all(isinstance(verdict_from_shown(s, w), Verdict) for s in SHOWN for w in (False, True))
    with pytest.raises(InputError):
        verdict_from_shown("A", False)


def pair_items(n: int) -> list[PairItem]:
    return [PairItem(id=f"p{i}", question=f"q{i}", answer_a="a", answer_b="b") for i in range(n)]


def test_allocation_overlap_and_stored_order(store: Store) -> None:
    ann = PairAnnotations(store)
    ann.import_pairs(pair_items(10), "s", overlap=2, seed=3)
    for u in ("u1", "u2", "u3", "u4"):
        Assignments(store).assign(u, "pairset", "s")
    alloc = ann.allocation("s")
    per_pair = {p.id: sum(p.id in ids for ids in alloc.values()) for p in ann.pairs("s")}
    assert set(per_pair.values()) == {2}
    assert sorted(len(v) for v in alloc.values()) == [5, 5, 5, 5]
    q1 = ann.queue("s", "u1")
    assert [v.pair.id for v in q1] != sorted(v.pair.id for v in q1) or len(q1) < 3
    assert [(v.pair.id, v.swapped) for v in ann.queue("s", "u1")] == [(v.pair.id, v.swapped) for v in q1]
    # a different annotator gets another order / placement
    assert {v.swapped for v in ann.queue("s", "u2")} | {v.swapped for v in q1} == {True, False}
    view = q1[0]
    ann.save_verdict(view, "s", "u1", "left", base_version=0)
    v = ann.verdict("s", view.pair.id, "u1")
    assert v is not None and v["verdict"] == ("B" if view.swapped else "A") and v["swapped"] == int(view.swapped)
    ann.save_verdict(view, "s", "u1", "both_good", base_version=1)
    assert ann.verdict("s", view.pair.id, "u1")["verdict"] == Verdict.C  # type: ignore[index]
    with pytest.raises(StaleWrite):
        ann.save_verdict(view, "s", "u1", "right", base_version=0)
    ann.set_overlap("s", 4)
    assert all(len(v) == 10 for v in ann.allocation("s").values())
    assert len(ann.queue("s", "u1")) == 10 and ann.queue("s", "u1")[0].pair.id == view.pair.id
    with pytest.raises(InputError, match="duplicate"):
        ann.import_pairs(pair_items(2) + pair_items(1), "t")


def test_pair_agreement_from_verdicts(store: Store) -> None:
    ann = PairAnnotations(store)
    ann.import_pairs(pair_items(3), "s", overlap=2)
    for u in ("u1", "u2"):
        Assignments(store).assign(u, "pairset", "s")
        for view in ann.queue("s", u):
            ann.save_verdict(view, "s", u, "left" if not view.swapped else "right", base_version=0)
    ag = ann.agreement("s")  # both always chose A: kappa undefined, Fleiss undefined (P_e = 1)
    assert ag["annotators"] == {"u1": 3, "u2": 3} and ag["pairs_judged"] == 3 and ag["fleiss_items"] == 3
    assert ag["cohen"] == [{"a": "u1", "b": "u2", "n": 3, "agreement": 1.0, "kappa": None}]
    assert ag["fleiss"] is None


def test_read_pairs_formats(tmp_path: Path) -> None:
    assert [p.answer_b for p in read_pairs(FIXTURES / "metaeval" / "pairs.jsonl")] == ["8", "Bonjour", "four"]
    own = tmp_path / "own.jsonl"
    own.write_text(json.dumps({"id": "x", "question": "q", "answer_a": "a", "answer_b": "b"}) + "\n")
    assert read_pairs(own)[0].id == "x"
    own.write_text(json.dumps({"id": "x", "question": "q", "answer_a": "a", "answer_b": "b", "bad": 1}) + "\n")
    with pytest.raises(InputError, match="line 1"):
        read_pairs(own)


# -- CLI -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cli() -> CliRunner:
    register_extensions(app)
    return CliRunner()


def test_cli_import_users_export(cli: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    r = cli.invoke(app, ["import", str(DEMO), "--db", str(db), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"exams": ["demo-de", "demo-en"], "questions": 4, "answers": 24}
    r = cli.invoke(app, ["import", str(FIXTURES / "metaeval" / "pairs.jsonl"), "--db", str(db), "--pairset", "p",
                         "--overlap", "2", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"pairset": "p", "pairs": 3, "new": 3, "overlap": 2}
    r = cli.invoke(app, ["users", "add", "ann", "--db", str(db), "--exam", "demo-en", "--pairset", "p",
                         "--password-stdin"], input="a-long-password\n")
    assert r.exit_code == 0, r.output
    r = cli.invoke(app, ["users", "add", "eve", "--db", str(db), "--exam", "nope", "--password-stdin"],
                   input="a-long-password\n")
    assert r.exit_code == 2 and "no exam 'nope'" in r.output
    r = cli.invoke(app, ["users", "list", "--db", str(db), "--json"])
    users = json.loads(r.stdout)
    assert {"name": "ann", "role": "grader", "exams": ["demo-en"], "pairsets": ["p"]} in users
    r = cli.invoke(app, ["users", "assign", "ann", "--db", str(db), "--exam", "demo-en", "--remove"])
    assert r.exit_code == 0
    store = Store(db)
    assert Assignments(store).of_user("ann", "exam") == []
    exam = ExamGrades(store).exam("demo-en")
    assert exam is not None
    a = exam.examinees[0].answers[exam.questions[0].id]
    ExamGrades(store).save_grade(answer=a, question=exam.questions[0], exam_id="demo-en", grader="ann", score=3,
                                 comment="c,\"q\"", base_version=0)
    store.close()
    r = cli.invoke(app, ["annotations", "export", "--db", str(db), "--format", "jsonl"])
    assert r.exit_code == 0
    row = json.loads(r.stdout)
    assert row["answer_id"] == a.id and row["score"] == 3 and row["grader"] == "ann" and row["version"] == 1
    out = tmp_path / "g.csv"
    r = cli.invoke(app, ["annotations", "export", "--db", str(db), "-O", str(out)])
    assert r.exit_code == 0 and '"c,""q"""' in out.read_text()
    r = cli.invoke(app, ["annotations", "agreement", "p", "--db", str(db), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["fleiss"] is None
    r = cli.invoke(app, ["users", "remove", "ann", "--db", str(db)])
    assert r.exit_code == 0
    r = cli.invoke(app, ["serve", "--db", str(tmp_path / "missing.db")])
    assert r.exit_code == 2 and "store not found" in r.output
    r = cli.invoke(app, ["import", str(DEMO), "--db", str(db), "--kind", "what"])
    assert r.exit_code == 2
