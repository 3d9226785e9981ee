"""The fuzzer (issue 26): bad input found by generated cases rather than a list.

Hypothesis strategies generate item sets (typed and flat JSONL, CSV, SciEx folders), experiment files,
jury files, command-line option values and the Python API's configuration objects, including values that
are structured but wrong: NaN, infinities, negative and huge numbers, booleans for numbers, wrong types,
Unicode edge cases (lone surrogates, NUL, zero-width and right-to-left characters, long strings), deep
nesting, and path tricks (``..``, absolute paths, devices, ``file://`` URLs).  Every case runs the CLI in
process (typer's CliRunner) and must end with

* exit code 0 or 2, never a traceback (an exception escaping the command);
* within :data:`CASE_S` seconds (a SIGALRM interrupts a case that would hang);
* on exit code 2: one line on stderr (``error: ...``, or click's usage message for an option click itself
  cannot convert), and every file of the case byte-identical (no store created);
* on exit code 0: the input files byte-identical (only the store is written).

The normal suite runs the ``ci`` profile (fixed seed, a few cases per property; tests/conftest.py);
``pytest tests/test_fuzz.py --hypothesis-profile long`` runs the nightly budget (docs/testing.md).
The judge's replies are fuzzed too, from a loopback fake server (tests/fake_server.py): a reply counts as a
valid grade only when it is within 0..max and is the number the fake judge wrote as its last verdict line.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import signal
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, note, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from typer.testing import CliRunner

from knockout.cli import _progress, register_extensions
from knockout.cli._main import app
from knockout.errors import KnockoutError
from knockout.storage import _store
from tests.test_bad_input import snapshot

register_extensions(app)

#: a case that runs longer than this is a hang
CASE_S = 30.0
#: a secret in judge specs and options: never printed (issue 35)
SECRET = "sk-fuzz-secret-7"

# -- running a case -----------------------------------------------------------------------------------


class Hang(Exception):
    pass


@contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"no result after {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


def run_cli(files: dict[str, str | bytes], args: list[str], setup: Callable[[Path], None] | None = None) -> Result:
    """Write ``files`` into a fresh folder, run the CLI on ``args`` (``{d}``: the folder) and check the
    properties in the module doc."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        d = Path(tmp)
        for name, content in files.items():
            p = d / name
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                p.write_bytes(content)
            else:
                p.write_bytes(content.encode("utf-8", "surrogatepass"))
        if setup is not None:
            setup(d)
        argv = [a.replace("{d}", str(d)) for a in args]
        before = snapshot(d)
        with time_bound(CASE_S):
            r = CliRunner().invoke(app, argv)
        after = snapshot(d)
    shown = f"args: {[a[:200] for a in argv]}\nexit {r.exit_code}\nstderr: {r.stderr[-2000:]}"
    exc = r.exception
    if isinstance(exc, Hang):
        pytest.fail(f"hang: {shown}")
    if exc is not None and not isinstance(exc, SystemExit):
        import traceback

        pytest.fail("traceback:\n" + "".join(traceback.format_exception(exc)) + shown)
    assert r.exit_code in (0, 2), shown
    assert "Traceback" not in r.stdout + r.stderr, shown
    assert SECRET not in r.stdout + r.stderr, f"a secret was printed\n{shown}"
    if r.exit_code == 2:
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 or "Usage:" in r.stderr, shown
        assert after == before, f"a refused input changed files: {sorted(set(after) ^ set(before))}\n{shown}"
    else:
        changed = [k for k in before if after.get(k) != before[k]]
        assert not changed, f"input files changed: {changed}\n{shown}"
    if currently_in_test_context():
        note(shown)
        event(f"exit {r.exit_code}")
    return Result(r.exit_code, r.stdout, r.stderr)


