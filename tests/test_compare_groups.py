"""``knockout compare --by``: per-group figures and paired differences; ``compare`` of side-by-side runs.

Runs are made with the scripted judge, a SIMULATION (human score + seeded noise and position bias).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from knockout.data import load_items
from knockout.data._records import ItemSet
from knockout.judges import make_judge
from knockout.methods._base import MethodOptions
from knockout.methods._run import RunConfig, run
from knockout.metrics._analysis import build_rows
from knockout.metrics._comparison import group_comparison, paired_comparison
from knockout.metrics._kappa import cohen_kappa
from knockout.sbs._metrics import bootstrap_intervals, paired_kappa
from knockout.storage import Store
from tests.test_sbs_run import synthetic

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "src/knockout/examples/demo_exam.jsonl"
EXE = [sys.executable, "-m", "knockout.cli"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "250"})


Runs = tuple[Path, str, str]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    db = tmp_path_factory.mktemp("cmp") / "g.db"
    items = load_items(DEMO)
    with Store(db) as store:
        a = run(items, make_judge("scripted?noise=0.3"), store, RunConfig())
        b = run(items, make_judge("scripted?noise=0.1&bias=0.1"), store,
                RunConfig(method="knockout", options=MethodOptions(debias=True)))
    return db, a.run_id, b.run_id


def stored(runs: Runs) -> tuple[ItemSet, list[dict[str, Any]], list[dict[str, Any]]]:
    """The item set and both runs' results, as the store holds them."""
    db, a, b = runs
    with Store(db) as store:
        items = store.items_for_run(a)
        assert items is not None
        return items, store.results(a), store.results(b)


def test_group_comparison_matches_a_paired_comparison_of_the_group(two_runs: Runs) -> None:
    items, ra, rb = stored(two_runs)
    by = group_comparison(items, [ra, rb], "difficulty", resamples=200, seed=1)
    names = [g["group"] for g in by["groups"]]
    assert names == ["easy", "hard", "medium", "all"]
    hard = {x.answer.id for x in build_rows(items, ra)[0] if x.question.difficulty == "hard"}
    direct = paired_comparison(items, [r for r in rb if r["item_id"] in hard], [r for r in ra if r["item_id"] in hard],
                               resamples=200, seed=1)
    g = by["groups"][1]
    assert g["answers"] == len(hard) and g["deltas"][0]["delta"] == pytest.approx(direct["question_level"]["delta"])
    assert g["deltas"][0]["ci"] == pytest.approx(direct["question_level"]["ci"])
    assert g["runs"][0]["pearson_ci"] is not None
    whole = by["groups"][-1]
    assert whole["answers"] == len(items) and whole["deltas"][0]["delta"] == pytest.approx(
        paired_comparison(items, rb, ra, resamples=200, seed=1)["question_level"]["delta"])


def test_round_groups_come_from_the_run_that_records_them(two_runs: Runs) -> None:
    items, ra, rb = stored(two_runs)
    by = group_comparison(items, [ra, rb], "round", resamples=0)
    names = [g["group"] for g in by["groups"]]
    assert "1" in names and "winner" in names and names[-1] == "all"
    assert sum(g["answers"] for g in by["groups"][:-1]) == len(items)
    by_mod = group_comparison(items, [ra, rb], "modality", resamples=0)
    assert [g["group"] for g in by_mod["groups"]] == ["text", "all"]


def test_cli_compare_by_tables_json_and_html(two_runs: Runs, tmp_path: Path) -> None:
    db, a, b = two_runs
    html = tmp_path / "c.html"
    res = cli("compare", f"{db}:{a}", f"{db}:{b}", "--by", "difficulty,language", "--resamples", "100",
              "--html", str(html))
    assert res.returncode == 0, res.stderr
    assert "by difficulty: Pearson per group" in res.stdout and "by language" in res.stdout
    page = html.read_text()
    assert "difference to the baseline by difficulty" in page and page.count("data:image/png") == 3
    out = json.loads(cli("compare", f"{db}:{a}", f"{db}:{b}", "--by", "language", "--resamples", "50",
                         "--json").stdout)
    assert [g["group"] for g in out["by"][0]["groups"]] == ["de", "en", "all"]
    bad = cli("compare", f"{db}:{a}", f"{db}:{b}", "--by", "colour")
    assert bad.returncode == 2 and "colour" in bad.stderr


def test_sbs_bootstrap_kappa_is_sklearns_on_the_data() -> None:
    rng = np.random.default_rng(3)
    s0 = ["ABCDE"[i] for i in rng.integers(0, 5, 80)]
    s1 = ["ABCDE"[i] for i in rng.integers(0, 5, 80)]
    h = ["ABCD"[i] for i in rng.integers(0, 4, 80)]
    ci = bootstrap_intervals(s0, s1, h, resamples=300, seed=0)
    k = (cohen_kappa(s0, h)  + cohen_kappa(s1, h)) / 2  # type: ignore[operator]
    assert ci["kappa"] is not None and ci["kappa"][0] < k < ci["kappa"][1]
    d = paired_kappa((s0, s1), (s0, s1), h, resamples=100)
    assert d["delta"] == 0 and d["ci"] == [0.0, 0.0]


def test_compare_of_sbs_runs_prints_the_papers_table(tmp_path: Path) -> None:
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps(i.model_dump()) + "\n" for i in synthetic(30)))
    db = tmp_path / "s.db"
    ids = []
    for prompt, spec in (("I", "scripted?bias=0.3"), ("II", "scripted?bias=0.3")):
        res = cli("sbs", str(data), "--judge", spec, "--prompt", prompt, "--window", "6", "--stride", "3", "-o",
                  str(db), "-q", "--json")
        assert res.returncode == 0, res.stderr
        ids.append(json.loads(res.stdout)["run_id"])
    text = cli("compare", *(f"{db}:{i}" for i in ids), "--resamples", "100")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    human = next(i for i, ln in enumerate(lines) if "experts (human" in ln)
    first = next(i for i, ln in enumerate(lines) if "sbs-I " in ln or "sbs-I│" in ln.replace(" ", ""))
    assert human < first  # the human row first
    for col in ("CK [95% CI]", "MPCC", "PCon@AB", "MPCC-Consistency", "MPCC-delta", "A %", "E %"):
        assert col in text.stdout
    cmp = json.loads(cli("compare", *(f"{db}:{i}" for i in ids), "--resamples", "100", "--json").stdout)
    assert cmp["kind"] == "sbs" and [r["label"] for r in cmp["runs"]] == ["sbs-I", "sbs-II"]
    r0, r1 = cmp["runs"]
    assert r0["ci"]["kappa"] is not None and r0["ci"]["pcon_ab"] is not None
    assert r1["kappa_vs_first"]["ci"] is not None and cmp["human"]["n"] == 30
    grade_db = tmp_path / "g.db"
    g = json.loads(cli("grade", str(DEMO), "--judge", "scripted", "-o", str(grade_db), "-q", "--json").stdout)
    mixed = cli("compare", f"{db}:{ids[0]}", f"{grade_db}:{g['run_id']}")
    assert mixed.returncode == 2 and "one kind" in mixed.stderr
