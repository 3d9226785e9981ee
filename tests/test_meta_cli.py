"""``knockout elo`` and ``knockout meta`` on the command line (scripted meta-judge = a SIMULATION).

Commands run in process (typer's CliRunner) to keep the tests fast; one test runs the installed
entry point in a subprocess."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knockout.cli import register_extensions
from knockout.cli._main import app
from tests.conftest import DATA, ROOT, needs_model, needs_shared
from tests.test_cli import knockout as knockout_subprocess
from tests.test_meta import write_verdicts

register_extensions(app)


def knockout(*args: str) -> subprocess.CompletedProcess[str]:
    res = CliRunner().invoke(app, list(args))
    return subprocess.CompletedProcess(list(args), res.exit_code, res.stdout, res.stderr)


OUTCOMES = ROOT / "tests" / "fixtures" / "meta" / "outcomes.jsonl"
PAIRWISE = DATA / "meta-evaluation" / "evaluator_results" / "pairwise"


def elo_json(*args: str) -> dict[str, object]:
    res = knockout("elo", *args, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_elo_one_match_by_hand(tmp_path: Path) -> None:
    f = tmp_path / "one.jsonl"
    f.write_text(json.dumps({"evaluator_1": "a", "evaluator_2": "b", "winner": "Assistant1"}) + "\n")
    out = elo_json(str(f), "--shuffles", "5")
    # equal ratings, K = 4: E = 0.5, the winner gains 4 * (1 - 0.5) = 2 points
    assert out["elo"]["ratings"] == {"a": 1002.0, "b": 998.0}  # type: ignore[index]
    assert out["win_rates"]["a"]["b"]["win"] == 1.0 and out["win_rates"]["b"]["a"]["win"] == 0.0  # type: ignore[index]
    out = elo_json(str(f), "--k", "32", "--shuffles", "5")
    assert out["elo"]["ratings"] == {"a": 1016.0, "b": 984.0}  # type: ignore[index]


def test_elo_two_matches_by_hand(tmp_path: Path) -> None:
    # a beats b, then b beats a: the order matters; both orders are averaged over the shuffles.
    f = tmp_path / "two.jsonl"
    f.write_text(json.dumps({"evaluator_1": "a", "evaluator_2": "b", "winner": "1"}) + "\n"
                 + json.dumps({"evaluator_1": "b", "evaluator_2": "a", "winner": "Assistant1"}) + "\n")
    e = 1 / (1 + 10 ** (4 / 400))  # the loser of the first match (998) expected against 1002
    after = 998 + 4 * (1 - e)  # whoever lost first ends at this rating, the other at 2000 - after
    r = elo_json(str(f), "--shuffles", "200")["elo"]["ratings"]  # type: ignore[index]
    assert min(r.values()) >= 2000 - after - 1e-9 and max(r.values()) <= after + 1e-9
    assert r["a"] + r["b"] == pytest.approx(2000)


def test_elo_win_rates_csv_arena_fields_and_ties(tmp_path: Path) -> None:
    f = tmp_path / "arena.csv"
    f.write_text("model_a,model_b,winner\nx,y,model_a\nx,y,tie\ny,x,model_a\nx,y,x\nx,y,\n")
    out = elo_json(str(f))
    assert out["matches"] == 4 and out["skipped"] == 1
    wr = out["win_rates"]
    # x against y: won 2 (rows 1 and 4), tie 1, lost 1 -> win 2/4, tie 1/4 (eq. 1 and 2), ties-half 2.5/4
    assert wr["x"]["y"] == {"n": 4, "win": 0.5, "tie": 0.25, "score": 0.625}  # type: ignore[index]
    assert wr["y"]["x"]["win"] == 0.25  # type: ignore[index]


def test_elo_fixture_stable_between_200_and_1000_shuffles() -> None:
    out = elo_json(str(OUTCOMES), "--shuffles", "200", "--check", "1000")
    elo = out["elo"]
    r200, r1000 = elo["ratings"], elo["convergence"]["ratings"]  # type: ignore[index]
    assert elo["convergence"]["shuffles"] == 1000 and elo["convergence"]["converged"]  # type: ignore[index]
    assert max(abs(r200[p] - r1000[p]) for p in r200) < 3.0
    assert [x["evaluator"] for x in out["ranking"]] == ["judge-a", "judge-b", "judge-c", "judge-d", "judge-e"]  # type: ignore[union-attr]
    assert out["skipped"] == 1
    # the installed entry point registers the command (a subprocess; few shuffles to stay fast)
    text = knockout_subprocess("elo", str(OUTCOMES), "--shuffles", "10", "--check", "10")
    assert text.returncode == 0 and "judge-a" in text.stdout and "converged" in text.stdout


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"evaluator_1": "a", "evaluator_2": "b", "winner": "maybe"}, "field 'winner'"),
        ({"evaluator_1": "a", "winner": "1"}, "field 'evaluator_2'"),
        ({"evaluator_1": "a", "evaluator_2": "a", "winner": "1"}, "cannot meet itself"),
    ],
)
def test_elo_bad_input(tmp_path: Path, row: dict[str, str], message: str) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps(row) + "\n")
    res = knockout("elo", str(f))
    assert res.returncode == 2 and message in res.stderr and "record line 1" in res.stderr


def test_meta_cli_json_export_and_elo_roundtrip(tmp_path: Path) -> None:
    folder = write_verdicts(tmp_path / "v")
    db, exported = tmp_path / "m.db", tmp_path / "matches.jsonl"
    res = knockout("meta", str(folder), "--meta-judge", "scripted?noise=0.05", "--framework", "jdeval", "-o", str(db),
                   "--json", "-q", "--export-matches", str(exported), "--self", "good", "--shuffles", "100")
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    for key in ("run_id", "kind", "framework", "judge", "simulated_judge", "evaluators", "items", "judgements",
                "valid", "invalid", "judge_calls", "cache_hits", "ranking", "human", "kendall_tau", "win_rates", "elo",
                "self_preference", "position", "meta_answer_accuracy"):
        assert key in s
    assert s["kind"] == "meta" and s["judgements"] == 18 and s["self_preference"]["evaluator"] == "good"
    rows = [json.loads(x) for x in exported.read_text().splitlines()]
    assert len(rows) == 18 and {r["winner"] for r in rows} <= {"Assistant1", "Assistant2", "equally good"}
    back = elo_json(str(exported), "--shuffles", "100")
    assert back["elo"]["ratings"] == pytest.approx(s["elo"]["ratings"])  # type: ignore[index]
    runs = json.loads(knockout("runs", str(db), "--json").stdout)
    assert [r["kind"] for r in runs] == ["meta"]
    text = knockout("meta", str(folder), "--meta-judge", "scripted?noise=0.05", "-o", str(db), "-q",
                    "--shuffles", "100")
    assert text.returncode == 0 and "Kendall tau" in text.stdout and "0 live calls" in text.stdout


def test_meta_cli_bad_input(tmp_path: Path) -> None:
    folder = write_verdicts(tmp_path / "p", "pointwise")
    res = knockout("meta", str(folder), "--meta-judge", "scripted", "--framework", "jdeval", "-o",
                   str(tmp_path / "m.db"))
    assert res.returncode == 2 and "use jdeval-i or bsmeval" in res.stderr
    res = knockout("meta", str(folder), "--meta-judge", "scripted", "--framework", "xx", "-o", str(tmp_path / "m.db"))
    assert res.returncode == 2 and "unknown framework" in res.stderr
    res = knockout("meta", str(tmp_path / "missing"), "--meta-judge", "scripted")
    assert res.returncode == 2 and "no such file" in res.stderr


@needs_shared
def test_meta_cli_on_recorded_evaluators(tmp_path: Path) -> None:
    res = knockout("meta", str(PAIRWISE), "--meta-judge", "scripted?noise=0.05", "--limit", "40", "-o",
                   str(tmp_path / "m.db"), "--json", "-q", "--shuffles", "50")
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    assert s["items"] == 40 and s["judgements"] == 120 and len(s["evaluators"]) == 5
    assert s["human"]["all_items"]["items"] == 491 and s["human"]["run_items"]["items"] == 40


@needs_model
@needs_shared
@pytest.mark.model
def test_meta_real_small_model_one_item(tmp_path: Path) -> None:
    """The embedded 0.5B model as meta-judge on one MT-bench item, one draw (1 call, no retry)."""
    res = knockout("meta", str(PAIRWISE), "--meta-judge", "llamacpp:qwen2.5-coder-0.5b", "--limit", "1", "--draws",
                   "1", "--max-tokens", "48", "--format-retries", "0", "-o", str(tmp_path / "m.db"), "--json", "-q")
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    assert s["judgements"] == 1 and s["judge_calls"] == 1 and s["valid"] + s["invalid"] == 1
