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

from knockout._registry import GROUPS, OWN_ENTRY_POINTS
from knockout.data import detect_format, load_items, loaders
from knockout.errors import ConfigError, InputError
from knockout.judges import backends, make_judge
from knockout.methods._base import methods
from knockout.prompts import parsers
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
    "knockout_testplugin/broken.py": 'raise ImportError("boom: this plugin module is broken")\n',
    "knockout_testplugin-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: knockout-testplugin\nVersion: 0.1\n",
    "knockout_testplugin-0.1.dist-info/entry_points.txt": """
        [knockout.backends]
        echo = knockout_testplugin.judge:EchoJudge

        [knockout.methods]
        plugged = knockout_testplugin.methods:Plugged

        [knockout.loaders]
        quiz = knockout_testplugin.quiz

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
REGISTRIES = (backends, methods, loaders, parsers)


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


def test_own_entry_points_match_pyproject() -> None:
    """knockout's own entry points (read from pyproject once installed) and the copy that keeps them
    working before a reinstall are the same table; prompts/ no longer names the sbs/meta features."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {g: dict(eps) for g, eps in project.get("entry-points", {}).items() if g.startswith("knockout.")}
    assert declared == OWN_ENTRY_POINTS
    assert set(declared) <= set(GROUPS)
    source = (ROOT / "src/knockout/prompts/_parsers.py").read_text(encoding="utf-8")
    assert "knockout.sbs" not in source and "knockout.meta" not in source
    for name in ("sbs", "meta-better", "meta-score"):
        assert name in parsers and callable(parsers.get(name))


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
