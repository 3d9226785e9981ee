"""The grading and annotation web app (FastAPI, server-rendered Jinja2 pages, no JavaScript).

``create_app(db, settings)`` serves one store; the routes live in ``_routes_auth`` (login, logout,
password), ``_routes_exams`` (overview, exams, grading, figures, question info), ``_routes_groups`` (a
question's answer groups: grade a group once, split, move out, override, undo), ``_routes_pairs``
(side-by-side annotation) and ``_routes_runs`` (the read-only transcript viewer of judge runs).  What is
wired here (see docs/web.md):

* every response: a Content-Security-Policy without any script, ``nosniff``, ``DENY`` framing, no caching;
* every POST: a body of at most ``max_body_bytes`` (413 otherwise), an ``Origin`` (or, without one, a
  ``Referer``) of the app's own origin or one of ``allowed_origins`` (403 otherwise), and a CSRF token;
* ``X-Forwarded-For`` / ``X-Forwarded-Proto`` read only from the proxies named in ``trusted_proxies``
  (none by default: a client's claimed address never reaches the login throttle);
* errors as pages: 303 to the login page without a session, 400 for a form value out of its bounds, 429
  while a login is locked out, 503 while too many password checks wait.
"""

# No ``from __future__ import annotations``: FastAPI reads the annotations of the handlers.
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import quote, urlsplit

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from knockout.storage._store import Store
from knockout.web import _routes_auth, _routes_exams, _routes_groups, _routes_pairs, _routes_runs
from knockout.web._auth import HashSlots
from knockout.web._deps import HERE, LoginRequired, Throttled, WebSettings, page, root

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class BodyLimit:
    """Refuse (413) a request body over ``limit`` bytes before anything parses it; the body read is
    handed on to the app unchanged."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in UNSAFE_METHODS:
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.limit:
            await self.too_large(scope, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self.too_large(scope, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def too_large(self, scope: Scope, send: Send) -> None:
        response = HTMLResponse("<h1>413</h1><p>The form is too large.</p>", status_code=413,
                                headers={"Connection": "close"})
        await response(scope, _no_body, send)


async def _no_body() -> Message:
    return {"type": "http.disconnect"}


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of a URL, lower-cased; None when it has none."""
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


def same_origin(request: Request, allowed: tuple[str, ...]) -> bool:
    """Whether a POST comes from a page of this app: its ``Origin`` header (or, when a browser sent none,
    its ``Referer``) is the app's own origin as the request names it, or one configured with
    ``--allowed-origin``.  A request with neither header is refused."""
    claimed = request.headers.get("origin")
    if claimed is None:
        referer = request.headers.get("referer")
        claimed = origin_of(referer) if referer else None
    if not claimed or claimed == "null":
        return False
    own = f"{request.url.scheme}://{request.url.netloc}".lower()
    return claimed.lower().rstrip("/") in {own, *allowed}


def create_app(db: str | Path, settings: WebSettings | None = None) -> FastAPI:
    settings = settings or WebSettings()
    db = Path(db)
    Store(db).close()  # creates or migrates the store before the first request
    allowed = tuple(o for o in (origin_of(a) for a in settings.allowed_origins) if o)

    app = FastAPI(title="knockout grading", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.db = db
    app.state.settings = settings
    app.state.hash_slots = HashSlots(settings.hash_slots, settings.hash_queue)

    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)

    @app.middleware("http")
    async def check_origin(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if request.method in UNSAFE_METHODS and not same_origin(request, allowed):
            return page(request, "error.html", 403, code=403,
                        message="This form was not sent from a page of this site (Origin check).")
        return await call_next(request)

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    @app.exception_handler(LoginRequired)
    async def _login(request: Request, exc: LoginRequired) -> Response:
        path, prefix = request.url.path, root(request)
        target = path[len(prefix):] if prefix and path.startswith(prefix) else path
        return RedirectResponse(root(request) + "/login?next=" + quote(target, safe="/"), status_code=303)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> Response:
        response = page(request, "error.html", exc.status_code, code=exc.status_code, message=str(exc.detail))
        response.headers.update(exc.headers or {})
        return response

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        fields = sorted({str(e.get("loc", ("", "?"))[-1]) for e in exc.errors()})
        return page(request, "error.html", 400, code=400,
                    message=f"A value is missing, too long or out of range: {', '.join(fields)}.")

    @app.exception_handler(Throttled)
    async def _throttled(request: Request, exc: Throttled) -> Response:
        minutes = max(1, round(exc.wait_s / 60))
        response = page(request, "login.html", 429, next="/", error=(
            f"Too many failed logins for this account or from this address. Try again in {minutes} minute"
            f"{'s' if minutes != 1 else ''}."))
        response.headers["Retry-After"] = str(int(exc.wait_s) + 1)
        return response

    if settings.trusted_proxies:  # added last: the outermost layer, so everything sees the forwarded client
        from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=list(settings.trusted_proxies))
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    for module in (_routes_auth, _routes_groups, _routes_exams, _routes_pairs, _routes_runs):
        app.include_router(module.router)
    return app
