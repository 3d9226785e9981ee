"""Juries: several judges on the same items, each member's run the solo run, the aggregate its own run.

The judges here are the scripted SIMULATION (human score + seeded noise), which is what jury plumbing needs:
which runs exist, which calls are made, how results aggregate and how the reports read them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from knockout.data import load_items
from knockout.errors import ConfigError, InputError
from knockout.judges import make_judge
from knockout.jury import JuryRun, MemberSpec, grade_member_runs, make_jury, read_jury_file, sbs_member_runs
from knockout.jury._aggregate import majority, median, table8, trimmed
from knockout.methods._base import MethodOptions
from knockout.methods._run import GradeRun, RunConfig
from knockout.metrics._interrater import icc, krippendorff_alpha
from knockout.reports._runs import find_run, load_run
from knockout.runs import execute, run_id_for
from knockout.sbs._run import SbsConfig, SbsRun
from knockout.storage import Store
from tests.test_sbs_run import synthetic

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "src/knockout/examples/demo_exam.jsonl"
EXE = [sys.executable, "-m", "knockout.cli"]
SPECS = ["scripted?noise=0.1", "scripted?noise=0.3", "scripted?noise=0.3&bias=0.2"]


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}  # wide tables: no cell is wrapped
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def test_aggregates() -> None:
    assert median([1.0, 5.0, 2.0], 0) == 2.0
    assert trimmed([0.0, 2.0, 3.0, 10.0], 1) == 2.5
    assert trimmed([1.0, 3.0], 1) == 2.0  # too few to trim: the mean
    assert majority(["A", "A", "B"]) == "A" and majority(["A", "B", "C"]) is None
    assert majority(["A", "E", "E"]) == "A"  # E is no vote
    assert table8(["A", "B", "C"]) == "C" and table8(["A", "E", "C"]) is None


def test_icc_and_alpha_reference_values() -> None:
    # Shrout & Fleiss (1979), Table 2: ICC(2,1) = 0.29, ICC(3,1) = 0.71
    y = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]], float)
    got = icc(y)
    assert got["icc2_1"] == pytest.approx(0.2898, abs=1e-4) and got["icc3_1"] == pytest.approx(0.7148, abs=1e-4)
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the nominal example with missing data
    data = np.array([
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ], dtype=object)
    assert krippendorff_alpha(data, "nominal") == pytest.approx(0.743, abs=1e-3)
    assert krippendorff_alpha(np.array([[1.0, 1.0], [1.0, 1.0]])) is None  # one value: undefined


def test_members_are_the_solo_runs_and_a_rerun_is_free(tmp_path: Path) -> None:
    items = load_items(DEMO)
    members = [MemberSpec(s) for s in SPECS]
    db = tmp_path / "j.db"
    with Store(db) as store:
        solo = execute(GradeRun(items, make_judge(SPECS[0]), RunConfig()), store)
        jury = make_jury(grade_member_runs(items, members, RunConfig(), {}), members, aggregate="median")
        first = execute(jury, store).summary()
        again = execute(make_jury(grade_member_runs(items, members, RunConfig(), {}), members, aggregate="median"),
                        store).summary()
        kinds = {r.id: r.kind for r in store.runs()}
    assert first["members"][0]["run_id"] == solo.run_id  # the first member is exactly the solo run
    assert first["judge_calls"] == 2 * len(items) and first["cache_hits"] == len(items)
    assert again["judge_calls"] == 0 and again["run_id"] == first["run_id"]
    assert sorted(kinds.values()) == ["grade", "grade", "grade", "jury"]
    loaded = load_run(db)  # the latest grade run: the jury, not its last member
    assert loaded.run.kind == "jury" and loaded.run.id == first["run_id"]
    for r in loaded.results:
        d = r["details"]
        assert r["score"] == pytest.approx(float(np.median(list(d["members"].values()))))
        assert d["valid_members"] == 3


def test_invalid_member_results_are_left_out(tmp_path: Path) -> None:
    items = load_items(DEMO)
    members = [MemberSpec("scripted?noise=0.1"), MemberSpec("scripted?invalid=1", name="broken")]
    with Store(tmp_path / "j.db") as store:
        s = execute(make_jury(grade_member_runs(items, members, RunConfig(format_retries=0), {}), members),
                    store).summary()
        res = store.results(s["run_id"])
    assert s["valid"] == len(items) and s["members"][1]["agreement"]["n"] == 0
    assert all(r["details"]["members"]["broken"] is None and r["details"]["valid_members"] == 1 for r in res)


def test_jury_needs_distinct_members_and_same_items() -> None:
    items = load_items(DEMO)
    same = [MemberSpec("scripted"), MemberSpec("scripted", name="again")]
    with pytest.raises(ConfigError, match="same judge"):
        execute(make_jury(grade_member_runs(items, same, RunConfig(), {}), same), Store(":memory:"))
    other = items.subset(limit=2)
    runs = [GradeRun(items, make_judge("scripted"), RunConfig()), GradeRun(other, make_judge("scripted?noise=0.5"),
                                                                             RunConfig())]
    with pytest.raises(ConfigError, match="same items"):
        execute(JuryRun(runs, ["a", "b"]), Store(":memory:"))
    with pytest.raises(ConfigError, match="at least two"):
        JuryRun(runs[:1], ["a"])
    with pytest.raises(ConfigError, match="unknown jury aggregate"):
        JuryRun(runs, ["a", "b"], aggregate="majority")


def test_a_member_may_be_another_prompt_and_parameters(tmp_path: Path) -> None:
    items = load_items(DEMO)
    members = [MemberSpec("scripted"), MemberSpec("scripted", prompt="sciex-en", params={"temperature": 0.0})]
    runs = grade_member_runs(items, members, RunConfig(options=MethodOptions(prompt="knockout-individual-en")), {})
    assert runs[1].cfg.options.prompt == "sciex-en" and runs[1].cfg.params.temperature == 0.0
    assert run_id_for(runs[0].identity()) != run_id_for(runs[1].identity())


@pytest.mark.parametrize("method", ["knockout", "pairwise", "allpairs", "heapsort", "window"])
def test_pairwise_method_jury(tmp_path: Path, method: str) -> None:
    items = load_items(DEMO)
    members = [MemberSpec(s) for s in SPECS[:2]]
    cfg = RunConfig(method=method, options=MethodOptions(debias=True))
    with Store(tmp_path / "k.db") as store:
        s = execute(make_jury(grade_member_runs(items, members, cfg, {}), members), store).summary()
        member_matches = [len(store.matches(m["run_id"])) for m in s["members"]]
    assert s["method"] == method and s["valid"] == len(items) and s["agreement"]["pearson"] > 0.5
    assert all(n > 0 for n in member_matches)  # each member played its own matches


def test_sbs_jury_majority(tmp_path: Path) -> None:
    items = synthetic(24)
    members = [MemberSpec("scripted?bias=0.4"), MemberSpec("scripted?noise=0.05"), MemberSpec("scripted?bias=-0.4")]
    cfg = SbsConfig(window=6, stride=3)
    db = tmp_path / "s.db"
    with Store(db) as store:
        s = execute(make_jury(sbs_member_runs(items, members, cfg, {}, source="syn"), members), store).summary()
        res = store.results(s["run_id"])
    assert s["of"] == "sbs" and s["aggregate"] == "majority" and s["items"] == 24
    for r in res:
        d = r["details"]
        for o in ("swap0", "swap1"):
            votes = [m[o] for m in d["members"].values()]
            assert d["verdicts"][o] == (majority(votes) or "E")
    assert abs(s["metrics"]["pbias_ab"]) < 0.5  # opposite position biases cancel in the majority
    rec = find_run(db)
    assert rec.kind == "jury"
    res_report = cli("report", f"{db}:{s['run_id']}", "--json", "--resamples", "50")
    rep = json.loads(res_report.stdout)
    assert rep["kind"] == "sbs" and rep["jury"]["inter_judge"]["alpha_nominal"] is not None
    assert rep["cost"]["live_calls"] == 3 * 48 and len(rep["jury"]["members"]) == 3


def test_cli_grade_jury_and_report(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    res = cli("grade", str(DEMO), *(x for s in SPECS for x in ("--judge", s)), "--aggregate", "trimmed", "-o",
              str(db), "-q", "--json")
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    assert s["kind"] == "jury" and s["aggregate"] == "trimmed" and len(s["members"]) == 3
    assert s["judge_calls"] == 72 and s["simulated_judge"] is True
    text = cli("grade", str(DEMO), *(x for s in SPECS for x in ("--judge", s)), "--aggregate", "trimmed", "-o",
               str(db), "-q")
    assert text.returncode == 0 and "JURY (trimmed)" in text.stdout and "Krippendorff" in text.stdout
    rep = json.loads(cli("report", str(db), "--json", "--resamples", "100").stdout)
    jury = rep["jury"]
    assert rep["run"]["run_id"] == s["run_id"] and [m["label"] for m in jury["members"]] == SPECS
    ij = jury["inter_judge"]
    assert 0 < ij["alpha_interval"] <= 1 and ij["icc2_1_ci"] is not None and ij["icc3_1"] is not None
    assert len(ij["pairs"]) == 3 and jury["jury"]["question_level"]["pearson_ci"] is not None
    assert rep["cost"]["live_calls"] == 72 and rep["cost"]["members"] == 3
    for m in jury["members"]:
        assert m["question_level"]["pearson_ci"] and m["jury_minus_member"]["ci"] is not None


def test_jury_file(tmp_path: Path) -> None:
    f = tmp_path / "jury.toml"
    f.write_text('aggregate = "median"\n[[member]]\njudge = "scripted?noise=0.1"\nname = "low noise"\n'
                 '[[member]]\nbackend = "scripted"\noptions = { noise = 0.4 }\nprompt = "sciex-en"\n'
                 'params = { temperature = 0.0 }\n')
    jf = read_jury_file(f)
    assert jf.aggregate == "median" and jf.members[1].judge == "scripted" and jf.members[1].options == {"noise": "0.4"}
    res = cli("grade", str(DEMO), "--jury", str(f), "-o", str(tmp_path / "f.db"), "-q", "--json")
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    assert [m["label"] for m in s["members"]] == ["low noise", "scripted + sciex-en"] and s["aggregate"] == "median"


@pytest.mark.parametrize(("text", "field"), [
    ('[[member]]\njudge = "scripted"\ncolour = "red"\n', "colour"),
    ('[[member]]\nname = "x"\n', "judge"),
    ('[[member]]\njudge = "scripted"\nparams = { temperature = "hot" }\n', "params.temperature"),
    ('[[member]]\njudge = "scripted"\nparams = { top_k = 3 }\n', "params.top_k"),
    ('aggregate = 3\n[[member]]\njudge = "scripted"\n', "aggregate"),
])
def test_jury_file_errors_name_file_member_and_field(tmp_path: Path, text: str, field: str) -> None:
    check_bad_toml(tmp_path, text, field, read_jury_file,
                   lambda f: cli("grade", str(DEMO), "--jury", str(f), "-o", str(tmp_path / "x.db"), "-q"))


def check_bad_toml(tmp_path: Path, text: str, field: str, read: Callable[[Path], object],
                   run_cli: Callable[[Path], subprocess.CompletedProcess[str]]) -> None:
    """A bad TOML file: an InputError naming the file and ``field``; the command fails with exit code 2 and
    one line naming both, and writes no store."""
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(InputError) as e:
        read(f)
    assert e.value.field == field and str(f) in str(e.value)
    res = run_cli(f)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and field in res.stderr
    assert str(f) in res.stderr and not list(tmp_path.glob("*.db"))


def test_sbs_cli_with_two_judges(tmp_path: Path) -> None:
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps(i.model_dump()) + "\n" for i in synthetic(12)))
    res = cli("sbs", str(data), "--judge", "scripted?bias=0.3", "--judge", "scripted", "--window", "4", "--stride",
              "2", "-o", str(tmp_path / "s.db"), "-q")
    assert res.returncode == 0, res.stderr
    assert "side-by-side jury (majority)" in res.stdout and "Krippendorff's alpha (nominal)" in res.stdout


def test_sbs_member_runs_keep_the_solo_identity() -> None:
    items = synthetic(6)
    cfg = SbsConfig(prompt="II")
    run = sbs_member_runs(items, [MemberSpec("scripted")], cfg, {}, source="s")[0]
    solo = SbsRun(items, make_judge("scripted"), cfg, source="s")
    assert run_id_for(run.identity()) == run_id_for(solo.identity())
