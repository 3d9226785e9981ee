"""Loaders and the JSONL writer: small fixtures, bad input, and the real data in ../shared."""

from __future__ import annotations

import json
import re
import shutil
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from knockout.data import Answer, ItemSet, Question, detect_format, load_items, loaders, write_jsonl
from knockout.data._loaders import load_pairs, load_scored_texts, parse_column_map
from knockout.errors import ConfigError, InputError
from tests.conftest import DATA, ROOT, needs_shared  # CI puts ../shared beside the repository

FIX = Path(__file__).resolve().parent / "fixtures"
DEMO = ROOT / "src" / "knockout" / "examples" / "demo_exam.jsonl"
STARS = "*" * 88


def raises_input(*parts: str) -> AbstractContextManager[Any]:
    """pytest.raises(InputError) whose message contains every one of ``parts`` (in any order)."""
    return pytest.raises(InputError, match="(?s)" + "".join(f"(?=.*{re.escape(p)})" for p in parts))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(path: Path, *objs: dict[str, object]) -> Path:
    return write(path, "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs))


Q1 = {"type": "question", "id": "q1", "text": "What does DNS do?", "max_points": 2}
A1 = {"type": "answer", "id": "a1", "question_id": "q1", "text": "Name resolution.", "human_score": 1.5}


# ---------------------------------------------------------------- registry and detection


def test_registry_names() -> None:
    assert loaders.names() == ["csv", "hf-dataset", "jsonl", "metaeval", "mqm", "parquet", "saf", "sciex",
                               "sciex-repo", "wmt"]


@pytest.mark.parametrize(
    ("rel", "fmt"),
    [
        ("tiny.jsonl", "jsonl"),
        ("tiny.csv", "csv"),
        ("mapped.csv", "csv"),
        ("sciex/tiny_exam", "sciex"),
        ("sciex/tiny_exam/tiny_exam_en.json", "sciex"),
        ("saf", "saf"),
        ("saf/1.1_NET.xml", "saf"),
        ("mqm", "mqm"),
        ("mqm/mqm_tiny_ende.tsv", "mqm"),
        ("metaeval/summeval.jsonl", "metaeval"),
        ("metaeval/pairs.jsonl", "metaeval"),
        ("metaeval/pandalm_tiny.json", "metaeval"),
    ],
)
def test_detect_format(rel: str, fmt: str) -> None:
    assert detect_format(FIX / rel) == fmt


def test_missing_path_and_unknown_format(tmp_path: Path) -> None:
    with raises_input("nope.jsonl", "no such file"):
        load_items(tmp_path / "nope.jsonl")
    with raises_input("tiny.jsonl", "unknown format 'yaml'"):
        load_items(FIX / "tiny.jsonl", format="yaml")
    with raises_input("notes.txt", "cannot tell the format"):
        load_items(write(tmp_path / "notes.txt", "hello"))
    with pytest.raises(ConfigError, match=r"unknown option.*colums.*known: columns, delimiter"):
        load_items(FIX / "tiny.csv", colums="x=y")


# ---------------------------------------------------------------- jsonl


def test_jsonl_loads_fixture() -> None:
    items = load_items(FIX / "tiny.jsonl")
    assert list(items.questions) == ["q1", "q2"] and len(items) == 3
    q1, q2 = items.questions["q1"], items.questions["q2"]
    assert (q1.max_points, q1.difficulty, q1.exam_id, q1.language) == (2.0, "easy", "tiny", "en")
    assert q1.images == [str(FIX / "sciex/tiny_exam/img/f1.png")]
    assert q2.language == "de" and q2.meta == {"topic": "os"} and q2.reference is None
    assert items.answer("q1/alice").human_scores == {"human": 2.0}
    assert items.answer("q1/bob").human_scores == {"g1": 0.0, "g2": 0.5}
    assert items.answer("q2/alice").human_scores == {}
    assert items.source == str(FIX / "tiny.jsonl")


@pytest.mark.parametrize(
    ("lines", "parts"),
    [
        (['{"type": "question", "id": "q1"'], ["line 1", "malformed JSON"]),
        ([json.dumps(Q1), "", "[1, 2]"], ["line 3", "expected a JSON object"]),
        ([json.dumps({k: v for k, v in Q1.items() if k != "text"})], ["line 1", "field 'text'", "required"]),
        ([json.dumps(Q1), json.dumps({**A1, "human_score": "lots"})], ["line 2", "field 'human_score'"]),
        (
            [
                json.dumps(Q1),
                json.dumps(
                    {**{k: v for k, v in A1.items() if k != "human_score"}, "human_scores": {"g": "x"}}
                ),
            ],
            ["line 2", "field 'human_scores.g'", "valid number"],
        ),
        ([json.dumps({**Q1, "max_points": 0})], ["line 1", "field 'max_points'", "in (0, 10000]"]),
        ([json.dumps({**Q1, "max_points": -3})], ["line 1", "field 'max_points'"]),
        ([json.dumps(Q1), json.dumps({**A1, "text": "  "})], ["line 2", "field 'text'", "must not be empty"]),
        ([json.dumps({**Q1, "type": "quiz"})], ["line 1", "field 'type'", "unknown record type 'quiz'"]),
        ([json.dumps({k: v for k, v in Q1.items() if k != "type"})], ["line 1", "field 'type'"]),
        ([json.dumps({**Q1, "colour": "red"})], ["line 1", "field 'colour'", "Extra inputs"]),
        ([json.dumps({**Q1, "images": ["missing.png"]})], ["line 1", "field 'images'", "not found"]),
        ([json.dumps(Q1), json.dumps({**A1, "human_scores": {"g": 1}})], ["line 2", "both"]),
        (
            [json.dumps(Q1), json.dumps({**A1, "human_score": -1})],
            ["record a1", "human_scores", "outside 0..2"],
        ),
        ([json.dumps(Q1), json.dumps({**A1, "human_score": 2.5})], ["record a1", "human_scores"]),
        (
            [json.dumps(Q1), json.dumps(A1), json.dumps(A1)],
            ["record a1", "field 'id'", "duplicate answer id"],
        ),
        ([json.dumps(Q1), json.dumps(Q1)], ["record q1", "field 'id'", "duplicate question id"]),
        ([json.dumps(A1)], ["record a1", "field 'question_id'", "unknown question 'q1'"]),
    ],
)
def test_jsonl_bad_input(tmp_path: Path, lines: list[str], parts: list[str]) -> None:
    path = write(tmp_path / "exam.jsonl", "\n".join(lines) + "\n")
    with raises_input("exam.jsonl", *parts):
        load_items(path)


def test_jsonl_negative_scores_allowed_on_other_scales(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "mt.jsonl", {**Q1, "human_scale": "mqm", "task": "mt"}, {**A1, "human_score": -7})
    assert load_items(path).answer("a1").human_scores == {"human": -7.0}


# ---------------------------------------------------------------- writer


def test_write_jsonl_round_trip(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    shutil.copy(FIX / "sciex/tiny_exam/img/f1.png", tmp_path / "img" / "f.png")
    outside = str(FIX / "sciex/tiny_exam/img/f2.png")
    items = ItemSet(
        [
            Question(
                id="q1",
                text="Line\u2028separator and ünïcode",
                reference="r",
                max_points=3,
                language="de",
                difficulty="hard",
                exam_id="e",
                images=[str(tmp_path / "img/f.png"), outside],
                meta={"k": [1, {"x": None}]},
            ),
            Question(id="q2", text="MT source", task="mt", human_scale="mqm", max_points=100),
            Question(id="q3", text="No answers yet"),
        ],
        [
            Answer(id="a1", question_id="q1", examinee="e1", text="x\ny", human_scores={"g1": 2.5, "g2": 3}),
            Answer(id="a2", question_id="q2", text="Übersetzung", human_scores={"mqm": -4.5}, meta={"m": 1}),
            Answer(id="a3", question_id="q1", text="none"),
        ],
    )
    out = tmp_path / "out.jsonl"
    write_jsonl(items, out)
    lines = [json.loads(s) for s in out.read_text(encoding="utf-8").split("\n") if s]
    assert [d["type"] for d in lines] == ["question"] * 3 + ["answer"] * 3
    # a figure outside the folder is copied beside the file and kept relative (docs/sciex.md, exam sets)
    assert lines[0]["images"][0] == "img/f.png" and lines[0]["images"][1].startswith("figures/")
    assert lines[0]["images"][1].endswith("-f2.png")
    assert (tmp_path / lines[0]["images"][1]).read_bytes() == Path(outside).read_bytes()
    assert "reference" not in lines[1] and "images" not in lines[1] and "meta" not in lines[5]
    again = load_items(out)  # every figure inside the output's folder: no allow_root needed
    copied = str(tmp_path / lines[0]["images"][1])
    assert [q.model_dump() for q in again.questions.values()] == [
        q.model_dump() | ({"images": [str(tmp_path / "img/f.png"), copied]} if q.images else {})
        for q in items.questions.values()
    ]
    assert [a.model_dump() for a in again] == [a.model_dump() for a in items]
    write_jsonl(again, out)
    assert [json.loads(s) for s in out.read_text(encoding="utf-8").split("\n") if s] == lines  # a fixed point
    assert len(list((tmp_path / "figures").iterdir())) == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_write_jsonl_round_trip_of_every_fixture(tmp_path: Path) -> None:
    for rel in ("tiny.jsonl", "tiny.csv", "sciex/tiny_exam", "saf", "mqm", "metaeval/pairs.jsonl"):
        items = load_items(FIX / rel)
        out = tmp_path / (rel.replace("/", "_") + ".jsonl")
        write_jsonl(items, out)
        again = load_items(out)  # figures copied beside it: read without allow_root
        assert _without_images(again) == _without_images(items), rel
        for q in items.questions.values():  # the same figures, by content
            assert [Path(p).read_bytes() for p in again.questions[q.id].images] == \
                [Path(p).read_bytes() for p in q.images], rel


def _without_images(items: ItemSet) -> str:
    return ItemSet([q.model_copy(update={"images": []}) for q in items.questions.values()], items.answers,
                   source="").fingerprint()


# ---------------------------------------------------------------- csv


def test_csv_loads_fixture() -> None:
    items = load_items(FIX / "tiny.csv")
    assert list(items.questions) == ["q1", "q2"] and len(items) == 3
    assert items.questions["q1"].reference == "It maps names to IP addresses."
    assert items.questions["q2"].max_points == 3 and items.questions["q2"].language == "de"
    bob = items.answer("q1/bob")
    assert bob.text == "It encrypts web traffic, I think." and bob.human_scores == {"g1": 0.0}
    assert items.answer("q2/alice").text == "Zwei Prozesse warten\ngegenseitig aufeinander."
    assert items.answer("q2/alice").human_scores == {"g1": 3.0, "g2": 2.5}


def test_csv_column_map() -> None:
    spec = "question_id=Frage-Nr, question=Frage,max_points=Punkte,examinee=Student,answer=Antwort"
    spec += ",human_score=Note"
    assert parse_column_map(spec)["answer"] == "Antwort"
    for columns in (spec, parse_column_map(spec)):
        items = load_items(FIX / "mapped.csv", columns=columns, delimiter=";")
        assert [a.id for a in items] == ["1/s1", "1/s2"]
        assert items.answer("1/s1").human_scores == {"human": 1.5}
        assert items.questions["1"].max_points == 2
    items = load_items(
        FIX / "mapped.csv", columns={**parse_column_map(spec), "human_score:ta": "Note"}, delimiter=";"
    )
    assert items.answer("1/s1").human_scores == {"ta": 1.5, "human": 1.5}


@pytest.mark.parametrize("spec", ["answer", "answer=", "=x", "grade=Note", "human_score:=x"])
def test_csv_bad_column_map(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_column_map(spec)


HEAD = "question_id,question,max_points,examinee,answer,human_score\n"


@pytest.mark.parametrize(
    ("body", "parts"),
    [
        ("q1,Q?,2,a,fine,two\n", ["line 2", "field 'human_score'", "not a number"]),
        ("q1,Q?,2,a,fine,1\nq1,Q?,2,b,ok,-1\n", ["record q1/b", "outside 0..2"]),
        ("q1,Q?,0,a,fine,0\n", ["line 2", "field 'max_points'"]),
        ("q1,Q?,x,a,fine,0\n", ["line 2", "field 'max_points'", "not a number"]),
        ("q1,Q?,2,a,fine,1\n\nq1,Other?,2,b,ok,1\n", ["line 4", "field 'question'", "differs", "line 2"]),
        ("q1,Q?,2,a,fine,1\nq1,Q?,3,b,ok,1\n", ["line 3", "field 'max_points'", "differs"]),
        ("q1,Q?,2,a,,1\n", ["line 2", "field 'answer'", "must not be empty"]),
        ("q1,,2,a,fine,1\n", ["line 2", "field 'question'", "required"]),
        (",Q?,2,a,fine,1\n", ["line 2", "field 'question_id'", "must not be empty"]),
        ("q1,Q?,2,a,fine\n", ["line 2", "expected 6 columns, found 5"]),
        ("q1,Q?,2,a,fine,1\nq1,Q?,2,a,again,1\n", ["record q1/a", "duplicate answer id"]),
        ('q1,"Multi\nline",2,a,fine,1\nq1,,,b,x,bad\n', ["line 4", "field 'human_score'"]),
    ],
)
def test_csv_bad_input(tmp_path: Path, body: str, parts: list[str]) -> None:
    path = write(tmp_path / "grades.csv", HEAD + body)
    with raises_input("grades.csv", *parts):
        load_items(path)


def test_csv_missing_column(tmp_path: Path) -> None:
    path = write(tmp_path / "g.csv", "question_id,question,text\nq1,Q?,x\n")
    with raises_input("g.csv", "line 1", "field 'answer'", "no column 'answer'"):
        load_items(path)
    with raises_input("g.csv", "line 1", "field 'Grade'"):
        load_items(path, columns="answer=text,human_score=Grade")
    with raises_input("empty.csv", "no header"):
        load_items(write(tmp_path / "empty.csv", ""), format="csv")


# ---------------------------------------------------------------- sciex


def test_sciex_loads_fixture() -> None:
    folder = FIX / "sciex/tiny_exam"
    items = load_items(folder)
    assert load_items(folder / "tiny_exam_en.json").fingerprint() == items.fingerprint()
    assert list(items.questions) == ["tiny_exam/1", "tiny_exam/2", "tiny_exam/3"]
    q1, q2, q3 = items.questions.values()
    assert json.loads(q1.text) == {
        "Description": "Name the layers of the TCP/IP model.",
        "Figures": ["img/f1.png"],
    }
    assert "Übergangsfunktion" in q3.text  # ensure_ascii=False
    assert q1.images == [str(folder / "img/f1.png")] and q2.images == [str(folder / "img/f2.png")]
    assert (q1.max_points, q2.max_points, q3.max_points) == (2.0, 2.5, 1.0)
    assert (q1.difficulty, q2.difficulty, q3.difficulty) == ("easy", "medium", "hard")
    assert q1.reference == "Link, Internet, Transport, Application."
    assert q2.reference == "a) The step size.\n\nb) Divergence or oscillation."
    assert q3.reference == "Sie bildet Zustand und Eingabe auf den Folgezustand ab."  # falls back to German
    assert q1.meta["average_student_points"] == 1.5 and q2.meta["average_student_points"] is None
    assert {q.exam_id for q in items.questions.values()} == {"tiny_exam"} and q1.language == "en"
    assert [a.id for a in items] == [
        "tiny_exam/1/examinee-a",
        "tiny_exam/1/examinee-b",
        "tiny_exam/2/examinee-a",
        "tiny_exam/2/examinee-b",
        "tiny_exam/3/examinee-b",
    ]
    assert items.answer("tiny_exam/1/examinee-a").human_scores == {"grader-1": 2.0, "grader-2": 1.5}
    assert items.answer("tiny_exam/2/examinee-a").human_scores == {"grader-1": 2.5, "grader-2": 2.0}
    b2 = items.answer("tiny_exam/2/examinee-b")
    assert b2.text == "a) How fast we learn.\nb) Nothing." and b2.human_scores == {"grader-1": 1.0}
    assert items.answer("tiny_exam/3/examinee-b").human_scores == {"grader-1": 1.0}


def copy_exam(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIX / "sciex/tiny_exam", tmp_path / "exam1"))


def test_sciex_single_grader_language_and_empty_answer(tmp_path: Path) -> None:
    folder = copy_exam(tmp_path)
    shutil.rmtree(folder / "grades")
    write(folder / "grades/examinee-b_grade.json", '{"Questions": [{"Index": "1", "Points": "0,5"}]}')
    (folder / "tiny_exam_en.json").rename(folder / "exam.json")
    jsonl_answer = '{"Questions": [{"Index": "1", "Answer": ""}]}'
    write(folder / "answers/examinee-c.json", jsonl_answer)
    items = load_items(folder, language="de")
    assert items.questions["exam1/1"].language == "de"
    assert items.answer("exam1/1/examinee-b").human_scores == {"human": 0.5}
    assert items.answer("exam1/1/examinee-c").meta == {"empty": True}


@pytest.mark.parametrize(
    ("rel", "edit", "parts"),
    [
        (
            "additional_info.json",
            lambda d: d["Questions"][1].pop("MaximumPoints"),
            ["additional_info.json", "record Index 2", "field 'MaximumPoints'"],
        ),
        (
            "additional_info.json",
            lambda d: d["Questions"][0].update(MaximumPoints="zwei"),
            ["additional_info.json", "record Index 1", "field 'MaximumPoints'", "not a number"],
        ),
        (
            "additional_info.json",
            lambda d: d["Questions"].pop(2),
            ["additional_info.json", "record Index 3", "field 'MaximumPoints'"],
        ),
        (
            "grades/grader-1/examinee-a_grade.json",
            lambda d: d["Questions"][0].update(Points="viel"),
            ["examinee-a_grade.json", "record Index 1", "field 'Points'"],
        ),
        (
            "grades/grader-1/examinee-a_grade.json",
            lambda d: d["Questions"][0].update(Points=3),
            ["examinee-a_grade.json", "record Index 1", "field 'Points'", "outside 0..2"],
        ),
        (
            "grades/grader-1/examinee-a_grade.json",
            lambda d: d["Questions"][0].update(Index="9"),
            ["examinee-a_grade.json", "record Index 9", "field 'Index'"],
        ),
        (
            "answers/examinee-a.json",
            lambda d: d["Questions"][0].update(Index="7"),
            ["examinee-a.json", "record Index 7", "field 'Index'", "no question"],
        ),
        (
            "answers/examinee-a.json",
            lambda d: d["Questions"][0].pop("Index"),
            ["examinee-a.json", "field 'Index'"],
        ),
        (
            "tiny_exam_en.json",
            lambda d: d["Questions"][0].update(Figures=["img/none.png"]),
            ["tiny_exam_en.json", "record Index 1", "field 'Figures'", "not found"],
        ),
    ],
)
def test_sciex_bad_input(tmp_path: Path, rel: str, edit: object, parts: list[str]) -> None:
    folder = copy_exam(tmp_path)
    data = json.loads((folder / rel).read_text(encoding="utf-8"))
    edit(data)  # type: ignore[operator]
    write(folder / rel, json.dumps(data))
    with raises_input(*parts):
        load_items(folder)


def test_sciex_bad_files(tmp_path: Path) -> None:
    folder = copy_exam(tmp_path)
    write(
        folder / "answers/examinee-b.txt",
        f"Answer to Question 1\nok\n{STARS}\n{STARS}\n\nOops\n{STARS}\n{STARS}\n",
    )
    with raises_input("examinee-b.txt", "line 6", "Answer to Question"):
        load_items(folder)
    write(folder / "additional_info.json", '{"Questions": [')
    with raises_input("additional_info.json", "line 1", "malformed JSON"):
        load_items(folder)
    (folder / "additional_info.json").unlink()
    with raises_input("additional_info.json", "missing"):
        load_items(folder / "tiny_exam_en.json")
    write(folder / "exam1_de.json", "{}")
    with raises_input("exam1", "several exam files"):
        load_items(folder, format="sciex")


# ---------------------------------------------------------------- saf


def test_saf_loads_fixture() -> None:
    items = load_items(FIX / "saf")
    assert list(items.questions) == ["1.1_NET", "1.2_NET"]  # XML ids repeat; file names do not
    q1, q2 = items.questions.values()
    assert q1.meta == {"saf_id": "1.1"} and q1.exam_id == "NET" and q1.language == "en" and q1.max_points == 1
    assert q1.reference is not None and q1.reference.startswith("It limits the lifetime")
    assert q2.reference is not None and q2.reference.startswith("The sender does not know")  # the first one
    a1 = items.answer("NET_1.1.1")
    assert a1.text.endswith("prevents endless loops.") and a1.human_scores == {"expert": 1.0}
    assert a1.meta == {"feedback": "Correct.", "verification": "Correct"}
    assert items.answer("NET_1.1.2").human_scores == {"expert": 0.25}
    assert items.answer("NET_1.1.3").meta["empty"] is True
    assert items.answer("NET_1.2.1").meta["feedback"] == "Correct & short."
    scaled = load_items(FIX / "saf/1.1_NET.xml", max_points=4)
    assert scaled.questions["1.1_NET"].max_points == 4 and scaled.answer("NET_1.1.2").human_scores == {
        "expert": 1.0
    }


def test_saf_bad_input(tmp_path: Path) -> None:
    text = (FIX / "saf/1.1_NET.xml").read_text(encoding="utf-8")
    with raises_input("broken.xml", "line 8", "malformed XML", "mismatched tag"):
        load_items(write(tmp_path / "broken.xml", text.replace("</referenceAnswer>", "", 1)))
    with raises_input("score.xml", "record NET_1.1.2", "field 'score'", "not a number"):
        load_items(write(tmp_path / "score.xml", text.replace("<score> 0.25</score>", "<score>good</score>")))
    with raises_input("noq.xml", "field 'questionText'"):
        load_items(
            write(
                tmp_path / "noq.xml",
                text.replace("<questionText>What", "<questionTxt>What").replace(
                    "header?</questionText>", "header?</questionTxt>"
                ),
            )
        )
    with raises_input("high.xml", "record NET_1.1.2", "outside 0..1"):
        load_items(write(tmp_path / "high.xml", text.replace("<score> 0.25</score>", "<score>1.5</score>")))
    (tmp_path / "empty").mkdir()
    with raises_input("empty", "no .xml files"):
        load_items(tmp_path / "empty", format="saf")


# ---------------------------------------------------------------- mqm


@pytest.mark.parametrize("rel", ["mqm", "mqm/mqm_tiny_ende.tsv", "mqm/mqm_tiny_ende.avg_seg_scores.tsv"])
def test_mqm_loads_fixture(rel: str) -> None:
    items = load_items(FIX / rel)
    assert list(items.questions) == ["ende/1", "ende/2", "ende/3"]  # segment 4 has no texts
    q1 = items.questions["ende/1"]
    assert (q1.text, q1.task, q1.human_scale, q1.max_points, q1.language) == (
        "The cat sleeps.",
        "mt",
        "mqm",
        100.0,
        "de",
    )
    assert q1.reference == "Die Katze schläft." and q1.meta["source_language"] == "en"
    assert items.questions["ende/2"].text == 'He said "yes".'  # quotes are not CSV quoting
    assert [a.id for a in items] == [
        "ende/1/SysA",
        "ende/1/SysB",
        "ende/2/SysA",
        "ende/3/SysA",
        "ende/3/SysB",
    ]
    a = items.answer("ende/1/SysA")
    assert (a.text, a.examinee, a.human_scores) == ("Die Katze schlaeft.", "SysA", {"mqm": -1.0})


def test_mqm_options() -> None:
    items = load_items(FIX / "mqm", include_reference_systems=True, segments=2, reference_system=None)
    assert list(items.questions) == ["ende/1", "ende/2"]
    assert items.answer("ende/1/ref-A").text == "Die Katze schläft."
    assert items.questions["ende/1"].reference is None
    with raises_input("mqm", "*_zhen.tsv"):
        load_items(FIX / "mqm", pair="zhen")


def test_options_given_as_text() -> None:
    items = load_items(FIX / "mqm", include_reference_systems="yes", segments="1")
    assert [a.examinee for a in items] == ["SysA", "SysB", "ref-A"]
    assert load_items(FIX / "saf", max_points="2,5").questions["1.1_NET"].max_points == 2.5
    assert load_items(FIX / "mqm", segments="none").questions.keys() == {"ende/1", "ende/2", "ende/3"}
    with pytest.raises(
        ConfigError, match=re.escape("option segments of format 'mqm' must be int | None, got 'many'")
    ):
        load_items(FIX / "mqm", segments="many")


def test_mqm_bad_input(tmp_path: Path) -> None:
    folder = Path(shutil.copytree(FIX / "mqm", tmp_path / "mqm"))
    texts = folder / "mqm_tiny_ende.tsv"
    original = texts.read_text(encoding="utf-8")
    write(texts, original.replace("Die Katze schlaeft.\tNo-error", "Die Katze schlief.\tNo-error"))
    with raises_input("mqm_tiny_ende.tsv", "line 3", "field 'target'", "differs from line 2"):
        load_items(folder)
    write(texts, original.replace("\tsource\t", "\tsrc\t"))
    with raises_input("mqm_tiny_ende.tsv", "line 1", "field 'source'"):
        load_items(folder)
    write(texts, original)
    scores = folder / "mqm_tiny_ende.avg_seg_scores.tsv"
    write(scores, scores.read_text(encoding="utf-8").replace("-5.000000", "bad"))
    with raises_input("avg_seg_scores.tsv", "line 3", "field 'mqm_avg_score'"):
        load_items(folder)
    scores.unlink()
    with raises_input("avg_seg_scores.tsv", "not found"):
        load_items(texts)


# ---------------------------------------------------------------- meta-evaluation


def test_metaeval_scoring() -> None:
    items = load_items(FIX / "metaeval/summeval.jsonl")
    q = items.questions["summeval"]
    assert (q.text, q.max_points, q.human_scale) == ("Evaluate the coherence of the text.", 5.0, "likert-1-5")
    assert [a.human_scores for a in items] == [{"human": 4.0}, {"human": 1.5}, {"human": 5.0}]
    assert (
        load_items(FIX / "metaeval/summeval.jsonl", instruction="Rate it.").questions["summeval"].text
        == "Rate it."
    )
    texts = load_scored_texts(FIX / "metaeval/summeval.jsonl")
    assert [(t.id, t.human_score) for t in texts] == [
        ("summeval/0", 4.0),
        ("summeval/1", 1.5),
        ("summeval/2", 5.0),
    ]


def test_metaeval_pairs() -> None:
    pairs = load_pairs(FIX / "metaeval/pairs.jsonl")
    assert [(p.id, p.human_verdicts["human"]) for p in pairs] == [
        ("pairs/0", "1"),
        ("pairs/1", "2"),
        ("pairs/2", "0"),
    ]
    assert (pairs[1].question, pairs[1].answer_a, pairs[1].answer_b) == (
        "Say hello in French.",
        "Hallo",
        "Bonjour",
    )
    items = load_items(FIX / "metaeval/pairs.jsonl")
    assert len(items.questions) == 3 and len(items) == 6 and not items.has_human_scores()
    assert items.questions["pairs/1"].meta["human_verdicts"] == {"human": "2"}
    assert [a.examinee for a in items.answers_for("pairs/1")] == ["output_1", "output_2"]


def test_pandalm_pairs() -> None:
    pairs = load_pairs(FIX / "metaeval/pandalm_tiny.json")
    assert pairs[0].question == "Fix the grammar.\n\nhe go home" and pairs[1].question == "Is 7 prime?"
    assert pairs[0].human_verdicts == {"annotator1": "1", "annotator2": "1", "annotator3": "0"}
    assert (pairs[1].system_a, pairs[1].system_b, pairs[1].answer_a) == ("model-b", "model-c", "True")
    items = load_items(FIX / "metaeval/pandalm_tiny.json")
    assert items.answer("pandalm_tiny/1/2").meta == {"empty": True}
    assert items.answer("pandalm_tiny/1/1").examinee == "model-b"


def test_metaeval_bad_input(tmp_path: Path) -> None:
    row = {"input": "q", "output_1": "a", "output_2": "b", "label": 3}
    with raises_input("p.jsonl", "line 1", "field 'label'"):
        load_pairs(jsonl(tmp_path / "p.jsonl", row))
    with raises_input("p2.jsonl", "line 2", "field 'output_2'"):
        load_pairs(jsonl(tmp_path / "p2.jsonl", {**row, "label": 1}, {"input": "q", "output_1": "a"}))
    with raises_input("s.jsonl", "line 2", "field 'score'"):
        load_items(jsonl(tmp_path / "s.jsonl", {"text": "t", "score": 2}, {"text": "u", "score": "high"}))
    with raises_input("s2.jsonl", "line 1", "field 'text'"):
        load_scored_texts(jsonl(tmp_path / "s2.jsonl", {"score": 2}))
    bad = json.loads((FIX / "metaeval/pandalm_tiny.json").read_text(encoding="utf-8"))
    bad[1]["annotator2"] = 5
    with raises_input("pl.json", "idx 1", "field 'annotator2'"):
        load_pairs(write(tmp_path / "pl.json", json.dumps(bad)))


# ---------------------------------------------------------------- demo exam


def test_demo_exam() -> None:
    items = load_items(DEMO)
    assert len(items.questions) == 4 and len(items) == 24
    assert [q.language for q in items.questions.values()] == ["en", "en", "de", "de"]
    assert {q.exam_id for q in items.questions.values()} == {"demo-en", "demo-de"}
    for qid, q in items.questions.items():
        answers = items.answers_for(qid)
        assert q.reference and q.difficulty in ("easy", "medium", "hard")
        assert [a.examinee for a in answers] == [f"examinee-{k}" for k in range(1, 7)]
        for a in answers:
            assert set(a.human_scores) == {"grader-a", "grader-b"}
            assert all((2 * s).is_integer() for s in a.human_scores.values())
        means = sorted(a.human_score or 0 for a in answers)
        assert means[0] <= 0.25 * q.max_points and means[-1] >= 0.9 * q.max_points


# ---------------------------------------------------------------- real data (../shared)


@needs_shared
def test_real_saf() -> None:
    items = load_items(DATA / "saf/unseen_answers/english")
    assert len(items.questions) == 18 and all(len(items.answers_for(q)) == 14 for q in items.questions)
    assert all(a.human_scores["expert"] <= 1 for a in items)


@needs_shared
@pytest.mark.parametrize("pair", ["ende", "zhen"])
def test_real_mqm(pair: str) -> None:
    items = load_items(DATA / "mqm-ted", pair=pair)
    assert len(items.questions) == 529
    counts = {len(items.answers_for(q)) for q in items.questions}
    assert counts == {13}  # the 13 MT systems; the human references ref-A (and ref-B) are left out
    assert not any(a.examinee and a.examinee.startswith("ref") for a in items)
    assert all(q.reference for q in items.questions.values())
    assert "<v>" not in "".join(a.text for a in items)
    with_refs = load_items(DATA / f"mqm-ted/mqm_ted_{pair}.tsv", include_reference_systems=True, segments=10)
    assert len(with_refs.questions) == 10 and len(with_refs) == 10 * (14 if pair == "ende" else 15)


@needs_shared
def test_real_metaeval() -> None:
    base = DATA / "meta-evaluation/datasets"
    summeval = load_items(base / "scoring/summeval.jsonl")
    assert len(summeval) == 250 and all(1 <= (a.human_score or 0) <= 5 for a in summeval)
    assert len(load_items(base / "scoring/openmeva.jsonl")) == 250
    assert len(load_pairs(base / "pairwise/mt-bench.jsonl")) == 391
    assert len(load_items(base / "pairwise/llmbar.jsonl").questions) == 100


@needs_shared
def test_real_pandalm() -> None:
    pairs = load_pairs(DATA / "pandalm/testset-v1.json")
    assert len(pairs) == 999 and all(len(p.human_verdicts) == 3 for p in pairs)
    assert all(p.system_a and p.system_b for p in pairs)
    assert len(load_items(DATA / "pandalm/testset-v1.json")) == 1998
