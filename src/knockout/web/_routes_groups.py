"""Answer groups in the web app: a question's groups, largest first; the teacher grades a group's representative
(its near-identical members take the grade, the others keep their drafts moved by the adaptation), splits it,
moves an answer out, overrides a member, undoes the last action (:mod:`knockout.groups`)."""

# No ``from __future__ import annotations``: FastAPI reads the parameter annotations of the routes.
from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from knockout.annotations import Exam, StaleWrite
from knockout.errors import InputError
from knockout.web._deps import MAX_TOKEN, Auth, Csrf, Ctx, NumberText, check_csrf, number, page, quote_id, redirect

router = APIRouter()
Token = Annotated[str, Form(max_length=MAX_TOKEN)]


def _where(exam: Exam) -> dict[str, tuple[int, int]]:
    """Answer id -> (examinee number, question number) of the exam."""
    return {a.id: (e.number, k) for e in exam.examinees for k, q in enumerate(exam.questions, 1)
            for a in [e.answers[q.id]] if q.id in e.answers}


def groups_context(ctx: Ctx, exam: Exam, k: int) -> dict[str, Any]:
    from knockout.groups import graded_groups, propose, run_for_answers, run_groups

    if not 1 <= k <= len(exam.questions):
        raise HTTPException(404, "No such question.")
    question = exam.questions[k - 1]
    where = _where(exam)
    run_id = run_for_answers(ctx.store, set(where))
    c: dict[str, Any] = {"user": ctx.user, "exam": exam, "k": k, "question": question, "run_id": run_id,
                         "groups": [], "next": None, "error": None}
    if run_id is None:
        return c
    found = run_groups(ctx.store, run_id)
    mine = {g["answer_id"]: g for g in ctx.exams.grades(exam_id=exam.id, grader=ctx.user.name)}
    texts = {a.id: a.text for e in exam.examinees for a in e.answers.values()}
    teacher = {a: float(g["score"]) for a, g in mine.items()}
    done = graded_groups(mine)
    proposed = propose({question.id: found.questions.get(question.id, [])}, teacher, graded=done)
    c["next"] = proposed[0] if proposed else None
    for g in found.questions.get(question.id, []):
        grades = {mine[a]["score"] for a in g.members if a in mine}
        c["groups"].append({
            "id": g.id, "size": len(g.members), "draft": g.draft, "spread": g.spread, "max": g.max_points,
            "representative": g.representative, "text": texts.get(g.representative, ""),
            "graded": sum(a in mine for a in g.members), "group_graded": g.id in done,
            "grade": next(iter(grades)) if len(grades) == 1 else None,
            "members": [{"id": a, "n": where.get(a, (0, 0))[0], "text": texts.get(a, ""), "draft": g.drafts.get(a),
                         "grade": mine[a]["score"] if a in mine else None,
                         "via": mine[a].get("via_group") if a in mine else None} for a in g.members]})
    return c


@router.get("/groups/{exam_id:path}/q/{k}", response_class=HTMLResponse)
def groups_page(request: Request, exam_id: str, k: int, ctx: Auth, done: str = "") -> HTMLResponse:
    c = groups_context(ctx, ctx.exam(exam_id), k)
    c["done"] = done[:200]
    return page(request, "groups.html", **c)


@router.post("/groups/{exam_id:path}/q/{k}", response_class=HTMLResponse)
def groups_action(request: Request, exam_id: str, k: int, ctx: Auth, csrf: Csrf, action: Token,
                  group: Token = "", answer: Token = "", score: NumberText = "") -> Response:
    """One action: ``grade`` (a group), ``override`` (a member), ``split`` (a group), ``move`` (a member out),
    ``undo`` (the user's latest group action)."""
    from knockout import groups as g

    check_csrf(request, csrf)
    exam = ctx.exam(exam_id)
    c = groups_context(ctx, exam, k)
    if c["run_id"] is None:
        raise HTTPException(404, "No judge run graded this exam: there are no groups.")
    run_id = c["run_id"]
    mine = {x["id"] for x in c["groups"]}
    members = {m["id"] for x in c["groups"] for m in x["members"]}
    try:
        if action in ("grade", "split") and group not in mine:
            raise InputError("no such group of this question", field="group")
        if action in ("override", "move") and answer not in members:
            raise InputError("no such answer of this question", field="answer")
        if action == "grade":
            r = g.grade_group(ctx.store, run_id, group, number(score, "score"), ctx.user.name, exam_id=exam.id)
            done = (f"graded {len(r.graded)} answers of {group} (the representative and those near-identical to it)"
                    + (f", {len(r.kept)} kept" if r.kept else "") +
                    (f"; {len(r.adapted)} keep their own drafts, moved by your grades" if r.adapted else ""))
        elif action == "override":
            g.override(ctx.store, run_id, answer, number(score, "score"), ctx.user.name, exam_id=exam.id)
            done = "graded one answer"
        elif action == "split":
            done = "split into " + " and ".join(g.split_group(ctx.store, run_id, group))
        elif action == "move":
            done = f"moved out into {g.move_out(ctx.store, run_id, answer)}"
        elif action == "undo":
            u = g.undo(ctx.store, ctx.user.name)
            done = "nothing to undo" if u is None else f"undone: {u['reverted']} answers back"
        else:
            raise InputError("unknown action", field="action")
    except (InputError, StaleWrite) as e:
        c = groups_context(ctx, exam, k)
        c["error"] = e.message if isinstance(e, InputError) else "changed meanwhile: reload"
        c["done"] = ""
        return page(request, "groups.html", 400, **c)
    from urllib.parse import quote

    return redirect(request, f"/groups/{quote_id(exam_id)}/q/{k}?done={quote(done)}")
