"""``knockout calibrate`` (the model's grades adapted to the teacher's level) and ``knockout review`` (what to
grade next)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from knockout.cli._common import JsonOpt, check_outputs, fail, options, out, print_json, print_tables
from knockout.errors import KnockoutError

PerQuestion = Annotated[int | None, typer.Option(
    "--per-question", help="adapt on this many teacher-graded answers per question (drawn with --seed) and "
    "compute the figures on the other teacher-graded answers: what a teacher who graded only these would get")]


PartialOpt = Annotated[bool, typer.Option("--partial", help="read a run that is not complete (incomplete, "
                                          "interrupted, failed or still running): its results so far")]


def _loaded(ref: str, details: bool = False, *, partial: bool, what: str) -> Any:
    from knockout.reports._runs import parse_ref, pick_run, read_run, refuse_partial
    from knockout.storage import Store

    path, run_id = parse_ref(ref)
    with Store.open_existing(path) as store:
        record = refuse_partial(store, pick_run(store, run_id, "grades"), partial, what)
        return read_run(store, record, details=details, web_grades=True)


def after_grade(store: Path, run_id: str) -> dict[str, Any]:
    """``grade --calibrate``: the calibration of the run just made, or why there is none."""
    from knockout.calibration._run import section_or_refusal

    # the run just made: an incomplete one (its command exits 3) is calibrated on what it has
    return section_or_refusal(_loaded(f"{store}:{run_id}", partial=True, what="calibrate"), resamples=1000)


def calibrate(
    run: Annotated[str, typer.Argument(help="the SQLite store (STORE or STORE:RUN_ID; default: its latest grade run)")],
    per_question: PerQuestion = None,
    output: Annotated[Path | None, typer.Option("--output", "-O", help="write every answer's model and adapted "
                                                "grade (CSV, or JSONL by the suffix .jsonl)")] = None,
    resamples: Annotated[int, typer.Option("--resamples", help="bootstrap resamples for the 95% CIs (0: "
                                           "none; at most 100,000)")] = 1000,
    seed: Annotated[int, typer.Option(help="seed of the folds, the draw of --per-question and the bootstrap")] = 0,
    partial: PartialOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Adapt the model's grades to the teacher's level (the data file's human grades and the web app's): an
    exam-level offset and slope and per-question offsets with the frozen model as prior, so a few teacher grades
    move the grades a little; show how far the grades written moved, and RMSE, Pearson and kappa before and after
    on held-out answers only."""
    from knockout._bounds import Calibrating, Seeded
    from knockout.calibration._run import calibrate_loaded, calibrated_rows, calibration_tables

    try:
        options(Seeded, seed=seed)
        options(Calibrating, per_question=per_question, resamples=resamples)
        check_outputs(output)
        loaded = _loaded(run, partial=partial, what="calibrate")
        section = calibrate_loaded(loaded, per_question=per_question, seed=seed, resamples=resamples)
        if output is not None:
            _write(output, calibrated_rows(section, _rows(loaded), "answer_id"))
    except KnockoutError as exc:
        fail(exc)
        return
    if as_json:
        print_json({"run_id": loaded.run.id, **section})
        return
    if loaded.run.simulated:
        out.print("[bold yellow]warning:[/] the judge of this run is the scripted SIMULATION, not an LLM")
    print_tables(calibration_tables(section))
    if output is not None:
        out.print(f"model and adapted grades written to {output}")


def _rows(loaded: Any) -> list[dict[str, Any]]:
    rows = []
    for r in loaded.results:
        try:
            a = loaded.items.answer(r["item_id"])
        except KeyError:
            continue
        rows.append({"answer_id": a.id, "question_id": r["question_id"], "examinee": a.examinee,
                     "max_points": loaded.items.question_of(a).max_points, "expert_score": a.human_score,
                     "score": r["score"] if r["valid"] else None})
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    import json

    from knockout.data._csv import write_dicts
    from knockout.data._output import atomic_output

    with atomic_output(path, newline="") as f:
        if path.suffix == ".jsonl":
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
            return
        write_dicts(f, rows, list(rows[0]) if rows else ["answer_id"])  # the one CSV writer (formulas neutralised)


def review(
    run: Annotated[str, typer.Argument(help="the SQLite store (STORE or STORE:RUN_ID; default: its latest grade run)")],
    next_n: Annotated[int, typer.Option("--next", help="how many answers to list (1 to 10,000)")] = 10,
    seed: Annotated[int, typer.Option(help="seed of the calibration's refits")] = 0,
    partial: PartialOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """The answers an expert should grade next: ranked by how much an expert grade would help (the calibrated
    grade's uncertainty, jury disagreement, debiased-knockout order flips, spread over repeated samples,
    closeness to a grade boundary, questions with few expert grades)."""
    from knockout._bounds import Calibrating, Seeded
    from knockout.calibration._review import queue_tables, review_loaded

    try:
        options(Seeded, seed=seed)
        options(Calibrating, next=next_n)
        loaded = _loaded(run, details=True, partial=partial, what="review")
        queue = review_loaded(loaded, seed=seed)
    except KnockoutError as exc:
        fail(exc)
        return
    groups = next_groups(run, loaded)
    if as_json:
        print_json({"run_id": loaded.run.id, "queue": queue["queue"][:next_n], "calibration": queue["calibration"],
                    "grades": queue["grades"], "weights": queue["weights"], "groups": groups[:next_n]})
        return
    print_tables(queue_tables(queue, next_n))
    if groups:
        from knockout.reports._tables import Table, points

        print_tables([Table("or grade these answer groups next (knockout groups; one grade: its representative's)",
                            ["#", "group", "ungraded", "draft", "gain"],
                            [[str(i), g["group"], str(g["ungraded"]), points(g["draft"]), g["words"]]
                             for i, g in enumerate(groups[:next_n], 1)])])


def next_groups(ref: str, loaded: Any) -> list[dict[str, Any]]:
    """The review queue's groups: where the run's answers were grouped (``knockout groups``, the web app), the
    groups whose grade would remove the most expected error (:func:`knockout.groups.propose`), the expert grades
    entered so far (the file's and the web app's) as the teacher's; [] where nobody grouped them."""
    from knockout.groups import graded_groups, propose, stored_groups, teacher_grades
    from knockout.reports._runs import parse_ref
    from knockout.storage import Store

    with Store.open_existing(parse_ref(ref)[0]) as store:
        found = stored_groups(store, loaded.run.id)
        done = graded_groups(teacher_grades(store, loaded.run.id)) if found is not None else set()
    if found is None:
        return []
    experts = {a.id: float(a.human_score) for a in loaded.items if a.human_score is not None}
    return propose(found.questions, experts, graded=done)


def register(app: typer.Typer) -> None:
    app.command()(calibrate)
    app.command()(review)

