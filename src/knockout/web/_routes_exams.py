"""The overview, exams, grading pages, figures and the question information (organizers decide it)."""

# No ``from __future__ import annotations``: FastAPI reads the parameter annotations of the routes.
from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from knockout.annotations import Exam, ImageFiles, StaleWrite
from knockout.data._records import Question
from knockout.errors import InputError
from knockout.web._deps import (
    MAX_TEXT,
    MAX_TOKEN,
    Auth,
    Comment,
    Csrf,
    Ctx,
    NumberText,
    Version,
    check_csrf,
    number,
    page,
    quote_id,
    redirect,
)
from knockout.web._totals import totals_view

router = APIRouter()
#: The language of the gold answer a grader chose (``?gold=de``); unknown values are ignored.
GoldLang = Annotated[str, Query(max_length=16)]
LANGUAGE_NAMES = {"en": "English", "de": "Deutsch"}


def gold_answers(q: Question) -> dict[str, str]:
    """The question's gold answers per language, the exam's language first: SciEx's ``GoldAnswerEnglish``
    and ``GoldAnswerGerman`` (kept by the loader in ``meta["gold_answers"]``) and ``reference`` (which holds
    an organizer's change) for the exam's language -- unless it is only the other language's fallback."""
    golds = {str(k): str(v) for k, v in (q.meta.get("gold_answers") or {}).items()}
    if q.reference and (q.language in golds or q.reference not in golds.values()):
        golds[q.language] = q.reference
    return {lang: golds[lang] for lang in sorted(golds, key=lambda lang: lang != q.language)}


def gold_choice(q: Question, chosen: str) -> dict[str, Any]:
    golds = gold_answers(q)
    lang = chosen if chosen in golds else next(iter(golds), None)
    return {"golds": [(code, LANGUAGE_NAMES.get(code, code), code == lang) for code in golds],
            "gold_lang": lang, "gold_text": golds.get(lang) if lang else None,
            "gold_name": LANGUAGE_NAMES.get(lang, lang) if lang else None,
            "gold_note": None if lang is None or lang == q.language else
            f"the exam's language is {LANGUAGE_NAMES.get(q.language, q.language)}"}


@router.get("/", response_class=HTMLResponse)
def index(request: Request, ctx: Auth) -> HTMLResponse:
    exams = []
    for exam_id in ctx.visible("exam"):
        exam = ctx.exams.exam(exam_id)
        if exam is None:
            continue
        mine = ctx.exams.grades(exam_id=exam_id, grader=ctx.user.name)
        exams.append({"id": exam_id, "questions": len(exam.questions), "examinees": len(exam.examinees),
                      "total": sum(len(e.answers) for e in exam.examinees), "done": len(mine),
                      "flagged": len(exam.out_of_range(mine))})
    pairsets = []
    for ps in ctx.visible("pairset"):
        queue = ctx.pairs.queue(ps, ctx.user.name)
        done = len(ctx.pairs.verdicts(ps, annotator=ctx.user.name))
        pairsets.append({"id": ps, "total": len(queue), "done": done, **(ctx.pairs.pairset(ps) or {})})
    return page(request, "index.html", user=ctx.user, exams=exams, pairsets=pairsets)


def flagged_grades(ctx: Ctx, exam: Exam, grader: str | None) -> list[dict[str, Any]]:
    """Grades above the current maximum: (examinee number, question number, grader, score, max)."""
    numbers = {a.id: (e.number, k) for e in exam.examinees for k, q in enumerate(exam.questions, 1)
               for a in [e.answers.get(q.id)] if a is not None}
    out = []
    for g in exam.out_of_range(ctx.exams.grades(exam_id=exam.id, grader=grader)):
        n, k = numbers.get(g["answer_id"], (None, None))
        q = exam.question(g["question_id"])
        out.append({"n": n, "k": k, "grader": g["grader"], "score": g["score"],
                    "max": q.max_points if q else None})
    return out