@pytest.fixture(autouse=True)
def _in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI freezes its heap for the rest of its process (gc.freeze): here the process runs thousands of
    commands, so that is left out; a locked store is waited for only briefly."""
    monkeypatch.setattr(_progress, "freeze_heap", lambda: None)
    monkeypatch.setattr(_store, "BUSY_TIMEOUT_S", 0.5)


#: the judge-reply property runs a loopback server round trip per case: a tenth of the profile's budget
REPLY_EXAMPLES = max(10, settings.default.max_examples // 10)
FUZZ = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much, HealthCheck.large_base_example],
                deadline=None)

# -- values -------------------------------------------------------------------------------------------
EDGE_TEXT = [
    "", " ", "\t\n", "\u200b", "\u200b\u200c\u2060\ufeff", "\u3164", "\x00", "a\x00b", "\ud800", "x\udfff y",
    "\u202eevil\u202c", "\U0001f642", "é", "ß", "İ", "\r", "a\rb", "\u2028", "../../etc/passwd", "/etc/passwd",
    "/dev/zero", "/dev/stdin", "file:///etc/passwd", "https://example.org/x.png", "ftp://example.org/x",
    "data:image/png;base64,AAAA", "data:text/html,<script>", "C:\\x", "~", "~root/x", "%s%n", "{answer}",
    "{{question}}", "NaN", "nan", "inf", "-inf", "-1", "0", "1e309", "true", "null", "None", "[", "{", "\\",
    "q1", "a1", "exam.jsonl", ".", "..", "img.png", "a" * 300,
]
text = st.one_of(
    st.sampled_from(EDGE_TEXT),
    st.text(max_size=30),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=10),
    st.builds(lambda c, n: c * n, st.sampled_from(["x", "é", "\u200b", "é\u0301"]),
              st.sampled_from([1025, 5000, 140_000])),
)
number = st.one_of(
    st.sampled_from([0, 1, 2, -1, 0.5, -0.0, 1e308, -1e308, 2**63, 2**64, -(2**63) - 1, 10**30, True, False]),
    st.integers(-(10**25), 10**25),
    st.floats(allow_nan=True, allow_infinity=True),
)
scalar = st.one_of(number, text, st.none())
value = st.one_of(
    scalar,
    st.lists(scalar, max_size=3),
    st.dictionaries(st.sampled_from(["a", "human", "x", "\ud800", ""]), scalar, max_size=2),
)
#: an object inside an object (a SciEx ``Description`` that is not a text: issue 35)
nested_object = st.dictionaries(st.sampled_from(["en", "de", "text"]), st.one_of(
    st.dictionaries(st.sampled_from(["a", "text"]), scalar, max_size=2), scalar), min_size=1, max_size=2)
DEEP = "\x01DEEP{}\x01"  # replaced in the written text by that many nested lists
LONG = "\x01LONG{}\x01"  # replaced in the written text by an integer of that many digits (issue 35)


def deep(n: int) -> str:
    return DEEP.format(n)


nesting = st.sampled_from([2, 50, 900, 1100, 5000, 100_000]).map(deep)
#: integers with more digits than Python converts (4,300) and just fewer
long_int = st.sampled_from([4000, 4299, 4301, 5000, 50_000]).map(LONG.format)


def to_json(obj: Any, ascii_only: bool) -> str:
    out = json.dumps(obj, ensure_ascii=ascii_only, allow_nan=True)
    out = re.sub(r'"\\u0001LONG(\d+)\\u0001"|"\x01LONG(\d+)\x01"', lambda m: "1" * int(m.group(1) or m.group(2)),
                 out)
    return re.sub(r'"\\u0001DEEP(\d+)\\u0001"|"\x01DEEP(\d+)\x01"',
                  lambda m: "[" * int(m.group(1) or m.group(2)) + "]" * int(m.group(1) or m.group(2)), out)


Q = {"type": "question", "id": "q1", "text": "What does DNS do?", "max_points": 2, "reference": "Names."}
A1 = {"type": "answer", "id": "a1", "question_id": "q1", "examinee": "e1", "text": "It maps names.",
      "human_score": 1}
A2 = {"type": "answer", "id": "a2", "question_id": "q1", "examinee": "e2", "text": "It encrypts.",
      "human_scores": {"g1": 0, "g2": 0.5}}
Q_FIELDS = ["id", "text", "reference", "max_points", "language", "difficulty", "exam_id", "images", "human_scale",
            "task", "meta", "type"]
A_FIELDS = ["id", "question_id", "examinee", "text", "human_scores", "human_score", "meta", "type"]


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    rec = dict(base)
    for _ in range(draw(st.sampled_from([0, 0, 0, 0, 1, 1, 2, 3]))):
        how = draw(st.sampled_from(["set", "set", "drop", "extra", "deep", "long"]))
        key = draw(st.sampled_from(fields))
        if how == "set":
            rec[key] = draw(value)
        elif how == "long":
            rec[key] = draw(long_int)
        elif how == "drop":
            rec.pop(key, None)
        elif how == "extra":
            rec[draw(text)] = draw(value)
        else:
            rec[key] = draw(nesting)
    return rec


@st.composite
def jsonl_file(draw: st.DrawFn) -> bytes:
    recs = [draw(mutated(Q, Q_FIELDS)), draw(mutated(A1, A_FIELDS)), draw(mutated(A2, A_FIELDS))]
    if draw(st.booleans()):
        recs = draw(st.permutations(recs))
    ascii_only = draw(st.booleans())
    lines = [to_json(r, ascii_only) for r in recs]
    if draw(st.integers(0, 4)) == 0:  # a raw line: junk, nesting, a cut record
        junk = draw(st.sampled_from(["{", "[1, 2]", '"x"', "null", "{'a': 1}", "\x00" * 8, "[" * 100_000,
                                     lines[0][: len(lines[0]) // 2], "NaN", "\ufeff{}"]))
        lines.insert(draw(st.integers(0, len(lines))), junk)
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 6)) == 0:  # bytes that are not UTF-8
        pos = draw(st.integers(0, len(data)))
        data = data[:pos] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"])) + data[pos:]
    return data


def grade_args(data: str, *extra: str) -> list[str]:
    return ["grade", "{d}/" + data, "--judge", "scripted", "-o", "{d}/k.db", "-q", *extra]


# -- item sets ----------------------------------------------------------------------------------------
@FUZZ
@given(data=jsonl_file(), urls=st.booleans())
def test_fuzz_jsonl_item_sets(data: bytes, urls: bool) -> None:
    extra = ["--data-opt", "allow_urls=true"] if urls else []
    run_cli({"exam.jsonl": data, "img.png": b"\x89PNG\r\n\x1a\n"}, grade_args("exam.jsonl", *extra))


CSV_COLUMNS = ["question_id", "question", "reference", "max_points", "examinee", "answer", "answer_id",
               "human_score", "human_score:ta", "human_scores", "language", "exam_id", "difficulty"]


@st.composite
def csv_file(draw: st.DrawFn) -> tuple[str, list[str]]:
    header = draw(st.lists(st.one_of(st.sampled_from(CSV_COLUMNS), text), min_size=1, max_size=8))
    if draw(st.booleans()):
        header = ["question_id", "question", "max_points", "examinee", "answer", "human_score"]
    good = {"question_id": "q1", "question": "What?", "max_points": "2", "examinee": "e", "answer": "It.",
            "human_score": "1"}
    rows = []
    for i in range(draw(st.integers(0, 3))):
        row = [good.get(h, "") if draw(st.integers(0, 2)) else str(draw(scalar)) for h in header]
        if "examinee" in header and row[header.index("examinee")] == "e":
            row[header.index("examinee")] = f"e{i}"
        rows.append(row)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(rows)
    body = buf.getvalue()
    if draw(st.integers(0, 5)) == 0:
        body += draw(st.sampled_from(['q1,"unclosed\n', "a,b\x00c\n", "x" * 140_000 + "\n", ",,,,,,,,,,\n"]))
    extra: list[str] = []
    if draw(st.integers(0, 3)) == 0:
        pairs = draw(st.lists(st.tuples(st.sampled_from([*CSV_COLUMNS, "bogus", ""]), st.one_of(
            st.sampled_from(header), text)), min_size=1, max_size=3))
        extra += ["--map", ",".join(f"{f}={c}" for f, c in pairs)]
    if draw(st.integers(0, 4)) == 0:
        extra += ["--data-opt", "delimiter=" + draw(st.sampled_from([";", "", "ab", chr(0), chr(9)]))]
    return body, extra


@FUZZ
@given(case=csv_file())
def test_fuzz_csv_tables(case: tuple[str, list[str]]) -> None:
    body, extra = case
    run_cli({"grades.csv": body}, grade_args("grades.csv", *extra))


@st.composite
def sciex_folder(draw: st.DrawFn) -> tuple[dict[str, str | bytes], Callable[[Path], None] | None]:
    qs = [{"Index": "1", "Description": "Q?"}, {"Index": "2", "Description": "R?", "Figures": []}]
    info = [{"Index": "1", "MaximumPoints": 2}, {"Index": "2", "MaximumPoints": "2,5"}]
    answers = [{"Index": "1", "Answer": "A."}, {"Index": "2", "Answer": "B."}]
    grades = [{"Index": "1", "Points": 1}]
    for obj, fields in ((qs, ["Index", "Description", "Figures", "Subquestions"]),
                        (info, ["Index", "MaximumPoints", "AverageStudentPoints", "GoldAnswerEnglish",
                                "DifficultyLabel"]),
                        (answers, ["Index", "Answer"]), (grades, ["Index", "Points"])):
        for _ in range(draw(st.integers(0, 2))):
            entry = draw(st.sampled_from(obj))
            entry[draw(st.sampled_from(fields))] = draw(st.one_of(value, nesting, nested_object))
        if draw(st.integers(0, 5)) == 0:
            obj.append(dict(obj[0]))  # a second entry with the same Index
    ascii_only = draw(st.booleans())
    files: dict[str, str | bytes] = {
        "exam/exam_en.json": to_json({"Questions": qs}, ascii_only),
        "exam/additional_info.json": to_json({"Questions": info, "MaximumTotalPoints": draw(number)}, ascii_only),
        "exam/answers/s1.json": to_json({"Questions": answers}, ascii_only),
        "exam/grades/s1_grade.json": to_json({"Questions": grades}, ascii_only),
    }
    if draw(st.booleans()):
        files["exam/answers/s2.txt"] = ("Answer to Question 1\n" + draw(text) + "\n" + "*" * 88 + "\n" + "*" * 88
                                        + "\n")
    trick = draw(st.sampled_from([None, "loop-file", "loop-folder", "loop-in-answers", "outside", "dangling"]))

    def setup(d: Path) -> None:
        if trick == "loop-file":
            (d / "exam/answers/s3.json").symlink_to("s3.json")
        elif trick == "loop-in-answers":  # an entry no pattern matches (no suffix): issue 35
            (d / "exam/answers/sub").symlink_to("sub")
        elif trick == "loop-folder":
            (d / "exam/grades/g").symlink_to("g")
        elif trick == "outside":
            (d / "exam/answers/s4.json").symlink_to("/etc/hostname")
        elif trick == "dangling":
            (d / "exam/answers/s5.json").symlink_to("nowhere.json")

    return files, setup if trick else None


@FUZZ
@given(case=sciex_folder())
def test_fuzz_sciex_folders(case: tuple[dict[str, str | bytes], Callable[[Path], None] | None]) -> None:
    files, setup = case
    run_cli(files, grade_args("exam", "--format", "sciex"), setup)


grade_value = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                        st.sampled_from([0.0, 1.0, 2.0, -3.0, 99.0]))


@FUZZ
@given(scores=st.lists(st.dictionaries(st.sampled_from(["g1", "g2", "ta"]), grade_value, min_size=1, max_size=3),
                       min_size=1, max_size=3))
def test_fuzz_parquet_human_scores(scores: list[dict[str, float | None]]) -> None:
    """A Parquet ``human_scores`` struct holding NaN, infinities, negatives and grades above the maximum
    (issue 35): refused naming the row and grader, never taken as no grade without a word."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    keys = sorted({k for s in scores for k in s})
    rows = [{k: s.get(k) for k in keys} for s in scores]
    buf = io.BytesIO()
    pq.write_table(pa.table({"question_id": ["q1"] * len(rows), "question": ["What?"] * len(rows),
                             "max_points": [2] * len(rows), "examinee": [f"e{i}" for i in range(len(rows))],
                             "answer": ["It."] * len(rows), "human_scores": pa.array(rows, from_pandas=False)}),
                   buf)
    r = run_cli({"t.parquet": buf.getvalue()}, grade_args("t.parquet"))
    if any(isinstance(v, float) and math.isnan(v) for s in scores for v in s.values()):
        assert r.code == 2 and "NaN" in r.stderr, r.stderr


