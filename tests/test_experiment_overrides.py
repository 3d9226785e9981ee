"""``knockout run FILE --judge SPEC --store PATH``: the file's judges and store replaced from the command line,
and comparison tables headed with the file's method names, not run-id hashes (the scripted SIMULATION)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_experiments import ROOT, cli

FILE = f"""
title = "demo"
root = "{ROOT}"
store = "from-file.db"
[data]
path = "src/knockout/examples/demo_exam.jsonl"
limit = 3
[[judges]]
judge = "llamacpp"
[[methods]]
name = "ind"
[[methods]]
name = "ko"
method = "knockout"
[compare]
resamples = 20
"""


def test_judge_and_store_from_the_command_line(tmp_path: Path) -> None:
    f = tmp_path / "exp.toml"
    f.write_text(FILE)
    store = tmp_path / "mine.db"
    dry = json.loads(cli("run", str(f), "--judge", "scripted?noise=0.2", "--store", str(store), "--dry-run",
                         "--json", cwd=tmp_path).stdout)
    assert dry["store"] == str(store) and [p["column"] for p in dry["parts"]] == ["scripted?noise=0.2"] * 2
    res = cli("run", str(f), "-j", "scripted?noise=0.2", "-j", "scripted?noise=0.5&seed=1", "--store", str(store),
              "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert store.is_file() and not (ROOT / "from-file.db").exists() and not (tmp_path / "from-file.db").exists()
    rep = json.loads(cli("run", str(f), "-j", "scripted?noise=0.2", "-j", "scripted?noise=0.5&seed=1", "--store",
                         str(store), "--json", "-q", cwd=tmp_path).stdout)
    assert rep["columns"] == ["scripted?noise=0.2", "scripted?noise=0.5&seed=1"]
    ids = {p["row"]: p["run_id"] for p in rep["parts"] if p["column"] == "scripted?noise=0.2"}
    # the printed comparison names the methods (with a short run id), not bare run-id hashes
    text = res.stdout
    assert f"ind ({ids['ind'][:8]})" in text and f"ko ({ids['ko'][:8]})" in text, text
    heads = [line for line in text.splitlines() if "paired tests" in line or "methods x metrics" in line]
    assert heads, text
    assert rep["comparisons"]["scripted?noise=0.2"]["names"] == {ids["ind"]: "ind", ids["ko"]: "ko"}


def test_a_jury_file_needs_two_judges(tmp_path: Path) -> None:
    f = tmp_path / "exp.toml"
    f.write_text(FILE.replace('[[judges]]\njudge = "llamacpp"\n',
                              '[[judges]]\njudge = "scripted"\n[[judges]]\njudge = "scripted?seed=2"\n[jury]\n'))
    res = cli("run", str(f), "--judge", "scripted?noise=0.2", "--dry-run", cwd=tmp_path)
    assert res.returncode == 2 and "give --judge twice" in res.stderr, res.stderr
