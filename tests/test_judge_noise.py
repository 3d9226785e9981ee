"""The judge's own noise (``--samples K``, knockout.calibration._noise): K draws per answer with distinct seeds,
cached per draw, the test-retest ICC, the spread per answer, intervals with the draw-to-draw variance, in
``report`` and ``compare``.  The judge is the scripted judge (a SIMULATION, not an LLM) whose draw-to-draw
noise is known (``noise``, a fraction of the maximum points)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from knockout.calibration._noise import icc1
from knockout.data import Answer, ItemSet, Question
from knockout.engine._cache import KeyMaker, call_key
from knockout.errors import ConfigError
from knockout.judges import GenParams, Message, make_judge
from knockout.methods._run import GradeRun, RunConfig
from knockout.runs import execute
from knockout.storage import Store


def _items(n: int = 30) -> ItemSet:
    rng = np.random.default_rng(5)
    qs = [Question(id=f"q{i}", text=f"Question {i}?", max_points=10.0) for i in range(n)]
    answers = [Answer(id=f"q{i}/a", question_id=f"q{i}", examinee="x", text=f"answer {i}",
                      human_scores={"prof": float(round(rng.uniform(0, 10) * 2) / 2)}) for i in range(n)]
    return ItemSet(qs, answers, source="noise-test")


def _run(store: Store, items: ItemSet, spec: str, samples: int, method: str = "individual") -> dict:
    return execute(GradeRun(items, make_judge(spec), RunConfig(method=method, samples=samples)), store).summary()


def test_a_single_draw_keeps_its_cache_key_and_run_id() -> None:
    msgs = [Message(role="user", content="Grade this.")]
    ident = {"backend": "scripted", "model": "sim"}
    params = GenParams()
    assert call_key(ident, params, msgs) == call_key(ident, params, msgs, draw=0) == KeyMaker(ident, params)(msgs)
    assert call_key(ident, params, msgs, draw=1) != call_key(ident, params, msgs)
    items = _items(3)
    one = GradeRun(items, make_judge("scripted"), RunConfig())
    assert "samples" not in one.identity() and "samples" not in one.config()
    three = GradeRun(items, make_judge("scripted"), RunConfig(samples=3))
    assert three.identity()["samples"] == 3


def test_samples_draws_cached_per_draw_and_a_rerun_calls_nothing(tmp_path: Path) -> None:
    items = _items()
    with Store(tmp_path / "s.db") as store:
        single = _run(store, items, "scripted?noise=0.1", 1)
        assert single["judge_calls"] == 30
        first = _run(store, items, "scripted?noise=0.1", 3)
        assert first["judge_calls"] == 60 and first["cache_hits"] == 30  # draw 0 is the single run's call
        again = _run(store, items, "scripted?noise=0.1", 3)
        assert again["judge_calls"] == 0 and again["cache_hits"] == 90
        results = store.results(again["run_id"])
    for r in results:
        d = r["details"]
        assert len(d["draws"]) == 3 and len(set(d["draw_keys"])) == 3
        assert r["score"] == pytest.approx(np.mean(d["draws"]))
    assert sum(len(set(r["details"]["draws"])) > 1 for r in results) > 10  # the draws differ


def test_report_shows_test_retest_icc_spread_and_intervals_with_draw_variance(tmp_path: Path) -> None:
    from tests.test_sciex_leaderboard import cli

    items = _items(40)
    db = tmp_path / "s.db"
    with Store(db) as store:
        noisy = _run(store, items, "scripted?noise=0.1", 4)
        steady = _run(store, items, "scripted?noise=0", 3)
    rep = cli("report", f"{db}:{noisy['run_id']}", "--json", "--resamples", "300", cache=tmp_path)
    assert rep.returncode == 0, rep.stderr
    noise = json.loads(rep.stdout)["noise"]
    assert noise["draws"] == 4 and noise["complete"] == 40
    assert 0.5 < noise["icc1_1"] < 0.99 and noise["icc1_1_ci"][0] <= noise["icc1_1"] <= noise["icc1_1_ci"][1]
    assert 0.06 < noise["sd_share_mean"] < 0.14  # the scripted judge's known noise: 0.1 of the maximum points
    mean, pearson = noise["intervals"]["mean"], noise["intervals"]["pearson"]
    width = lambda ci: ci[1] - ci[0]  # noqa: E731
    assert width(mean["draws_ci"]) < width(mean["answers_ci"])  # the judge asked again moves it less
    assert pearson["answers_draws_ci"][0] <= pearson["value"] <= pearson["answers_draws_ci"][1]
    assert noise["widest"] and noise["widest"][0]["sd"] >= noise["widest"][-1]["sd"]
    text = cli("report", f"{db}:{noisy['run_id']}", "--resamples", "100", cache=tmp_path)
    assert text.returncode == 0 and "test-retest ICC(1,1)" in text.stdout
    flat = json.loads(cli("report", f"{db}:{steady['run_id']}", "--json", "--resamples", "0",
                          cache=tmp_path).stdout)["noise"]
    assert flat["differ"] == 0 and flat["sd_mean"] == 0  # no noise: every draw the same
    cmp = cli("compare", f"{db}:{noisy['run_id']}", f"{db}:{steady['run_id']}", "--json", "--resamples", "100",
              cache=tmp_path)
    assert cmp.returncode == 0, cmp.stderr
    assert [n["run_id"] for n in json.loads(cmp.stdout)["noise"]] == [noisy["run_id"], steady["run_id"]]


def test_samples_need_the_individual_method(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store, pytest.raises(ConfigError, match="individual"):
        _run(store, _items(4), "scripted", 2, method="knockout")


def test_icc1_matches_the_one_way_anova_by_hand() -> None:
    y = np.array([[1.0, 2.0], [3.0, 3.0], [5.0, 6.0], [2.0, 2.5]])
    n, k = y.shape
    row = y.mean(axis=1)
    msb = k * ((row - y.mean()) ** 2).sum() / (n - 1)
    msw = ((y - row[:, None]) ** 2).sum() / (n * (k - 1))
    assert icc1(y) == pytest.approx((msb - msw) / (msb + (k - 1) * msw))
    assert icc1(np.array([[1.0, 1.0], [2.0, 2.0]])) == pytest.approx(1.0)
    assert icc1(np.array([[1.0, 2.0]])) is None
