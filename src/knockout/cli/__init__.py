"""Command line: ``knockout`` (typer + rich).  Feature modules add their commands here."""

from __future__ import annotations

import importlib
import weakref

import typer

#: Modules that define ``register(app)`` to add their commands (one per concern).
EXTENSIONS: list[str] = [
    "knockout.cli._sbs",
    "knockout.cli._report",
    "knockout.cli._web",
    "knockout.cli._meta",
    "knockout.cli._sciex",
    "knockout.cli._experiment",
    "knockout.cli._calibrate",
    "knockout.cli._gradebook",
    "knockout.cli._groups",
]


#: the apps that have the extensions' commands
_EXTENDED: weakref.WeakSet[typer.Typer] = weakref.WeakSet()


def register_extensions(app: typer.Typer) -> None:
    """Add the extensions' commands to ``app``, once: a second call does nothing.  Typer keeps every command
    registered, a duplicate too, and builds the click group from all of them at each call of the app."""
    if app in _EXTENDED:
        return
    for name in EXTENSIONS:
        importlib.import_module(name).register(app)
    _EXTENDED.add(app)


def main() -> None:
    """The ``knockout`` console script."""
    from knockout.cli._main import main as run_cli

    run_cli()
