"""``knockout gradebook``: one row per student, the final grade of each question (expert, calibrated or judge)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from knockout.cli._common import JsonOpt, check_outputs, err, fail, one_line, options, print_json
from knockout.errors import KnockoutError


def gradebook(
    run: Annotated[str, typer.Argument(help="the SQLite store (STORE or STORE:RUN_ID; default: its latest grade run)")],
    format: Annotated[str, typer.Option("--format", help="csv (grade, source and error per question, total), "
                                        "moodle (Moodle's CSV grade import) or canvas (Canvas's gradebook "
                                        "CSV)")] = "csv",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="file (default: stdout)")] = None,
    id_column: Annotated[str, typer.Option("--id-column", help="the student identifier: examinee (the data's "
                                           "examinee id) or a field of each answer's meta, e.g. email")
                         ] = "examinee",
    partial: Annotated[bool, typer.Option("--partial", help="use a run that is not complete (its missing "
                                          "grades are the source 'none')")] = False,
    seed: Annotated[int, typer.Option(help="seed of the calibration's folds and refits")] = 0,
    write_empty: Annotated[bool, typer.Option("--write-empty", help="moodle: write an answer without a grade as "
                                              "an empty cell, which clears the grade Moodle has (refused "
                                              "otherwise)")] = False,
    as_json: JsonOpt = False,
) -> None:
    """One row per student (examinee), a column per question with the final grade: the expert's where there is
    one (the data file's human grades and the web app's), else the grade adapted to the teacher's level with its
    error (as `knockout calibrate` adapts it, when there are expert grades), else the judge's; the total; each
    grade's source (expert, calibrated, judge, none), or the trust mark that replaces it where no expert graded
    the answer (flagged: the persuasion defence flagged it, with the grade it would have had; needs expert: the
    judge cannot grade its question reliably)."""
    from knockout.data._output import atomic_output
    from knockout.reports._gradebook import FORMATS, check, left_out_line, unanchored_line, write
    from knockout.reports._gradebook import gradebook as build
    from knockout.reports._runs import parse_ref

    try:
        from knockout._bounds import Seeded
        from knockout.errors import ConfigError

        options(Seeded, seed=seed)
        if format not in FORMATS:
            raise ConfigError(f"unknown gradebook format '{format}' ({', '.join(FORMATS)})")
        if as_json and output is None:
            raise ConfigError("gradebook --json prints a summary; give --output FILE for the gradebook")
        check_outputs(output)
        path, run_id = parse_ref(run)
        book = build(path, run_id, id_column=id_column, partial=partial, seed=seed)
        check(book, format, write_empty=write_empty)
        if output is None:
            write(book, format, sys.stdout, write_empty=write_empty)
        else:
            with atomic_output(output, newline="") as f:
                write(book, format, f, write_empty=write_empty)
    except KnockoutError as exc:
        fail(exc)
        return
    summary = book.summary()
    if as_json:
        print_json({**summary, "format": format, "output": None if output is None else str(output)})
        return
    if book.run.simulated:
        err.print("[bold yellow]warning:[/] the judge of this run is the scripted SIMULATION, not an LLM")
    if not book.run.complete:
        err.print(f"[bold yellow]warning:[/] run {book.run.id} is {book.run.status}: its grades are partial")
    cal = book.calibration
    how = ("no expert grades: the model's grades, not adapted" if cal is None else f"not adapted: {cal['refused']}"
           if "refused" in cal else cal["label"])
    src = ", ".join(f"{n} {k}" for k, n in summary["sources"].items())
    err.print(f"gradebook of run {book.run.id}: {len(book.students)} students x {len(book.questions)} questions; "
              f"grades: {src}; {how}" + (f"; written to {output}" if output is not None else ""),
              highlight=False, soft_wrap=True, markup=False)
    if (line := unanchored_line(book)) is not None:
        err.print(f"[bold yellow]warning:[/] {one_line(line)}", highlight=False, soft_wrap=True)
    if (line := left_out_line(book)) is not None:
        err.print(f"[bold yellow]warning:[/] {one_line(line)}", highlight=False, soft_wrap=True)
    if book.trust.get("needs_expert_questions") or book.trust.get("flagged"):
        err.print(f"trust: {book.trust['words']}" + "".join(f"\n  question {q}: {w}" for q, w in
                                                        book.trust.get("questions", {}).items()),
                  highlight=False, soft_wrap=True, markup=False)


def register(app: typer.Typer) -> None:
    app.command()(gradebook)
