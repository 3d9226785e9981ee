"""No silent degradation (few-shot with fewer examples, figures a judge cannot see, a language without its
preset), SciEx exam sets (a folder of exam folders, a list of exams), figures that keep relative paths through
``write_jsonl``, and the authors' repository layout.  The judge is the scripted one: a simulation.

The fixtures were written for this project: ``tests/fixtures/sciex_set`` (an English and a German exam, three
examinees with expert grades) and ``tests/fixtures/sciex_repo`` (the authors' layout: exams_json/,
human_feedback/, llm_out_filtered/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from knockout.cli import register_extensions
from knockout.cli._main import app
from knockout.data import Answer, ItemSet, Question, load_item_sets, load_items, write_jsonl
from knockout.errors import ConfigError, InputError
from knockout.judges import make_judge
from knockout.methods._base import MethodOptions
from knockout.methods._run import GradeRun, RunConfig
from knockout.runs import execute
from knockout.storage import Store

FIX = Path(__file__).parent / "fixtures"
SET = FIX / "sciex_set"
TINY = FIX / "sciex" / "tiny_exam"
REPO = FIX / "sciex_repo"
ROOT = Path(__file__).resolve().parents[1]


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
    report = cli("report", f"{db}:{two.run_id}", "--json", "--resamples", "0")  # the report says it too
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["run"]["used"] == {
        "shots": "2-shot other-exam requested, used 0 for 12 of 12 answers", "languages": ["de", "en"]}
    flat = " ".join(cli("report", f"{db}:{two.run_id}", "--resamples", "0").stdout.replace("│", " ").split())
    assert "few-shot 2-shot other-exam requested, used 0 for 12 of 12 answers" in flat
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


# -- 4. exam sets ------------------------------------------------------------------------------------------
def test_a_folder_of_exam_folders_is_one_item_set() -> None:
    items = load_items(SET)
    assert sorted({q.exam_id for q in items.questions.values()}) == ["algo-en", "netze-de"]
    assert {q.exam_id: q.language for q in items.questions.values()} == {"algo-en": "en", "netze-de": "de"}
    assert len(items.questions) == 6 and len(items) == 18 and all(a.human_scores for a in items)
    listed = load_item_sets([SET / "algo-en", SET / "netze-de"])
    assert listed.fingerprint() == items.fingerprint()
    with pytest.raises(InputError, match="question id also in"):
        load_item_sets([SET / "algo-en", SET / "algo-en"])


def test_a_stray_folder_in_an_exam_set_is_named(tmp_path: Path) -> None:
    shutil.copytree(SET, tmp_path / "set")
    (tmp_path / "set" / "notes").mkdir()
    with pytest.raises(InputError, match="not an exam folder") as e:
        load_items(tmp_path / "set")
    assert "notes" in str(e.value)


def test_other_exam_shots_work_when_a_same_language_exam_exists(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    res = cli("grade", str(SET / "algo-en"), str(TINY), "--judge", "scripted", "--figures", "none", "--shots", "2",
              "--shot-source", "other-exam", "-o", str(db), "-q", "--json")
    assert res.exit_code == 0, res.output
    used = json.loads(res.stdout)["info"]["shots"]
    assert used["fewer"] == 0 and set(used["per_answer"]) == {"2"}
    with Store.open_existing(db) as store:
        run = store.find_run(json.loads(res.stdout)["run_id"])
        items = store.items_for_run(run.id)
        assert items is not None
        for r in store.results(run.id):
            exam = items.questions[str(r["question_id"])].exam_id
            shown = {items.questions[items.answer(s).question_id].exam_id for s in r["details"]["shots"]}
            assert len(shown) == 1 and exam not in shown  # one other English exam
    # the German exam of the set still has no other German exam: refused, or labelled with --allow-fewer-shots
    text = one_line_error(cli("grade", str(SET), str(TINY), "--judge", "scripted", "--figures", "none", "--shots",
                              "2", "--shot-source", "other-exam", "-o", str(db), "-q"))
    assert "language 'de'" in text and "9 of" in text


def test_an_exam_set_solves_grades_imports_and_ranks_in_one_command_each(tmp_path: Path) -> None:
    db, out = tmp_path / "s.db", tmp_path / "solved"
    solved = cli("solve", str(SET), "--model", "sim=scripted", "-o", str(db), "-d", str(out), "-q", "--json")
    assert solved.exit_code == 0, solved.output
    assert json.loads(solved.stdout)["runs"][0]["answered"] == 6
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["algo-en", "netze-de"]
    graded = cli("grade", str(out), "--judge", "scripted", "--figures", "none", "--reference", "-o", str(db), "-q",
                 "--json")
    assert graded.exit_code == 0, graded.output
    assert json.loads(graded.stdout)["answers"] == 24  # 3 examinees + the solver, 6 questions
    board = cli("leaderboard", str(db), "--exams", str(SET), "--json", "--resamples", "0")
    assert board.exit_code == 0, board.output
    ranked = json.loads(board.stdout)
    assert {r["examinee"] for r in ranked["examinees"]} == {"model-a", "model-b", "model-c", "sim"}
    assert ranked["examinees"][0]["examinee"] == "model-a"  # the best expert grades
    assert "de+en" in ranked["judges"][0]["label"]
    imported = cli("import", str(SET), "--db", str(tmp_path / "web.db"), "--json")
    assert imported.exit_code == 0, imported.output
    assert sorted(json.loads(imported.stdout)["exams"]) == ["algo-en", "netze-de"]


def test_write_jsonl_keeps_figures_relative(tmp_path: Path) -> None:
    items = load_items(SET)
    out = tmp_path / "combined" / "set.jsonl"
    write_jsonl(items, out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    images = [im for d in lines if d["type"] == "question" for im in d.get("images", [])]
    assert len(images) == 1 and not Path(images[0]).is_absolute() and images[0].startswith("figures/")
    assert (out.parent / images[0]).read_bytes() == (SET / "algo-en" / "img" / "tree.png").read_bytes()
    again = load_items(out)  # the next grade reads it: the figure lies inside its folder
    assert [q.images for q in again.questions.values()] == [[str((out.parent / images[0]).resolve())] if q.images
                                                            else [] for q in items.questions.values()]
    write_jsonl(again, out)  # written again: the same relative path, nothing copied twice
    assert len(list((out.parent / "figures").iterdir())) == 1


# -- 4. the authors' layout --------------------------------------------------------------------------------
def test_the_authors_repository_layout_is_read_as_their_scripts_read_it() -> None:
    from knockout.data import detect_format

    assert detect_format(REPO) == "sciex-repo"
    items = load_items(REPO)
    exams = {q.exam_id: q.language for q in items.questions.values()}
    assert exams == {"dbs_demo_en": "en", "dbs_demo_de": "de", "hci_demo_en": "en"}
    assert {a.examinee for a in items} == {"claude", "gpt4v", "mixtral"}  # llm4, llm6, llm2 of LLM_LIST
    a = items.answer("dbs_demo_en/2/gpt4v")
    assert a.human_scores == {"human": 4.0} and "transitive" in a.text
    q = items.questions["dbs_demo_de/2"]
    assert q.images and q.images[0].endswith("exams_json/dbs_demo/figures/schema.png")
    assert q.reference == "Die transitive Abhängigkeit abspalten." and q.max_points == 4
    assert len(load_items(REPO, exams="hci_demo").questions) == 3
    assert {q.language for q in load_items(REPO, language="de").questions.values()} == {"de"}
    with pytest.raises(InputError, match="no exam nope"):
        load_items(REPO, exams="nope")


def test_the_authors_layout_matches_their_released_grade_files(tmp_path: Path) -> None:
    from knockout.sciex._llm_grades import grades_by_setting, load_llm_grades

    grade = tmp_path / "llm_grade" / "hci_demo" / "grader_gpt4v" / "0_shot"
    grade.mkdir(parents=True)
    (grade / "hci_demo_en_llm4_grade.json").write_text(json.dumps(
        {"Questions": [{"Index": "1", "Points": 1.0}, {"Index": "2", "Points": None}]}))
    by = grades_by_setting(load_llm_grades(tmp_path / "llm_grade"), load_items(REPO))
    assert list(by.values()) == [{"hci_demo_en/1/claude": 1.0, "hci_demo_en/2/claude": None}]


# -- 4. the grid experiment --------------------------------------------------------------------------------
def grid_file(tmp_path: Path, **replace: str) -> Path:
    text = (ROOT / "examples" / "sciex-grid.toml").read_text()
    text = text.replace('root = ".."', f'root = "{ROOT}"').replace('judge = "llamacpp"', 'judge = "scripted"')
    text = text.replace('store = "sciex-grid.db"', f'store = "{tmp_path / "grid.db"}"')
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    f = tmp_path / "grid.toml"
    f.write_text(text)
    return f


def test_the_sciex_grid_experiment_lays_out_tables_4_9_10_and_11(tmp_path: Path) -> None:
    from knockout.experiments._report import experiment_tables

    # 100 resamples, not the file's 1000: the layout is checked here, not the intervals' precision
    grid = grid_file(tmp_path, **{"resamples = 1000": "resamples = 100"})
    res = cli("run", str(grid), "--json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["layout"] == "sciex-grid" and rep["resamples"] == 100
    assert len(rep["parts"]) == 2 * (1 + 2 * 3)  # reference x (zero-shot + 2 shots x 3 sources)
    assert all(c["fewer_shots"] == 0 for c in rep["cells"].values())
    tables = experiment_tables(rep)
    titles = [t.title for t in tables]
    for name in ("Table 4 (Text-only", "Table 4 (Image-related", "Table 9", "Table 10 (Text-only", "Table 11"):
        assert any(name in t for t in titles), (name, titles)
    t4 = tables[0]
    assert t4.columns[2:] == [f"{r} ref: {s}" for r in ("without", "with")
                              for s in ("same question", "same exam", "diff exam")]
    assert [row[1] for row in t4.rows] == ["0 shot", "1 shot", "2 shot"]
    zero = t4.rows[0]
    assert zero[3] == zero[4] == "" and zero[2] != "-"  # zero-shot: one value per reference
    again = cli("run", str(grid), "--json")  # every cell is an ordinary run: all from the cache
    assert again.exit_code == 0 and json.loads(again.stdout)["cells"] == rep["cells"]


def test_a_grid_cell_without_its_examples_is_refused_before_any_call(tmp_path: Path) -> None:
    f = grid_file(tmp_path, **{'options = { language = "en" }': "options = {}"})
    text = one_line_error(cli("run", str(f), "--json"))
    assert "other-exam" in text and "language 'de'" in text and "--allow-fewer-shots" in text
    assert not (tmp_path / "grid.db").exists()
