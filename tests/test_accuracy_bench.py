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
    # per question (issue 41): within-question Pearson, both spreads, the level offset
    assert "per question: the judge's signal inside a question and its level" in out
    pq = saf["figures"]["per_question"]
    assert pq["summary"]["questions"] == 6 and len(pq["questions"]) == 6
    assert {"pearson", "judge_sd", "human_sd", "offset"} <= set(pq["questions"][0])


def test_the_committed_baseline_names_its_commit_and_holds_per_item_grades() -> None:
    base = json.loads((ROOT / "bench/baselines/accuracy.json").read_text())
    assert base["commit"] and base["judge"] == "llamacpp"
    assert {"saf-ind", "demo-ind"} <= set(base["suites"])
    assert all(e["items"] for e in base["suites"].values())


@needs_shared
def test_the_mohler_dev_suites_read_the_shared_set() -> None:
    """Issue 41's development set: 63 questions, 1,756 answers, two graders, read by the CSV loader."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("accuracy_bench", ROOT / "bench/accuracy.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["accuracy_bench"] = bench  # its dataclasses look their module up
    try:
        spec.loader.exec_module(bench)
    finally:
        del sys.modules["accuracy_bench"]
    if not bench.SUITES["mohler-ind"].path.exists():
        import pytest

        pytest.skip("../shared/data/mohler-dev not here")
    quick = bench.load_subset(bench.SUITES["mohler-ind"])
    assert len(quick) == 192 and len(quick.questions) == 24
    assert all(len(a.human_scores) == 2 for a in quick)
    whole = bench.load_subset(bench.SUITES["mohler-ind-all"])
    assert len(whole) == 1756 and len(whole.questions) == 63
    assert {q.max_points for q in whole.questions.values()} == {5.0}
