"""What every command module shares: the consoles, one-line errors, JSON output, options built into models,
and tables printed with rich."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from knockout.errors import ConfigError, KnockoutError

if TYPE_CHECKING:
    from knockout.reports._tables import Table

JudgeOpt = Annotated[str, typer.Option("--judge", "-j", help="judge spec, e.g. llamacpp, openai:MODEL, "
                                       "anthropic:MODEL, scripted (simulation)")]
JudgeKV = Annotated[list[str] | None, typer.Option("--judge-opt", help="backend option key=value "
                                                   "(base_url, api_key, timeout, retries, ...)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one machine-readable JSON summary")]
JudgesOpt = Annotated[list[str] | None, typer.Option("--judge", "-j", help="judge spec, e.g. llamacpp, "
                      "openai:MODEL, anthropic:MODEL, scripted (simulation); repeat it for a jury")]
JuryOpt = Annotated[Path | None, typer.Option("--jury", help="jury file (TOML): members with backend, model, "
                                              "options, prompt, params (docs/juries.md)")]
AggregateOpt = Annotated[str | None, typer.Option("--aggregate", help="jury: mean, median or trimmed (scores); "
                                                  "majority or table8 (side-by-side)")]
TopPOpt = Annotated[float | None, typer.Option("--top-p", help="nucleus sampling (unset: the backend's "
                                               "default; the side-by-side paper's Table 9: 0.1)")]
FreqPenaltyOpt = Annotated[float | None, typer.Option("--frequency-penalty", help="frequency penalty (unset: the "
                                                      "backend's default; Table 9: 1.0)")]

out = Console()
err = Console(stderr=True)

def knockout_command() -> str:
    """How to run this ``knockout`` again as a shell command: ``knockout`` when that name on PATH is this very
    program, else its full path (``.venv/bin/knockout`` before the venv is activated), or ``python -m
    knockout.cli`` with this interpreter when it was started so.  Commands the CLI prints to be run next
    (resume, report, export) start with it, so they work as printed."""
    import os
    import shlex
    import shutil

    argv0 = sys.argv[0] if sys.argv else ""
    if not argv0 or argv0 in ("-c", "-m") or Path(argv0).name == "__main__.py" or not Path(argv0).name.startswith(
            "knockout"):
        return shlex.join([sys.executable, "-m", "knockout.cli"])
    here = Path(argv0) if os.sep in argv0 else Path(shutil.which(argv0) or argv0)
    found = shutil.which("knockout")
    if found is not None and os.path.realpath(found) == os.path.realpath(here):
        return "knockout"
    return shlex.quote(str(here.absolute()))


def one_line(text: str) -> str:
    """``text`` as one printable line: control characters and line breaks (``\\n``, ``\\x1e``, U+2028 ...)
    written as escapes, rich markup escaped, so an error naming a hostile value is still one line."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return escape(text)


def print_error(exc: KnockoutError) -> None:
    """The error as one line on stderr, secrets redacted."""
    from knockout._redact import redact

    err.print(f"[bold red]error:[/] {one_line(redact(str(exc)))}", highlight=False, soft_wrap=True)


def fail(exc: KnockoutError) -> None:
    """One line on stderr (:func:`print_error`) and the error's exit code."""
    print_error(exc)
    raise typer.Exit(exc.exit_code)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")


