"""knockout solve: the solve run kind, its prompts and figures, its output, and a kill midway that resumes
without repeating a call.  Examinees are the scripted judge (a SIMULATION, not an LLM) or a test examinee
that accepts images."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from knockout.data import load_items
from knockout.errors import ConfigError
from knockout.judges import make_judge
from knockout.judges._base import Completion, Judge, JudgeRequest
from knockout.runs import execute, kind_of
from knockout.sciex import SolveConfig, SolveRun, parse_model, write_solved
from knockout.sciex._output import STARS
from knockout.storage import Store
from tests.test_resume import kill_after_calls, live_calls

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "src" / "knockout" / "examples" / "sciex"
EN, DE = EXAMPLES / "cs-basics-en", EXAMPLES / "cs-basics-de"


class SeeingExaminee(Judge):
    """A test examinee that takes images: it answers with what it was sent (a simulation, not an LLM)."""

    backend = "seeing"
    supports_images = True
    simulated = True

    def __init__(self) -> None:
        super().__init__("test")
        self.requests: list[JudgeRequest] = []

    async def complete(self, request: JudgeRequest) -> Completion:
        self.requests.append(request)
        return Completion(text=f"I was sent {sum(len(m.images) for m in request.messages)} image(s).")


def test_solve_is_a_registered_run_kind() -> None:
    assert kind_of("solve").run_class is SolveRun


def test_model_names() -> None:
    assert parse_model("llamacpp:qwen2.5-coder-0.5b") == ("llamacpp-qwen2.5-coder-0.5b", "llamacpp:qwen2.5-coder-0.5b")
    assert parse_model("small=llamacpp:qwen2.5-coder-0.5b") == ("small", "llamacpp:qwen2.5-coder-0.5b")
    assert parse_model("openai:m?base_url=http://h/v1") == ("openai-m", "openai:m?base_url=http://h/v1")


def test_a_text_only_model_gets_the_sciex_prompt_and_the_question_json_without_figures(tmp_path: Path) -> None:
    exam = load_items(EN)
    run = SolveRun(exam, make_judge("scripted"), examinee="sim")
    with Store(tmp_path / "s.db") as store:
        report = execute(run, store)
        rows = store.results(report.run_id)
        (call,) = [c for c in store.iter_calls() if "graph.png" in c["request"]]
    s = report.summary()
    assert s["kind"] == "solve" and s["answered"] == 6 and s["empty"] == 0 and s["simulated_judge"]
    assert s["figures"] == "none" and s["figures_sent"] == 0 and s["figures_left_out"] == 2
    request = json.loads(call["request"])["messages"]
    assert request[0]["role"] == "system" and request[0]["content"].startswith("You are a university student.")
    assert "Please provide all answers in English." in request[0]["content"]
    assert json.loads(request[1]["content"])["Figures"] == ["figures/graph.png"]  # the question as its JSON
    assert request[1]["images"] == []
    left = {r["item_id"]: r["details"]["figures_left_out"] for r in rows if r["details"]["figures_left_out"]}
    assert left == {"cs-basics-en/2/sim": ["figures/graph.png"], "cs-basics-en/4/sim": ["figures/bst.pdf"]}
    assert all(a.id == f"{a.question_id}/sim" and a.examinee == "sim" for a in report.answers)
    de = SolveRun(load_items(DE), make_judge("scripted"), examinee="sim")
    assert de.template_for(next(iter(de.questions.questions.values()))).name == "sciex-solve-de"


def test_a_multimodal_model_gets_captioned_figures_and_a_one_image_model_one_stacked_image(tmp_path: Path) -> None:
    exam = load_items(EN)
    seeing = SeeingExaminee()
    with Store(tmp_path / "s.db") as store:
        report = execute(SolveRun(exam, seeing, examinee="eyes", figure_dir=tmp_path / "fig"), store,
                         close_judges=False)
        sent = {r.messages[-1].content: r.messages[-1].images for r in seeing.requests}
        assert report.summary()["figures_sent"] == 2 and report.summary()["figures_left_out"] == 0
        assert all(Path(p).parent == tmp_path / "fig" for imgs in sent.values() for p in imgs)
        one = SeeingExaminee()
        stacked = execute(SolveRun(exam, one, SolveConfig(figures="stacked"), examinee="one",
                                   figure_dir=tmp_path / "fig"), store, close_judges=False)
    assert stacked.summary()["figures"] == "stacked"
    with_figs = [r for r in one.requests if r.messages[-1].images]
    assert len(with_figs) == 2 and all(len(r.messages[-1].images) == 1 for r in with_figs)
    assert "stacked vertically" in with_figs[0].messages[0].content  # the sciex-solve-en-stacked prompt


def test_solve_refuses_a_taken_examinee_name_and_a_prompt_that_shows_the_reference(tmp_path: Path) -> None:
    exam = load_items(EN)
    with pytest.raises(ConfigError, match="already has answers"):
        SolveRun(exam, make_judge("scripted"), examinee="sample-a").check()
    cheat = tmp_path / "cheat.toml"
    cheat.write_text('name = "cheat"\nkind = "solve"\ntemplate = "{question} (the answer is {reference})"\n')
    with pytest.raises(ConfigError, match=r"shows \{reference\}"):
        SolveRun(exam, make_judge("scripted"), SolveConfig(prompt=str(cheat)), examinee="sim").check()
    with pytest.raises(ConfigError, match="examinee name"):
        SolveRun(exam, make_judge("scripted"), examinee="a b").check()


def test_output_is_a_sciex_folder_and_a_jsonl_that_the_loaders_read(tmp_path: Path) -> None:
    exam = load_items(EN)
    with Store(tmp_path / "s.db") as store:
        report = execute(SolveRun(exam, make_judge("scripted"), examinee="sim"), store)
    from knockout.data import ItemSet

    solved = ItemSet(exam.questions.values(), [*exam.answers, *report.answers], source=exam.source)
    (folder,), jsonl = write_solved(solved, tmp_path / "out")
    text = (folder / "answers" / "sim.txt").read_text()
    assert text.startswith("Answer to Question 1\nSimulated answer")
    assert text.count(f"{STARS}\n{STARS}") == 6
    back = load_items(folder)
    assert {a.id for a in back} == {a.id for a in solved}
    assert back.questions["cs-basics-en/2"].text == exam.questions["cs-basics-en/2"].text
    assert back.questions["cs-basics-en/4"].meta == exam.questions["cs-basics-en/4"].meta  # exam info kept
    assert back.answer("cs-basics-en/1/sample-b").human_scores == {"human": 1.0}
    assert (folder / "figures" / "bst.pdf").read_bytes() == (EN / "figures" / "bst.pdf").read_bytes()
    again = load_items(jsonl)
    assert again.fingerprint() == ItemSet(back.questions.values(), back.answers, source="x").fingerprint()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "knockout.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def solve_cmd(db: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "knockout.cli", "solve", str(EN), str(DE), "--model", "sim=scripted?delay=0.3",
            "--concurrency", "1", "-o", str(db), "-d", str(out), "--json", "-q"]


@pytest.mark.slow
def test_solve_killed_midway_resumes_without_repeating_a_call(tmp_path: Path) -> None:
    db, out = tmp_path / "killed.db", tmp_path / "out"
    env = {**os.environ, "KNOCKOUT_CACHE": str(tmp_path / "cache")}
    before = kill_after_calls(solve_cmd(db, out), db, 3, env)
    assert 3 <= len(before) < 12
    with Store(db) as store:
        (run,) = store.runs()
        assert run.kind == "solve" and run.status == "interrupted"
    assert not (out / "solved.jsonl").exists()  # nothing written before the run completes

    resumed = subprocess.run(solve_cmd(db, out), capture_output=True, text=True, timeout=300, env=env)
    assert resumed.returncode == 0, resumed.stderr
    after = live_calls(db)
    assert len(after) == len(set(after)) == 12, "a call was repeated after the kill"
    assert after[: len(before)] == before
    (summary,) = json.loads(resumed.stdout)["runs"]
    assert summary["cache_hits"] == len(before) and summary["judge_calls"] == 12 - len(before)

    clean_db, clean_out = tmp_path / "clean.db", tmp_path / "clean"
    clean = subprocess.run(solve_cmd(clean_db, clean_out), capture_output=True, text=True, timeout=300, env=env)
    assert clean.returncode == 0, clean.stderr
    assert (out / "solved.jsonl").read_text() == (clean_out / "solved.jsonl").read_text()


def test_solve_cli_errors_are_one_line_with_exit_code_2(tmp_path: Path) -> None:
    done = cli("solve", str(EN), "--model", "sample-a=scripted", "-o", str(tmp_path / "s.db"), "-d", str(tmp_path))
    assert done.returncode == 2 and "already has answers" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    done = cli("solve", str(EN), "--model", "a=scripted", "--model", "a=scripted?noise=0.2", "-o",
               str(tmp_path / "s.db"))
    assert done.returncode == 2 and "same examinee name" in done.stderr
    assert not (tmp_path / "s.db").exists()


class SeeingJudge(SeeingExaminee):
    """A test judge that takes images and grades 1 point (a simulation, not an LLM)."""

    backend = "seeing-judge"

    async def complete(self, request: JudgeRequest) -> Completion:
        self.requests.append(request)
        return Completion(text="[reason] simulated [/reason]\n[grade] 1 [/grade]")


def test_a_multimodal_judge_grades_with_the_same_captioned_figures(tmp_path: Path) -> None:
    from knockout.methods._run import GradeRun, RunConfig

    exam = load_items(EN)
    seeing = SeeingExaminee()
    judge = SeeingJudge()
    with Store(tmp_path / "s.db") as store:
        execute(SolveRun(exam, seeing, examinee="eyes", figure_dir=tmp_path / "fig"), store, close_judges=False)
        report = execute(GradeRun(exam, judge, RunConfig(figure_dir=tmp_path / "fig")), store, close_judges=False)
    assert report.summary()["valid"] == len(exam)
    solved_with = {img for r in seeing.requests for m in r.messages for img in m.images}
    graded_with = {img for r in judge.requests for m in r.messages for img in m.images}
    assert len(solved_with) == 2 and graded_with == solved_with  # one file per figure, the same for both


def test_the_solved_exam_imports_into_the_web_app(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = cli("solve", str(EN), "--model", "sim=scripted", "-o", str(tmp_path / "s.db"), "-d", str(out), "-q")
    assert done.returncode == 0, done.stderr
    imported = cli("import", str(out / "cs-basics-en"), "--db", str(tmp_path / "web.db"), "--json")
    assert imported.returncode == 0, imported.stderr
    from knockout.annotations import ExamGrades

    with Store(tmp_path / "web.db") as store:
        exam = ExamGrades(store).exam("cs-basics-en")
    assert exam is not None and {e.key for e in exam.examinees} == {"sample-a", "sample-b", "sample-c", "sim"}


def test_an_item_set_of_mixed_languages_is_solved_into_one_folder_per_language(tmp_path: Path) -> None:
    tiny = load_items(ROOT / "tests" / "fixtures" / "tiny.jsonl")
    with Store(tmp_path / "s.db") as store:
        report = execute(SolveRun(tiny, make_judge("scripted"), examinee="sim"), store)
    from knockout.data import ItemSet

    solved = ItemSet(tiny.questions.values(), [*tiny.answers, *report.answers], source=tiny.source)
    folders, jsonl = write_solved(solved, tmp_path / "out")
    assert sorted(f.name for f in folders) == ["tiny-de", "tiny-en"]
    back = load_items(jsonl)
    assert len(back) == len(solved) and len(back.questions) == len(tiny.questions)
    assert {q.language for q in back.questions.values()} == {"en", "de"}