@router.get("/exam/{exam_id:path}/examinee/{n}/q/{k}", response_class=HTMLResponse)
def grading_page(request: Request, exam_id: str, n: int, k: int, ctx: Auth, saved: int = 0,
                 gold: GoldLang = "") -> HTMLResponse:
    c = grading_context(ctx, ctx.exam(exam_id), n, k, gold)
    c["saved"] = bool(saved)
    return page(request, "grade.html", **c)


def grading_context(ctx: Ctx, exam: Exam, n: int, k: int, gold: str = "") -> dict[str, Any]:
    if not 1 <= n <= len(exam.examinees) or not 1 <= k <= len(exam.questions):
        raise HTTPException(404, "No such examinee or question.")
    examinee = exam.examinees[n - 1]
    question = exam.questions[k - 1]
    answer = examinee.answers.get(question.id)
    # the user's grades: entered here, and the data file's of the grader of the same name (their own, imported)
    mine = {g["answer_id"] for g in ctx.exams.grades(exam_id=exam.id, grader=ctx.user.name)} | {
        a.id for e in exam.examinees for a in e.answers.values() if ctx.user.name in a.human_scores}
    total = sum(len(e.answers) for e in exam.examinees)
    # previous / next answer of this examinee, then on to the next examinee
    order = [(i, j) for i, e in enumerate(exam.examinees, 1) for j, q in enumerate(exam.questions, 1)
             if q.id in e.answers]
    here = order.index((n, k)) if (n, k) in order else -1
    grade = ctx.exams.grade(answer.id, ctx.user.name) if answer else None
    copied = ImageFiles(ctx.store).recorded(exam.fingerprint, question.id)
    imported = answer.human_scores.get(ctx.user.name) if answer is not None and grade is None else None
    return {
        "user": ctx.user, "exam": exam, "n": n, "k": k, "question": question, "answer": answer,
        "grade": grade, "imported": imported, "draft": draft_of(ctx, answer.id) if answer is not None else None,
        "out_of_range": grade is not None and exam.out_of_range([grade]) != [],
        "prev": order[here - 1] if here > 0 else None,
        "next": order[here + 1] if 0 <= here < len(order) - 1 else None,
        "done": len(mine), "total": total,
        "examinee_done": sum(a.id in mine for a in examinee.answers.values()),
        "examinee_total": len(examinee.answers),
        "graded": {j for j, q in enumerate(exam.questions, 1)
                   if q.id in examinee.answers and examinee.answers[q.id].id in mine},
        "images": [(i, im, i in copied) for i, im in enumerate(question.images)],
        "error": None, "conflict": None, "saved": False,
        "totals": totals_view(ctx, exam, ctx.user.name),
        # the chosen gold-answer language travels with the links of the page (and the save)
        "gq": f"?gold={gold}" if gold.isascii() and gold.isalpha() else "",
        **gold_choice(question, gold),
    }


def draft_of(ctx: Ctx, answer_id: str) -> dict[str, Any] | None:
    """The draft grade of an answer: the latest complete grading run's result, with its readers in words."""
    from knockout.groups import run_for_answers
    from knockout.methods._kind import readers_words

    run_id = run_for_answers(ctx.store, {answer_id})
    if run_id is None:
        return None
    found = ctx.store.results(run_id, item_id=answer_id)
    if not found:
        return None
    r = found[-1]
    record = ctx.store.get_run(run_id)
    readers = (r.get("details") or {}).get("readers")
    return {"run_id": run_id, "score": r.get("score") if r.get("valid") else None,
            "judge": record.judge if record is not None else "",
            "simulated": bool(record.simulated) if record is not None else False,
            "readers": readers_words(readers) if isinstance(readers, dict) else None}


