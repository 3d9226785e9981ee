"""The bad-input corpus: every malformed input file and out-of-bound option ends in exit code 2 and one
line on stderr naming the file (and, where there is one, the record and field), no traceback, no hang,
and nothing written: the folder of the case (store included) is byte for byte as it was.

The cases are written here (small files made in a tmp folder per case); they run in process through
typer's CliRunner; the few that could hang (a FIFO as input) run as a subprocess with a time-out.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from knockout.cli import register_extensions
from knockout.cli._main import app
from knockout.storage import _store

FIX = Path(__file__).parent / "fixtures"
register_extensions(app)

Q = {"type": "question", "id": "q1", "text": "What does DNS do?", "max_points": 2}
A = {"type": "answer", "id": "a1", "question_id": "q1", "examinee": "e1", "text": "It maps names.", "human_score": 1}
CSV_HEAD = "question_id,question,max_points,examinee,answer,human_score\n"
CSV_ROW = "q1,What does DNS do?,2,alice,It maps names.,1\n"
MQM_HEAD = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\tcomment\n"
MQM_ROW = "SysA\ttalk.1\t1\t1\trater1\tThe cat sleeps.\tDie Katze.\tFluency/Spelling\tMinor\t\n"
MQM_AVG = "system\tmqm_avg_score\tseg_id\nSysA\t-1.0\t1\n"
INFO = json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2}]})
PAIR = {"input": "Name a prime.", "output_1": "7", "output_2": "8", "label": 1}
MATCH = {"item": "0", "evaluator_1": "judge-a", "evaluator_2": "judge-b", "winner": "Assistant1"}
VERDICT = {"id": "x1", "verdict": 1, "human": 1}
MV = [{"evaluator": e, "item": "1", "question": "Q?", "answer1": "a", "answer2": "b", "winner": w, "label": 1}
      for e, w in (("judge-a", 1), ("judge-b", 2), ("judge-c", 1))]


# -- building the files of a case ---------------------------------------------------------------------
def jsonl(*rows: Any) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


@dataclass
class Case:
    """``files``: name -> text or bytes (written in the case folder, "/" makes folders); ``args``: the
    command line, where ``{d}`` is the case folder; ``expect``: text the error line must contain."""

    id: str
    args: list[str]
    expect: tuple[str, ...]
    files: dict[str, str | bytes] = field(default_factory=dict)
    setup: Callable[[Path], Any] | None = None  # extra preparation; may return a context manager
    subprocess: bool = False


def grade(data: str, *extra: str) -> list[str]:
    return ["grade", "{d}/" + data, "--judge", "scripted", "-o", "{d}/k.db", "-q", *extra]


GOOD = {"exam.jsonl": jsonl(Q, A)}


def gcase(id: str, text: str | bytes, expect: tuple[str, ...], name: str = "bad.jsonl", *extra: str) -> Case:
    """``knockout grade`` of one bad data file."""
    return Case(id, grade(name, *extra), (name, *expect), {name: text})


def ocase(id: str, *extra: str, expect: tuple[str, ...]) -> Case:
    """``knockout grade`` of good data with one bad option."""
    return Case(id, grade("exam.jsonl", *extra), expect, dict(GOOD))


def scase(id: str, name: str, expect: tuple[str, ...], files: dict[str, str | bytes], *extra: str) -> Case:
    """``knockout sbs`` of a pairs file."""
    return Case(id, ["sbs", "{d}/" + name, "--judge", "scripted", "-o", "{d}/k.db", "-q", *extra], expect, files)


def mcase(id: str, name: str, expect: tuple[str, ...], files: dict[str, str | bytes], *extra: str) -> Case:
    """``knockout meta`` of a verdicts file or folder."""
    return Case(id, ["meta", "{d}/" + name, "--meta-judge", "scripted", "-o", "{d}/k.db", "-q", *extra], expect,
                files)


EXP = ('[data]\npath = "exam.jsonl"\n[[judges]]\njudge = "scripted"\n[[judges]]\njudge = "scripted?noise=0.1"\n'
       '[[methods]]\nname = "ind"\n')


# -- store files: every command that reads or writes a store ------------------------------------------
def good_store(path: Path) -> None:
    """A store with one complete scripted run (made through the CLI)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "exam.jsonl").write_text(jsonl(Q, A))
    r = CliRunner().invoke(app, ["grade", str(path.parent / "exam.jsonl"), "--judge", "scripted", "-o", str(path),
                                 "-q"])
    assert r.exit_code == 0, r.output