EXAM_NAMES = ["x/examinee/1", "a/q/2", "nlp/2023", "a//b", "./x", "x/..", "/x", "x/", "a\x07b", "\x1b[31mred",
              "tab\there", "info", "x/info", "e" * 300, "é/ß", "\u200b"]


@FUZZ
@given(name=st.one_of(st.sampled_from(EXAM_NAMES), text), in_file=st.booleans())
def test_fuzz_exam_names(name: str, in_file: bool) -> None:
    """An exam's name, from ``import --exam`` or a question's ``exam_id`` (issue 35): refused in one line
    when it is path-like (an empty, ``.``, ``..`` or address-word part between ``/``) or holds a control
    character; otherwise imported."""
    q = {**Q, "exam_id": name} if in_file else Q
    good = "\n".join(json.dumps(r) for r in (q, A1, A2)) + "\n"
    r = run_cli({"exam.jsonl": good.encode("utf-8", "surrogatepass")},
                ["import", "{d}/exam.jsonl", "--db", "{d}/k.db", *([] if in_file else ["--exam", name])])
    parts = name.split("/")
    if not name.isprintable() or ("/" in name and any(p in ("", ".", "..", "examinee", "q", "info") for p in parts)):
        assert r.code == 2, r.stderr


@FUZZ
@given(verdicts=st.lists(st.tuples(value, value), min_size=1, max_size=4), human=st.sampled_from(["human", "label"]))
def test_fuzz_agreement_verdict_files(verdicts: list[tuple[Any, Any]], human: str) -> None:
    """``knockout agreement`` of a verdict file whose verdicts and human labels are any values, NaN and
    Infinity among them (issue 35): exit 0 with the invalid ones counted, or one line naming the record."""
    body = "".join(to_json({"id": f"x{i}", "verdict": v, human: h}, True) + "\n" for i, (v, h) in enumerate(verdicts))
    r = run_cli({"v.jsonl": body}, ["agreement", "{d}/v.jsonl", "--human", human, "--resamples", "0"])
    if any(isinstance(x, float) and not math.isfinite(x) for pair in verdicts for x in pair):
        assert r.code == 2, r.stderr


