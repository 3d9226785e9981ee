"""Tests that start Ray run inside a network namespace that has only loopback.

Ray binds the host's own address even when it is told 127.0.0.1 (``ray start``, ``ray.init()``), so a test
that starts Ray on a shared machine would listen on the network.  Such a test is marked
:data:`loopback_only` (it runs only inside a loopback-only namespace) and a gate test re-executes it there
with :func:`rerun_in_loopback_netns`: ``unshare -n`` (a new network namespace: no interface but ``lo``) in a
PID namespace of its own (everything in it dies with it), ``ip link set lo up``, then pytest on the given node
ids.  Where ``unshare -n`` is refused (not root, no
user namespaces), the gate skips.
"""

from __future__ import annotations

import contextlib
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
    """Why ``unshare`` (a network and a PID namespace, :func:`loopback_command`) cannot be used here, or None."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs unshare and ip (util-linux, iproute2)"
    try:
        done = subprocess.run(loopback_command(["true"]), capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare -n failed: {exc}"
    if done.returncode != 0:
        return f"unshare -n refused: {done.stderr.decode(errors='replace').strip()}"
    return None


def loopback_command(argv: list[str]) -> list[str]:
    """``argv`` run in a new network namespace with only ``lo`` (brought up), and a new PID namespace whose first
    process it is: when it ends, or when ``unshare`` is killed (``--kill-child``), the kernel kills every process
    left in the namespace (a Ray cluster a killed run started included: issue 59 found 9 Ray heads still running
    26 minutes after a gate's time-out)."""
    return ["unshare", "-n", "-p", "-f", "--mount-proc", "--kill-child", "sh", "-c", 'ip link set lo up && exec "$@"',
            "sh", *argv]


def pace() -> float:
    """How many times slower than an idle core this machine runs a process now (at least 1): the wall time of a
    small CPU-bound child (about 0.3 s of CPU) over the CPU time it used.  The tests' time limits are their idle
    limits times this (a loaded two-core machine: 2 to 7), measured where they start, not constants."""
    import resource
    import time

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-S", "-c", "sum(i * i for i in range(3_000_000))"], check=True, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return max(1.0, wall / max(cpu, 1e-3))


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when this (the parent) process ends, however it ends (PR_SET_PDEATHSIG)."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def rerun_in_loopback_netns(config: pytest.Config, *node_ids: str, timeout: float = 600.0) -> dict[str, int]:
    """Run pytest on ``node_ids`` in a loopback-only network namespace (the outer run's ``-m`` expression
    passed on); fails with the inner output unless it passes; the inner counts (passed, skipped, ...).

    ``timeout`` is the idle machine's limit: the limit is ``timeout`` times :func:`pace` measured now.  The inner
    run is in a PID namespace of its own and dies with this process: past the limit it is interrupted (SIGINT:
    its fixtures tear down what they started), then killed with everything in its namespace, in a ``finally``;
    a gate killed itself takes the namespace with it (``unshare`` dies with its parent, its child with it)."""
    import signal
    import time

    reason = unshare_refused()
    if reason is not None:
        pytest.skip(reason)
    marks = config.getoption("markexpr") or ""
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
            *(["-m", marks] if marks else []), *node_ids]
    env = {**os.environ, ENV: "1"}
    env.pop("RAY_ADDRESS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    limit = timeout * pace()
    proc = subprocess.Popen(loopback_command(argv), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=_die_with_parent)
    try:
        try:
            out, _ = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            import psutil

            with contextlib.suppress(psutil.Error):  # the inner pytest (unshare's child) interrupted
                for child in psutil.Process(proc.pid).children():
                    child.send_signal(signal.SIGINT)
            t0 = time.monotonic()
            try:
                out, _ = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            pytest.fail(f"the tests in the loopback namespace ran past {limit:.0f} s ({timeout:g} s x the pace; "
                        f"interrupted, stopped {time.monotonic() - t0:.0f} s later):\n{(out or '')[-12000:]}")
    finally:
        if proc.poll() is None:  # killed: its namespace, and every process left in it, with it
            proc.kill()
            proc.wait()
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", out)}
    if proc.returncode not in (0, 5) or counts.get("failed") or counts.get("error") or counts.get("errors"):
        pytest.fail(f"the tests in the loopback namespace failed (exit {proc.returncode}):\n{out[-12000:]}")
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
