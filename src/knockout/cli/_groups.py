"""``knockout groups``: each question's answer groups, their grade sheet, the import of group grades, undo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from knockout.cli._common import JsonOpt, check_outputs, err, fail, out, print_json, print_tables
from knockout.errors import KnockoutError

#: the teacher's name when none is given (the grades read as ``web:teacher`` in report and gradebook)
DEFAULT_GRADER = "teacher"


def groups(
    run: Annotated[str, typer.Argument(help="the SQLite store (STORE or STORE:RUN_ID; default: its latest grade run)")],
    import_file: Annotated[Path | None, typer.Option(
        "--import", help="grade groups from a file: CSV with columns group and grade (and comment; the sheet "
        "--sheet writes, filled in), or JSON {group: grade}: the grade of each group's representative, stored as "
        "the grader's on it and the members near-identical to it")] = None,
    sheet: Annotated[Path | None, typer.Option("--sheet", help="write one CSV row per group to fill in (group, "
                                               "question, size, draft, representative and its text, grade)")] = None,
    grader: Annotated[str, typer.Option("--grader", help="whose grades --import and --undo are")] = DEFAULT_GRADER,
    undo: Annotated[bool, typer.Option("--undo", help="revert the grader's latest group action (an import, a "
                                       "group grade or override in the web app)")] = False,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="cluster the answers again (the groups are kept in "
                                          "the store after the first time, split and moves included)")] = False,
    members: Annotated[bool, typer.Option("--members", help="list every member of each group")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Each question's answer groups (answers alike in meaning and draft grade, near-identical ones always
    together), largest first: the draft grade and its spread, the representative answer, the members; which
    group to grade next.  A teacher grades a group once (--import, or the web app): the grade of its
    representative, which it and its near-identical members take; the other members keep their own drafts, moved
    by the adaptation to the teacher (knockout calibrate, gradebook), where the group's grade counts as one."""
    from knockout._bounds import check_name
    from knockout.groups import graded_groups, import_group_grades, propose, run_groups, sheet_rows, teacher_grades
    from knockout.groups import undo as undo_last
    from knockout.reports._runs import parse_ref, pick_run, refuse_partial
    from knockout.storage import Store

    try:
        check_outputs(sheet)
        check_name(grader, "grader")
        path, run_id = parse_ref(run)
        with Store.open_existing(path) as store:
            record = refuse_partial(store, pick_run(store, run_id, "grades"), False, "groups")
            done: dict[str, Any] = {}
            if undo:
                done["undo"] = undo_last(store, grader)
            if import_file is not None:
                graded = import_group_grades(store, record.id, import_file, grader)
                done["imported"] = {"groups": len(graded), "answers": sum(len(g.graded) for g in graded),
                                    "kept": sum(len(g.kept) for g in graded),
                                    "adapted": sum(len(g.adapted) for g in graded),
                                    "action": graded[0].action if graded else None}
            found = run_groups(store, record.id, rebuild=rebuild)
            items = store.items_for_run(record.id)
            assert items is not None
            texts = {a.id: a.text for a in items}
            mine = {a: g for a, g in teacher_grades(store, record.id).items() if g["grader"] == grader}
            teacher = {a: g["score"] for a, g in mine.items()}
            nxt = propose(found.questions, teacher, graded=graded_groups(mine))
            if sheet is not None:
                _write_sheet(sheet, sheet_rows(found, texts))
    except KnockoutError as exc:
        fail(exc)
        return
    if as_json:
        print_json({**found.as_dict(), **done, "grader": grader, "teacher_grades": len(teacher), "next": nxt[:10],
                    "texts": {g.representative: texts.get(g.representative, "") for gs in found.questions.values()
                              for g in gs}})
        return
    if "undo" in done:
        u = done["undo"]
        err.print("nothing to undo" if u is None else
                  f"undone: {u['action']} ({u['reverted']} answers back to their grade before" +
                  (f"; {u['changed_since']} changed since, left as they are" if u["changed_since"] else "") + ")",
                  highlight=False, markup=False)
    if "imported" in done:
        i = done["imported"]
        err.print(f"imported {i['groups']} group grades: {i['answers']} answers graded as {grader}'s" +
                  (f", {i['kept']} kept ({grader} graded them one by one)" if i["kept"] else "") +
                  (f"; {i['adapted']} other members keep their own drafts, moved by the adaptation to these grades "
                   "(knockout calibrate, gradebook)" if i["adapted"] else "") +
                  f"; --undo reverts it ({i['action']})", highlight=False, markup=False)
    print_tables(_tables(found, texts, teacher, nxt, members))
    if sheet is not None:
        out.print(f"grade sheet written to {sheet}: fill in the grade column, then knockout groups {run} "
                  f"--import {sheet}", highlight=False, markup=False)


def _tables(found: Any, texts: dict[str, str], teacher: dict[str, float], nxt: list[dict[str, Any]],
            members: bool) -> list[Any]:
    from knockout.reports._tables import Table, points

    tables = []
    for qid, gs in found.questions.items():
        rows = []
        for g in gs:
            graded = [teacher[a] for a in g.members if a in teacher]
            text = " ".join(texts.get(g.representative, "").split())
            rows.append([g.id, str(len(g.members)), f"{points(g.draft)} / {points(g.max_points)}",
                         points(g.spread), f"{g.representative}: {text[:70]}" + ("..." if len(text) > 70 else ""),
                         f"{len(graded)} ({', '.join(sorted({points(x) for x in graded}))})" if graded else "-"] +
                        ([", ".join(g.members)] if members else []))
        tables.append(Table(f"question {qid}: {len(gs)} groups of {sum(len(g.members) for g in gs)} answers",
                            ["group", "answers", "draft", "spread", "representative", "teacher's grades"] +
                            (["members"] if members else []), rows))
    if nxt:
        tables.append(Table("grade these groups next (the expected squared error a grade removes, highest first)",
                            ["#", "group", "ungraded", "draft", "gain"],
                            [[str(i), n["group"], str(n["ungraded"]), points(n["draft"]), n["words"]]
                             for i, n in enumerate(nxt[:5], 1)]))
    return tables


def _write_sheet(path: Path, rows: list[dict[str, Any]]) -> None:
    from knockout.data._csv import write_dicts
    from knockout.data._output import atomic_output
    from knockout.groups._files import SHEET_COLUMNS

    with atomic_output(path, newline="") as f:
        write_dicts(f, rows, SHEET_COLUMNS)


def register(app: typer.Typer) -> None:
    app.command()(groups)
