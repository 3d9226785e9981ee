"""What the route modules share: settings, templates, the per-request store and user, CSRF and bounds."""

# No ``from __future__ import annotations``: FastAPI reads the annotations of the dependency functions.
import math
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup
from pydantic import ConfigDict, Field, ModelWrapValidatorHandler, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from knockout._bounds import bounded
from knockout.annotations import (
    CHOICE_LABELS,
    MAX_VERSION,
    VERDICT_LABELS,
    Assignments,
    Exam,
    ExamGrades,
    Kind,
    PairAnnotations,
)
from knockout.errors import InputError
from knockout.reports._tables import points
from knockout.storage._store import Store
from knockout.web._auth import MAX_NAME, MAX_PASSWORD, Accounts, Session, Sessions, ThrottlePolicy, User

HERE = Path(__file__).parent
SESSION_COOKIE = "knockout_session"
CSRF_COOKIE = "knockout_csrf"
#: Bounds of the form values (characters).
MAX_TOKEN = 128
MAX_COMMENT = 5_000
MAX_TEXT = 100_000  # a gold answer
MAX_NUMBER_TEXT = 32
MAX_NEXT = 2_000


@pydantic_dataclass(frozen=True, config=ConfigDict(arbitrary_types_allowed=True, allow_inf_nan=False))
class WebSettings:
    """How ``knockout serve`` runs the app (see docs/web.md); a pydantic dataclass: the bounds are checked
    however it is made."""

    secure_cookies: bool = False  # cookies only over HTTPS (behind a TLS reverse proxy)
    allowed_origins: tuple[str, ...] = ()  # origins accepted on POST besides the app's own
    session_hours: float = Field(default=8.0, gt=0, le=24 * 30)
    throttle: ThrottlePolicy = field(default_factory=ThrottlePolicy)
    hash_slots: int = Field(default=2, ge=1, le=1024)  # password hashes at once (argon2: 64 MiB each)
    #: password checks waiting for a slot before the server answers 503
    hash_queue: int = Field(default=64, ge=0, le=1_000_000)
    max_body_bytes: int = Field(default=2**20, ge=1024, le=2**31)
    #: addresses of reverse proxies whose X-Forwarded-For / -Proto headers are trusted ('*': any); empty (the
    #: default): the headers are ignored and the client address is the connection's
    trusted_proxies: tuple[str, ...] = ()

    @model_validator(mode="wrap")
    @classmethod
    def _bounds(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        return bounded(data, handler)  # a value out of bounds: a ConfigError naming the field


class LoginRequired(Exception):
    pass


class Throttled(Exception):
    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        super().__init__(f"locked for {wait_s:.0f} s")


_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")


def render_markdown(text: str | None) -> Markup:
    """Markdown to HTML with raw HTML disabled: ``<script>`` in the text comes out as text."""
    return Markup(_md.render(text or ""))  # markdown-it escapes all text (html=False)


def quote_id(value: object) -> str:
    """An id as one URL path segment (``/`` as ``%2F``; the routes' path converters take it back)."""
    return quote(str(value), safe="")


_env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True))
_env.filters["md"] = render_markdown
_env.filters["q"] = quote_id
_env.filters["points"] = points
_env.globals["VERDICT_LABELS"] = VERDICT_LABELS
_env.globals["CHOICE_LABELS"] = CHOICE_LABELS
templates = Jinja2Templates(env=_env)


def settings_of(request: Request) -> WebSettings:
    settings: WebSettings = request.app.state.settings
    return settings


def root(request: Request) -> str:
    """The path the app is served under (uvicorn's ``--root-path`` behind a reverse proxy), or ''."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def redirect(request: Request, path: str) -> RedirectResponse:
    return RedirectResponse(root(request) + path, status_code=303)


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int | None) -> None:
    response.set_cookie(name, value, max_age=max_age, path=root(request) or "/", httponly=True, samesite="strict",
                        secure=settings_of(request).secure_cookies)


def csrf_expected(request: Request) -> str | None:
    """The CSRF token forms must carry: the session's, or before login the ``knockout_csrf`` cookie's."""
    session: Session | None = getattr(request.state, "session", None)
    if session is not None:
        return session.csrf
    token = request.cookies.get(CSRF_COOKIE)
    return token if token and len(token) <= MAX_TOKEN else None


def page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """Render a template with the user, the CSRF token and the root path."""
    context.setdefault("user", None)
    token = csrf_expected(request)
    fresh = token is None
    context["csrf"] = token = token or secrets.token_urlsafe(32)
    context["root"] = root(request)
    response = templates.TemplateResponse(request, name, context, status_code=status)
    if fresh:
        set_cookie(request, response, CSRF_COOKIE, token, None)
    return response


def check_csrf(request: Request, token: str) -> None:
    expected = csrf_expected(request)
    if expected is None or not secrets.compare_digest(expected.encode(), token.encode("utf-8", "replace")):
        raise HTTPException(403, "The form has expired or did not come from this site. Reload and try again.")


def open_store(request: Request) -> Iterator[Store]:
    """The store, opened per request.  FastAPI runs a request's dependencies, its endpoint and the clean-up in
    worker threads that may differ; the store's connection allows that (one thread at a time)."""
    with Store(request.app.state.db) as store:
        yield store


