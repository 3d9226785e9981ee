"""bench/scale.py's second-reader options (issue 59): a real loopback judge, references, both readers against the
judge alone, and texts that do not repeat."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT


def scale() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "bench" / "scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_distinct_texts_do_not_repeat_and_the_bench_texts_do(tmp_path: Path) -> None:
    bench = scale()
    for texts, distinct in (("distinct", 3000), ("bench", None)):
        path = tmp_path / f"{texts}.jsonl"
        bench.write_exam(path, 3000, 10, "typed", references=True, texts=texts)
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        answers = [r["text"] for r in rows if r["type"] == "answer"]
        questions = [r for r in rows if r["type"] == "question"]
        assert len(answers) == 3000 and len(questions) == 300
        assert all(q["reference"] for q in questions)
        if distinct:
            assert len(set(answers)) == distinct
        else:
            assert len(set(answers)) <= 100  # what --texts distinct is for: this flatters a reader of each text once


@pytest.mark.slow
def test_two_readers_against_the_judge_alone_on_a_loopback_judge(tmp_path: Path) -> None:
    pytest.importorskip("all_minilm_l6_v2", reason="needs the packaged encoder")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "scale.py"), "--answers", "60", "--steps", "grade",
                        "--judge", "loopback", "--latency-ms", "1", "--references", "--readers", "two,judge",
                        "--texts", "distinct", "--encoder", "40", "--json", "--dir", str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    two, judge = got["runs"]
    assert (two["readers"], judge["readers"]) == ("two", "judge")
    assert two["judge_calls"] == judge["judge_calls"] == 60  # a real judge on loopback, asked once an answer
    assert two["grade_readers"]["combined"] == 60  # every grade read by both readers (the references read)
    assert not (judge["grade_readers"] or {}).get("combined")
    enc = got["encoder"]
    assert enc["n"] == enc["distinct"] == 40 and enc["ms_limit"] > 0 and enc["ms_cpu"] > 0


def test_the_rss_table_gives_each_readers_slope_and_its_peak_at_a_million(capsys: pytest.CaptureFixture[str]) -> None:
    """Two readers and the judge alone graded at two sizes, interleaved: each readers' growth per added answer is
    taken from its own smaller run (not the other readers'), and extrapolated to 1M answers."""
    runs = [{"format": "typed", "readers": rd, "answers": n, "first_run_rss_mb": rss, "peak_rss_mb": rss,
             "first_run_cpu_ms_per_answer": 1.0}
            for n, pair in ((10_000, (300, 140)), (40_000, (330, 170)))
            for rd, rss in zip(("two", "judge"), pair, strict=True)]
    scale().print_rss_table(runs)
    rows = {(c[2], c[3]): c for line in capsys.readouterr().out.splitlines()
            if (c := [x.strip() for x in line.split("|")]) and len(c) > 8 and c[1] == "typed"}
    assert rows[("two", "40,000")][7] == f"{30 * 1024 / 30_000:.2f}"  # KB per added answer: (330 - 300) MB / 30k
    assert rows[("two", "40,000")][8] == f"{330 + 30 / 30_000 * 960_000:,.0f}" == "1,290"  # MB at 1M
    assert rows[("judge", "40,000")][8] == "1,130" and rows[("judge", "10,000")][8] == "-"