@pytest.mark.parametrize(("name", "files", "extra"), [
    ("csv-cell-over-131072", {"grades.csv": "question_id,question,max_points,examinee,answer,human_score\n"
                                            "q1,What?,2,alice," + "x" * 140_000 + ",1\n"}, []),
    ("data-image-url", {"exam.jsonl": json.dumps({**Q, "images": ["data:image/png;base64,iVBORw0KGgo="]}) + "\n"
                                      + json.dumps(A1) + "\n"}, ["--data-opt", "allow_urls=true", "--figures", "none"]),
    ("zero-width-inside-text", {"exam.jsonl": json.dumps(Q) + "\n" + json.dumps({**A1, "text": "ja\u200bwohl"})
                                              + "\n"}, []),
    ("meta-32-deep", {"exam.jsonl": json.dumps({**Q, "meta": json.loads('{"a": ' * 31 + "1" + "}" * 31)}) + "\n"
                                    + json.dumps(A1) + "\n"}, []),
])
def test_accepted_edge_cases(name: str, files: dict[str, str | bytes], extra: list[str]) -> None:
    """What issue 26 lists as accepted where that is right (the reasons: docs/data-formats.md)."""
    data = next(iter(files))
    assert run_cli(files, grade_args(data, *extra)).code == 0


# -- command-line options -----------------------------------------------------------------------------
num_text = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1", "2", "1e309", "1e-320", "99999999999999999999999",
                     "0x10", "", " ", "1_000", "\u0663", "1.5", "-0", "2147483648", "9223372036854775808"]),
    st.integers(-(10**25), 10**25).map(str),
    st.floats().map(repr),
)
GRADE_OPTIONS: dict[str, st.SearchStrategy[str]] = {
    "--temperature": num_text, "--max-tokens": num_text, "--concurrency": num_text, "--format-retries": num_text,
    "--limit": num_text, "--answers-per-question": num_text, "--shots": num_text, "--seed": num_text,
    "--top-p": num_text, "--frequency-penalty": num_text, "--samples": num_text,
    "--method": st.sampled_from(["individual", "knockout", "pairwise", "allpairs", "heapsort", "window", "bogus",
                                 "", "\ud800", "x" * 5000]),
    "--prompt": st.one_of(st.sampled_from(["auto", "bogus", "{d}/exam.jsonl", "/dev/zero", "/etc/passwd", ""]), text),
    "--shot-source": st.sampled_from(["same-question", "same-exam", "other-exam", "bogus", ""]),
    "--figures": st.sampled_from(["auto", "none", "separate", "stacked", "bogus"]),
    "--parser": st.sampled_from(["sciex-score", "bogus", ""]),
    "--map": st.one_of(st.sampled_from(["answer=answer", "answer=text,answer=x", "bogus=1", "=", ",", ""]), text),
    "--data-opt": st.one_of(st.sampled_from(["max_file_mb=nan", "max_file_mb=1e308", "max_file_mb=-1",
                                             "max_file_mb=0.000001", "allow_urls=maybe", "allow_root=/",
                                             "allow_root={d}/nope", "bogus=1", "novalue"]),
                            st.builds(lambda v: f"max_file_mb={v}", num_text)),
    "--method-opt": st.sampled_from(["rounds=nan", "bogus=1", "novalue", "seed=-1", "window=0", "window=1e309"]),
    "--judge": st.one_of(st.sampled_from(["scripted", "bogus", "", "scripted?", "scripted?noise=nan",
                                          "scripted?bias=1e308", "scripted?seed=99999999999999999999",
                                          "scripted?invalid=0.5", "scripted?concurrency=0", "scripted:\ud800",
                                          f"scripted?api_key={SECRET}", f"scripted?token={SECRET}&noise=nan",
                                          f"openai:m?base_url=http://u:{SECRET}@127.0.0.1:9/v1&timeout=nan",
                                          f"bogus:m?password={SECRET}"]),
                         st.builds(lambda k, v: f"scripted?{k}={v}",
                                   st.sampled_from(["noise", "bias", "inflation", "invalid", "seed"]), num_text)),
    "--executor": st.sampled_from(["local", "bogus", "ray?workers=nan"]),
}