def parse_kv(pairs: list[str] | None, what: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for p in pairs or []:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise ConfigError(f"{what} '{p}' must look like key=value")
        if k != k.strip() or v != v.strip():  # refused, not read as something else than written
            raise ConfigError(f"{what} {p!r}: no space around '=' or the value ({k.strip()}={v.strip()})")
        result[k] = v
    return result


#: model fields whose command-line option is not ``--field-name``
OPTION_NAMES = {"self_name": "--self", "extra": "--method-opt", "options": "--data-opt"}

M = TypeVar("M")


def option_name(loc: tuple[Any, ...]) -> str:
    """The command-line option of a model field's location (``("options", "shots")`` -> ``--shots``)."""
    if loc and loc[0] in OPTION_NAMES:
        return OPTION_NAMES[loc[0]]
    name = next((str(x) for x in reversed(loc) if isinstance(x, str) and not x.startswith("[")), "")
    return OPTION_NAMES.get(name) or ("--" + name.replace("_", "-") if name else "options")


def options(factory: Callable[..., M], /, **values: Any) -> M:
    """``factory(**values)``: a model built from command-line options.  The bounds live on the model
    (``knockout._bounds``, ``GenParams``, ``RunConfig``, ...); a value it refuses is a ConfigError naming the
    option: one line, exit code 2."""
    from pydantic import ValidationError

    from knockout._bounds import BoundsError, field_error

    try:
        return factory(**values)
    except BoundsError as exc:  # a configuration dataclass
        raise ConfigError(f"{option_name(exc.loc)}: {str(exc).split(': ', 1)[-1]}") from None
    except ValidationError as exc:  # a pydantic model
        _, msg = field_error(exc)
        raise ConfigError(f"{option_name(tuple(exc.errors()[0]['loc']))}: {msg}") from None


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def gen_params(**values: Any) -> Any:
    """Generation parameters from command-line options (a value out of range is a one-line error)."""
    from knockout.judges import GenParams

    return options(GenParams, **values)


def print_tables(tables: Sequence[Table]) -> None:
    """Each table with rich; one wider than the terminal is printed as several, its columns in groups with
    the first column repeated (:func:`knockout.reports._tables.fit_width`)."""
    from rich.table import Table as RichTable

    from knockout.reports._tables import fit_width

    for whole in tables:
        for t in fit_width(whole, out.width):
            rt = RichTable(title=t.title, caption=t.note or None, title_justify="left")
            for c in t.columns:
                rt.add_column(c, overflow="fold")
            for row in t.rows:
                rt.add_row(*row)
            out.print(rt)


def write_html(path: Path, text: str) -> None:
    from knockout.data._output import write_output

    write_output(path, text, newline=None)


def check_outputs(*paths: Path | None) -> None:
    """Refuse, before any work, an output path that cannot be written (a folder, a missing parent folder):
    :func:`knockout.data._output.output_target`."""
    from knockout.data._output import output_target

    for p in paths:
        if p is not None:
            output_target(p)


def resume_command() -> str:
    """This command line, to run again (``knockout``, or its full path when that is not on PATH, and the
    arguments it was given), secrets redacted."""
    from knockout._redact import redact_arg

    # quoted after the redaction: ``***`` is no glob
    return " ".join([knockout_command(), *(shlex.quote(redact_arg(arg)) for arg in sys.argv[1:])])


#: The exit code of a command whose run ran to its end with judge requests that failed for good (stored
#: ``incomplete``); beside 2 (refused input), 1 (an error) and 128 + a signal (stopped).
EXIT_INCOMPLETE = 3
#: The runs of this command stored ``incomplete`` (store, run id, failed requests), until the command ends.
_NOTED: list[tuple[str, str, int]] = []


def note_incomplete(store_path: Path, run_id: str, failed: int) -> None:
    """Remember, for the end of this command (:func:`exit_if_incomplete`), a run stored ``incomplete``."""
    _NOTED.append((str(store_path), run_id, failed))


def forget_incomplete() -> None:
    # the app's callback, before every command: no note of an earlier command in this process (tests)
    _NOTED.clear()


def exit_if_incomplete(*_: object, **__: object) -> None:
    """The ``knockout`` app's result callback: after a command that ran to its end, a run of it that is
    stored ``incomplete`` gets one line on stderr (the failed requests, the command that retries only them:
    the same command, whose other requests the store answers) and exit code :data:`EXIT_INCOMPLETE`."""
    noted = list(_NOTED)
    _NOTED.clear()
    if not noted:
        return
    failed = sum(n for _, _, n in noted)
    runs = ", ".join(f"run {run_id} in {store} ({n})" for store, run_id, n in noted)
    sys.stderr.write(one_line(f"knockout: {failed} judge request{'s' if failed != 1 else ''} failed for good; "
                              f"stored as incomplete: {runs}; retry only those with: {resume_command()}") + "\n")
    sys.stderr.flush()
    raise typer.Exit(EXIT_INCOMPLETE)
