"""Experiment files (``knockout run FILE``): parts through the one lifecycle, resumable, then the comparison.

The judges here are the scripted SIMULATION; the examples in ``examples/`` are checked (parsed, data
loaded, prompts rendered, run ids planned) without calling a judge, and skipped without ``../shared``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from knockout.experiments import plan, read_experiment
from tests.conftest import needs_shared
from tests.test_jury import check_bad_toml
from tests.test_sbs_run import synthetic

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "src/knockout/examples/demo_exam.jsonl"
EXE = [sys.executable, "-m", "knockout.cli"]

GRADE = f"""
title = "demo"
root = "{ROOT}"
[data]
path = "src/knockout/examples/demo_exam.jsonl"
limit = 3
[params]
max_tokens = 128
[[judges]]
judge = "scripted?noise=0.2"
name = "sim-a"
[[judges]]
judge = "scripted?noise=0.4&bias=0.1"
name = "sim-b"
[[methods]]
name = "ind"
[[methods]]
name = "ko-d"
method = "knockout"
debias = true
[jury]
aggregate = "median"
[compare]
by = ["difficulty"]
resamples = 50
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # another working folder: keep the import path absolute (PYTHONPATH=src in a checkout)
    path = os.pathsep.join(str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "COLUMNS": "250", "PYTHONPATH": path})


