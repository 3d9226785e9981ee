"""Which process holds a run or an in-flight request, and whether that process is gone.

An owner is ``HOST:PID:TOKEN`` (the token tells apart two processes that got the same pid).  A process on
this host that no longer exists cannot finish what it holds: its runs read as ``interrupted`` and its
in-flight requests may be taken over at once.  A process on another host is trusted until its lease expires.
"""

from __future__ import annotations

import os
import secrets
import socket

_TOKEN: tuple[int, str] | None = None


def owner() -> str:
    """This process's owner string (a new token after a fork)."""
    global _TOKEN
    pid = os.getpid()
    if _TOKEN is None or _TOKEN[0] != pid:
        _TOKEN = (pid, secrets.token_hex(4))
    return f"{socket.gethostname()}:{pid}:{_TOKEN[1]}"


def is_gone(who: str | None) -> bool:
    """True when ``who`` is a process of this host that no longer runs (never for other hosts or this one)."""
    if not who:
        return False
    host, _, rest = who.partition(":")
    pid_text, _, _token = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    if who == owner():
        return False
    pid = int(pid_text)
    if pid == os.getpid():  # our pid with another token: an earlier process whose pid we reuse
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # exists, owned by another user
        return False
    return False