StoreDep = Annotated[Store, Depends(open_store)]


@dataclass
class Ctx:
    """Per request: the store and the logged-in user."""

    store: Store
    user: User
    session: Session

    @cached_property
    def exams(self) -> ExamGrades:
        return ExamGrades(self.store)

    @cached_property
    def pairs(self) -> PairAnnotations:
        return PairAnnotations(self.store)

    @cached_property
    def assignments(self) -> Assignments:
        return Assignments(self.store)

    def may_see(self, kind: Kind, target: str) -> bool:
        return self.user.is_organizer or target in self.assignments.of_user(self.user.name, kind)

    def visible(self, kind: Kind) -> list[str]:
        every = self.assignments.targets(kind)
        return every if self.user.is_organizer else [t for t in self.assignments.of_user(self.user.name, kind)
                                                     if t in every]

    def exam(self, exam_id: str) -> Exam:
        """The exam, if the user may see it: 403 otherwise, also for an exam that does not exist."""
        if not self.may_see("exam", exam_id):
            raise HTTPException(403, "You are not assigned to this exam.")
        exam = self.exams.exam(exam_id)
        if exam is None:
            raise HTTPException(404, "No such exam.")
        return exam

    def pairset(self, pairset: str) -> dict[str, Any]:
        if not self.may_see("pairset", pairset):
            raise HTTPException(403, "You are not assigned to this annotation set.")
        info = self.pairs.pairset(pairset)
        if info is None:
            raise HTTPException(404, "No such annotation set.")
        return info

    def organizer(self, what: str) -> None:
        if not self.user.is_organizer:
            raise HTTPException(403, f"Only an organizer can {what}.")


def session_token(request: Request) -> str:
    token = request.cookies.get(SESSION_COOKIE, "")
    return token if len(token) <= MAX_TOKEN else ""


def context(request: Request, store: StoreDep) -> Ctx:
    token = session_token(request)
    session = Sessions(store).get(token) if token else None
    user = Accounts(store).user(session.user) if session else None
    if session is None or user is None:  # not logged in, expired, revoked, or the account was removed
        raise LoginRequired()
    request.state.session = session
    return Ctx(store, user, session)


Auth = Annotated[Ctx, Depends(context)]
Csrf = Annotated[str, Form(max_length=MAX_TOKEN)]
Version = Annotated[int, Form(ge=0, le=MAX_VERSION - 1)]
Comment = Annotated[str, Form(max_length=MAX_COMMENT)]
NumberText = Annotated[str, Form(max_length=MAX_NUMBER_TEXT)]
Name = Annotated[str, Form(max_length=MAX_NAME)]
Password = Annotated[str, Form(max_length=MAX_PASSWORD)]
Next = Annotated[str, Form(max_length=MAX_NEXT)]
Choice = Annotated[str, Form(max_length=MAX_TOKEN)]


def safe_next(target: str) -> str:
    """Only local paths (no ``//host`` or ``scheme:``) as the page to go to after login."""
    if (not target.startswith("/") or target.startswith("//") or "\\" in target or ":" in target.split("?")[0]
            or len(target) > MAX_NEXT or not target.isprintable()):
        return "/"
    return target


def number(text: str, field: str) -> float:
    """A number typed into a form (a decimal comma is accepted); not finite -> InputError."""
    try:
        value = float(text.strip().replace(",", "."))
    except ValueError:
        raise InputError(f"'{text}' is not a number", field=field) from None
    if not math.isfinite(value):
        raise InputError(f"'{text}' is not a finite number", field=field)
    return value