def write_parquet_scores(path: Path, scores: dict[str, float]) -> None:
    """A Parquet table of one answer whose ``human_scores`` struct holds ``scores`` as written (NaN kept)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"question_id": ["q1"], "question": ["What does DNS do?"], "max_points": [2],
                             "examinee": ["alice"], "answer": ["It maps names."],
                             "human_scores": pa.array([scores], from_pandas=False)}), path)


def make_fifo(d: Path, name: str = "fifo") -> None:
    os.mkfifo(d / name)


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """A store file nobody may write: chmod, plus the immutable flag when we run as root."""
    os.chmod(path, 0o444)
    os.chmod(path.parent, 0o555)
    immutable = os.geteuid() == 0 and shutil.which("chattr") is not None
    if immutable:
        subprocess.run(["chattr", "+i", str(path), str(path.parent)], check=True)
    try:
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path), str(path.parent)], check=True)
        os.chmod(path.parent, 0o755)
        os.chmod(path, 0o644)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Another process holds the store's write lock for the whole command."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        con.execute("ROLLBACK")
        con.close()


STORE_KINDS: dict[str, tuple[dict[str, str | bytes], Callable[[Path], Any] | None, tuple[str, ...]]] = {
    "not-sqlite": ({"s.db": "this is not a database\n" * 20}, None, ("s.db",)),
    "non-utf8": ({"s.db": bytes(range(256)) * 8}, None, ("s.db",)),
    "directory": ({"s.db/keep": ""}, None, ("s.db",)),
    "fifo": ({}, lambda d: make_fifo(d, "s.db"), ("s.db",)),
    "dev-zero": ({}, lambda d: (d / "s.db").symlink_to("/dev/zero"), ("s.db",)),
    "read-only": ({}, lambda d: (good_store(d / "s.db"), read_only(d / "s.db"))[1], ("s.db",)),
    "locked": ({}, lambda d: (good_store(d / "s.db"), locked(d / "s.db"))[1], ("s.db",)),
}
#: Commands that only read a store, and how each names it.
STORE_READERS: dict[str, list[str]] = {
    "report": ["report", "{d}/s.db", "--resamples", "0"],
    "export": ["export", "{d}/s.db"],
    "runs": ["runs", "{d}/s.db"],
    "compare": ["compare", "{d}/s.db", "--resamples", "0"],
}


def store_cases() -> list[Case]:
    cases = []
    for kind, (files, setup, expect) in STORE_KINDS.items():
        cases.append(Case(f"store-{kind}-grade", ["grade", "{d}/exam.jsonl", "--judge", "scripted", "-o",
                                                  "{d}/s.db", "-q"], expect, {**GOOD, **files}, setup))
        if kind in ("read-only", "locked"):
            continue  # reading such a store is fine
        for cmd, args in STORE_READERS.items():
            cases.append(Case(f"store-{kind}-{cmd}", args, expect, dict(files), setup))
    for cmd, args in STORE_READERS.items():
        cases.append(Case(f"store-empty-{cmd}", args, ("s.db",), {"s.db": b""}))
        cases.append(Case(f"store-absent-{cmd}", args, ("s.db",)))
    cases.append(Case("store-unknown-run-report", ["report", "{d}/s.db:nope", "--resamples", "0"], ("s.db", "nope"),
                      {}, lambda d: good_store(d / "s.db")))
    cases.append(Case("store-unknown-run-export", ["export", "{d}/s.db", "--run", "nope"], ("s.db", "nope"),
                      {}, lambda d: good_store(d / "s.db")))
    return cases


# -- issue 42: output paths and gradebooks an LMS would read wrong ----------------------------------------
#: every command with an output file or folder, and how it names it ({out})
OUTPUT_COMMANDS: dict[str, list[str]] = {
    "gradebook": ["gradebook", "{d}/s.db", "-o", "{out}"],
    "export": ["export", "{d}/s.db", "-O", "{out}"],
    "export-parquet": ["export", "{d}/s.db", "--format", "parquet", "-O", "{out}"],
    "report-html": ["report", "{d}/s.db", "--resamples", "0", "--html", "{out}"],
    "compare-html": ["compare", "{d}/s.db", "{d}/s.db", "--resamples", "0", "--html", "{out}"],
    "calibrate": ["calibrate", "{d}/s.db", "--resamples", "0", "-O", "{out}"],
    "groups-sheet": ["groups", "{d}/s.db", "--sheet", "{out}"],
    "annotations-export": ["annotations", "export", "--db", "{d}/s.db", "-O", "{out}"],
    "leaderboard-csv": ["leaderboard", "{d}/s.db", "--resamples", "0", "--csv", "{out}"],
    "leaderboard-html": ["leaderboard", "{d}/s.db", "--resamples", "0", "--html", "{out}"],
    "meta-export-matches": ["meta", "{d}/v.jsonl", "--meta-judge", "scripted", "--framework", "jdeval",
                            "--export-matches", "{out}", "-o", "{d}/k.db", "-q"],
}


def output_cases() -> list[Case]:
    cases = []
    for name, args in OUTPUT_COMMANDS.items():
        for kind, out, files, expect in (("folder", "{d}/out", {"out/keep": ""}, ("out", "is a folder")),
                                         ("missing-parent", "{d}/nope/out.x", {}, ("nope", "does not exist"))):
            cases.append(Case(f"output-{kind}-{name}", [a.replace("{out}", out) for a in args], expect,
                              {**files, "v.jsonl": jsonl(*MV)}, lambda d: good_store(d / "s.db")))
    cases.append(Case("output-solve-out-dir-a-file", ["solve", "{d}/exam.jsonl", "-m", "scripted", "-d",
                                                      "{d}/file", "-o", "{d}/k.db", "-q"],
                      ("file", "not a folder"), {**GOOD, "file": "x"}))
    return cases


def graded_exam(examinees: list[str], question: str = "q1", meta: list[dict[str, Any]] | None = None
                ) -> Callable[[Path], None]:
    """Setup: a store ``s.db`` graded from ``exam.jsonl`` (these examinees, each with an expert grade and, when
    given, its ``meta``)."""
    def setup(d: Path) -> None:
        rows: list[Any] = [{**Q, "id": question}]
        rows += [{**A, "id": f"a{i}", "question_id": question, "examinee": e,
                  **({"meta": meta[i]} if meta else {})} for i, e in enumerate(examinees)]
        (d / "exam.jsonl").write_text(jsonl(*rows))
        r = CliRunner().invoke(app, ["grade", str(d / "exam.jsonl"), "--judge", "scripted", "-o", str(d / "s.db"),
                                     "-q"])
        assert r.exit_code == 0, r.output
    return setup


def gradebook_case(id: str, fmt: str, examinees: list[str], expect: tuple[str, ...], question: str = "q1") -> Case:
    return Case(f"gradebook-{id}", ["gradebook", "{d}/s.db", "--format", fmt, "-o", "{d}/book.csv"],
                ("exam.jsonl", *expect), {}, graded_exam(examinees, question))


def gguf_cases() -> list[Case]:
    """``gguf=`` naming a file that is not a GGUF: refused from its header, before llama.cpp opens it."""
    def spec(d: str, extra: str = "&server=llama-cpp-python") -> str:
        return f"openai:m?base_url=http://127.0.0.1:9/v1{extra}&gguf={d}/m.gguf"

    header = b"GGUF" + (3).to_bytes(4, "little")
    files: dict[str, bytes] = {
        "garbage": b"\x00\x01not a model at all" * 10,
        "empty": b"",
        "huge-counts": header + (2**63).to_bytes(8, "little") + (2**63).to_bytes(8, "little"),
        "counts-past-the-end": header + (1000).to_bytes(8, "little") + (10).to_bytes(8, "little") + b"\0" * 100,
        "version-1": b"GGUF" + (1).to_bytes(4, "little") + b"\0" * 16,
    }
    cases = [Case(f"gguf-{name}", grade("exam.jsonl", "--judge", spec("{d}")), ("m.gguf", "GGUF"),
                  {**GOOD, "m.gguf": content}) for name, content in files.items()]
    cases.append(Case("gguf-link-to-a-system-file", grade("exam.jsonl", "--judge", spec("{d}")), ("m.gguf", "GGUF"),
                      dict(GOOD), lambda d: (d / "m.gguf").symlink_to("/etc/passwd")))
    cases.append(Case("gguf-without-llama-cpp-python-server", grade("exam.jsonl", "--judge",
                                                                     spec("{d}", "&server=vllm")),
                      ("gguf", "server=llama-cpp-python"), {**GOOD, "m.gguf": b"GGUF"}))
    cases.append(Case("llamacpp-judge-garbage-gguf", grade("exam.jsonl", "--judge", "llamacpp:{d}/m.gguf"),
                      ("m.gguf", "GGUF"), {**GOOD, "m.gguf": b"not a model" * 100}))
    return cases


# -- the corpus ----------------------------------------------------------------------------------------
Q_NO_ID = {k: v for k, v in Q.items() if k != "id"}
CASES: list[Case] = [
    # JSONL item sets
    gcase("jsonl-empty", "", ()),
    gcase("jsonl-blank-lines", "\n\n   \n", ()),
    gcase("jsonl-not-json", jsonl(Q, "{not json"), ("line 2",)),
    gcase("jsonl-array-line", jsonl(Q, "[1, 2]"), ("line 2",)),
    gcase("jsonl-string-line", jsonl(Q, '"text"'), ("line 2",)),
    gcase("jsonl-unknown-type", jsonl(Q, {**A, "type": "bogus"}), ("line 2", "type")),
    gcase("jsonl-no-question-id", jsonl(Q, {k: v for k, v in A.items() if k != "question_id"}),
          ("line 2", "question_id")),
    gcase("jsonl-dangling-question-id", jsonl(Q, {**A, "question_id": "q9"}), ("q9",)),
    gcase("jsonl-answer-without-question", jsonl(A), ("q1",)),
    gcase("jsonl-negative-max-points", jsonl({**Q, "max_points": -2}, A), ("line 1", "max_points")),
    gcase("jsonl-zero-max-points", jsonl({**Q, "max_points": 0}, A), ("line 1", "max_points")),
    gcase("jsonl-text-max-points", jsonl({**Q, "max_points": "two"}, A), ("line 1", "max_points")),
    gcase("jsonl-nan-max-points", jsonl(Q, A).replace('"max_points": 2', '"max_points": NaN'),
          ("line 1", "max_points")),
    gcase("jsonl-inf-max-points", jsonl(Q, A).replace('"max_points": 2', '"max_points": Infinity'),
          ("line 1", "max_points")),
    gcase("jsonl-text-human-score", jsonl(Q, {**A, "human_score": "good"}), ("line 2", "human_score")),
    gcase("jsonl-nan-human-score", jsonl(Q, A).replace('"human_score": 1', '"human_score": NaN'),
          ("line 2", "human_score")),
    gcase("jsonl-negative-human-score", jsonl(Q, {**A, "human_score": -1}), ("a1", "human_score")),
    gcase("jsonl-human-score-over-max", jsonl(Q, {**A, "human_score": 7}), ("a1", "human_score")),
    gcase("jsonl-human-scores-list", jsonl(Q, {**A, "human_scores": [1, 2]}), ("line 2", "human_scores")),
    gcase("jsonl-duplicate-question", jsonl(Q, Q, A), ("q1",)),
    gcase("jsonl-duplicate-answer", jsonl(Q, A, A), ("a1",)),
    gcase("jsonl-no-question-text", jsonl({k: v for k, v in Q.items() if k != "text"}, A), ("line 1", "text")),
    gcase("jsonl-answer-text-number", jsonl(Q, {**A, "text": 42}), ("line 2", "text")),
    gcase("jsonl-answer-text-list", jsonl(Q, {**A, "text": ["a"]}), ("line 2", "text")),
    gcase("jsonl-question-id-object", jsonl({**Q, "id": {"x": 1}}, A), ("line 1", "id")),
    gcase("jsonl-no-question-at-all", jsonl(Q_NO_ID, A), ("line 1", "id")),
    gcase("jsonl-images-not-list", jsonl({**Q, "images": 5}, A), ("line 1", "images")),
    gcase("jsonl-image-missing", jsonl({**Q, "images": ["nope.png"]}, A), ("line 1", "images")),
    gcase("jsonl-image-outside", jsonl({**Q, "images": ["/etc/passwd"]}, A), ("line 1", "images")),
    gcase("jsonl-image-url", jsonl({**Q, "images": ["https://example.org/x.png"]}, A), ("line 1", "images")),
    gcase("jsonl-meta-not-object", jsonl({**Q, "meta": "x"}, A), ("line 1", "meta")),
    gcase("jsonl-non-utf8", jsonl(Q).encode() + b'{"type": "answer", "text": "\xff\xfe"}\n', ()),
    gcase("jsonl-nul-bytes", b"\x00" * 64, ()),
    gcase("jsonl-huge-line", jsonl(Q, {**A, "text": "x" * 3_000_000}), ("max_file_mb",), "bad.jsonl", "--data-opt",
          "max_file_mb=1"),
    Case("jsonl-directory", grade("dir.jsonl"), ("dir.jsonl",), {"dir.jsonl/x": ""}),
    Case("jsonl-absent", grade("absent.jsonl"), ("absent.jsonl",)),
    Case("jsonl-dev-zero", ["grade", "/dev/zero", "--format", "jsonl", "--judge", "scripted", "-o", "{d}/k.db",
                            "-q"], ("/dev/zero",)),
    Case("jsonl-fifo", grade("fifo.jsonl"), ("fifo.jsonl",), {}, lambda d: make_fifo(d, "fifo.jsonl"),
         subprocess=True),
    Case("data-fifo-auto", grade("fifo"), ("fifo",), {}, lambda d: make_fifo(d), subprocess=True),
    gcase("jsonl-as-csv", jsonl(Q, A), (), "bad.jsonl", "--format", "csv"),
    gcase("format-unknown", jsonl(Q, A), ("bogus",), "bad.jsonl", "--format", "bogus"),
    Case("data-opt-malformed", grade("exam.jsonl", "--data-opt", "novalue"), ("--data-opt", "novalue"), dict(GOOD)),
    Case("data-opt-unknown", grade("exam.jsonl", "--data-opt", "bogus=1"), ("bogus",), dict(GOOD)),
    Case("data-opt-unknown-csv", grade("ok.csv", "--data-opt", "bogus=1"), ("bogus",), {"ok.csv": CSV_HEAD + CSV_ROW}),
    Case("data-opt-unknown-sciex", grade("exam", "--format", "sciex", "--data-opt", "bogus=1"), ("bogus",),
         {"exam/keep": ""}),
    Case("data-opt-max-file-mb", grade("exam.jsonl", "--data-opt", "max_file_mb=abc"), ("max_file_mb", "abc"),
         dict(GOOD)),
    Case("data-opt-max-file-mb-negative", grade("exam.jsonl", "--data-opt", "max_file_mb=-1"), ("max_file_mb",),
         dict(GOOD)),
    # CSV item sets
    gcase("csv-empty", "", (), "bad.csv"),
    gcase("csv-header-only", CSV_HEAD, (), "bad.csv"),
    gcase("csv-no-answer-column", "question_id,question,max_points\nq1,Q?,2\n", ("answer",), "bad.csv"),
    gcase("csv-text-max-points", CSV_HEAD + "q1,What?,two,alice,It maps.,1\n", ("line 2", "max_points"), "bad.csv"),
    gcase("csv-negative-max-points", CSV_HEAD + "q1,What?,-1,alice,It maps.,1\n", ("line 2", "max_points"),
          "bad.csv"),
    gcase("csv-text-human-score", CSV_HEAD + "q1,What?,2,alice,It maps.,good\n", ("line 2", "human_score"),
          "bad.csv"),
    gcase("csv-score-over-max", CSV_HEAD + "q1,What?,2,alice,It maps.,9\n", ("q1/alice", "human_score"), "bad.csv"),
    gcase("csv-ragged-row", CSV_HEAD + CSV_ROW.strip() + ",extra,more\n", ("line 2",), "bad.csv"),
    gcase("csv-unclosed-quote", CSV_HEAD + 'q1,"What?,2,alice,It maps.,1\n', (), "bad.csv"),
    gcase("csv-non-utf8", CSV_HEAD.encode() + b"q1,Wh\xff\xfeat?,2,alice,It.,1\n", (), "bad.csv"),
    gcase("csv-duplicate-header", "answer,answer,question_id\nx,y,q1\n", (), "bad.csv"),
    Case("csv-map-malformed", grade("ok.csv", "--map", "nonsense"), ("nonsense",), {"ok.csv": CSV_HEAD + CSV_ROW}),
    gcase("csv-map-unknown-column", CSV_HEAD + CSV_ROW, ("nosuch",), "bad.csv", "--map", "answer=nosuch"),
    Case("csv-map-unknown-field", grade("ok.csv", "--map", "bogus=answer"), ("bogus",), {"ok.csv": CSV_HEAD + CSV_ROW}),
    gcase("csv-empty-answer-column-name", "question_id,question,max_points,examinee,,human_score\n" + CSV_ROW, (),
          "bad.csv"),
    Case("csv-dev-zero", ["grade", "/dev/zero", "--format", "csv", "--judge", "scripted", "-o", "{d}/k.db", "-q"],
         ("/dev/zero",)),
    # meta-evaluation files loaded as item sets
    gcase("metaeval-bad-label", jsonl({**PAIR, "label": 7}), ("line 1", "label"), "pairs.jsonl", "--format",
          "metaeval"),
    gcase("metaeval-no-output", jsonl({k: v for k, v in PAIR.items() if k != "output_2"}), ("line 1",),
          "pairs.jsonl", "--format", "metaeval"),
    gcase("metaeval-text-score", jsonl({"text": "a b c", "score": "high"}), ("line 1", "score"), "scores.jsonl",
          "--format", "metaeval"),
    gcase("pandalm-not-list", json.dumps({"idx": 1}), (), "pandalm.json", "--format", "metaeval"),
    # SAF and MQM
    gcase("saf-malformed-xml", "<question id='1'><questionText>What?", (), "bad.xml", "--format", "saf"),
    gcase("saf-no-question-text", "<question id='1' module='NET'><studentAnswers/></question>", (), "bad.xml",
          "--format", "saf"),
    gcase("saf-bad-score", "<question id='1' module='NET'><questionText>Q?</questionText><studentAnswers>"
          "<studentAnswer id='s1'><response>r</response><score>lots</score></studentAnswer></studentAnswers>"
          "</question>", ("score",), "bad.xml", "--format", "saf"),
    gcase("saf-non-utf8", b"<?xml version='1.0' encoding='utf-8'?><question id='1'>\xff\xfe</question>", (),
          "bad.xml", "--format", "saf"),
    Case("mqm-no-companion", grade("bad.tsv", "--format", "mqm"), ("bad.avg_seg_scores.tsv",),
         {"bad.tsv": MQM_HEAD + MQM_ROW}),
    Case("mqm-no-columns", grade("bad.tsv", "--format", "mqm"), ("bad.tsv",),
         {"bad.tsv": "a\tb\n1\t2\n", "bad.avg_seg_scores.tsv": MQM_AVG}),
    Case("mqm-bad-avg-score", grade("bad.tsv", "--format", "mqm"), ("bad.avg_seg_scores.tsv",),
         {"bad.tsv": MQM_HEAD + MQM_ROW, "bad.avg_seg_scores.tsv": MQM_AVG.replace("-1.0", "lots")}),
    Case("mqm-non-utf8", grade("bad.tsv", "--format", "mqm"), ("bad.tsv",),
         {"bad.tsv": MQM_HEAD.encode() + b"SysA\t\xff\xfe\t1\n", "bad.avg_seg_scores.tsv": MQM_AVG}),
    # SciEx folders
    Case("sciex-empty-folder", grade("exam", "--format", "sciex"), ("exam",), {"exam/keep.txt": ""}),
    Case("sciex-exam-not-json", grade("exam", "--format", "sciex"), ("exam_en.json",),
         {"exam/exam_en.json": "{not json", "exam/additional_info.json": INFO, "exam/answers/s1.json": "{}"}),
    Case("sciex-no-questions", grade("exam", "--format", "sciex"), ("exam_en.json",),
         {"exam/exam_en.json": json.dumps({"Foo": []}), "exam/additional_info.json": INFO,
          "exam/answers/s1.json": json.dumps({"Questions": []})}),
    Case("sciex-answer-not-json", grade("exam", "--format", "sciex"), ("s1.json",),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": "Q?"}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2}]}),
          "exam/answers/s1.json": "{broken"}),
    Case("sciex-bad-max-points", grade("exam", "--format", "sciex"), ("additional_info.json", "MaximumPoints"),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": "Q?"}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": "lots"}]}),
          "exam/answers/s1.json": json.dumps({"Questions": [{"Index": "1", "Answer": "A."}]})}),
    Case("sciex-bad-grade", grade("exam", "--format", "sciex"), ("s1_grade.json", "Points"),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": "Q?"}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2}]}),
          "exam/answers/s1.json": json.dumps({"Questions": [{"Index": "1", "Answer": "A."}]}),
          "exam/grades/g1/s1_grade.json": json.dumps({"Questions": [{"Index": "1", "Points": "many"}]})}),
    Case("sciex-figure-outside", grade("exam", "--format", "sciex"), ("exam_en.json", "Figures"),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": "Q?",
                                                           "Figures": ["../../etc/passwd"]}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2}]}),
          "exam/answers/s1.json": json.dumps({"Questions": [{"Index": "1", "Answer": "A."}]})}),
    Case("sciex-non-utf8-answer", grade("exam", "--format", "sciex"), ("s1.txt",),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": "Q?"}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2}]}),
          "exam/answers/s1.txt": b"Answer to Question 1\n\xff\xfe\xfd\n"}),
    # prompt template files
    ocase("prompt-unknown", "--prompt", "no-such-preset", expect=("no-such-preset",)),
    Case("prompt-file-empty", grade("exam.jsonl", "--prompt", "{d}/t.txt"), ("t.txt",), {**GOOD, "t.txt": ""}),
    Case("prompt-file-non-utf8", grade("exam.jsonl", "--prompt", "{d}/t.txt"), ("t.txt",),
         {**GOOD, "t.txt": b"Grade {answer} \xff\xfe"}),
    Case("prompt-file-unknown-placeholder", grade("exam.jsonl", "--prompt", "{d}/t.txt"), ("t.txt", "nosuch"),
         {**GOOD, "t.txt": "Question: {question}\nAnswer: {answer}\n{nosuch}\nScore:"}),
    Case("prompt-file-no-answer", grade("exam.jsonl", "--prompt", "{d}/t.txt"), ("t.txt",),
         {**GOOD, "t.txt": "Grade the question {question} from 0 to {max_points}."}),
    Case("prompt-file-directory", grade("exam.jsonl", "--prompt", "{d}/t.toml"), ("t.toml",),
         {**GOOD, "t.toml/x": ""}),
    Case("prompt-file-bad-toml", grade("exam.jsonl", "--prompt", "{d}/t.toml"), ("t.toml",),
         {**GOOD, "t.toml": "[prompt\nname = "}),
    Case("prompt-file-fifo", grade("exam.jsonl", "--prompt", "{d}/t.txt"), ("t.txt",), dict(GOOD),
         lambda d: make_fifo(d, "t.txt"), subprocess=True),
    Case("prompt-file-dev-zero", grade("exam.jsonl", "--prompt", "/dev/zero"), ("/dev/zero",), dict(GOOD)),
    # options with a bound
    ocase("concurrency-0", "--concurrency", "0", expect=("concurrency",)),
    ocase("concurrency-negative", "--concurrency", "-1", expect=("concurrency",)),
    ocase("max-tokens-0", "--max-tokens", "0", expect=("max-tokens",)),
    ocase("max-tokens-negative", "--max-tokens", "-5", expect=("max-tokens",)),
    ocase("format-retries-negative", "--format-retries", "-1", expect=("--format-retries",)),
    ocase("temperature-nan", "--temperature", "nan", expect=("temperature",)),
    ocase("temperature-inf", "--temperature", "inf", expect=("temperature",)),
    ocase("temperature-negative", "--temperature", "-0.5", expect=("temperature",)),
    ocase("limit-0", "--limit", "0", expect=("limit",)),
    ocase("limit-negative", "--limit", "-3", expect=("limit",)),
    ocase("answers-per-question-0", "--answers-per-question", "0", expect=("answers-per-question",)),
    ocase("shots-negative", "--shots", "-1", expect=("shots",)),
    ocase("shot-source-unknown", "--shot-source", "bogus", expect=("bogus",)),
    ocase("method-unknown", "--method", "bogus", expect=("bogus",)),
    ocase("method-opt-malformed", "--method-opt", "novalue", expect=("--method-opt",)),
    ocase("method-opt-unknown", "--method", "knockout", "--method-opt", "bogus=1", expect=("bogus",)),
    ocase("judge-unknown", "--judge", "bogus:model", expect=("bogus",)),
    ocase("judge-spec-timeout-text", "--judge", "openai:m?timeout=abc&base_url=http://127.0.0.1:9/v1",
          expect=("timeout",)),
    ocase("judge-opt-timeout-text", "--judge", "openai:m", "--judge-opt", "timeout=abc", "--judge-opt",
          "base_url=http://127.0.0.1:9/v1", expect=("timeout",)),
    ocase("judge-opt-timeout-0", "--judge", "openai:m", "--judge-opt", "timeout=0", "--judge-opt",
          "base_url=http://127.0.0.1:9/v1", expect=("timeout",)),
    ocase("judge-opt-concurrency-0", "--judge", "openai:m", "--judge-opt", "concurrency=0", "--judge-opt",
          "base_url=http://127.0.0.1:9/v1", expect=("concurrency",)),
    ocase("judge-opt-retries-negative", "--judge", "openai:m", "--judge-opt", "retries=-1", "--judge-opt",
          "base_url=http://127.0.0.1:9/v1", expect=("retries",)),
    ocase("judge-opt-unknown", "--judge", "openai:m", "--judge-opt", "bogus=1", expect=("bogus",)),
    ocase("judge-opt-malformed", "--judge-opt", "novalue", expect=("--judge-opt",)),
    ocase("judge-opt-bad-url", "--judge", "openai:m", "--judge-opt", "base_url=ftp://x", expect=("base_url",)),
    ocase("judge-scripted-concurrency-0", "--judge", "scripted?concurrency=0", expect=("concurrency",)),
    ocase("judge-scripted-noise-nan", "--judge", "scripted?noise=nan", expect=("noise",)),
    ocase("judge-llamacpp-threads-0", "--judge", "llamacpp", "--judge-opt", "threads=0", expect=("threads",)),
    # side-by-side pairs
    scase("sbs-empty", "p.jsonl", ("p.jsonl",), {"p.jsonl": ""}),
    scase("sbs-not-json", "p.jsonl", ("p.jsonl", "line 2"), {"p.jsonl": jsonl(PAIR, "{oops")}),
    scase("sbs-bad-label", "p.jsonl", ("p.jsonl", "line 1", "label"), {"p.jsonl": jsonl({**PAIR, "label": "maybe"})}),
    scase("sbs-missing-output", "p.jsonl", ("p.jsonl", "line 1"),
          {"p.jsonl": jsonl({k: v for k, v in PAIR.items() if k != "output_1"})}),
    scase("sbs-pandalm-bad", "p.json", ("p.json",), {"p.json": json.dumps([{"idx": 1, "cmp_key": "a_b"}])}),
    scase("sbs-non-utf8", "p.jsonl", ("p.jsonl",), {"p.jsonl": b'{"input": "\xff"}\n'}),
    scase("sbs-window-0", "p.jsonl", ("window",), {"p.jsonl": jsonl(PAIR)}, "--window", "0"),
    scase("sbs-stride-0", "p.jsonl", ("stride",), {"p.jsonl": jsonl(PAIR)}, "--stride", "0"),
    scase("sbs-debate-unknown", "p.jsonl", ("bogus",), {"p.jsonl": jsonl(PAIR)}, "--debate", "bogus"),
    scase("sbs-candidate-unknown", "p.jsonl", ("third",), {"p.jsonl": jsonl(PAIR)}, "--candidate", "third"),
    scase("sbs-tie-unknown", "p.jsonl", ("Z",), {"p.jsonl": jsonl(PAIR)}, "--tie", "Z"),
    scase("sbs-prompt-unknown", "p.jsonl", ("IX",), {"p.jsonl": jsonl(PAIR)}, "--prompt", "IX"),
    scase("sbs-concurrency-0", "p.jsonl", ("concurrency",), {"p.jsonl": jsonl(PAIR)}, "--concurrency", "0"),
    scase("sbs-max-tokens-0", "p.jsonl", ("max-tokens",), {"p.jsonl": jsonl(PAIR)}, "--max-tokens", "0"),
    scase("sbs-format-retries-negative", "p.jsonl", ("format-retries",), {"p.jsonl": jsonl(PAIR)},
          "--format-retries", "-1"),
    scase("sbs-temperature-nan", "p.jsonl", ("temperature",), {"p.jsonl": jsonl(PAIR)}, "--temperature", "nan"),
    scase("sbs-limit-0", "p.jsonl", ("limit",), {"p.jsonl": jsonl(PAIR)}, "--limit", "0"),
    # meta-evaluation verdict files
    mcase("meta-empty-folder", "v", ("v",), {"v/keep": ""}),
    mcase("meta-no-evaluator", "v.jsonl", ("v.jsonl", "evaluator"), {"v.jsonl": jsonl({"item": "1", "text": "x"})}),
    mcase("meta-not-json", "v.jsonl", ("v.jsonl", "line 1"), {"v.jsonl": "{nope\n"}),
    mcase("meta-framework-unknown", "v.jsonl", ("bogus",), {"v.jsonl": jsonl(*MV)}, "--framework", "bogus"),
    mcase("meta-draws-0", "v.jsonl", ("draws",), {"v.jsonl": jsonl(*MV)}, "--draws", "0"),
    mcase("meta-rounds-0", "v.jsonl", ("rounds",), {"v.jsonl": jsonl(*MV)}, "--rounds", "0"),
    mcase("meta-max-criteria-0", "v.jsonl", ("max-criteria",), {"v.jsonl": jsonl(*MV)}, "--max-criteria", "0"),
    mcase("meta-truncate-negative", "v.jsonl", ("truncate",), {"v.jsonl": jsonl(*MV)}, "--truncate", "-1"),
    mcase("meta-shuffles-0", "v.jsonl", ("shuffles",), {"v.jsonl": jsonl(*MV)}, "--shuffles", "0"),
    mcase("meta-k-nan", "v.jsonl", ("k",), {"v.jsonl": jsonl(*MV)}, "--k", "nan"),
    mcase("meta-concurrency-0", "v.jsonl", ("concurrency",), {"v.jsonl": jsonl(*MV)}, "--concurrency", "0"),
    mcase("meta-limit-negative", "v.jsonl", ("limit",), {"v.jsonl": jsonl(*MV)}, "--limit", "-1"),
    # Elo outcomes
    Case("elo-empty", ["elo", "{d}/m.jsonl"], ("m.jsonl",), {"m.jsonl": ""}),
    Case("elo-bad-winner", ["elo", "{d}/m.jsonl"], ("m.jsonl", "line 1", "winner"),
         {"m.jsonl": jsonl({**MATCH, "winner": "nobody"})}),
    Case("elo-missing-evaluator", ["elo", "{d}/m.jsonl"], ("m.jsonl", "line 1"),
         {"m.jsonl": jsonl({"item": "0", "winner": "Assistant1"})}),
    Case("elo-not-json", ["elo", "{d}/m.jsonl"], ("m.jsonl", "line 1"), {"m.jsonl": "[[\n"}),
    Case("elo-shuffles-0", ["elo", "{d}/m.jsonl", "--shuffles", "0"], ("shuffles",), {"m.jsonl": jsonl(MATCH)}),
    Case("elo-k-nan", ["elo", "{d}/m.jsonl", "--k", "nan"], ("k",), {"m.jsonl": jsonl(MATCH)}),
    Case("elo-k-negative", ["elo", "{d}/m.jsonl", "--k", "-4"], ("k",), {"m.jsonl": jsonl(MATCH)}),
    Case("elo-check-0", ["elo", "{d}/m.jsonl", "--check", "0"], ("check",), {"m.jsonl": jsonl(MATCH)}),
    Case("elo-dev-zero", ["elo", "/dev/zero"], ("/dev/zero",)),
    # agreement of verdict files
    Case("agreement-empty", ["agreement", "{d}/v.jsonl", "--human", "human"], ("v.jsonl",), {"v.jsonl": ""}),
    Case("agreement-no-human-field", ["agreement", "{d}/v.jsonl", "--human", "gold"], ("v.jsonl", "gold"),
         {"v.jsonl": jsonl(VERDICT)}),
    Case("agreement-kind-unknown", ["agreement", "{d}/v.jsonl", "--human", "human", "--kind", "bogus"], ("bogus",),
         {"v.jsonl": jsonl(VERDICT)}),
    Case("agreement-non-integer-unknown", ["agreement", "{d}/v.jsonl", "--human", "human", "--non-integer",
                                           "bogus"], ("bogus",), {"v.jsonl": jsonl(VERDICT)}),
    Case("agreement-resamples-negative", ["agreement", "{d}/v.jsonl", "--human", "human", "--resamples", "-1"],
         ("resamples",), {"v.jsonl": jsonl(VERDICT)}),
    Case("agreement-non-utf8-csv", ["agreement", "{d}/v.csv", "--human", "human"], ("v.csv",),
         {"v.csv": b"id,verdict,human\nx1,\xff,1\n"}),
    # report / export options
    Case("report-level-unknown", ["report", "{d}/s.db", "--level", "bogus", "--resamples", "0"], ("bogus",), {},
         lambda d: good_store(d / "s.db")),
    Case("report-by-unknown", ["report", "{d}/s.db", "--by", "bogus", "--resamples", "0"], ("bogus",), {},
         lambda d: good_store(d / "s.db")),
    Case("report-resamples-negative", ["report", "{d}/s.db", "--resamples", "-1"], ("resamples",), {},
         lambda d: good_store(d / "s.db")),
    Case("export-format-unknown", ["export", "{d}/s.db", "--format", "xlsx"], ("xlsx",), {},
         lambda d: good_store(d / "s.db")),
    Case("compare-resamples-negative", ["compare", "{d}/s.db", "{d}/s.db", "--resamples", "-1"], ("resamples",), {},
         lambda d: good_store(d / "s.db")),
    # web app imports
    Case("import-kind-unknown", ["import", "{d}/exam.jsonl", "--db", "{d}/k.db", "--kind", "bogus"], ("bogus",),
         dict(GOOD)),
    Case("import-overlap-0", ["import", "{d}/p.jsonl", "--db", "{d}/k.db", "--kind", "pairs", "--overlap", "0"],
         ("overlap",), {"p.jsonl": jsonl(PAIR)}),
    Case("import-bad-items", ["import", "{d}/bad.jsonl", "--db", "{d}/k.db"], ("bad.jsonl", "line 1",
                                                                             "max_points"),
         {"bad.jsonl": jsonl({**Q, "max_points": "x"}, A)}),
    Case("import-bad-pairs", ["import", "{d}/p.jsonl", "--db", "{d}/k.db", "--kind", "pairs"],
         ("p.jsonl", "line 1"), {"p.jsonl": jsonl({**PAIR, "label": 9})}),
    # issue 26: found by a fuzzer rather than a list
    gcase("jsonl-nested-100k", jsonl(Q) + "[" * 100_000 + "]" * 100_000 + "\n", ("line 2", "nested")),
    gcase("jsonl-nested-meta", jsonl({**Q, "meta": json.loads("[" * 100 + "]" * 100 and "{}")}, A).replace(
        '"meta": {}', '"meta": ' + '{"a": ' * 200 + "1" + "}" * 200), ("line 1", "meta")),
    gcase("jsonl-lone-surrogate", jsonl(Q, {**A, "text": "@@"}).replace("@@", "\\ud800"), ("line 2", "text",
                                                                                          "surrogate")),
    gcase("jsonl-lone-surrogate-id", jsonl(Q, {**A, "examinee": "@@"}).replace("@@", "\\udfff"),
          ("line 2", "examinee")),
    gcase("jsonl-max-points-true", jsonl({**Q, "max_points": True}, A), ("line 1", "max_points")),
    gcase("jsonl-human-score-true", jsonl(Q, {**A, "human_score": True}), ("line 2", "human_score")),
    gcase("jsonl-zero-width-answer", jsonl(Q, {**A, "text": "\u200b\u200c\u2060\ufeff "}), ("line 2", "text")),
    gcase("jsonl-zero-width-id", jsonl({**Q, "id": "\u200b"}, A), ("line 1", "id")),
    gcase("jsonl-huge-id", jsonl({**Q, "id": "q" * 100_000}, A), ("line 1", "id")),
    gcase("jsonl-image-file-url", jsonl({**Q, "images": ["file:///etc/passwd"]}, A), ("line 1", "images", "http"),
          "bad.jsonl", "--data-opt", "allow_urls=true"),
    gcase("jsonl-image-ftp-url", jsonl({**Q, "images": ["ftp://example.org/x.png"]}, A), ("line 1", "images"),
          "bad.jsonl", "--data-opt", "allow_urls=true"),
    Case("csv-map-field-twice", grade("ok.csv", "--map", "answer=answer,answer=question"), ("answer", "twice"),
         {"ok.csv": CSV_HEAD + CSV_ROW}),
    gcase("csv-nul-byte", CSV_HEAD + "q1,What?,2,alice,It\x00 maps.,1\n", (), "bad.csv"),
    Case("sciex-duplicate-index", grade("exam", "--format", "sciex"), ("exam_en.json", "Index"),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": "Q?"},
                                                          {"Index": "1", "Description": "Q again?"}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2}]}),
          "exam/answers/s1.json": json.dumps({"Questions": [{"Index": "1", "Answer": "A."}]})}),
    Case("sciex-duplicate-info-index", grade("exam", "--format", "sciex"), ("additional_info.json", "Index"),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": "Q?"}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2},
                                                                   {"Index": "1", "MaximumPoints": 3}]}),
          "exam/answers/s1.json": json.dumps({"Questions": [{"Index": "1", "Answer": "A."}]})}),
    Case("sciex-answers-symlink-loop", grade("exam", "--format", "sciex"), ("answers", "loop"),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": "Q?"}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2}]})},
         lambda d: (d / "exam/answers").symlink_to("answers")),
    Case("sciex-answer-file-symlink-loop", grade("exam", "--format", "sciex"), ("s2.json",),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": "Q?"}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2}]}),
          "exam/answers/s1.json": json.dumps({"Questions": [{"Index": "1", "Answer": "A."}]})},
         lambda d: (d / "exam/answers/s2.json").symlink_to("s2.json")),
    Case("jury-file-nested", grade("exam.jsonl", "--jury", "{d}/j.toml"), ("j.toml", "nested"),
         {**GOOD, "j.toml": "x = " + "[" * 100_000 + "]" * 100_000 + "\n"}),
    Case("jury-file-fifo", grade("exam.jsonl", "--jury", "{d}/j.toml"), ("j.toml",), dict(GOOD),
         lambda d: make_fifo(d, "j.toml"), subprocess=True),
    Case("import-exam-name-huge", ["import", "{d}/exam.jsonl", "--db", "{d}/k.db", "--exam", "e" * 100_000],
         ("exam",), dict(GOOD)),
    # issue 26: the bounds live on the models, whichever entry point fills them
    Case("experiment-temperature-nan", ["run", "{d}/e.toml"], ("e.toml", "params.temperature"),
         {**GOOD, "e.toml": EXP + "[params]\ntemperature = nan\n"}),
    Case("experiment-max-tokens-huge", ["run", "{d}/e.toml"], ("e.toml", "params.max_tokens"),
         {**GOOD, "e.toml": EXP + "[params]\nmax_tokens = 1000000000000\n"}),
    Case("experiment-member-temperature-inf", ["run", "{d}/e.toml"], ("e.toml", "params.temperature"),
         {**GOOD, "e.toml": EXP.replace('judge = "scripted"', 'judge = "scripted"\nparams = { temperature = inf }')}),
    Case("experiment-concurrency-huge", ["run", "{d}/e.toml"], ("e.toml", "concurrency"),
         {**GOOD, "e.toml": "concurrency = 99999999\n" + EXP}),
    Case("experiment-shots-huge", ["run", "{d}/e.toml"], ("e.toml", "prompt.shots"),
         {**GOOD, "e.toml": EXP + "[prompt]\nshots = 99999999\n"}),
    Case("experiment-k-nan", ["run", "{d}/e.toml"], ("e.toml", "frameworks.0.k"),
         {"v.jsonl": jsonl(*MV), "e.toml": 'kind = "meta"\n[data]\npath = "v.jsonl"\n[[judges]]\njudge = "scripted"\n'
                                           '[[frameworks]]\nk = nan\n'}),
    Case("jury-member-params-nan", grade("exam.jsonl", "--jury", "{d}/j.toml"), ("j.toml", "params.temperature"),
         {**GOOD, "j.toml": '[[member]]\njudge = "scripted"\nparams = { temperature = nan }\n'
                            '[[member]]\njudge = "scripted"\n'}),
    Case("jury-member-max-tokens-huge", grade("exam.jsonl", "--jury", "{d}/j.toml"), ("j.toml", "params.max_tokens"),
         {**GOOD, "j.toml": '[[member]]\njudge = "scripted"\nparams = { max_tokens = 10000000000 }\n'
                            '[[member]]\njudge = "scripted"\n'}),
    ocase("max-tokens-huge", "--max-tokens", "10000000000", expect=("--max-tokens",)),
    ocase("temperature-huge", "--temperature", "1e300", expect=("--temperature",)),
    ocase("shots-huge", "--shots", "100000000", expect=("--shots",)),
    ocase("concurrency-huge", "--concurrency", "100000000", expect=("--concurrency",)),
    ocase("seed-huge", "--seed", "99999999999999999999999", expect=("seed",)),
    ocase("top-p-nan", "--top-p", "nan", expect=("--top-p",)),
    ocase("samples-zero", "--samples", "0", expect=("--samples",)),
    ocase("guard-unknown", "--guard", "maybe", expect=("guard", "maybe")),
    ocase("guard-on-not-individual", "--guard", "on", "--method", "knockout", expect=("--guard", "individual")),
    ocase("samples-huge", "--samples", "100000", expect=("--samples",)),
    ocase("samples-not-individual", "--samples", "2", "--method", "knockout", expect=("--samples", "individual")),
    ocase("prompt-huge", "--prompt", "p" * 10_000, expect=("--prompt",)),
    scase("sbs-window-huge", "p.jsonl", ("window",), {"p.jsonl": jsonl(PAIR)}, "--window", "100000000000"),
    mcase("meta-shuffles-huge", "v.jsonl", ("shuffles",), {"v.jsonl": jsonl(*MV)}, "--shuffles", "100000000000"),
    mcase("meta-rounds-huge", "v.jsonl", ("rounds",), {"v.jsonl": jsonl(*MV)}, "--rounds", "100000000000"),
    Case("elo-shuffles-huge", ["elo", "{d}/m.jsonl", "--shuffles", "100000000000"], ("shuffles",),
         {"m.jsonl": jsonl(MATCH)}),
    Case("elo-k-inf", ["elo", "{d}/m.jsonl", "--k", "inf"], ("k",), {"m.jsonl": jsonl(MATCH)}),
    Case("solve-temperature-nan", ["solve", "{d}/exam.jsonl", "--model", "scripted", "-o", "{d}/k.db",
                                   "--out-dir", "{d}/out", "--temperature", "nan", "-q"], ("temperature",),
         dict(GOOD)),
    Case("report-resamples-huge", ["report", "{d}/s.db", "--resamples", "100000000000"], ("resamples",), {},
         lambda d: good_store(d / "s.db")),
    Case("serve-session-hours-nan", ["serve", "--db", "{d}/k.db", "--session-hours", "nan"], ("--session-hours",),
         {}),
    Case("serve-session-hours-huge", ["serve", "--db", "{d}/k.db", "--session-hours", "1e9"], ("--session-hours",),
         {}),
    Case("data-opt-max-file-mb-huge", grade("exam.jsonl", "--data-opt", "max_file_mb=1e300"), ("max_file_mb",),
         dict(GOOD)),
    # found by the fuzzer's long run (tests/test_fuzz.py)
    Case("sciex-figures-not-list", grade("exam", "--format", "sciex"), ("exam_en.json", "Figures"),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": "Q?", "Figures": 1}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2}]}),
          "exam/answers/s1.json": json.dumps({"Questions": [{"Index": "1", "Answer": "A."}]})}),
    Case("sciex-subquestions-not-list", grade("exam", "--format", "sciex"), ("exam_en.json", "Subquestions"),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": "Q?", "Subquestions": 3}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2}]}),
          "exam/answers/s1.json": json.dumps({"Questions": [{"Index": "1", "Answer": "A."}]})}),
    ocase("judge-spec-lone-surrogate", "--judge", "scripted:\ud800", expect=("judge spec",)),
    ocase("judge-opt-lone-surrogate", "--judge-opt", "seed=\udcff", expect=("judge option",)),
    Case("elo-seed-negative", ["elo", "{d}/m.jsonl", "--seed", "-1"], ("--seed",), {"m.jsonl": jsonl(MATCH)}),
    mcase("meta-seed-negative", "v.jsonl", ("--seed",), {"v.jsonl": jsonl(*MV)}, "--seed", "-1"),
    Case("report-seed-negative", ["report", "{d}/s.db", "--seed", "-1"], ("--seed",), {},
         lambda d: good_store(d / "s.db")),
    # issue 42: scikit-learn's seeds are [0, 2**32 - 1] (knockout._bounds.MAX_SEED); a traceback before
    *(Case(f"{cmd}-seed-{name}", [cmd, "{d}/s.db", "--seed", value], ("--seed", bound), {},
           lambda d: good_store(d / "s.db"))
      for cmd in ("calibrate", "review", "gradebook")
      for name, value, bound in (("negative", "-1", "greater than or equal to 0"),
                                 ("2-32", str(2**32), "less than or equal to 4294967295"))),
    Case("jury-member-prompt-too-long-for-a-path", grade("exam.jsonl", "--jury", "{d}/j.toml"), ("x" * 20,),
         {**GOOD, "j.toml": '[[member]]\njudge = "scripted"\n[[member]]\njudge = "scripted"\nprompt = "'
                            + "x" * 1000 + '"\n'}),
    Case("data-file-name-not-utf8", grade("\udcff.jsonl"), ("not valid UTF-8",), {"\udcff.jsonl": jsonl(Q, A)}),
    ocase("prompt-too-long-for-a-path", "--prompt", "y" * 1000 + ".toml", expect=("prompt",)),
    # issue 35: bad input, round four
    gcase("jsonl-max-points-5000-digits", jsonl({**Q, "max_points": "@@"}, A).replace('"@@"', "1" * 5000),
          ("line 1", "max_points", "finite")),
    # the long fuzz run of issue 35 (seed 35): 2**63 points passed as a number, then no grade could be read
    gcase("csv-max-points-2-63", "question_id,question,max_points,examinee,answer,human_score\r\n"
          "q1,What?,9223372036854775808,e0,It.,1\r\n", ("line 2", "max_points", "10000"), "bad.csv"),
    gcase("jsonl-max-points-above-bound", jsonl({**Q, "max_points": 10001}, A), ("line 1", "max_points", "10000")),
    Case("parquet-human-scores-nan", grade("t.parquet"), ("t.parquet", "row 1", "human_scores.g2", "NaN"), {},
         lambda d: write_parquet_scores(d / "t.parquet", {"g1": 1.0, "g2": float("nan")})),
    Case("sciex-answers-folder-loop", grade("exam", "--format", "sciex"), ("answers/sub", "loop"),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": "Q?"}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2}]}),
          "exam/answers/s1.json": json.dumps({"Questions": [{"Index": "1", "Answer": "A."}]})},
         lambda d: (d / "exam/answers/sub").symlink_to("sub")),
    Case("sciex-description-object", grade("exam", "--format", "sciex"), ("exam_en.json", "Index 1", "Description"),
         {"exam/exam_en.json": json.dumps({"Questions": [{"Index": "1", "Description": {"en": {"text": "Q?"}}}]}),
          "exam/additional_info.json": json.dumps({"Questions": [{"Index": "1", "MaximumPoints": 2}]}),
          "exam/answers/s1.json": json.dumps({"Questions": [{"Index": "1", "Answer": "A."}]})}),
    Case("import-exam-path-like", ["import", "{d}/exam.jsonl", "--db", "{d}/k.db", "--exam", "x/examinee/1"],
         ("--exam", "examinee"), dict(GOOD)),
    Case("import-exam-control-character", ["import", "{d}/exam.jsonl", "--db", "{d}/k.db", "--exam", "a\x07b"],
         ("--exam", "control", "\\x07"), dict(GOOD)),
    Case("import-exam-id-path-like", ["import", "{d}/bad.jsonl", "--db", "{d}/k.db"],
         ("bad.jsonl", "line 1", "exam_id"), {"bad.jsonl": jsonl({**Q, "exam_id": "x/examinee/1"}, A)}),
    gcase("jsonl-exam-id-control-character", jsonl({**Q, "exam_id": "a\x1bb"}, A), ("line 1", "exam_id")),
    Case("agreement-verdict-infinity", ["agreement", "{d}/v.jsonl", "--human", "human"],
         ("v.jsonl", "line 1", "verdict", "Infinity"),
         {"v.jsonl": '{"id": "x1", "verdict": Infinity, "human": 1}\n' + jsonl({**VERDICT, "id": "x2"})}),
    Case("agreement-human-nan", ["agreement", "{d}/v.jsonl", "--human", "human"], ("v.jsonl", "line 2", "human"),
         {"v.jsonl": jsonl(VERDICT) + '{"id": "x2", "verdict": 1, "human": NaN}\n'}),
    Case("experiment-store-folder", ["run", "{d}/e.toml"], ("e.toml", "store", "folder"),
         {**GOOD, "e.toml": 'store = "."\n' + EXP}),
    *store_cases(),
    # issue 42: outputs that cannot be written, and gradebooks an LMS or a spreadsheet would read wrong
    *output_cases(),
    gradebook_case("moodle-formula-id", "moodle", ["ada", "=HYPERLINK(\"http://x\")"], ("formula", "HYPERLINK")),
    gradebook_case("canvas-formula-id", "canvas", ["ada", "@SUM(A1)"], ("formula", "@SUM")),
    gradebook_case("moodle-tab-id", "moodle", ["ada", "\tada2"], ("formula", "\\t")),
    gradebook_case("moodle-ids-differ-by-case", "moodle", ["Ann", "ann"], ("'Ann'", "'ann'", "ignores case")),
    gradebook_case("canvas-ids-differ-by-a-space", "canvas", ["bob", "bob "], ("'bob'", "'bob '")),
    gradebook_case("moodle-id-0", "moodle", ["ada", "0"], ("'0'", "Moodle")),
    gradebook_case("canvas-student-points-possible", "canvas", ["ada", "Points Possible"], ("Points Possible",)),
    gradebook_case("canvas-question-like-an-assignment", "canvas", ["ada"], ("Quiz (12345)", "existing"),
                   question="Quiz (12345)"),
    Case("import-exam-dot", ["import", "{d}/exam.jsonl", "--db", "{d}/k.db", "--exam", "."], ("--exam", "'.'"),
         dict(GOOD)),
    Case("import-exam-id-dot-dot", ["import", "{d}/bad.jsonl", "--db", "{d}/k.db"], ("bad.jsonl", "line 1", "exam_id"),
         {"bad.jsonl": jsonl({**Q, "exam_id": ".."}, A)}),
    # issue 49: ids as the LMS compares them, formula look-alikes, GGUF files, small items
    gradebook_case("moodle-ids-nfc-nfd", "moodle", ["zo\u00e9", "zoe\u0301"], ("'zo\u00e9'", "zoe\\u0301")),
    gradebook_case("canvas-ids-fullwidth", "canvas", ["alice", "\uff41lice"], ("'alice'", "\\uff41lice")),
    gradebook_case("moodle-ids-nbsp", "moodle", ["dave", "dave\u00a0"], ("'dave'", "'dave\\xa0'")),
    gradebook_case("moodle-ids-accents", "moodle", ["jose", "jos\u00e9"], ("'jose'", "accents")),
    gradebook_case("moodle-id-space-then-formula", "moodle", ["ada", " =1+1"], ("formula", "after blank")),
    gradebook_case("canvas-id-fullwidth-equals", "canvas", ["ada", "\uff1dSUM(A1)"], ("formula", "read as '='")),
    gradebook_case("moodle-question-fullwidth-equals", "moodle", ["ada"], ("question", "formula"),
                   question="\uff1dSUM(A1)"),
    Case("gradebook-id-column-a-list", ["gradebook", "{d}/s.db", "--id-column", "email", "-o", "{d}/book.csv"],
         ("exam.jsonl", "record a1", "meta.email", "list"), {},
         graded_exam(["e0", "e1"], meta=[{"email": "a@x.org"}, {"email": ["a@x.org", "b@x.org"]}])),
    Case("gradebook-id-column-an-object", ["gradebook", "{d}/s.db", "--format", "moodle", "--id-column", "email",
                                           "-o", "{d}/book.csv"], ("exam.jsonl", "record a0", "meta.email", "dict"),
         {}, graded_exam(["e0"], meta=[{"email": {"work": "a@x.org"}}])),
    Case("experiment-store-newline", ["run", "{d}/e.toml"], ("e.toml", "store", "control"),
         {**GOOD, "e.toml": 'store = "k\\n.db"\n' + EXP}),
    Case("experiment-data-path-control-character", ["run", "{d}/e.toml"], ("e.toml", "data.path", "control"),
         {**GOOD, "e.toml": EXP.replace('path = "exam.jsonl"', 'path = "exam\\u0007.jsonl"')}),
    Case("report-calibrate-per-question-huge", ["report", "{d}/s.db", "--calibrate-per-question",
                                                "9" * 30], ("--calibrate-per-question",), {},
         lambda d: good_store(d / "s.db")),
    Case("report-calibrate-per-question-0", ["report", "{d}/s.db", "--calibrate-per-question", "0"],
         ("--calibrate-per-question",), {}, lambda d: good_store(d / "s.db")),
    Case("calibrate-per-question-0", ["calibrate", "{d}/s.db", "--per-question", "0"], ("--per-question",), {},
         lambda d: good_store(d / "s.db")),
    Case("calibrate-resamples-negative", ["calibrate", "{d}/s.db", "--resamples", "-1"], ("--resamples",), {},
         lambda d: good_store(d / "s.db")),
    Case("calibrate-resamples-huge", ["calibrate", "{d}/s.db", "--resamples", "100001"], ("--resamples",), {},
         lambda d: good_store(d / "s.db")),
    Case("review-next-0", ["review", "{d}/s.db", "--next", "0"], ("--next",), {}, lambda d: good_store(d / "s.db")),
    Case("review-next-huge", ["review", "{d}/s.db", "--next", "10001"], ("--next",), {},
         lambda d: good_store(d / "s.db")),
    ocase("executor-window-space", "--executor", "ray?window= 5", expect=("window",)),
    ocase("executor-workers-huge", "--executor", "ray?workers=100000", expect=("workers", "1024")),
    ocase("executor-workers-other-digits", "--executor", "ray?workers=\u0665", expect=("workers",)),
    ocase("method-opt-space", "--method", "window", "--method-opt", "passes= 5", expect=("--method-opt", "passes")),
    ocase("judge-opt-space", "--judge-opt", "seed =1", expect=("--judge-opt", "seed")),
    *gguf_cases(),
]


# -- running a case ------------------------------------------------------------------------------------
def snapshot(folder: Path) -> dict[str, object]:
    """Every entry under ``folder``: the bytes of regular files, the kind of anything else."""
    seen: dict[str, object] = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            seen[rel] = ("link", os.readlink(p))
        elif p.is_fifo():
            seen[rel] = "fifo"
        elif p.is_dir():
            seen[rel] = "dir"
        else:
            seen[rel] = p.read_bytes()
    return seen


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


def invoke(args: list[str], in_subprocess: bool) -> Outcome:
    if in_subprocess:
        try:
            r = subprocess.run([sys.executable, "-m", "knockout.cli", *args], capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pytest.fail(f"hang: {args}")
        return Outcome(r.returncode, r.stdout, r.stderr)
    r = CliRunner().invoke(app, args)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        import traceback

        trace = "".join(traceback.format_exception(r.exception))
        return Outcome(1, r.stdout, r.stderr + "\nTraceback (in process):\n" + trace)
    return Outcome(r.exit_code, r.stdout, r.stderr)


@pytest.fixture(autouse=True)
def _short_busy_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store locked by another process is waited for; here only briefly."""
    monkeypatch.setattr(_store, "BUSY_TIMEOUT_S", 0.5)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path: Path) -> None:
    d = tmp_path / "case"
    d.mkdir()
    for name, content in case.files.items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    args = [a.replace("{d}", str(d)) for a in case.args]
    with ExitStack() as stack:
        ctx = case.setup(d) if case.setup else None
        if isinstance(ctx, AbstractContextManager):
            stack.enter_context(ctx)
        before = snapshot(d)
        got = invoke(args, case.subprocess)
        after = snapshot(d)
    shown = f"exit {got.code}\nstdout: {got.stdout[-2000:]}\nstderr: {got.stderr[-3000:]}"
    assert "Traceback" not in got.stdout + got.stderr, shown
    assert got.code == 2, shown
    lines = [ln for ln in got.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, shown
    line = lines[0].replace(str(d) + "/", "")
    for text in case.expect:
        assert text in line, f"{text!r} not in the error line\n{shown}"
    assert after == before, f"files changed: {sorted(set(after) ^ set(before)) or 'contents'}\n{shown}"


def test_corpus_size() -> None:
    assert len(CASES) >= 100
    assert len({c.id for c in CASES}) == len(CASES)


# -- accepted, counted and shown: what a reader is told rather than refused -----------------------------------
def test_expert_grades_that_are_not_grades_are_counted_and_shown(tmp_path: Path) -> None:
    """The web app's grade table of a store written by hand holds a text, an infinity, -3 and 99 (above the
    maximum 2): ``calibrate`` and ``report --calibrate`` neither crash nor drop them without a word; each is
    left out and counted by reason (``not a number``, ``out of range``), in the table and in ``--json``."""
    import time

    rows: list[Any] = []
    for q in range(3):
        rows += [{**Q, "id": f"q{q}", "text": f"What {q}?"},
                 *({**A, "id": f"a{q}{i}", "question_id": f"q{q}", "examinee": f"e{i}", "text": f"answer {i}",
                    "human_score": (q + i) % 3} for i in range(6))]
    (tmp_path / "exam.jsonl").write_text(jsonl(*rows))
    db = str(tmp_path / "k.db")
    runner = CliRunner()
    assert runner.invoke(app, ["import", str(tmp_path / "exam.jsonl"), "--db", db]).exit_code == 0
    assert runner.invoke(app, ["grade", str(tmp_path / "exam.jsonl"), "--judge", "scripted", "-o", db,
                               "-q"]).exit_code == 0
    con = sqlite3.connect(db)
    now = time.time()
    for aid, score in (("a00", "a lot"), ("a01", float("inf")), ("a02", -3.0), ("a03", 99.0), ("a04", 1.0)):
        con.execute("INSERT INTO human_grades (answer_id, grader, question_id, exam_id, score, version, created, "
                    "updated) VALUES (?, 'bob', 'q0', 'exam', ?, 1, ?, ?)", (aid, score, now, now))
    con.commit()
    con.close()
    r = runner.invoke(app, ["calibrate", db, "--resamples", "0", "--json"])
    assert r.exit_code == 0, r.output + r.stderr
    assert json.loads(r.stdout)["expert_grades_left_out"] == {"not a number": 2, "out of range": 2}
    r = runner.invoke(app, ["calibrate", db, "--resamples", "0"])
    assert r.exit_code == 0 and "2 not a number, 2 out of range" in " ".join(r.stdout.split()), r.stdout
    r = runner.invoke(app, ["report", db, "--calibrate", "--resamples", "0", "--json"])
    assert r.exit_code == 0, r.output + r.stderr
    rep = json.loads(r.stdout)
    assert rep["run"]["human_grades"]["web_skipped"] == {"not a number": 2, "out of range": 2}, rep["run"]
    assert rep["run"]["human_grades"]["web_grades"] == 1


def test_a_gguf_header_llama_cpp_reads_is_accepted(tmp_path: Path) -> None:
    """The header check refuses what is not a GGUF (the ``gguf-*`` cases above), not a GGUF llama.cpp reads: a
    version 2 or 3 header whose counts fit the file, and the embedded model when it is in the cache."""
    from knockout.judges._gguf import check_gguf
    from knockout.judges._models import DEFAULT_MODEL, MODELS, cache_dir

    for version in (2, 3):
        p = tmp_path / f"v{version}.gguf"
        p.write_bytes(b"GGUF" + version.to_bytes(4, "little") + (2).to_bytes(8, "little")
                      + (3).to_bytes(8, "little") + b"\0" * (2 * 24 + 3 * 13))
        assert check_gguf(p, "gguf=") == p
    model = MODELS[DEFAULT_MODEL]
    cached = cache_dir() / "models" / f"{model.name}-{model.sha256[:12]}.gguf"
    if cached.is_file():
        assert check_gguf(cached, "gguf=") == cached