@FUZZ
@given(opts=st.lists(st.sampled_from(sorted(GRADE_OPTIONS)), min_size=1, max_size=4, unique=True), data=st.data())
def test_fuzz_grade_options(opts: list[str], data: st.DataObject) -> None:
    args: list[str] = []
    for o in opts:
        args += [o, data.draw(GRADE_OPTIONS[o], label=o)]
    good = "\n".join(json.dumps(r) for r in (Q, A1, A2)) + "\n"
    run_cli({"exam.jsonl": good}, ["grade", "{d}/exam.jsonl", "-o", "{d}/k.db", "-q",
                                   *(["--judge", "scripted"] if "--judge" not in opts else []), *args])


PAIR = {"input": "Name a prime.", "output_1": "7", "output_2": "8", "label": 1}
MV = [{"evaluator": e, "item": "1", "question": "Q?", "answer1": "a", "answer2": "b", "winner": w, "label": 1}
      for e, w in (("judge-a", 1), ("judge-b", 2), ("judge-c", 1))]
MATCH = {"item": "0", "evaluator_1": "judge-a", "evaluator_2": "judge-b", "winner": "Assistant1"}
OTHER_COMMANDS: dict[str, tuple[list[str], dict[str, st.SearchStrategy[str]]]] = {
    "sbs": (["sbs", "{d}/p.jsonl", "--judge", "scripted", "-o", "{d}/k.db", "-q"],
            {"--window": num_text, "--stride": num_text, "--limit": num_text, "--temperature": num_text,
             "--max-tokens": num_text, "--top-p": num_text, "--format-retries": num_text,
             "--debate": st.sampled_from(["none", "soft", "bogus"]), "--tie": st.sampled_from(["C", "D", "Z"])}),
    "meta": (["meta", "{d}/v.jsonl", "--meta-judge", "scripted", "-o", "{d}/k.db", "-q"],
             {"--draws": num_text, "--rounds": num_text, "--max-criteria": num_text, "--truncate": num_text,
              "--k": num_text, "--shuffles": num_text, "--limit": num_text, "--seed": num_text,
              "--framework": st.sampled_from(["jdeval", "mdeval", "jdeval-i", "bsmeval", "bogus"]),
              "--self": st.one_of(st.sampled_from(["none", "judge-a"]), text)}),
    "elo": (["elo", "{d}/m.jsonl"], {"--k": num_text, "--shuffles": num_text, "--check": num_text,
                                     "--seed": num_text}),
}


@FUZZ
@given(command=st.sampled_from(sorted(OTHER_COMMANDS)), data=st.data())
def test_fuzz_other_commands(command: str, data: st.DataObject) -> None:
    base, options = OTHER_COMMANDS[command]
    opts = data.draw(st.lists(st.sampled_from(sorted(options)), min_size=1, max_size=3, unique=True))
    args = [*base]
    for o in opts:
        args += [o, data.draw(options[o], label=o)]
    files = {"p.jsonl": json.dumps(PAIR) + "\n", "v.jsonl": "".join(json.dumps(r) + "\n" for r in MV),
             "m.jsonl": json.dumps(MATCH) + "\n"}
    run_cli(files, args)


# -- experiment and jury files ------------------------------------------------------------------------
def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string (\uXXXX escapes; a lone surrogate is invalid TOML)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v if x is not None) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items() if x is not None) + " }"
    return '""'


def toml_table(name: str | None, d: dict[str, Any], array: bool = False) -> str:
    head = "" if name is None else (f"[[{name}]]\n" if array else f"[{name}]\n")
    return head + "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in d.items() if v is not None)


toml_scalar = st.one_of(number, text, st.lists(st.one_of(number, text), max_size=2))
PARAMS = ["temperature", "max_tokens", "seed", "top_p", "frequency_penalty", "stop", "bogus"]


