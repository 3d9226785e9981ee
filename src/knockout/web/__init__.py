"""Web app for human grading and side-by-side annotation (``knockout serve``; extra ``web``).

* :func:`create_app` (``knockout.web._app``) and :class:`WebSettings`: the FastAPI app serving one store;
  its routes are ``APIRouter`` modules (``_routes_auth``, ``_routes_exams``, ``_routes_pairs``).
* :class:`Accounts`, :class:`Sessions`, :class:`LoginThrottle`, :class:`HashSlots`, :class:`User`:
  accounts with argon2id passwords and roles, server-side sessions, login throttling, bounded hashing.

What people enter is stored by :mod:`knockout.annotations`.  FastAPI is imported only when
:func:`create_app` or :class:`WebSettings` is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from knockout.web._auth import (
    ARGON2_PARAMS,
    ROLES,
    Accounts,
    HashSlots,
    LoginThrottle,
    Session,
    Sessions,
    ThrottlePolicy,
    User,
)

if TYPE_CHECKING:
    from knockout.web._app import create_app
    from knockout.web._deps import WebSettings

__all__ = [
    "ARGON2_PARAMS",
    "ROLES",
    "Accounts",
    "HashSlots",
    "LoginThrottle",
    "Session",
    "Sessions",
    "ThrottlePolicy",
    "User",
    "WebSettings",
    "create_app",
]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from knockout.web._app import create_app

        return create_app
    if name == "WebSettings":
        from knockout.web._deps import WebSettings

        return WebSettings
    raise AttributeError(f"module 'knockout.web' has no attribute '{name}'")
