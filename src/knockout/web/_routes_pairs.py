"""Side-by-side annotation: the queue, the verdict form, the agreement page and the overlap."""

# No ``from __future__ import annotations``: FastAPI reads the parameter annotations of the routes.
from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from knockout.annotations import MAX_OVERLAP, PairView, StaleWrite
from knockout.errors import InputError
from knockout.web._deps import Auth, Choice, Comment, Csrf, Ctx, Version, check_csrf, page, quote_id, redirect

router = APIRouter()


def pair_context(ctx: Ctx, pairset: str, pos: int) -> tuple[dict[str, Any], PairView]:
    info = ctx.pairset(pairset)
    queue = ctx.pairs.queue(pairset, ctx.user.name)
    if not 1 <= pos <= len(queue):
        raise HTTPException(404, "No such item in your queue.")
    view = queue[pos - 1]
    judged = {v["pair_id"]: v for v in ctx.pairs.verdicts(pairset, annotator=ctx.user.name)}
    done = {v.position for v in queue if v.pair.id in judged}
    return {"user": ctx.user, "info": info, "pairset": pairset, "view": view, "pos": pos, "total": len(queue),
            "done": len(done), "verdict": judged.get(view.pair.id), "conflict": None, "error": None,
            "next_todo": next((v.position for v in queue if v.position not in done and v.position != pos),
                              None)}, view


@router.get("/pairs/{pairset:path}/item/{pos}", response_class=HTMLResponse)
def pair_page(request: Request, pairset: str, pos: int, ctx: Auth) -> HTMLResponse:
    c, _ = pair_context(ctx, pairset, pos)
    return page(request, "pair.html", **c)


@router.post("/pairs/{pairset:path}/item/{pos}", response_class=HTMLResponse)
def save_pair(
    request: Request,
    pairset: str,
    pos: int,
    ctx: Auth,
    csrf: Csrf,
    choice: Choice,
    version: Version,
    comment: Comment = "",
) -> Response:
    check_csrf(request, csrf)
    c, view = pair_context(ctx, pairset, pos)
    try:
        ctx.pairs.save_verdict(view, pairset, ctx.user.name, choice, comment=comment.strip(), base_version=version)
    except InputError as e:
        c["error"] = e.message
        return page(request, "pair.html", 400, **c)
    except StaleWrite as e:
        c.update(verdict=e.current, conflict={"choice": choice})
        return page(request, "pair.html", 409, **c)
    return redirect(request, f"/pairs/{quote_id(pairset)}")


@router.get("/pairs/{pairset:path}/agreement", response_class=HTMLResponse)
def agreement_page(request: Request, pairset: str, ctx: Auth) -> HTMLResponse:
    info = ctx.pairset(pairset)
    queue = ctx.pairs.queue(pairset, ctx.user.name)
    done = len(ctx.pairs.verdicts(pairset, annotator=ctx.user.name))
    load = {a: len(p) for a, p in ctx.pairs.allocation(pairset).items()}
    return page(request, "agreement.html", user=ctx.user, info=info, pairset=pairset,
                ag=ctx.pairs.agreement(pairset), load=load, done=done, total=len(queue), max_overlap=MAX_OVERLAP)


@router.post("/pairs/{pairset:path}/overlap")
def set_overlap(request: Request, pairset: str, ctx: Auth, csrf: Csrf,
                overlap: Annotated[int, Form(ge=1, le=MAX_OVERLAP)]) -> Response:
    check_csrf(request, csrf)
    ctx.organizer("change the overlap")
    ctx.pairset(pairset)
    ctx.pairs.set_overlap(pairset, overlap)
    return redirect(request, f"/pairs/{quote_id(pairset)}/agreement")


@router.get("/pairs/{pairset:path}", response_class=HTMLResponse)
def pairset_page(request: Request, pairset: str, ctx: Auth) -> Response:
    ctx.pairset(pairset)
    queue = ctx.pairs.queue(pairset, ctx.user.name)
    judged = {v["pair_id"] for v in ctx.pairs.verdicts(pairset, annotator=ctx.user.name)}
    todo = next((v.position for v in queue if v.pair.id not in judged), None)
    target = f"/pairs/{quote_id(pairset)}/"
    return redirect(request, target + (f"item/{todo}" if todo else "agreement"))