@st.composite
def experiment_file(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["grade", "grade", "grade", "sbs", "meta", "bogus"]))
    top = {"kind": kind, "title": draw(st.one_of(st.none(), st.none(), text))}
    for k in ("concurrency", "format_retries", "root", "store"):
        if draw(st.integers(0, 4)) == 0:
            top[k] = draw(toml_scalar)
    path = {"grade": "exam.jsonl", "sbs": "p.jsonl", "meta": "v.jsonl", "bogus": "exam.jsonl"}[kind]
    data: dict[str, Any] = {"path": draw(st.one_of(st.just(path), st.sampled_from(
        ["/dev/zero", "../..", "nope.jsonl", "~", ".", "exam.jsonl/..", "/etc/passwd"]), text))
        if draw(st.integers(0, 3)) == 0 else path}
    for k in ("limit", "answers_per_question", "format", "tie", "candidate", "human", "options"):
        if draw(st.integers(0, 5)) == 0:
            data[k] = draw(st.one_of(toml_scalar, st.dictionaries(st.sampled_from(["max_file_mb", "columns", "x"]),
                                                                  toml_scalar, max_size=2)))
    maybe = st.sampled_from([0, 0, 0, 1, 2])
    params = draw(st.dictionaries(st.sampled_from(PARAMS), toml_scalar, max_size=draw(maybe)))
    judges = [{"judge": draw(st.sampled_from(["scripted", "scripted", "scripted?noise=0.2", "bogus", "",
                                              "scripted?noise=nan"]))}
              for _ in range(draw(st.sampled_from([1, 1, 2, 2, 0, 3])))]
    for j in judges:
        if draw(st.integers(0, 3)) == 0:
            j["params"] = draw(st.dictionaries(st.sampled_from(PARAMS), toml_scalar, max_size=2))
        if draw(st.integers(0, 3)) == 0:
            j[draw(st.sampled_from(["name", "prompt", "options", "model", "backend", "colour"]))] = draw(toml_scalar)
    part_key = {"grade": "methods", "sbs": "prompts", "meta": "frameworks", "bogus": "methods"}[kind]
    part_fields = {"methods": ["name", "method", "debias", "options"],
                   "prompts": ["name", "prompt", "debate", "params"],
                   "frameworks": ["name", "framework", "draws", "rounds", "max_criteria", "truncate", "k",
                                  "shuffles", "self_name", "seed", "both_orders"]}[part_key]
    parts = [draw(st.dictionaries(st.sampled_from(part_fields), toml_scalar, max_size=draw(maybe)))
             for _ in range(draw(st.sampled_from([1, 1, 2, 0])))]
    text_ = toml_table(None, top) + toml_table("data", data)
    if params:
        text_ += toml_table("params", params)
    for name, sub in (("prompt", ["prompt", "reference", "shots", "shot_source", "seed"]),
                      ("sbs", ["window", "stride"]), ("jury", ["aggregate", "trim", "name"]),
                      ("compare", ["baseline", "by", "resamples", "seed"])):
        if draw(st.integers(0, 3)) == 0:
            text_ += toml_table(name, draw(st.dictionaries(st.sampled_from(sub), toml_scalar, max_size=draw(maybe))))
    text_ += "".join(toml_table("judges", j, array=True) for j in judges)
    text_ += "".join(toml_table(part_key, p, array=True) if p else f"[[{part_key}]]\n" for p in parts)
    if draw(st.integers(0, 8)) == 0:
        text_ += draw(st.sampled_from(["x = " + "[" * 100_000, "[[[", "x = nan\nx = 1\n", "\x00", 'y = "\\ud800"\n']))
    return text_


@FUZZ
@given(exp=experiment_file(), dry=st.booleans())
def test_fuzz_experiment_files(exp: str, dry: bool) -> None:
    files: dict[str, str | bytes] = {
        "e.toml": exp, "exam.jsonl": "\n".join(json.dumps(r) for r in (Q, A1, A2)) + "\n",
        "p.jsonl": json.dumps(PAIR) + "\n", "v.jsonl": "".join(json.dumps(r) + "\n" for r in MV)}
    run_cli(files, ["run", "{d}/e.toml", "-o", "{d}/k.db", "-q", *(["--dry-run"] if dry else [])])


@st.composite
def jury_file(draw: st.DrawFn) -> str:
    top = draw(st.dictionaries(st.sampled_from(["aggregate", "trim", "bogus"]), toml_scalar,
                               max_size=draw(st.sampled_from([0, 0, 1, 2]))))
    members = []
    for _ in range(draw(st.integers(0, 3))):
        m: dict[str, Any] = {"judge": draw(st.sampled_from(["scripted", "scripted?noise=0.3", "scripted?seed=2",
                                                            "bogus", "", "scripted?delay=nan"]))}
        for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
            m[draw(st.sampled_from(["params", "name", "prompt", "options", "judge", "backend", "model", "x"]))] = (
                draw(st.dictionaries(st.sampled_from(PARAMS), toml_scalar, max_size=2)) if draw(st.booleans())
                else draw(toml_scalar))
        members.append(m)
    body = toml_table(None, top) + "".join(toml_table("member", m, array=True) for m in members)
    if draw(st.integers(0, 8)) == 0:
        body += draw(st.sampled_from(["member = 3\n", "[member]\n", "x = " + "{a = " * 50_000, "\x00"]))
    return body


@FUZZ
@given(jury=jury_file())
def test_fuzz_jury_files(jury: str) -> None:
    good = "\n".join(json.dumps(r) for r in (Q, A1, A2)) + "\n"
    run_cli({"j.toml": jury, "exam.jsonl": good}, ["grade", "{d}/exam.jsonl", "--jury", "{d}/j.toml", "-o",
                                                   "{d}/k.db", "-q"])


# -- the Python API -----------------------------------------------------------------------------------
def api_models() -> dict[str, tuple[Callable[..., Any], list[str]]]:
    from knockout.data import Answer, Question
    from knockout.judges import GenParams
    from knockout.meta import MetaConfig, MetaOptions
    from knockout.methods import MethodOptions, RunConfig
    from knockout.sbs._run import SbsConfig
    from knockout.sciex._solve import SolveConfig

    return {
        "GenParams": (GenParams, ["temperature", "max_tokens", "seed", "stop", "top_p", "frequency_penalty"]),
        "MethodOptions": (MethodOptions, ["prompt", "reference", "shots", "shot_source", "seed", "parser",
                                          "debias", "extra"]),
        "RunConfig": (RunConfig, ["method", "concurrency", "format_retries", "figures"]),
        "SbsConfig": (SbsConfig, ["prompt", "debate", "format_retries", "concurrency", "window", "stride"]),
        "MetaOptions": (MetaOptions, ["framework", "draws", "rounds", "max_criteria", "truncate", "seed"]),
        "MetaConfig": (MetaConfig, ["k", "shuffles", "self_name", "concurrency", "format_retries"]),
        "SolveConfig": (SolveConfig, ["prompt", "figures", "concurrency", "format_retries"]),
        "Question": (Question, ["id", "text", "reference", "max_points", "language", "images", "meta"]),
        "Answer": (Answer, ["id", "question_id", "examinee", "text", "human_scores", "meta"]),
    }


