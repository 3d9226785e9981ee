"""No silent degradation: few-shot with fewer examples, figures a judge cannot see, a language without its
preset.  The judge is the scripted one: a simulation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from knockout.cli import register_extensions
from knockout.cli._main import app
from knockout.data import Answer, ItemSet, Question, load_items
from knockout.errors import ConfigError, InputError
from knockout.judges import make_judge
from knockout.methods._base import MethodOptions
from knockout.methods._run import GradeRun, RunConfig
from knockout.runs import execute
from knockout.storage import Store

FIX = Path(__file__).parent / "fixtures"
TINY = FIX / "sciex" / "tiny_exam"


if "solve" not in {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}:
    register_extensions(app)


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def one_line_error(res: Any) -> str:
    """The refusal: exit code 2 and one line on stderr."""
    text = res.stderr.strip()
    assert res.exit_code == 2, res.output
    assert len(text.splitlines()) == 1, text
    return text


def two_languages() -> ItemSet:
    """Exam E (English) and exam G (German), three examinees with expert grades each."""
    qs = [Question(id=f"{e}/{i}", text=f"{e} question {i}", max_points=2, exam_id=e, language=lang)
          for e, lang in (("E", "en"), ("G", "de")) for i in range(2)]
    ans = [Answer(id=f"{q.id}/{w}", question_id=q.id, examinee=w, text=f"{w} on {q.id}",
                  human_scores={"h": float(k % 3)}) for q in qs for k, w in enumerate(("x", "y", "z"))]
    return ItemSet(qs, ans)


# -- 1. fewer shots ----------------------------------------------------------------------------------------
def test_other_exam_shots_without_a_same_language_exam_are_refused() -> None:
    items = two_languages()
    run = GradeRun(items, make_judge("scripted"), RunConfig(options=MethodOptions(shots=2, shot_source="other-exam")))
    with pytest.raises(ConfigError) as e:
        run.check()
    msg = str(e.value)
    assert "\n" not in msg and "--allow-fewer-shots" in msg and "12 of 12 answers" in msg and "language 'en'" in msg


def test_allow_fewer_shots_records_and_labels_what_was_used(tmp_path: Path) -> None:
    from knockout.sciex._leaderboard import gather

    items = two_languages()
    db = tmp_path / "s.db"
    with Store(db) as store:
        one = execute(GradeRun(items, make_judge("scripted"),
                               RunConfig(options=MethodOptions(shots=1, shot_source="same-question"))), store)
        two = execute(GradeRun(items, make_judge("scripted"),
                               RunConfig(options=MethodOptions(shots=2, shot_source="other-exam",
                                                               allow_fewer_shots=True))), store)
    assert one.info["shots"] == {"requested": 1, "source": "same-question", "per_answer": {"1": 12}, "fewer": 0,
                                 "prompts": {"sciex-de": 6, "sciex-en": 6}}
    used = two.info["shots"]
    assert used["per_answer"] == {"0": 12} and used["fewer"] == 12 and used["allow_fewer"] is True
    assert all(r.details["shots"] == [] for r in two.results)
    labels = {j.key: j.label for j in gather(db).judges}
    assert "1-shot same-question · de+en" in labels[one.run_id].replace(", ", " · ")
    assert "2-shot other-exam requested, used 0 for 12 of 12 answers" in labels[two.run_id]
    # the option is part of a run's identity only when given: a run without it keeps its id
    plain = GradeRun(items, make_judge("scripted"), RunConfig())
    assert "allow_fewer_shots" not in plain.identity()["options"]


def test_shot_refusal_on_the_command_line_and_the_labelled_run(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    n = len(load_items(TINY))  # one English exam: no other exam for other-exam shots
    base = ["grade", str(TINY), "--judge", "scripted", "--figures", "none", "-o", str(db), "-q"]
    text = one_line_error(cli(*base, "--shots", "2", "--shot-source", "other-exam"))
    assert "--allow-fewer-shots" in text and f"{n} of {n} answers would get fewer examples" in text
    res = cli(*base, "--shots", "2", "--shot-source", "other-exam", "--allow-fewer-shots", "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["info"]["shots"]["per_answer"] == {"0": n}
    table = cli(*base, "--shots", "2", "--shot-source", "other-exam", "--allow-fewer-shots")
    flat = " ".join(table.stdout.replace("│", " ").split())  # a wrapped cell reads on in the next line
    assert f"few-shot 2-shot other-exam requested, used 0 for {n} of {n} answers" in flat


def test_figures_a_text_only_judge_cannot_see_are_refused_or_left_out_on_request(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    text = one_line_error(cli("grade", str(TINY), "--judge", "scripted", "-o", str(db), "-q"))
    assert "takes no images" in text and "--figures none" in text and "tiny_exam/1" in text
    res = cli("grade", str(TINY), "--judge", "scripted", "--figures", "none", "-o", str(db), "-q", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["info"]["figures_left_out"] == 2  # the two figures of the exam
    board = cli("leaderboard", str(db), "--json", "--resamples", "0")
    assert "figures left out: 2" in json.loads(board.stdout)["judges"][0]["label"]


def test_a_language_without_its_preset_is_refused_unless_a_prompt_is_chosen(tmp_path: Path) -> None:
    q = Question(id="F/1", text="Qu'est-ce qu'un graphe ?", max_points=2, exam_id="F", language="fr")
    items = ItemSet([q], [Answer(id="F/1/x", question_id="F/1", examinee="x", text="Un ensemble.")])
    with pytest.raises(ConfigError, match="question 'F/1': no 'knockout-individual' preset in language 'fr'"):
        GradeRun(items, make_judge("scripted"), RunConfig()).check()
    with pytest.raises(ConfigError, match="no 'sciex-system' preset in language 'fr'"):
        GradeRun(items, make_judge("scripted"), RunConfig(options=MethodOptions(prompt="sciex-system"))).check()
    GradeRun(items, make_judge("scripted"), RunConfig(options=MethodOptions(prompt="knockout-individual-en"))).check()
    from knockout.sciex._solve import SolveRun

    with pytest.raises(ConfigError, match=r"language 'fr'.*--prompt"):
        SolveRun(items, make_judge("scripted")).check()
    # regional forms and names of English and German keep their presets
    for lang in ("en-GB", "de_AT", "German", "EN"):
        qq = q.model_copy(update={"language": lang})
        GradeRun(ItemSet([qq], list(items)), make_judge("scripted"), RunConfig()).check()


def test_sciex_language_is_never_a_silent_default(tmp_path: Path) -> None:
    exam = tmp_path / "exam"
    shutil.copytree(TINY, exam)
    (exam / "tiny_exam_en.json").rename(exam / "exam.json")
    with pytest.raises(InputError, match="cannot tell the exam's language"):
        load_items(exam)
    assert {q.language for q in load_items(exam, language="en").questions.values()} == {"en"}
