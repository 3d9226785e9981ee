"""Help texts as printed: rich markup must not eat the extras' names (``knockout[plots]``)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import typer

#: what rich reads as a markup tag: ``[plots]``, ``[bold]``, ``[/]`` (an escaped ``\[`` is printed as ``[``)
TAG = re.compile(r"(?<!\\)\[/?[a-z#@][^\[\]]*\]")


def texts() -> Iterator[tuple[str, str]]:
    """(where, text) for every command's help and every option's help."""
    from knockout.cli import register_extensions
    from knockout.cli._main import app

    register_extensions(app)
    root: Any = typer.main.get_command(app)
    for name, cmd in root.commands.items():
        yield name, cmd.help or ""
        groups = [cmd, *getattr(cmd, "commands", {}).values()]
        for c in groups:
            yield f"{name} {c.name}", c.help or ""
            for p in c.params:
                yield f"{name} {c.name} {p.name}", getattr(p, "help", None) or ""


def test_no_help_text_holds_unescaped_markup() -> None:
    bad = [(where, m.group()) for where, text in texts() for m in TAG.finditer(text)]
    assert not bad, f"help texts with rich tags that print as nothing (write \\[ for a literal [): {bad}"


@pytest.mark.parametrize(("command", "extra"), [("report", "knockout[plots]"), ("leaderboard", "knockout[plots]"),
                                                ("leaderboard", "knockout[calibration]")])
def test_help_names_the_extra(command: str, extra: str) -> None:
    r = subprocess.run([sys.executable, "-m", "knockout.cli", command, "--help"], capture_output=True, text=True,
                       timeout=120, env={"COLUMNS": "200", "PATH": "", "PYTHONPATH": ":".join(sys.path)})
    assert r.returncode == 0, r.stderr
    assert extra in r.stdout, r.stdout


def test_extensions_are_registered_once() -> None:
    """Typer keeps a command registered twice twice, and builds the click group from every registration at each
    call of the app: tests that each call ``register_extensions`` made every later command line slower."""
    from knockout.cli import register_extensions
    from knockout.cli._main import app

    register_extensions(app)
    before = (len(app.registered_commands), len(app.registered_groups))
    register_extensions(app)
    assert (len(app.registered_commands), len(app.registered_groups)) == before
    fresh = typer.Typer()  # another app gets the commands too
    register_extensions(fresh)
    assert {c.callback.__name__ for c in fresh.registered_commands if c.callback} >= {"gradebook", "report", "serve"}


def test_the_click_command_is_built_once_per_app_and_again_when_a_command_is_added(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/conftest.py: ``CliRunner.invoke`` reuses the app's click command while its registrations stay."""
    import typer.main
    from typer.testing import CliRunner

    builds: list[typer.Typer] = []
    build = typer.main.get_command
    monkeypatch.setattr(typer.main, "get_command", lambda app: builds.append(app) or build(app))
    app = typer.Typer()
    for name in ("one", "two"):
        app.command(name)(lambda name=name: print(name))
    assert [CliRunner().invoke(app, [n]).stdout for n in ("one", "two", "one")] == ["one\n", "two\n", "one\n"]
    assert builds == [app]
    app.command("three")(lambda: print("three"))
    sub = typer.Typer()
    sub.command("four")(lambda: print("four"))
    sub.command("five")(lambda: print("five"))
    app.add_typer(sub, name="sub")
    assert CliRunner().invoke(app, ["three"]).stdout == "three\n"
    assert CliRunner().invoke(app, ["sub", "five"]).stdout == "five\n"
    assert builds == [app, app]