REQUIRED = {"Question": {"id": "q", "text": "t"}, "Answer": {"id": "a", "question_id": "q", "text": "t"}}


def finite_everywhere(obj: Any, depth: int = 0) -> bool:
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(finite_everywhere(v, depth + 1) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(finite_everywhere(v, depth + 1) for v in obj)
    return True


@FUZZ
@given(name=st.sampled_from(sorted(api_models())), data=st.data())
def test_fuzz_python_api(name: str, data: st.DataObject) -> None:
    """Built with any values, a configuration object either is within its bounds or refuses with a pydantic
    ValidationError (a ConfigError for a name that is not registered); nothing else escapes."""
    from dataclasses import asdict, is_dataclass

    factory, fields = api_models()[name]
    kwargs = dict(REQUIRED.get(name, {}))
    kwargs.update(data.draw(st.dictionaries(st.sampled_from(fields), value, max_size=3), label="kwargs"))
    try:
        obj = factory(**kwargs)
    except (ValidationError, KnockoutError):
        return
    dumped = asdict(obj) if is_dataclass(obj) else obj.model_dump()
    assert finite_everywhere(dumped), dumped
    json.dumps(dumped, default=str).encode("utf-8")  # every string can be stored
    for key in ("concurrency", "max_tokens", "window", "stride", "shuffles", "draws", "rounds"):
        if dumped.get(key) is not None:
            assert 1 <= dumped[key] <= 10**7, dumped
    for key in ("format_retries", "shots", "truncate"):
        if dumped.get(key) is not None:
            assert 0 <= dumped[key] <= 10**7, dumped


# -- the web app's forms ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from knockout.web import _auth as auth_mod
    from tests.test_web_app import CHEAP_ARGON2, build_store, client_for

    saved = dict(auth_mod.ARGON2_PARAMS)
    auth_mod.ARGON2_PARAMS.update(CHEAP_ARGON2)
    db = build_store(tmp_path_factory.mktemp("web") / "store.db")
    clients = {"alice": client_for(db, "alice"), "org": client_for(db, "org")}
    yield clients
    for c in clients.values():
        c.close()
    auth_mod.ARGON2_PARAMS.clear()
    auth_mod.ARGON2_PARAMS.update(saved)


form_text = st.one_of(num_text, text.filter(lambda t: "\ud800" not in t and "\udfff" not in t))


@FUZZ
@given(form=st.sampled_from(["grade", "info"]), data=st.data())
def test_fuzz_web_forms(web: dict[str, Any], form: str, data: st.DataObject) -> None:
    """Whatever is typed into a form, the app answers with a page or a refusal (2xx, 3xx, 4xx), never a
    server error: the form's values meet the same bounds as the files' (``knockout._bounds``)."""
    from tests.test_web_app import csrf_of

    client = web["alice" if form == "grade" else "org"]
    url = "/exam/exam-a/examinee/1/q/1" if form == "grade" else "/exam/exam-a/q/2/info"
    page = client.get(url)
    assert page.status_code == 200, page.text[:500]
    fields = ({"score": form_text, "comment": form_text, "action": st.sampled_from(["save", "next", "x"]),
               "version": num_text} if form == "grade" else
              {"max_points": form_text, "student_average": form_text, "reference": form_text,
               "difficulty": form_text})
    values = {k: data.draw(v, label=k) for k, v in fields.items() if data.draw(st.integers(0, 4), label="use " + k)}
    if form == "grade":
        m = re.search(r'name="version" value="(\d+)"', page.text)
        values.setdefault("version", m.group(1) if m else "0")
    r = client.post(url, data={"csrf": csrf_of(page.text), **values}, follow_redirects=False)
    assert r.status_code < 500, (values, r.status_code, r.text[:500])


# -- judge replies under faults -----------------------------------------------------------------------
VERDICT = re.compile(r"Score:\s*(-?\d+(?:[.,]\d+)?)")


@st.composite
def judge_reply(draw: st.DrawFn) -> tuple[str, str | None]:
    """(kind, reply text or None for a transport fault)."""
    kind = draw(st.sampled_from(["valid", "valid", "two", "range", "negative", "words", "truncated", "huge",
                                 "text-after", "no-verdict", "types", "slow", "http", "empty", "comma"]))
    n = draw(st.sampled_from([0, 1, 2, 1.5, 0.5]))
    body = draw(st.sampled_from(["The answer is right.", "Partly right.", "Score: 2/2 would be too much."]))
    replies = {
        "valid": f"{body}\nScore: {n:g}/2",
        "two": f"Score: {draw(st.sampled_from([0, 1, 2]))}/2\nScore: {n:g}/2",
        "range": f"{body}\nScore: {draw(st.sampled_from([3, 7, 100, 1e9]))}/2",
        "negative": f"{body}\nScore: -{draw(st.sampled_from([1, 2]))}/2",
        "words": f"{body}\nScore: {draw(st.sampled_from(['two', 'one', 'zero', 'full marks']))}/2",
        "truncated": f"{body}\nSco",
        "huge": f"{body}\n" + "blah " * 40_000 + f"\nScore: {n:g}/2",
        "text-after": f"Score: {n:g}/2\nBut on reflection I am not sure.",
        "no-verdict": body,
        "comma": f"{body}\nScore: 1,5/2",
        "empty": "",
    }
    return kind, replies.get(kind)


def reply_body(kind: str, text: str | None) -> tuple[int, bytes]:
    from tests.fake_server import HANG, chat_body

    if kind == "slow":
        return HANG, b""
    if kind == "http":
        return 500, b'{"error": {"message": "internal error"}}'
    if kind == "types":
        return 200, json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                "choices": [{"index": 0, "finish_reason": "stop",
                                             "message": {"role": "assistant", "content": 5}}]}).encode()
    return 200, chat_body(text or "")


