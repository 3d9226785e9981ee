"""Presets, user templates and few-shot selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.prompts import get_template, load_template_file, presets, render, select_shots
from knockout.prompts._builder import PromptBuilder, PromptOptions


def test_every_preset_has_a_citation_and_loads() -> None:
    ps = presets()
    for name in [
        "knockout-individual-en", "knockout-individual-de", "knockout-individual-en-ref",
        "knockout-individual-de-ref", "knockout-individual-mt", "knockout-pairwise-en",
        "knockout-pairwise-de", "knockout-pairwise-en-ref", "knockout-pairwise-de-ref",
        "knockout-pairwise-mt", "sciex-en", "sciex-de", "sciex-en-ref", "sciex-de-ref",
    ]:
        assert name in ps, name
        assert ps[name].citation, name
    assert "Sandan" in ps["knockout-individual-en"].citation
    assert "SciEx" in ps["sciex-de"].citation


def test_render_fills_values_verbatim_and_escapes() -> None:
    text = render("Q: {question} {{literal}} max {max_points}", {"question": "a {answer} b", "max_points": "4"})
    assert text == "Q: a {answer} b {literal} max 4"


def test_user_template_txt_and_toml(tmp_path: Path) -> None:
    txt = tmp_path / "mine.txt"
    txt.write_text("Grade {answer} to {question} out of {max_points}. Say Score: X/{max_points}")
    t = load_template_file(txt)
    assert t.kind == "individual" and t.parser == "score" and t.name == "mine"
    toml = tmp_path / "pair.toml"
    toml.write_text('name = "pair"\ncitation = "me"\ntemplate = """{question} A: {answer1} B: {answer2}"""\n')
    t2 = get_template(str(toml))
    assert t2.kind == "pairwise" and t2.parser == "pairwise" and t2.citation == "me"


def test_user_template_unknown_placeholder(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("Grade {answr} for {question}")
    with pytest.raises(ConfigError, match=r"unknown placeholder \{answr\}"):
        load_template_file(bad)


def test_unknown_prompt() -> None:
    with pytest.raises(ConfigError, match="unknown prompt"):
        get_template("no-such-preset")


def _exam() -> ItemSet:
    qs = [
        Question(id="A/1", text="q1", max_points=2, exam_id="A", reference="r1"),
        Question(id="A/2", text="q2", max_points=2, exam_id="A"),
        Question(id="B/1", text="q3", max_points=4, exam_id="B", language="de"),
    ]
    ans = [
        Answer(id=f"{q.id}:{e}", question_id=q.id, examinee=e, text=f"{e} on {q.id}",
               human_scores={"g": 1.0})
        for q in qs
        for e in ("x", "y", "z")
    ]
    return ItemSet(qs, ans)


@pytest.mark.parametrize(("source", "expected"), [("same-question", 2), ("same-exam", 1), ("other-exam", 0)])
def test_shots_follow_sciex_rules(source: str, expected: int) -> None:
    items = _exam()
    target = items.answer("A/1:x")
    shots = select_shots(items, target, 2, source, seed=1)
    # same-exam: one other question in A (shots come from distinct questions); other-exam: B is German, A English
    assert len(shots) == expected
    for s in shots:
        assert s.answer.id != target.id
        assert s.answer.examinee != "x"
        q = items.question_of(s.answer)
        if source == "same-question":
            assert q.id == "A/1"
        else:
            assert q.id != "A/1" and q.exam_id == "A"
    assert [s.answer.id for s in shots] == [s.answer.id for s in select_shots(items, target, 2, source, seed=1)]


def test_shots_render_into_sciex_prompt_without_own_grade() -> None:
    items = _exam()
    b = PromptBuilder(items, "individual", PromptOptions(shots=2, shot_source="same-question", reference=True))
    t, msgs, shot_ids = b.individual(items.answer("A/1:x"))
    assert t.name == "sciex-en-ref"
    text = msgs[-1].content
    assert text.count("[grade] 1 [/grade]") == 2  # two examples with their human grades
    assert "A/1:x" not in shot_ids and len(shot_ids) == 2
    assert text.rstrip().endswith("[max_score] 2 [/max_score]")


def test_auto_preset_by_language_task_and_reference() -> None:
    items = _exam()
    b = PromptBuilder(items, "individual", PromptOptions(reference=True))
    assert b.template_for(items.questions["A/1"]).name == "knockout-individual-en-ref"
    assert b.template_for(items.questions["A/2"]).name == "knockout-individual-en"  # no reference there
    assert b.template_for(items.questions["B/1"]).name == "knockout-individual-de"
    mt = Question(id="s1", text="Hello", max_points=100, task="mt")
    assert b.template_for(mt).name == "knockout-individual-mt"
