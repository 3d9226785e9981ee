"""Command line: ``knockout`` (typer).  Feature modules add their commands here."""

from __future__ import annotations

import importlib

import typer

#: Modules that define ``register(app)`` to add their commands (one per concern).
EXTENSIONS: list[str] = [
    "knockout.cli.sbs",
    "knockout.cli.report",
    "knockout.cli.web",
    "knockout.cli.meta",
]


def register_extensions(app: typer.Typer) -> None:
    for name in EXTENSIONS:
        importlib.import_module(name).register(app)
