"""Command line: ``knockout`` (typer + rich).  Feature modules add their commands here."""

from __future__ import annotations

import importlib

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
]


def register_extensions(app: typer.Typer) -> None:
    for name in EXTENSIONS:
        importlib.import_module(name).register(app)


def main() -> None:
    """The ``knockout`` console script."""
    from knockout.cli._main import main as run_cli

    run_cli()
