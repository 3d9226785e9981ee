"""Log in, log out and change one's password."""

# No ``from __future__ import annotations``: FastAPI reads the parameter annotations of the routes.
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from knockout.errors import ConfigError
from knockout.storage._store import Store
from knockout.web._auth import Accounts, Busy, HashSlots, LoginThrottle, Sessions, User
from knockout.web._deps import (
    SESSION_COOKIE,
    Auth,
    Csrf,
    Ctx,
    Name,
    Next,
    Password,
    StoreDep,
    Throttled,
    check_csrf,
    page,
    redirect,
    root,
    safe_next,
    session_token,
    set_cookie,
    settings_of,
)

router = APIRouter()


def client_address(request: Request) -> str:
    """The client's address (behind a reverse proxy: the forwarded one, when uvicorn trusts the proxy)."""
    return request.client.host if request.client else "unknown"


async def check_password(request: Request, store: Store, name: str, password: str) -> User | None:
    """The user when ``password`` is theirs: throttled per account and per address (429 when locked),
    hashed in a bounded slot (503 when too many are waiting); a failure is recorded."""
    throttle = LoginThrottle(store, settings_of(request).throttle)
    address = client_address(request)
    wait = throttle.wait(name, address)
    if wait > 0:
        raise Throttled(wait)
    slots: HashSlots = request.app.state.hash_slots
    try:
        user = await slots.run(Accounts(store).authenticate, name, password)
    except Busy:
        raise HTTPException(503, "The server is busy checking other logins. Try again in a few seconds.",
                            headers={"Retry-After": "5"}) from None
    if user is None:
        throttle.failed(name, address)
    else:
        throttle.succeeded(name)
    return user


def start_session(request: Request, store: Store, user: str, target: str) -> Response:
    """A fresh session (new token and CSRF token) for ``user``, replacing this browser's previous one."""
    sessions = Sessions(store)
    old = session_token(request)
    if old:
        sessions.revoke(old)
    hours = settings_of(request).session_hours
    token, _ = sessions.create(user, hours)
    response = redirect(request, target)
    set_cookie(request, response, SESSION_COOKIE, token, int(hours * 3600))
    return response


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = "/") -> HTMLResponse:
    return page(request, "login.html", next=safe_next(next), error=None)


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request, store: StoreDep, csrf: Csrf, username: Name, password: Password,
                next: Next = "/") -> Response:
    check_csrf(request, csrf)
    user = await check_password(request, store, username, password)
    if user is None:
        return page(request, "login.html", 401, next=safe_next(next), error="Wrong user name or password.")
    return start_session(request, store, user.name, safe_next(next))


@router.post("/logout")
def logout(request: Request, ctx: Auth, csrf: Csrf) -> Response:
    check_csrf(request, csrf)
    Sessions(ctx.store).revoke(session_token(request))
    response = redirect(request, "/login")
    response.delete_cookie(SESSION_COOKIE, path=root(request) or "/", httponly=True, samesite="strict",
                           secure=settings_of(request).secure_cookies)
    return response


def account_page(request: Request, ctx: Ctx, status: int = 200, *, error: str | None = None,
                 changed: bool = False) -> HTMLResponse:
    return page(request, "account.html", status, user=ctx.user, error=error, changed=changed,
                sessions=Sessions(ctx.store).of_user(ctx.user.name), session_hours=settings_of(request).session_hours)


@router.get("/account", response_class=HTMLResponse)
def account(request: Request, ctx: Auth, changed: int = 0) -> HTMLResponse:
    return account_page(request, ctx, changed=bool(changed))


@router.post("/account/password", response_class=HTMLResponse)
async def change_password(request: Request, ctx: Auth, csrf: Csrf, current: Password, new: Password,
                          repeat: Password) -> Response:
    """A new password ends every session of the user (other browsers included); this browser gets a new one."""
    check_csrf(request, csrf)

    def refuse(message: str) -> HTMLResponse:
        return account_page(request, ctx, 400, error=message)

    if new != repeat:
        return refuse("The new password and its repetition differ.")
    if await check_password(request, ctx.store, ctx.user.name, current) is None:
        return refuse("The current password is wrong.")
    slots: HashSlots = request.app.state.hash_slots
    try:
        await slots.run(Accounts(ctx.store).set_password, ctx.user.name, new)
    except ConfigError as e:
        return refuse(str(e).capitalize() + ".")
    except Busy:
        raise HTTPException(503, "The server is busy. Try again in a few seconds.",
                            headers={"Retry-After": "5"}) from None
    return start_session(request, ctx.store, ctx.user.name, "/account?changed=1")
