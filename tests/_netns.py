"""Tests that start Ray run inside a network namespace that has only loopback.

Ray binds the host's own address even when it is told 127.0.0.1 (``ray start``, ``ray.init()``), so a test
that starts Ray on a shared machine would listen on the network.  Such a test is marked
:data:`loopback_only` (it runs only inside a loopback-only namespace) and a gate test re-executes it there
with :func:`rerun_in_loopback_netns`: ``unshare -n`` (a new network namespace: no interface but ``lo``),
``ip link set lo up``, then pytest on the given node ids.  Where ``unshare -n`` is refused (not root, no
user namespaces), the gate skips.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: set in the re-executed pytest: this process runs in a namespace whose only interface is loopback
ENV = "KNOCKOUT_TEST_LOOPBACK_NETNS"
IN_LOOPBACK_NETNS = os.environ.get(ENV) == "1"

loopback_only = pytest.mark.skipif(not IN_LOOPBACK_NETNS, reason="starts Ray: runs only inside a loopback-only "
                                   "network namespace (re-executed there by its gate test)")
#: the gate tests themselves run only outside the namespace
outside_netns = pytest.mark.skipif(IN_LOOPBACK_NETNS, reason="already inside the loopback-only namespace")


@functools.cache
def unshare_refused() -> str | None:
    """Why ``unshare -n`` cannot be used here, or None."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs unshare and ip (util-linux, iproute2)"
    try:
        done = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare -n failed: {exc}"
    if done.returncode != 0:
        return f"unshare -n refused: {done.stderr.decode(errors='replace').strip()}"
    return None


def loopback_command(argv: list[str]) -> list[str]:
    """``argv`` run in a new network namespace with only ``lo`` (brought up)."""
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *argv]


def rerun_in_loopback_netns(config: pytest.Config, *node_ids: str, timeout: float = 600.0) -> dict[str, int]:
    """Run pytest on ``node_ids`` in a loopback-only network namespace (the outer run's ``-m`` expression
    passed on); fails with the inner output unless it passes; the inner counts (passed, skipped, ...)."""
    reason = unshare_refused()
    if reason is not None:
        pytest.skip(reason)
    marks = config.getoption("markexpr") or ""
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
            *(["-m", marks] if marks else []), *node_ids]
    env = {**os.environ, ENV: "1"}
    env.pop("RAY_ADDRESS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    try:
        done = subprocess.run(loopback_command(argv), cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the tests in the loopback namespace ran past {timeout:g} s:\n{exc.stdout or ''}")
    out = done.stdout + done.stderr
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", out)}
    if done.returncode not in (0, 5) or counts.get("failed") or counts.get("error") or counts.get("errors"):
        pytest.fail(f"the tests in the loopback namespace failed (exit {done.returncode}):\n{out[-12000:]}")
    print(out[-2000:])
    return counts


def in_this_netns(pid: int) -> bool:
    """Process ``pid`` shares this process's network namespace (a test kills only processes of its own
    namespace: never another user's Ray on the same machine)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net")
    except OSError:
        return False


def non_loopback_listeners() -> list[str]:
    """The TCP sockets listening in this network namespace on anything but loopback (a wildcard counts)."""
    import ipaddress

    import psutil

    bad = []
    for c in psutil.net_connections("tcp"):
        if c.status != psutil.CONN_LISTEN or not c.laddr:
            continue
        ip = ipaddress.ip_address(c.laddr.ip)
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        if not (mapped or ip).is_loopback:
            bad.append(f"{c.laddr.ip}:{c.laddr.port} (pid {c.pid})")
    return bad