def last_verdict(text: str | None) -> float | None:
    """The number of the last verdict line the fake judge wrote (``Score: N/2``), or None."""
    found = [m for ln in (text or "").splitlines() for m in VERDICT.finditer(ln)]
    return float(found[-1].group(1).replace(",", ".")) if found else None


@pytest.fixture(scope="module")
def fake_judge() -> Iterator[Any]:
    from tests.fake_server import fake_api

    state: dict[str, Any] = {"replies": {}}

    def answer(body: dict[str, Any], n: int) -> tuple[int, bytes]:
        content = json.dumps(body.get("messages"))
        m = re.search(r"ANSWER-(\d+)-", content)
        kind, text = state["replies"].get(int(m.group(1)) if m else -1, ("no-verdict", "What answer?"))
        state.setdefault("sent", []).append((int(m.group(1)) if m else -1, kind, text))
        return reply_body(kind, text)

    with fake_api(answer, hang_s=1.5) as server:
        yield server, state


@settings(FUZZ, max_examples=REPLY_EXAMPLES)
@given(replies=st.lists(judge_reply(), min_size=1, max_size=5), retries=st.sampled_from([0, 1]))
def test_fuzz_judge_replies(fake_judge: Any, replies: list[tuple[str, str | None]], retries: int) -> None:
    """A reply is a valid grade only when it is within 0..max and is the number the judge wrote as its
    last verdict line; anything else is counted invalid (or failed), and the summary says so."""
    server, state = fake_judge
    state["replies"] = dict(enumerate(replies))
    state["sent"] = []
    rows = [Q] + [{"type": "answer", "id": f"a{i}", "question_id": "q1", "examinee": f"e{i}",
                   "text": f"ANSWER-{i}- the answer of examinee {i}"} for i in range(len(replies))]
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        d = Path(tmp)
        (d / "exam.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        with time_bound(CASE_S):
            r = CliRunner().invoke(app, [
                "grade", str(d / "exam.jsonl"), "--judge", "openai:fake", "--judge-opt", f"base_url={server.url}",
                "--judge-opt", "timeout=0.5", "--judge-opt", "retries=0", "--judge-opt", "backoff=0",
                "--format-retries", str(retries), "--concurrency", "4", "-o", str(d / "k.db"), "--json", "-q",
                "--readers", "judge"])  # the parse is tested: the judge's own grade, not the grade model's
        shown = f"replies: {[(k, (t or '')[:80]) for k, t in replies]}\nexit {r.exit_code}\n{r.stderr[-2000:]}"
        if r.exception is not None and not isinstance(r.exception, SystemExit):
            import traceback

            pytest.fail("traceback:\n" + "".join(traceback.format_exception(r.exception)) + shown)
        assert r.exit_code in (0, 1, 3), shown
        con = sqlite3.connect(d / "k.db")
        try:
            (status,) = con.execute("SELECT status FROM runs").fetchone()
            results = con.execute("SELECT item_id, score, valid FROM results").fetchall()
        finally:
            con.close()
    sent: dict[int, list[str | None]] = {}
    for idx, kind, text in state["sent"]:
        sent.setdefault(idx, []).append(None if kind in ("slow", "http", "types") else text)
    valid = 0
    for item_id, score, ok in results:
        i = int(item_id.removeprefix("a"))
        if not ok:
            continue
        valid += 1
        written = [last_verdict(t) for t in sent.get(i, [])]
        assert score is not None and 0 <= score <= 2, shown
        assert score in [w for w in written if w is not None], f"answer {i}: {score} not written last\n{shown}"
    if r.exit_code in (0, 3):  # 3: requests failed for good (HTTP 500, time-outs): the run is incomplete
        summary = json.loads(r.stdout)
        assert status == ("complete" if r.exit_code == 0 else "incomplete") == summary["status"], shown
        assert (summary["failed"] > 0) == (r.exit_code == 3), shown
        assert summary["valid"] == valid and summary["invalid"] == len(results) - valid, shown
        assert summary["answers"] == len(replies), shown
        if r.exit_code == 3:
            (line,) = [ln for ln in r.stderr.splitlines() if ln.strip()]
            assert "failed for good" in line and "retry only those with: " in line, shown  # launcher: any path
    else:  # the run failed, or no answer got a valid grade (its status says whether requests failed)
        assert status == "failed" or (status in ("complete", "incomplete") and valid == 0), shown


def test_negative_verdict_is_no_grade() -> None:
    """Found by the fuzzer (issue 26) and by the attacker of issue 28: 'Score: -1/2' was read as 1."""
    from knockout.prompts._parsers import parse_score

    parsed = parse_score("The answer is right.\nScore: -1/2", 2.0)
    assert not parsed.ok and "outside" in (parsed.error or "")
