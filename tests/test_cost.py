"""Method cost that does not depend on the cache: every run records the tokens of the stored replies it used
beside the ones it paid for, so ``compare`` shows what a method costs from scratch (a debiased knockout run
after a plain one pays only for the second orders, but costs both), and in money with a price table.
Judge: scripted (a SIMULATION; its token counts are the words of each request and reply)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from knockout.data import load_items
from knockout.errors import InputError
from knockout.judges import make_judge
from knockout.methods._base import MethodOptions
from knockout.methods._run import RunConfig, run
from knockout.reports._prices import PriceTable, load_prices, money
from knockout.reports._runs import load_run
from knockout.storage import Store
from tests.conftest import ROOT

DEMO = ROOT / "src/knockout/examples/demo_exam.jsonl"
KO = RunConfig(method="knockout")
KO_D = RunConfig(method="knockout", options=MethodOptions(debias=True))


def test_from_scratch_cost_does_not_depend_on_what_the_store_held(tmp_path: Path) -> None:
    items = load_items(DEMO)
    shared, alone = tmp_path / "shared.db", tmp_path / "alone.db"
    with Store(shared) as store:
        first = run(items, make_judge("scripted"), store, KO).run_id
        second = run(items, make_judge("scripted"), store, KO_D).run_id
    with Store(alone) as store:
        solo = run(items, make_judge("scripted"), store, KO_D).run_id
    after, fresh = load_run(shared, second).cost, load_run(alone, solo).cost
    assert after["tokens"] < after["scratch_tokens"]  # half its games came from the first run
    assert fresh["tokens"] == fresh["scratch_tokens"] == after["scratch_tokens"]
    assert after["requests"] == fresh["requests"]
    assert load_run(shared, first).cost["tokens"] == load_run(shared, first).cost["scratch_tokens"]

    prices = tmp_path / "prices.toml"
    prices.write_text('[judges."scripted:sim"]\ninput = 1.0\noutput = 2.0\ncurrency = "EUR"\n', encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "knockout.cli", "compare", f"{shared}:{first}", f"{shared}:{second}",
                          "--prices", str(prices), "--resamples", "0", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["runs"]
    m, c = rows[1]["money"], rows[1]["cost"]
    assert m["currency"] == "EUR" and m["paid"] < m["scratch"]
    scratch = (c["scratch_prompt_tokens"] * 1.0 + c["scratch_completion_tokens"] * 2.0) / 1e6
    assert m["scratch"] == pytest.approx(scratch)
    text = subprocess.run([sys.executable, "-m", "knockout.cli", "compare", f"{shared}:{first}",
                           f"{shared}:{second}", "--prices", str(prices), "--resamples", "0"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"}).stdout
    assert "from scratch" in text and "EUR" in text


def test_price_table_errors_and_lookup(tmp_path: Path) -> None:
    bad = tmp_path / "p.toml"
    bad.write_text('[judges."openai:gpt-4o-mini"]\ninput = -1\noutput = 2\n', encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_prices(bad)
    msg = str(info.value)
    assert "p.toml" in msg and "openai:gpt-4o-mini" in msg and "input" in msg
    table = PriceTable.model_validate({"judges": {"openai:gpt-4o-mini": {"input": 0.15, "output": 0.6}}})
    cost = {"prompt_tokens": 1_000_000, "completion_tokens": 0, "scratch_prompt_tokens": 2_000_000,
            "scratch_completion_tokens": 1_000_000}
    got = money(table, "openai:gpt-4o-mini?base_url=http://x", cost)
    assert got == {"currency": "USD", "paid": pytest.approx(0.15), "scratch": pytest.approx(0.9)}
    assert money(table, "anthropic:claude", cost) is None  # no price: no figure, never 0


def test_wide_tables_fit_the_terminal(tmp_path: Path) -> None:
    """At 80 columns the side-by-side comparison (13 columns) is printed as tables of column groups, the run
    repeated in each: no line is wider than the terminal, every column is still there; and a run is taken
    by a prefix of its id."""
    from knockout.judges import make_judge as judge
    from knockout.reports._tables import Table, fit_width, width_of
    from knockout.sbs._run import SbsConfig, run_sbs
    from tests.test_sbs_run import synthetic

    t = Table("wide", ["run", *(f"column {i}" for i in range(12))],
              [["r1", *(f"{i}.000 [0.1, 0.9]" for i in range(12))]])
    parts = fit_width(t, 80)
    assert len(parts) > 1 and all(width_of(p) <= 80 for p in parts)
    assert [c for p in parts for c in p.columns[1:]] == t.columns[1:] and all(p.rows[0][0] == "r1" for p in parts)

    db = tmp_path / "sbs.db"
    with Store(db) as store:
        a = run_sbs(synthetic(6), judge("scripted"), store, SbsConfig(prompt="I"), source="syn").run_id
        b = run_sbs(synthetic(6), judge("scripted?seed=3"), store, SbsConfig(prompt="I"), source="syn").run_id
    res = subprocess.run([sys.executable, "-m", "knockout.cli", "compare", f"{db}:{a[:6]}", f"{db}:{b[:6]}",
                          "--resamples", "0"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "COLUMNS": "80"})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= 80, max(lines, key=len)
    for header in ("PBias@AB", "Con@ABCD", "MPCC-Consistency", "PCon@AB"):
        assert header.split("@")[0] in res.stdout