def judge_means(ctx: Ctx, exam: Exam) -> dict[str, str]:
    """Question id -> the judge's mean grade over its answers in the latest complete grading run, in words."""
    from knockout.groups import run_for_answers

    ids = {a.id for e in exam.examinees for a in e.answers.values()}
    run_id = run_for_answers(ctx.store, ids)
    if run_id is None:
        return {}
    out = {}
    for q in exam.questions:
        got = [float(r["score"]) for r in ctx.store.results(run_id, question_id=q.id, details=False)
               if r["item_id"] in ids and r.get("valid") and r.get("score") is not None]
        if got:
            out[q.id] = f"mean {sum(got) / len(got):.2f} / {q.max_points:g} over {len(got)} answers"
    return out


@router.post("/exam/{exam_id:path}/examinee/{n}/q/{k}", response_class=HTMLResponse)
def save_grade(
    request: Request,
    exam_id: str,
    n: int,
    k: int,
    ctx: Auth,
    csrf: Csrf,
    score: NumberText,
    version: Version,
    comment: Comment = "",
    action: Annotated[str, Form(max_length=MAX_TOKEN)] = "save",
    gold: GoldLang = "",
) -> Response:
    check_csrf(request, csrf)
    exam = ctx.exam(exam_id)
    c = grading_context(ctx, exam, n, k, gold)
    if c["answer"] is None:
        raise HTTPException(404, "This examinee did not answer this question.")
    try:
        ctx.exams.save_grade(answer=c["answer"], question=c["question"], exam_id=exam.id, grader=ctx.user.name,
                             score=number(score, "score"), comment=comment.strip(), base_version=version)
    except InputError as e:
        c.update(error=e.message, typed={"score": score, "comment": comment})
        return page(request, "grade.html", 400, **c)
    except StaleWrite as e:
        c.update(grade=e.current, conflict={"score": score, "comment": comment})
        return page(request, "grade.html", 409, **c)
    base = f"/exam/{quote_id(exam_id)}/examinee"
    if action == "next" and c["next"]:
        return redirect(request, f"{base}/{c['next'][0]}/q/{c['next'][1]}{c['gq']}")
    return redirect(request, f"{base}/{n}/q/{k}?saved=1{c['gq'].replace('?', '&')}")


@router.get("/exam/{exam_id:path}/examinee/{n}", response_class=HTMLResponse)
def examinee_page(request: Request, exam_id: str, n: int, ctx: Auth) -> Response:
    exam = ctx.exam(exam_id)
    if not 1 <= n <= len(exam.examinees):
        raise HTTPException(404, "No such examinee.")
    first = next(j for j, q in enumerate(exam.questions, 1) if q.id in exam.examinees[n - 1].answers)
    return redirect(request, f"/exam/{quote_id(exam_id)}/examinee/{n}/q/{first}")


@router.get("/exam/{exam_id:path}/image/{k}/{i}")
def image(exam_id: str, k: int, i: int, ctx: Auth) -> Response:
    """A figure of question ``k``: only the copy recorded at import, never a path named by the data."""
    exam = ctx.exam(exam_id)
    if not 1 <= k <= len(exam.questions) or not 0 <= i < len(exam.questions[k - 1].images):
        raise HTTPException(404, "No such image.")
    found = ImageFiles(ctx.store).find(exam.fingerprint, exam.questions[k - 1].id, i)
    if found is None:
        raise HTTPException(404, "This figure was not copied into the store at import.")
    path, media_type = found
    return FileResponse(path, media_type=media_type, headers={"Cache-Control": "private, no-store"})


@router.get("/exam/{exam_id:path}/q/{k}/info", response_class=HTMLResponse)
def info_page(request: Request, exam_id: str, k: int, ctx: Auth, saved: int = 0, flagged: int = 0) -> HTMLResponse:
    exam = ctx.exam(exam_id)
    if not 1 <= k <= len(exam.questions):
        raise HTTPException(404, "No such question.")
    return page(request, "info.html", user=ctx.user, exam=exam, k=k, question=exam.questions[k - 1],
                error=None, saved=bool(saved), flagged=flagged)


