"""The transcript viewer: read-only pages of the judge runs in the store, for viewers and organizers.

``/runs`` lists the runs; ``/runs/RUN`` a run's items (filters: invalid only, largest human-judge gap
first; one question); ``/runs/RUN/item/ITEM`` one answer (side-by-side item, meta-judgement) with every
judge request and raw reply; ``/runs/RUN/bracket/QUESTION`` the knockout bracket of a question.  Nothing
here writes to the store.
"""

# No ``from __future__ import annotations``: FastAPI reads the parameter annotations of the routes.
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from knockout.errors import ConfigError
from knockout.reports._transcripts import bracket, get_run, item_view, run_items, run_list
from knockout.storage._store import RunRecord
from knockout.web._deps import MAX_TOKEN, Auth, Ctx, page

router = APIRouter()
T = TypeVar("T")

Flag = Annotated[int, Query(ge=0, le=1)]
Sort = Annotated[str, Query(pattern="^(order|gap)$")]
PageNo = Annotated[int, Query(ge=1, le=1_000_000, alias="page")]
QuestionFilter = Annotated[str, Query(max_length=2000)]


def may_view(ctx: Ctx) -> None:
    if not ctx.user.sees_runs:
        raise HTTPException(403, "Only viewers and organizers can read the judge runs.")


def the_run(ctx: Ctx, run_id: str) -> RunRecord:
    may_view(ctx)
    if len(run_id) > MAX_TOKEN:
        raise HTTPException(404, "No such run.")
    try:
        return get_run(ctx.store, run_id)
    except ConfigError:
        raise HTTPException(404, "No such run.") from None


@router.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request, ctx: Auth) -> HTMLResponse:
    may_view(ctx)
    return page(request, "runs.html", user=ctx.user, runs=run_list(ctx.store))


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str, ctx: Auth, invalid: Flag = 0, sort: Sort = "order", page_no: PageNo = 1,
             question: QuestionFilter = "") -> HTMLResponse:
    run = the_run(ctx, run_id)
    listing = run_items(ctx.store, run, invalid_only=bool(invalid), sort=sort, question=question or None,
                        page=page_no)
    return page(request, "run.html", user=ctx.user, run=run, listing=listing, invalid=invalid, sort=sort,
                question=question)


def found(what: str, read: Callable[..., T], *args: Any) -> T:
    """What ``read`` finds, or a 404 page saying what is missing."""
    try:
        return read(*args)
    except KeyError:
        raise HTTPException(404, f"No such {what} in this run.") from None


@router.get("/runs/{run_id}/item/{item_id:path}", response_class=HTMLResponse)
def item_page(request: Request, run_id: str, item_id: str, ctx: Auth) -> HTMLResponse:
    run = the_run(ctx, run_id)
    view = found("item", item_view, ctx.store, run, item_id)
    return page(request, "run_item.html", user=ctx.user, run=run, item_id=item_id, v=view)


@router.get("/runs/{run_id}/bracket/{question_id:path}", response_class=HTMLResponse)
def bracket_page(request: Request, run_id: str, question_id: str, ctx: Auth) -> HTMLResponse:
    run = the_run(ctx, run_id)
    b = found("question", bracket, ctx.store, run, question_id)
    if not b["rounds"]:
        raise HTTPException(404, "This run played no matches on this question.")
    return page(request, "bracket.html", user=ctx.user, run=run, b=b)
