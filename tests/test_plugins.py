"""Entry-point registries: a plugin package written here (a backend, a method, a loader with its sniff,
a parser), installed into a temporary folder with a hand-written ``.dist-info``, is found by name and
used — in process and by the ``knockout`` command in a fresh process."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from knockout._registry import GROUPS, Registry
from knockout.data import detect_format, load_items, loaders
from knockout.errors import ConfigError, InputError
from knockout.judges import backends, make_judge
from knockout.methods._base import methods
from knockout.prompts import parsers
from knockout.runs import execute, kind_of, run_kinds
from knockout.storage import Store
from tests.conftest import ROOT

PLUGIN = {
    "knockout_testplugin/__init__.py": '"""A knockout plugin written by the test suite."""\n',
    "knockout_testplugin/judge.py": '''
        """Echo judge: replies with a fixed text (a plugin backend)."""
        from __future__ import annotations

        from pydantic import Field

        from knockout.judges import Completion, Judge, JudgeOptions, JudgeRequest


        class EchoOptions(JudgeOptions):
            reply: str = Field("yes", description="the reply to every request")


        class EchoJudge(Judge):
            """Replies with the text of its option reply."""

            backend = "echo"
            Options = EchoOptions
            options: EchoOptions

            async def complete(self, request: JudgeRequest) -> Completion:
                return Completion(text=self.options.reply, completion_tokens=1)
        ''',
    "knockout_testplugin/quiz.py": '''
        """The .quiz format: "Q id | max | text" lines, each followed by "A id | human | text" lines."""
        from __future__ import annotations

        from pathlib import Path

        from knockout.data import Answer, ItemSet, Question


        def sniff(path: Path) -> bool:
            return path.suffix == ".quiz" and path.is_file()


        def load(path: Path, *, scale: float = 1.0) -> ItemSet:
            questions, answers, current = [], [], None
            for line in path.read_text(encoding="utf-8").splitlines():
                kind, ident, number, text = (p.strip() for p in line.split("|", 3))
                if kind == "Q":
                    current = ident
                    questions.append(Question(id=ident, text=text, max_points=float(number) * scale))
                elif kind == "A":
                    answers.append(Answer(id=ident, question_id=current, text=text,
                                          human_scores={"h": float(number) * scale}))
            return ItemSet(questions, answers, source=str(path))
        ''',
    "knockout_testplugin/methods.py": '''
        """A method built on the individual one (found by name, so it follows knockout's layout)."""
        from knockout.methods._base import methods

        Plugged = type("Plugged", (methods.get("individual"),), {"name": "plugged"})
        ''',
    "knockout_testplugin/parsers.py": '''
        """A yes/no parser: yes is full marks, no is zero."""
        from __future__ import annotations

        from typing import Any

        from knockout.prompts import Parsed


        def parse_yesno(text: str, max_points: float, *args: Any, **kwargs: Any) -> Parsed:
            word = text.strip().lower().rstrip(".!")
            if word in ("yes", "no"):
                return Parsed(value=max_points if word == "yes" else 0.0)
            return Parsed(error="reply yes or no")
        ''',
    "knockout_testplugin/poll.py": '''
        """A run kind written by the test suite: ``poll`` asks the judge "right or not?" of every answer; its
        kind object says how knockout reads it (report, tidy table, viewer columns), with no change to knockout."""
        from __future__ import annotations

        from typing import Any

        from knockout.data import ItemSet
        from knockout.engine import Subject, Task
        from knockout.judges import GenParams, Judge, Message
        from knockout.prompts import Parsed
        from knockout.reports import Table
        from knockout.runs import Column, ReportOptions, ReportPage, Run, RunContext, RunKind, RunSummary
        from knockout.storage import ResultRow


        class PollSummary(RunSummary):
            answers: int
            yes: int
            invalid: int


        class PollReport:
            def __init__(self, run_id: str, summary: PollSummary) -> None:
                self.run_id, self._summary = run_id, summary

            def summary(self) -> dict[str, Any]:
                return self._summary.model_dump()


        def parse(text: str) -> Parsed:
            word = text.strip().lower().rstrip(".!")
            return Parsed(value=word == "yes") if word in ("yes", "no") else Parsed(error="reply yes or no")


        class PollRun(Run[PollReport]):
            kind = "poll"

            def __init__(self, items: ItemSet, judge: Judge) -> None:
                super().__init__(method="poll", data_source=items.source, params=GenParams())
                self.items, self.judge = items, judge

            def judges(self) -> dict[str, Judge]:
                return {"judge": self.judge}

            def identity(self) -> dict[str, Any]:
                return {"kind": "poll", "data": self.items.fingerprint(), "judge": self.judge.identity()}

            def config(self) -> dict[str, Any]:
                return {}

            def snapshot(self) -> ItemSet:
                return self.items

            async def execute(self, ctx: RunContext) -> PollReport:
                answers = list(self.items)
                tasks = [Task(messages=[Message(role="user", content=f"Is this right? {a.text} Reply yes or no.")],
                              parse=parse, subject=Subject("poll", (a.id,)), label=a.id) for a in answers]
                outcomes = await ctx.engine.ask_all(tasks)
                ctx.write_results(ResultRow(a.id, a.question_id, float(o.value) if o.valid else None, o.valid,
                                            o.details()) for a, o in zip(answers, outcomes))
                s = PollSummary(run_id=ctx.run_id, kind="poll", method="poll", judge=self.judge.spec,
                                simulated_judge=self.judge.simulated, data=self.items.source,
                                answers=len(answers), yes=sum(bool(o.valid and o.value) for o in outcomes),
                                invalid=sum(not o.valid for o in outcomes),
                                **{k: v for k, v in ctx.stats().items() if k in RunSummary.model_fields})
                return PollReport(ctx.run_id, s)


        class PollKind(RunKind):
            name = "poll"
            title = "poll"
            run = PollRun
            summary_model = PollSummary
            tables = ("votes",)

            def report(self, store: Any, record: Any, options: ReportOptions) -> ReportPage:
                s = self.summary(record)
                data = {"run": {"run_id": record.id, "status": record.status, "simulated_judge": record.simulated},
                        "yes": s.yes, "answers": s.answers}
                return ReportPage(f"poll {record.id}", data,
                                  [Table("poll", ["answers", "yes"], [[str(s.answers), str(s.yes)]])], dict,
                                  [data["run"]])

            def tidy(self, store: Any, record: Any, table: str) -> list[dict[str, Any]]:
                return [{"answer": r["item_id"], "yes": r["score"]} for r in store.results(record.id)]

            def columns(self, store: Any, record: Any) -> list[Column]:
                return [Column("answer", "id", "item"), Column("vote", "vote")]

            def listing(self, store: Any, record: Any, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
                return [{"id": r["item_id"], "question_id": r["question_id"], "valid": r["valid"], "gap": None,
                         "error": None, "vote": {1.0: "VOTED-YES", 0.0: "VOTED-NO"}.get(r["score"], "-")}
                        for r in results]
        ''',
    "knockout_testplugin/broken.py": 'raise ImportError("boom: this plugin module is broken")\n',
    "knockout_testplugin-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: knockout-testplugin\nVersion: 0.1\n",
    "knockout_testplugin-0.1.dist-info/entry_points.txt": """
        [knockout.backends]
        echo = knockout_testplugin.judge:EchoJudge

        [knockout.methods]
        plugged = knockout_testplugin.methods:Plugged

        [knockout.loaders]
        quiz = knockout_testplugin.quiz

        [knockout.run_kinds]
        poll = knockout_testplugin.poll:PollKind

        [knockout.parsers]
        yesno = knockout_testplugin.parsers:parse_yesno
        broken = knockout_testplugin.broken:parse
        """,
}
QUIZ = "Q | q1 | 2 | What does DNS do?\nA | a1 | 2 | Resolves names.\nA | a2 | 0 | Routes packets.\n"
TEMPLATE = '''name = "yesno"
kind = "individual"
parser = "yesno"
citation = "written for the plugin test"
template = "Is this answer to {question} right? {answer} Reply yes or no."
'''
REGISTRIES = (backends, methods, loaders, parsers, run_kinds)


def _reset() -> None:
    importlib.invalidate_caches()
    for r in REGISTRIES:
        r.refresh()


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    for rel, text in PLUGIN.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return site


@pytest.fixture()
def plugin(plugin_site: Path) -> Iterator[Path]:
    """The plugin on sys.path for one test; afterwards gone from sys.path and from the registries."""
    sys.path.insert(0, str(plugin_site))
    _reset()
    try:
        yield plugin_site
    finally:
        sys.path.remove(str(plugin_site))
        for mod in [m for m in sys.modules if m.startswith("knockout_testplugin")]:
            del sys.modules[mod]
        _reset()


def test_plugins_found_by_name_and_used(plugin: Path, tmp_path: Path) -> None:
    assert "echo" in backends.names() and backends.plugin("echo").distribution == "knockout-testplugin"  # type: ignore[union-attr]
    judge = make_judge("echo:any?reply=no")
    assert type(judge).__name__ == "EchoJudge" and judge.options.reply == "no"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"unknown option 'rply' for judge backend 'echo' \(accepted: reply\)"):
        make_judge("echo?rply=x")
    assert backends.help("echo") == "Replies with the text of its option reply."

    quiz = tmp_path / "exam.quiz"
    quiz.write_text(QUIZ, encoding="utf-8")
    assert detect_format(quiz) == "quiz"
    items = load_items(quiz, scale="2")  # the plugin's own option, given as text like --data-opt
    assert items.questions["q1"].max_points == 4.0 and len(items) == 2

    assert methods.get("plugged").name == "plugged"
    yesno = parsers.get("yesno")
    assert yesno("Yes.", 2).value == 2 and not yesno("perhaps", 2).ok


def test_broken_plugin_is_a_clear_error(plugin: Path) -> None:
    assert "broken" in parsers.names()
    with pytest.raises(ConfigError) as info:
        parsers.get("broken")
    msg = str(info.value)
    for part in ("parser 'broken'", "plugin knockout-testplugin", "knockout.parsers", "failed to load",
                 "boom: this plugin module is broken"):
        assert part in msg, msg
    assert parsers.help("broken").startswith("(failed to load")
    assert parsers.get("score")("Score: 1/1", 1).value == 1  # the others still work


def test_plugins_are_gone_after_uninstall(plugin_site: Path) -> None:
    assert "echo" not in backends.names() and "quiz" not in loaders.names()
    with pytest.raises(ConfigError, match="unknown judge backend 'echo'"):
        make_judge("echo")


def test_plugin_end_to_end_in_a_fresh_process(plugin_site: Path, tmp_path: Path) -> None:
    """``knockout grade exam.quiz --method plugged --judge echo --prompt yesno.toml`` with the plugin on
    the path: format sniffed, method, backend and parser all found through entry points."""
    quiz = tmp_path / "exam.quiz"
    quiz.write_text(QUIZ, encoding="utf-8")
    template = tmp_path / "yesno.toml"
    template.write_text(TEMPLATE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_site), str(ROOT / "src")])}
    res = subprocess.run(
        [sys.executable, "-m", "knockout.cli", "grade", str(quiz), "--method", "plugged", "--judge",
         "echo?reply=yes", "--prompt", str(template), "-o", str(tmp_path / "s.db"), "--json", "--quiet"],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert (summary["method"], summary["valid"], summary["invalid"]) == ("plugged", 2, 0)
    assert summary["judge"].startswith("echo")
    listed = subprocess.run([sys.executable, "-m", "knockout.cli", "judges", "--json"], capture_output=True,
                            text=True, timeout=300, env=env)
    js = json.loads(listed.stdout)
    assert js["options"]["echo"][0]["name"] == "reply" and js["options"]["echo"][0]["default"] == "yes"


def test_plugin_run_kind_is_read_everywhere(plugin: Path, tmp_path: Path) -> None:
    """A run kind from a plugin (its Run class and its read hooks registered under ``knockout.run_kinds``) is
    written through the one lifecycle and appears in ``runs``, ``report``, ``export`` (raw replies and its tidy
    table) and the transcript viewer, with no change to knockout."""
    quiz = tmp_path / "exam.quiz"
    quiz.write_text(QUIZ, encoding="utf-8")
    kind = kind_of("poll")
    assert run_kinds.plugin("poll").distribution == "knockout-testplugin"  # type: ignore[union-attr]
    db = tmp_path / "poll.db"
    with Store(db) as store:
        run_id = execute(kind.run_class(load_items(quiz), make_judge("echo?reply=yes")), store).run_id  # type: ignore[call-arg]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), str(ROOT / "src")])}

    def cli(*args: str) -> str:
        res = subprocess.run([sys.executable, "-m", "knockout.cli", *args], capture_output=True, text=True,
                             timeout=300, env=env)
        assert res.returncode == 0, res.stderr
        return res.stdout

    listed = json.loads(cli("runs", str(db), "--json"))
    assert [(r["run_id"], r["kind"], r["results"]) for r in listed] == [(run_id, "poll", 2)]
    assert json.loads(cli("report", f"{db}:{run_id}", "--json"))["yes"] == 2
    assert "poll" in cli("report", str(db))  # the latest run a report reads: the plugin's
    rows = [json.loads(line) for line in cli("export", f"{db}:{run_id[:6]}", "--format", "jsonl").splitlines()]
    assert [r["replies"] for r in rows] == [["yes"], ["yes"]] and {r["kind"] for r in rows} == {"poll"}
    assert "answer,yes" in cli("export", f"{db}:{run_id}", "--table", "votes", "--format", "csv")

    pytest.importorskip("fastapi")
    pytest.importorskip("argon2")
    from knockout.web._auth import Accounts
    from tests.test_web_app import PASSWORD, client_for

    with Store(db) as store:
        Accounts(store).add_user("vic", PASSWORD, "viewer")
    client = client_for(db, "vic")
    assert run_id in client.get("/runs").text
    page = client.get(f"/runs/{run_id}").text
    assert page.count("VOTED-YES") == 2 and "<th>vote</th>" in page
    item = client.get(f"/runs/{run_id}/item/a1").text
    assert "Parsed value" in item and "Judge calls" in item and "Reply yes or no." in item


def test_one_registration_and_every_registry_in_the_groups() -> None:
    """knockout's own parsers are lazy registry entries (no entry points of its own in pyproject), found
    without importing their features; every registry's entry-point group is in GROUPS."""
    import knockout.jury
    import knockout.meta._frameworks
    import knockout.sbs._run  # noqa: F401

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not [g for g in project.get("entry-points", {}) if g.startswith("knockout.")]
    made = {r.group for r in Registry.made if r.group}
    assert made == set(GROUPS), (made ^ set(GROUPS))
    source = (ROOT / "src/knockout/prompts/_parsers.py").read_text(encoding="utf-8")
    assert "knockout.sbs" not in source and "knockout.meta" not in source
    for name in ("sbs", "meta-better", "meta-score", "answer", "sciex-score"):
        assert name in parsers and parsers.plugin(name) is None and callable(parsers.get(name))


def test_lazy_init_name_lists_agree() -> None:
    """Each package whose ``__init__`` re-exports lazily lists every public name three times: the lazy table
    (``_EXPORTS``), ``__all__`` and the imports for type checkers; the three agree."""
    import ast

    checked = 0
    for init in sorted((ROOT / "src/knockout").rglob("__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        exports = all_names = typed = None
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                if node.targets[0].id == "_EXPORTS":
                    exports = set(ast.literal_eval(node.value))
                elif node.targets[0].id == "__all__":
                    all_names = set(ast.literal_eval(node.value))
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                typed = {a.asname or a.name for n in node.body if isinstance(n, ast.ImportFrom) for a in n.names}
        if exports is None:
            continue
        checked += 1
        assert exports == all_names == typed, (init, exports ^ (all_names or set()), exports ^ (typed or set()))
    assert checked >= 3


def test_sniff_ambiguity_is_an_input_error(plugin: Path, tmp_path: Path) -> None:
    """A plugin whose sniff claims the same file as a built-in format: the error lists both."""
    quiz = tmp_path / "exam.quiz"
    quiz.write_text(QUIZ, encoding="utf-8")
    loaders.add("quiz-twin", loaders.get("quiz"), "the same sniff, for this test")
    try:
        with pytest.raises(InputError, match=r"several formats claim this input \(quiz, quiz-twin\)"):
            detect_format(quiz)
        assert load_items(quiz, format="quiz").questions["q1"].max_points == 2.0  # naming one settles it
    finally:
        loaders.remove("quiz-twin")
