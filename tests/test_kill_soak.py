"""The kill soak (bench/kill_soak.py) in its smoke-test size: 3 SIGKILLs of a knockout --debias run against
the loopback fake server, resumed until complete; two processes on one store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "kill_soak.py"


@pytest.mark.slow
def test_kill_soak_quick() -> None:
    p = subprocess.run([sys.executable, str(BENCH), "--quick", "--json"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["kills"], "no kill happened"
    for k in r["kills"]:
        assert k["lost"] == 0
        assert k["repeated"] <= max(k["leases"], k["server_open"]), k  # only what was in flight is sent again
    assert r["lost_at_end"] == 0
    assert r["identical"] and r["results"] == 12
    assert r["integrity_check"] == "ok"
    assert r["two_process"]["exit_codes"] == [0, 0] and r["two_process"]["identical"]
    assert r["two_process"]["share"] < 0.05
    assert r["ok"]