@router.post("/exam/{exam_id:path}/q/{k}/info", response_class=HTMLResponse)
def save_info(
    request: Request,
    exam_id: str,
    k: int,
    ctx: Auth,
    csrf: Csrf,
    max_points: NumberText,
    student_average: NumberText = "",
    reference: Annotated[str, Form(max_length=MAX_TEXT)] = "",
    difficulty: Annotated[str, Form(max_length=MAX_TOKEN)] = "",
) -> Response:
    check_csrf(request, csrf)
    exam = ctx.exam(exam_id)
    ctx.organizer("change the question information")
    if not 1 <= k <= len(exam.questions):
        raise HTTPException(404, "No such question.")
    question = exam.questions[k - 1]
    try:
        flagged = ctx.exams.set_question_info(
            question, user=ctx.user.name, max_points=number(max_points, "max_points"),
            student_average=number(student_average, "student_average") if student_average.strip() else None,
            reference=reference.strip() or None, difficulty=difficulty.strip().lower() or None)
    except InputError as e:
        return page(request, "info.html", 400, user=ctx.user, exam=exam, k=k, question=question,
                    error=f"{e.field}: {e.message}", saved=False, flagged=0)
    return redirect(request, f"/exam/{quote_id(exam_id)}/q/{k}/info?saved=1&flagged={flagged}")


@router.get("/exam/{exam_id:path}", response_class=HTMLResponse)
def exam_page(request: Request, exam_id: str, ctx: Auth) -> HTMLResponse:
    exam = ctx.exam(exam_id)
    mine = ctx.exams.grades(exam_id=exam_id, grader=ctx.user.name)
    done = {g["answer_id"] for g in mine}
    flagged = flagged_grades(ctx, exam, None if ctx.user.is_organizer else ctx.user.name)
    rows = [{"number": e.number, "total": len(e.answers), "done": sum(a.id in done for a in e.answers.values()),
             "imported": sum(bool(a.human_scores) for a in e.answers.values()),
             "flagged": sum(f["n"] == e.number and f["grader"] == ctx.user.name for f in flagged)}
            for e in exam.examinees]
    counts = {"imported": sum(r["imported"] for r in rows), "mine": len(done), "answers": sum(r["total"] for r in rows),
              "store": str(ctx.store.path), "data": exam.items.source if exam.items is not None else None}
    return page(request, "exam.html", user=ctx.user, exam=exam, rows=rows, flagged=flagged, counts=counts,
                totals=totals_view(ctx, exam, ctx.user.name),
                all_totals=totals_view(ctx, exam, None) if ctx.user.is_organizer else None,
                grade_next=grade_next(ctx, exam, done), judge_means=judge_means(ctx, exam))


def grade_next(ctx: Ctx, exam: Exam, done: set[str], n: int = 5) -> dict[str, Any] | None:
    """"Grade these next": the answers of ``exam`` that an expert grade would help most (the review queue of
    the latest grading run in the store that graded them; :func:`knockout.calibration.exam_queue`), those this
    user graded left out; None when no run graded the exam's answers."""
    from knockout.calibration._review import exam_queue

    where = {a.id: (e.number, k) for e in exam.examinees for k, q in enumerate(exam.questions, 1)
             for a in [e.answers[q.id]] if q.id in e.answers}
    queue = exam_queue(ctx.store, set(where) - done, n)
    if queue is None:
        return None
    for q in queue["queue"]:
        q["n"], q["k"] = where[q["answer_id"]]
    # the trust marks: questions the judge cannot grade reliably, answers the persuasion defence flagged
    number = {q.id: k for k, q in enumerate(exam.questions, 1)}
    queue["needs_expert_list"] = [{"k": number[qid], "words": words}
                                  for qid, words in (queue.get("needs_expert") or {}).items() if qid in number]
    queue["needs_expert_list"].sort(key=lambda t: t["k"])
    queue["flagged_list"] = sorted(({"n": where[aid][0], "k": where[aid][1], "full": full}
                                    for aid, full in (queue.get("flagged") or {}).items() if aid in where),
                                   key=lambda t: (t["n"], t["k"]))
    return queue
