"""bench/accuracy.py end to end with the scripted judge (a simulation: plumbing only, not an accuracy figure)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, needs_shared


@needs_shared
def test_accuracy_bench_prints_the_suites_and_the_paired_comparison(tmp_path: Path) -> None:
    cmd = [sys.executable, str(ROOT / "bench/accuracy.py"), "--quick", "--judge", "scripted", "--judge-opt",
           "noise=0.1", "--out", str(tmp_path / "a.db"), "--save", str(tmp_path / "r.json")]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout
    assert "| saf-ind" in out and "| demo-ind" in out
    assert "paired against the baseline" in out  # the committed baseline (bench/baselines/accuracy.json)
    saved = json.loads((tmp_path / "r.json").read_text())
    assert set(saved["suites"]) == {"saf-ind", "demo-ind"}
    saf = saved["suites"]["saf-ind"]
    assert saf["figures"]["n"] == 48 and len(saf["items"]) == 48 and saf["paired"]["n"] == 48


def test_the_committed_baseline_names_its_commit_and_holds_per_item_grades() -> None:
    base = json.loads((ROOT / "bench/baselines/accuracy.json").read_text())
    assert base["commit"] and base["judge"] == "llamacpp"
    assert {"saf-ind", "demo-ind"} <= set(base["suites"])
    assert all(e["items"] for e in base["suites"].values())
