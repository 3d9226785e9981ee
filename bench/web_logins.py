"""Memory and time of the web app's login under a burst of concurrent bad logins.

    python bench/web_logins.py [--logins 40] [--same-user] [--json]

Starts ``knockout serve`` (the real uvicorn server, argon2 at its default cost: RFC 9106 low-memory
profile, 64 MiB and 3 passes per hash) on a fresh store with one user, then sends ``--logins`` bad logins
at once, each from its own client (its own cookies and CSRF token, ``Origin`` set as a browser would).
Different user names by default (unknown users cost a hash too, and no per-account lockout applies);
``--same-user`` aims them all at one account.  Prints the server's resident memory before the burst,
its peak (``VmHWM``), the wall time of the burst and the HTTP statuses.  ``PYTHONPATH=/old/checkout/src``
measures another version.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

SRC = Path(__file__).resolve().parents[1] / "src"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in KiB."""
    text = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", text).group(1))  # type: ignore[union-attr]
    hwm = int(re.search(r"VmHWM:\s+(\d+)", text).group(1))  # type: ignore[union-attr]
    return rss, hwm


def one_login(base: str, user: str, statuses: list[int]) -> None:
    with httpx.Client(base_url=base, headers={"Origin": base}, timeout=300) as c:
        page = c.get("/login")
        token = re.search(r'name="csrf" value="([^"]+)"', page.text)
        r = c.post("/login", data={"csrf": token.group(1) if token else "", "username": user,
                                   "password": "wrong password 123"})
        statuses.append(r.status_code)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logins", type=int, default=40)
    ap.add_argument("--same-user", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(SRC)}  # another checkout: set it
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.db"
        subprocess.run([sys.executable, "-m", "knockout.cli", "users", "add", "alice", "--db", str(db),
                        "--password-stdin"], input="the right password\n", text=True, env=env, check=True,
                       capture_output=True)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = subprocess.Popen([sys.executable, "-m", "knockout.cli", "serve", "--db", str(db), "--port",
                                   str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 60
            while True:
                try:
                    httpx.get(base + "/login", timeout=2)
                    break
                except httpx.TransportError:
                    if time.time() > deadline or server.poll() is not None:
                        raise SystemExit("the server did not start") from None
                    time.sleep(0.2)
            idle_rss, _ = rss_kib(server.pid)
            statuses: list[int] = []
            users = ["alice" if args.same_user else f"nobody{i}" for i in range(args.logins)]
            threads = [threading.Thread(target=one_login, args=(base, u, statuses)) for u in users]
            start = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start
            after_rss, peak = rss_kib(server.pid)
        finally:
            server.terminate()
            server.wait(timeout=30)
    result: dict[str, Any] = {
        "logins": args.logins, "same_user": args.same_user, "idle_rss_mib": round(idle_rss / 1024, 1),
        "peak_rss_mib": round(peak / 1024, 1), "rss_after_mib": round(after_rss / 1024, 1),
        "wall_s": round(wall, 2), "statuses": dict(sorted(Counter(statuses).items())),
    }
    if args.json:
        print(json.dumps(result))
        return
    t = Table(title=f"{args.logins} concurrent bad logins against knockout serve (argon2 defaults)")
    for col in ("idle RSS (MiB)", "peak RSS (MiB)", "RSS after (MiB)", "wall (s)", "HTTP statuses"):
        t.add_column(col)
    t.add_row(str(result["idle_rss_mib"]), str(result["peak_rss_mib"]), str(result["rss_after_mib"]),
              f"{wall:.2f}", ", ".join(f"{k}: {v}" for k, v in result["statuses"].items()))
    Console().print(t)


if __name__ == "__main__":
    main()