def test_grade_experiment_runs_resumes_and_compares(tmp_path: Path) -> None:
    f = tmp_path / "exp.toml"
    f.write_text(GRADE)
    dry = json.loads(cli("run", str(f), "--dry-run", "--json", cwd=tmp_path).stdout)
    assert [(p["row"], p["column"]) for p in dry["parts"]] == [
        ("ind", "sim-a"), ("ind", "sim-b"), ("ind", "jury"), ("ko-d", "sim-a"), ("ko-d", "sim-b"), ("ko-d", "jury")]
    assert all(p["status"] == "not run" for p in dry["parts"]) and not (tmp_path / "exp.db").exists()
    res = cli("run", str(f), "--json", "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["rows"] == ["ind", "ko-d"] and rep["columns"] == ["sim-a", "sim-b", "jury"]
    assert rep["cells"]["ko-d"]["jury"]["question_level"]["pearson_ci"] is not None
    assert rep["comparisons"]["sim-a"]["by"][0]["key"] == "difficulty"
    # the individual part is exactly `knockout grade` with that judge
    solo = json.loads(cli("grade", str(DEMO), "--limit", "3", "--judge", "scripted?noise=0.2", "--max-tokens", "128",
                          "-o", str(tmp_path / "exp.db"), "-q", "--json", cwd=tmp_path).stdout)
    assert solo["run_id"] == rep["parts"][0]["run_id"] and solo["judge_calls"] == 0
    again = cli("run", str(f), "-q", cwd=tmp_path)
    assert again.returncode == 0 and "demo: Pearson with the human scores (question level)" in again.stdout
    dry2 = json.loads(cli("run", str(f), "--dry-run", "--json", cwd=tmp_path).stdout)
    assert all(p["status"] == "complete" for p in dry2["parts"])
    from knockout.storage import Store

    with Store(tmp_path / "exp.db") as store:
        assert store.repeated_calls() == 0  # the rerun asked nothing twice


def test_sbs_experiment_prints_the_side_by_side_table(tmp_path: Path) -> None:
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps(i.model_dump()) + "\n" for i in synthetic(16)))
    f = tmp_path / "sbs.toml"
    f.write_text('kind = "sbs"\n[data]\npath = "p.jsonl"\n[sbs]\nwindow = 4\nstride = 2\n'
                 '[[judges]]\njudge = "scripted?bias=0.3"\n[[prompts]]\nprompt = "I"\n[[prompts]]\nprompt = "II"\n'
                 'params = { max_tokens = 64 }\n[compare]\nresamples = 50\n')
    res = cli("run", str(f), "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "experts (human" in res.stdout and "MPCC-Consistency" in res.stdout and "sbs-II" in res.stdout


def test_sbs_experiment_of_one_run_prints_its_figures(tmp_path: Path) -> None:
    """One judge and one prompt: the paper's figures of that run (the long fuzz run of issue 35 found it ran the
    part and then refused, exit 2 with the store written: "compare needs at least two runs")."""
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps(i.model_dump()) + "\n" for i in synthetic(8)))
    f = tmp_path / "sbs.toml"
    f.write_text('kind = "sbs"\n[data]\npath = "p.jsonl"\n[prompt]\n[compare]\n[[judges]]\njudge = "scripted"\n'
                 '"params" = {  }\n[[prompts]]\n')
    res = cli("run", str(f), "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "experts (human" in res.stdout and "MPCC-Consistency" in res.stdout
    one = cli("compare", str(tmp_path / "sbs.db"), cwd=tmp_path)
    assert one.returncode == 2 and "compare needs at least two runs" in one.stderr


def test_meta_experiment(tmp_path: Path) -> None:
    from tests.test_meta import write_verdicts

    folder = write_verdicts(tmp_path / "v")
    f = tmp_path / "meta.toml"
    f.write_text('kind = "meta"\n[data]\npath = "v"\n[[judges]]\njudge = "scripted?noise=0.05"\n'
                 '[[frameworks]]\nframework = "jdeval"\nshuffles = 50\n[[frameworks]]\nframework = "jdeval-i"\n')
    res = cli("run", str(f), "--json", "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["kind"] == "meta" and [m["row"] for m in rep["meta"]] == ["jdeval", "jdeval-i"]
    assert rep["meta"][0]["judgements"] == 18 and rep["meta"][0]["kendall_tau"] is not None and folder.exists()
    text = cli("run", str(f), "-q", cwd=tmp_path)
    assert "meta ranking" in text.stdout and "Kendall tau" in text.stdout


@pytest.mark.parametrize(("text", "field"), [
    ('[data]\npath = "x"\n[[judges]]\njudge = "scripted"\n[[methods]]\nname = "a"\ncolour = 1\n', "methods.0.colour"),
    ('[data]\npath = "x"\n[[methods]]\nname = "a"\n', "judges"),
    ('[data]\npath = "x"\n[[judges]]\njudge = "scripted"\n', "methods"),
    ('[data]\npath = "x"\n[[judges]]\njudge = "scripted"\n[[methods]]\nname = "a"\n[[prompts]]\nprompt = "I"\n',
     "prompts"),
    ('[data]\npath = "x"\n[[judges]]\njudge = "scripted"\n[[methods]]\nname = "a"\n[[methods]]\nname = "a"\n',
     "methods"),
    ('[data]\npath = "x"\n[[judges]]\njudge = "scripted"\n[[methods]]\nname = "a"\n[compare]\nbaseline = "b"\n',
     "compare.baseline"),
    ('[data]\npath = "x"\n[[judges]]\nbackend = "scripted"\nparams = { temperature = "x" }\n[[methods]]\n',
     "params.temperature"),
    ('kind = "poll"\n[data]\npath = "x"\n[[judges]]\njudge = "scripted"\n', "kind"),
])
def test_file_errors_name_the_field(tmp_path: Path, text: str, field: str) -> None:
    check_bad_toml(tmp_path, text, field, read_experiment, lambda f: cli("run", str(f), cwd=tmp_path))


def test_missing_data_is_a_clear_error_before_anything_is_written(tmp_path: Path) -> None:
    f = tmp_path / "e.toml"
    f.write_text('root = "nowhere"\n[data]\npath = "../shared/data/none"\n[[judges]]\njudge = "scripted"\n'
                 '[[methods]]\nname = "ind"\n')
    res = cli("run", str(f), cwd=tmp_path)
    assert res.returncode == 2 and "data not found" in res.stderr and "data.path" in res.stderr
    assert not list(tmp_path.glob("*.db"))


def test_what_reads_the_shared_data_says_what_to_do_without_it() -> None:
    """Each example file and README section that reads ``../shared/data`` says, near it, where the data comes
    from, that it stops with "data not found" without it, and that ``knockout demo`` needs none."""
    for f in sorted((ROOT / "examples").glob("*.toml")):
        text = f.read_text(encoding="utf-8")
        if "../shared/data" in text:
            head = text.split("\ntitle", 1)[0]  # the comment before the settings
            assert "SOURCE.md" in head and "data not found" in head and "knockout demo" in head, f.name
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sections = re.split(r"\n## ", readme)
    for section in sections:
        if "../shared/data" in section:
            assert "data not found" in section and "knockout demo" in section, section[:80]


@needs_shared
@pytest.mark.shared
@pytest.mark.parametrize("name", ["knockout-table1-saf.toml", "sbs-table3-pandalm.toml", "meta-mtbench.toml"])
def test_examples_plan_without_a_judge_call(name: str) -> None:
    ef = read_experiment(ROOT / "examples" / name)
    assert ef.data_path.exists()
    parts = plan(ef)  # loads the data, renders every prompt, hashes every run id
    assert parts and all(p.run_id for p in parts)
    assert ef.store_path().parent == ROOT
