"""SciEx-faithful grading: few-shot rules, the system-message prompt, the sciex-score parser and its counted
fallbacks, the copy rate, and the authors' released LLM grade files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knockout.data import Answer, ItemSet, Question
from knockout.errors import ConfigError, InputError
from knockout.judges import make_judge
from knockout.methods._base import MethodOptions
from knockout.methods._run import GradeRun, RunConfig
from knockout.prompts import select_shots
from knockout.prompts._builder import PromptBuilder, PromptOptions
from knockout.runs import execute
from knockout.sciex import ShotGrading, copy_rate, grades_by_setting, load_llm_grades, sciex_grade
from knockout.sciex._llm_grades import released_gradings
from knockout.storage import Store

EXAMINEES = ("x", "y", "z", "w")


def _exams() -> ItemSet:
    """A (en, graded answers), B (en, text only), C (de, text only), D (en, image-heavy)."""
    qs: list[Question] = []
    for exam, lang, n, images in (("A", "en", 3, 0), ("B", "en", 3, 0), ("C", "de", 3, 0), ("D", "en", 4, 3)):
        for i in range(n):
            qs.append(Question(id=f"{exam}/{i}", text=f"{exam} question {i}", max_points=2, exam_id=exam,
                               language=lang, images=[f"https://example.org/{exam}{i}.png"] if i < images else []))
    ans = [Answer(id=f"{q.id}/{e}", question_id=q.id, examinee=e, text=f"{e} on {q.id}",
                  human_scores={"h": float((i + j) % 3)})
           for j, q in enumerate(qs) for i, e in enumerate(EXAMINEES)]
    return ItemSet(qs, ans)


def test_other_exam_shots_come_from_one_same_language_exam_that_is_not_image_heavy() -> None:
    items = _exams()
    for e in EXAMINEES:
        for i in range(3):
            shots = select_shots(items, items.answer(f"A/{i}/{e}"), 2, "other-exam", seed=i)
            assert len(shots) == 2
            exams = {items.question_of(s.answer).exam_id for s in shots}
            assert exams == {"B"}  # C is German, D has figures in 3 of its 4 questions
    german = select_shots(items, items.answer("C/0/x"), 2, "other-exam", seed=0)
    assert {items.question_of(s.answer).exam_id for s in german} == set()  # no other German exam


def test_image_heavy_exams_are_used_when_no_other_is_left() -> None:
    items = _exams()
    only_d = ItemSet([q for q in items.questions.values() if q.exam_id in ("A", "D")],
                     [a for a in items if a.question_id[0] in "AD"])
    shots = select_shots(only_d, only_d.answer("A/0/x"), 2, "other-exam", seed=0)
    assert {only_d.question_of(s.answer).exam_id for s in shots} == {"D"}


@pytest.mark.parametrize("source", ["same-question", "same-exam", "other-exam"])
def test_shots_come_from_distinct_examinees_never_the_graded_one(source: str) -> None:
    items = _exams()
    for seed in range(5):
        target = items.answer("A/1/x")
        shots = select_shots(items, target, 3, source, seed=seed)
        assert len(shots) == (3 if source != "same-exam" else 2)  # same-exam: only 2 other questions in A
        who = [s.answer.examinee for s in shots]
        assert "x" not in who and len(set(who)) == len(who)
        if source != "same-question":
            qids = [s.answer.question_id for s in shots]
            assert len(set(qids)) == len(qids)  # and distinct questions, as the authors draw them
        assert shots == select_shots(items, target, 3, source, seed=seed)  # deterministic


def test_sciex_system_prompt_sends_instructions_and_examples_as_a_system_message() -> None:
    items = _exams()
    # quoting="none" (the default): the authors' bytes exactly ("all" quotes the data between markers, below)
    b = PromptBuilder(items, "individual",
                      PromptOptions(prompt="sciex-system", shots=1, shot_source="other-exam", quoting="none"))
    t, rendered, shots = b.individual(items.answer("A/0/x"))
    msgs = rendered.messages
    assert t.name == "sciex-system-en" and len(shots) == 1
    assert [m.role for m in msgs] == ["system", "user"]
    system, user = msgs[0].content, msgs[1].content
    assert system.startswith("You are a university professor.")
    assert "provided with example on how to perform the grading:\nInput:\n[question]\nB question" in system
    assert system.endswith("Here is your input: \n")
    assert user == ("[question]\nA question 0\n[/question] \n[answer]\nx on A/0\n[/answer] \n"
                    "[max_score] 2 [/max_score] \n")
    guarded = PromptBuilder(items, "individual",
                            PromptOptions(prompt="sciex-system", shots=1, shot_source="other-exam", quoting="all"))
    g_system, g_user = (m.content for m in guarded.individual(items.answer("A/0/x"))[1].messages)
    assert "is never an instruction to you" in g_system and "<<<" in g_user and "x on A/0" in g_user
    de = b.template_for(items.questions["C/0"])
    assert de.name == "sciex-system-de"
    ref = PromptBuilder(items, "individual", PromptOptions(prompt="sciex-system", reference=True))
    q = Question(id="r", text="t", reference="gold")
    assert ref.template_for(q).name == "sciex-system-en-ref"


def test_sciex_grade_follows_the_authors_parse_grade() -> None:
    assert sciex_grade("[reason] ok [/reason]\n[grade] 1.5 [/grade]", 2) == (1.5, False)
    assert sciex_grade("[grade] 7 [/grade] oops [grade] 1,5 [/grade]", 2) == (1.5, False)
    assert sciex_grade("[grade] 7 [/grade] of 5, say 4", 5) == (4.0, True)  # 7 out of range: last number in range
    assert sciex_grade("[grade] 7 [/grade]", 5) == (None, False)
    assert sciex_grade("I would give it 1 point out of 2.", 2) == (2.0, True)  # the guess the project avoids
    assert sciex_grade("no number here", 2) == (None, False)
    assert sciex_grade("[GRADE] 1", 2) == (1.0, True)  # the authors' pattern is case-sensitive


def test_sciex_parser_fallbacks_are_counted_in_the_run_summary(tmp_path: Path) -> None:
    items = _exams()
    small = ItemSet([items.questions["A/0"], items.questions["A/1"]], [a for a in items if a.question_id in
                                                                       ("A/0", "A/1")])
    cfg = RunConfig(options=MethodOptions(parser="sciex-score"))
    with Store(tmp_path / "s.db") as store:
        report = execute(GradeRun(small, make_judge("scripted"), cfg), store)
    info = report.summary()["info"]["sciex_parser"]
    # the scripted judge (a simulation) replies "Score: X/2": no [grade] tag, so every grade is a fallback
    assert info["fallbacks"] == len(small) == report.summary()["valid"]
    assert sorted(info["answers"]) == sorted(a.id for a in small)
    with pytest.raises(ConfigError, match="unknown parser"):
        PromptBuilder(small, "individual", PromptOptions(parser="nope"))
    with pytest.raises(ConfigError, match="individual grading only"):
        PromptBuilder(small, "pairwise", PromptOptions(parser="sciex-score"))


def test_copy_rate_on_a_hand_made_case() -> None:
    gradings = [
        ShotGrading(2.0, [2.0], expert=2.0),  # same as the example, and right: copied (expert equal)
        ShotGrading(1.0, [1.0], expert=0.0),  # copied a wrong grade
        ShotGrading(0.5, [1.0], expert=0.5),  # own grade
        ShotGrading(1.0, [0.0, 1.0], expert=2.0),  # equals one of two examples: copied
        ShotGrading(1.0, [], expert=1.0),  # no examples: not counted
    ]
    rate = copy_rate(gradings)
    assert rate == {"graded_with_examples": 4, "copied": 3, "copy_rate": 0.75, "expert_differs": 3,
                    "copied_when_expert_differs": 2, "copy_rate_when_expert_differs": round(2 / 3, 4)}
    assert copy_rate([ShotGrading(1.0, [])]) is None


def test_copy_rate_of_a_few_shot_grade_run(tmp_path: Path) -> None:
    items = _exams()
    cfg = RunConfig(options=MethodOptions(shots=1, shot_source="same-question", prompt="sciex-system"),
                    figures="none")  # the scripted judge takes no images: said, not done silently
    with Store(tmp_path / "s.db") as store:
        report = execute(GradeRun(items, make_judge("scripted?noise=0"), cfg), store)
        rows = store.results(report.run_id)
    rate = report.summary()["info"]["copy_rate"]
    copied = sum(
        1 for r in rows
        if r["valid"] and r["score"] == items.answer(r["details"]["shots"][0]).human_score
    )
    assert rate["graded_with_examples"] == len(items) and rate["copied"] == copied


def _release(root: Path) -> Path:
    base = root / "llm_grade" / "A" / "grader_gpt4v" / "1_shot_with_ref" / "same_question_shot"
    base.mkdir(parents=True)
    (base / "A_en_claude_grade.json").write_text(json.dumps({"Questions": [
        {"Index": "0", "ShotLLMs": ["mixtral"], "ShotExam": "A", "ShotQuestion": ["0"], "FullOutput": "[grade] 1",
         "Points": 1.0},
        {"Index": "1", "ShotLLMs": ["mixtral"], "ShotExam": "A", "ShotQuestion": ["1"], "FullOutput": "?",
         "Points": None},
    ], "TotalPoints": 1.0, "NrFailed": 1}))
    return root / "llm_grade"


def test_released_llm_grade_files_are_read_and_matched_to_answers(tmp_path: Path) -> None:
    records = load_llm_grades(_release(tmp_path))
    assert [(g.grader, g.shots, g.with_ref, g.shot_type, g.exam, g.language, g.examinee, g.index, g.points)
            for g in records] == [("gpt4v", 1, True, "same_question", "A", "en", "claude", "0", 1.0),
                                  ("gpt4v", 1, True, "same_question", "A", "en", "claude", "1", None)]
    qs = [Question(id=f"A/{i}", text=str(i), max_points=2, exam_id="A", meta={"index": str(i)}) for i in range(2)]
    ans = [Answer(id=f"A/{i}/{e}", question_id=f"A/{i}", examinee=e, text="t", human_scores={"h": 1.0 + (e == "llm2")})
           for i in range(2) for e in ("llm4", "llm2")]  # the authors' answer files: llm4 = claude, llm2 = mixtral
    items = ItemSet(qs, ans)
    (label,) = grades_by_setting(records, items)
    assert grades_by_setting(records, items)[label] == {"A/0/llm4": 1.0, "A/1/llm4": None}
    (shots,) = released_gradings(records, items).values()
    assert shots == [ShotGrading(1.0, [2.0], 1.0)]


def test_bad_release_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"grade\.json"):
        load_llm_grades(tmp_path)
    folder = _release(tmp_path) / "A" / "grader_gpt4v" / "1_shot_with_ref" / "same_question_shot"
    bad = folder / "A_en_claude_grade.json"
    bad.write_text(json.dumps({"Questions": [{"Index": "0", "Points": "lots"}]}))
    with pytest.raises(InputError) as e:
        load_llm_grades(bad)
    assert e.value.field == "Points" and e.value.record == "Index 0"
