"""Smoke tests of the pairwise-method benchmarks (scripted judge: a simulation; small sizes)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from tests.conftest import DATA, ROOT, needs_shared

BENCH = ROOT / "bench"


def bench(script: str, *args: str, cwd: Path | None = None) -> dict[str, object]:
    res = subprocess.run([sys.executable, str(BENCH / script), *args, "--json"], capture_output=True, text=True,
                         timeout=120, cwd=cwd)
    assert res.returncode == 0, res.stderr
    out: dict[str, object] = json.loads(res.stdout)
    return out


def test_calls_counts_match_the_formulas() -> None:
    out = bench("calls.py", "--max-n", "6", "--mixed", "2,5,6")
    rows = out["rows"]
    assert isinstance(rows, dict) and out["simulated_judge"] is True
    for n in range(2, 7):
        r = rows[str(n)]
        assert r["knockout"] == {"calls": n - 1, "waves": math.ceil(math.log2(n))}
        assert r["knockout-d"]["calls"] == 2 * (n - 1)
        assert r["allpairs"] == {"calls": n * (n - 1) // 2, "waves": 1}
        assert r["pairwise"] == {"calls": math.ceil(n / 2), "waves": 1}
    assert rows["mixed"]["knockout"] == {"calls": 1 + 4 + 5, "waves": 3}


def test_recovery_runs_and_says_it_is_a_simulation() -> None:
    out = bench("recovery.py", "--questions", "3", "--answers", "4", "--noise", "0.1", "--bias", "0,0.2")
    assert out["simulated_judge"] is True
    cells = out["cells"]
    assert isinstance(cells, list) and len(cells) == 2
    assert all(-1 <= v <= 1 for c in cells for v in c["pearson"].values() if v is not None)


@needs_shared
def test_saf_methods_with_the_scripted_judge(tmp_path: Path) -> None:
    args = ["--data", str(DATA / "saf/unseen_answers/english"), "--questions", "2", "--answers", "3",
            "--judge", "scripted", "--out", str(tmp_path / "s.db"), "--quiet"]
    out = bench("saf_methods.py", *args)
    rows = {r["method"]: r for r in out["rows"]}  # type: ignore[attr-defined]
    assert set(rows) == {"individual", "pairwise", "knockout", "knockout-d"}
    assert rows["knockout"]["requests"] == 2 * 2 and rows["knockout-d"]["requests"] == 2 * 2 * 2
    again = bench("saf_methods.py", *args)
    assert all(r["live_calls"] == 0 for r in again["rows"])  # type: ignore[attr-defined]
