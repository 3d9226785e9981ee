"""The one-call notebook API (knockout.grade / grade_async) and docs/notebook.ipynb, executed.

Judges: scripted (a SIMULATION: grades from the human grades plus noise, not an LLM)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

import knockout
from knockout.errors import ConfigError, InputError
from knockout.judges import make_judge
from knockout.storage._store import Store
from tests.conftest import ROOT

pd = pytest.importorskip("pandas")

NOTEBOOK = ROOT / "docs" / "notebook.ipynb"
COLUMNS = {"question_id": "qid", "question": "prompt", "max_points": "points", "examinee": "student",
           "answer": "response", "human_score": "teacher"}


def exam() -> Any:
    return pd.DataFrame({
        "qid": ["dns"] * 3 + ["tcp"] * 3,
        "prompt": ["What does DNS do?"] * 3 + ["How is TCP reliable?"] * 3,
        "points": [2] * 3 + [3] * 3,
        "student": ["ana", "ben", "cem"] * 2,
        "response": ["Names to addresses.", "A name hierarchy.", "It encrypts.", "Acks and retransmission.",
                     "Sequence numbers.", "It sends twice."],
        "teacher": [2, 1.5, 0, 3, 2, 0],
    }, index=[10, 11, 12, 20, 21, 22])


def test_the_users_columns_come_back_with_the_grades_added(tmp_path: Path) -> None:
    df = exam()
    out = knockout.grade(df, judge="scripted", columns=COLUMNS, language="en", store=tmp_path / "s.db")
    assert list(out.columns) == [*df.columns, "grade", "valid", "explanation", "human_grade"]
    assert list(out.index) == list(df.index)
    assert out[list(df.columns)].equals(df)  # not renamed (student stays student), not reordered
    assert out["valid"].all() and out["explanation"].str.len().gt(0).all()
    assert ((out["grade"] >= 0) & (out["grade"] <= out["points"])).all()
    assert out["human_grade"].tolist() == df["teacher"].astype(float).tolist()
    assert "examinee" not in out.columns and "answer" not in out.columns
    info = out.attrs["knockout"]
    assert info["simulated_judge"] and info["method"] == "individual" and info["agreement"]["pearson"] > 0.5
    assert df.attrs == {}  # the user's frame is left as it was


def test_rerun_hits_the_cache_and_the_session_store_is_kept(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    first = knockout.grade(exam(), judge="scripted", columns=COLUMNS, language="en", store=db)
    again = knockout.grade(exam(), judge="scripted", columns=COLUMNS, language="en", store=db)
    assert first.attrs["knockout"]["stats"]["judge_calls"] == 6
    assert again.attrs["knockout"]["stats"]["judge_calls"] == 0
    assert again["grade"].tolist() == first["grade"].tolist()
    with Store(db) as store:  # the run is an ordinary grade run: knockout report reads it
        assert store.get_run(first.attrs["knockout"]["run_id"]).status == "complete"
    # store=None: one temporary store per process, so a notebook's rerun is a cache hit too
    a = knockout.grade(exam(), judge="scripted?seed=7", columns=COLUMNS, language="en")
    b = knockout.grade(exam(), judge="scripted?seed=7", columns=COLUMNS, language="en")
    assert a.attrs["knockout"]["store"] == b.attrs["knockout"]["store"]
    assert b.attrs["knockout"]["stats"]["judge_calls"] == 0


def test_invalid_replies_are_marked_and_explained(tmp_path: Path) -> None:
    out = knockout.grade(exam(), judge="scripted?invalid=0.5&seed=3", columns=COLUMNS, language="en",
                         format_retries=0, store=tmp_path / "s.db")
    bad, good = out[~out["valid"]], out[out["valid"]]
    assert len(bad) and len(good)
    assert bad["grade"].isna().all() and good["grade"].notna().all()
    assert bad["explanation"].str.len().gt(0).all()  # the unreadable reply, as the judge wrote it


def test_pairwise_explanations_name_the_opponent_and_order(tmp_path: Path) -> None:
    out = knockout.grade(exam(), judge="scripted", method="knockout", debias=True, columns=COLUMNS,
                         language="en", store=tmp_path / "s.db")
    assert out.attrs["knockout"]["method"] == "knockout"
    for text, student in zip(out["explanation"], out["student"], strict=True):
        assert "[vs " in text and "shown first" in text and "shown second" in text
        assert f"[vs {student}," not in text


def test_a_list_of_dicts_comes_back_as_a_list_of_dicts(tmp_path: Path) -> None:
    rows = [{"question_id": "q1", "question": "2+2?", "answer": a, "max_points": 1, "language": "en",
             "mark": m} for a, m in (("4", 1), ("5", 0))]
    rows.insert(1, {})  # an empty row gives no answer and comes back empty
    out = knockout.grade(rows, judge="scripted", columns={"human_score:ta": "mark"}, store=tmp_path / "s.db")
    assert isinstance(out, list) and len(out) == 3
    assert out[0]["answer"] == "4" and out[0]["mark"] == 1 and out[0]["valid"] is True
    assert out[1] == {"grade": None, "valid": None, "explanation": None, "human_grade": None}
    assert set(out[2]) == {*rows[2], "grade", "valid", "explanation", "human_grade"}


def test_sync_call_inside_a_running_event_loop_and_the_async_form(tmp_path: Path) -> None:
    async def cell() -> tuple[Any, Any]:
        asyncio.get_running_loop()  # as in Jupyter
        sync = knockout.grade(exam(), judge="scripted", columns=COLUMNS, language="en", store=tmp_path / "a.db")
        awaited = await knockout.grade_async(exam(), judge="scripted", columns=COLUMNS, language="en",
                                             store=tmp_path / "b.db")
        return sync, awaited

    sync, awaited = asyncio.run(cell())
    assert sync["grade"].tolist() == awaited["grade"].tolist()
    assert awaited.attrs["knockout"]["stats"]["judge_calls"] == 6


def test_language_and_max_points_are_never_assumed(tmp_path: Path) -> None:
    df = exam()
    with pytest.raises(ConfigError, match=r"no language: pass language='en'") as e:
        knockout.grade(df, judge="scripted", columns=COLUMNS, store=tmp_path / "s.db")
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="no max_points: pass max_points="):
        knockout.grade(df.drop(columns="points"), judge="scripted",
                       columns={k: v for k, v in COLUMNS.items() if k != "max_points"}, language="en")
    with pytest.raises(ConfigError, match="language is given twice: the column 'lang'"):
        knockout.grade(df.assign(lang="en"), judge="scripted", columns={**COLUMNS, "language": "lang"},
                       language="de")
    blank = df.assign(lang=["de", "de", "de", None, None, None])  # tcp has none
    with pytest.raises(ConfigError, match="question 'tcp' has no language"):
        knockout.grade(blank, judge="scripted", columns={**COLUMNS, "language": "lang"})
    with pytest.raises(ConfigError, match="language="):
        knockout.grade(df, judge="scripted", columns=COLUMNS, language="")
    with pytest.raises(InputError, match="no column 'lang'"):  # a mapped column that is not there
        knockout.grade(df, judge="scripted", columns={**COLUMNS, "language": "lang"})
    # taken from the data: a language column per question, max points as given
    out = knockout.grade(df.drop(columns="points").assign(lang=["de"] * 3 + ["en"] * 3), judge="scripted",
                         columns={**{k: v for k, v in COLUMNS.items() if k != "max_points"}, "language": "lang"},
                         max_points=3, store=tmp_path / "s.db")
    assert out["valid"].all() and out["grade"].max() <= 3


def test_bad_calls_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="already has a column 'grade'"):
        knockout.grade(exam().assign(grade=1), judge="scripted", columns=COLUMNS, language="en")
    out = knockout.grade(exam().assign(grade=1), judge="scripted", columns=COLUMNS, language="en",
                         prefix="judge_", store=tmp_path / "s.db")
    assert {"grade", "judge_grade", "judge_explanation"} <= set(out.columns)
    with pytest.raises(ConfigError, match="has no option 'bogus'"):
        knockout.grade(exam(), judge="scripted", columns=COLUMNS, language="en", bogus=1, store=tmp_path / "x.db")
    with pytest.raises(ConfigError, match="unknown method"):
        knockout.grade(exam(), judge="scripted", method="nope", columns=COLUMNS, language="en")
    with pytest.raises(ConfigError, match="DataFrame or a list of dicts"):
        knockout.grade("exam.csv", judge="scripted")


def test_a_judge_object_is_used_and_left_open(tmp_path: Path) -> None:
    judge = make_judge("scripted")
    with Store(tmp_path / "s.db") as store:
        one = knockout.grade(exam(), judge=judge, columns=COLUMNS, language="en", store=store)
        two = knockout.grade(exam(), judge=judge, columns=COLUMNS, language="en", store=store)
    assert one["grade"].tolist() == two["grade"].tolist()
    assert one.attrs["knockout"]["store"] is None  # a Store given: its path is the caller's


# -- docs/notebook.ipynb, executed ----------------------------------------------------------------
def _code_cells() -> list[str]:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def test_notebook_script_form_runs_inside_a_running_event_loop(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    """The notebook's code cells, one after the other in one namespace, inside a running event loop (as
    Jupyter runs them), with the scripted judge."""
    monkeypatch.setenv("KNOCKOUT_NOTEBOOK_JUDGE", "scripted")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}

    async def kernel() -> None:
        for source in _code_cells():
            exec(compile(source, str(NOTEBOOK), "exec"), namespace)

    asyncio.run(kernel())
    graded, ko = namespace["graded"], namespace["ko"]
    assert {"student", "response", "teacher", "grade", "valid", "explanation", "human_grade"} <= set(graded.columns)
    assert graded["valid"].all() and graded.attrs["knockout"]["simulated_judge"]
    assert graded.attrs["knockout"]["agreement"]["pearson"] > 0.5
    assert ko.attrs["knockout"]["method"] == "knockout" and ko["grade"].notna().all()


def test_notebook_executes_in_a_jupyter_kernel(tmp_path: Path) -> None:
    """docs/notebook.ipynb run by nbclient in a real IPython kernel (the extra `test` installs both)."""
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    env = {**os.environ, "KNOCKOUT_NOTEBOOK_JUDGE": "scripted",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=env)  # a cell that raises fails here (CellExecutionError)
    text = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert "Pearson r with the teacher" in text and "simulated: True" in text
    assert "explanation" in text
    assert "error" not in {o.get("output_type") for c in nb.cells for o in c.get("outputs", [])}
