"""Length and position analysis in ``knockout report`` (knockout.metrics._bias)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from knockout.data._records import Answer, ItemSet, Question
from knockout.judges import make_judge
from knockout.methods._base import MethodOptions
from knockout.methods._run import RunConfig, run
from knockout.metrics._analysis import Aligned, build_rows
from knockout.metrics._bias import length_analysis, match_bias, sbs_length
from knockout.storage import Store
from knockout.storage._store import MatchRow

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "src/knockout/examples/demo_exam.jsonl"


def items_with_lengths(n_q: int = 6, per: int = 8, seed: int = 0) -> ItemSet:
    rng = np.random.default_rng(seed)
    qs, ans = [], []
    for q in range(n_q):
        qs.append(Question(id=f"q{q}", text=f"question {q}", max_points=10))
        for a in range(per):
            words = int(rng.integers(3, 60))
            ans.append(Answer(id=f"q{q}a{a}", question_id=f"q{q}", text=" ".join(["w"] * words),
                              human_scores={"h": float(rng.integers(0, 11))}))
    return ItemSet(qs, ans)


def results(items: ItemSet, score: dict[str, float]) -> list[dict[str, object]]:
    return [{"item_id": a.id, "score": score[a.id], "valid": True, "details": {}} for a in items]


def test_a_judge_paid_by_the_word_has_a_positive_partial_correlation() -> None:
    items = items_with_lengths()
    rng = np.random.default_rng(1)
    fair = {a.id: float(np.clip(a.human_score + rng.normal(0, 1), 0, 10)) for a in items}  # type: ignore[operator]
    paid = {a.id: float(np.clip(a.human_score * 0.5 + len(a.text.split()) / 12, 0, 10)) for a in items}  # type: ignore[operator]
    f = length_analysis(Aligned(build_rows(items, results(items, fair))[0]), resamples=200, seed=0)
    p = length_analysis(Aligned(build_rows(items, results(items, paid))[0]), resamples=200, seed=0)
    assert f is not None and p is not None
    assert abs(f["partial_r"]) < 0.3 and p["partial_r"] > 0.6
    assert p["partial_r_ci"][0] > 0.3  # type: ignore[index]
    assert p["length_controlled_pearson"] > p["pearson"] - 0.6
    assert p["pairs"]["longer_wins"] > 0.7 and 0.3 < p["pairs"]["longer_wins_human"] < 0.7
    assert p["unit"] == "words" and p["pairs"]["decided"] > 0


def test_partial_correlation_matches_the_residual_definition() -> None:
    items = items_with_lengths(seed=4)
    rng = np.random.default_rng(2)
    score = {a.id: float(rng.integers(0, 11)) for a in items}
    an = length_analysis(Aligned(build_rows(items, results(items, score))[0]), resamples=0, seed=0)
    al = Aligned(build_rows(items, results(items, score))[0])
    n = np.array([len(r.answer.text.split()) for r in al.rows], float)
    j, h = al.judge_norm, al.human_norm
    x = np.column_stack([np.ones_like(h), h])
    rj = j - x @ np.linalg.lstsq(x, j, rcond=None)[0]
    rn = n - x @ np.linalg.lstsq(x, n, rcond=None)[0]
    assert an is not None and an["partial_r"] == pytest.approx(float(np.corrcoef(rj, rn)[0, 1]))


def test_position_figures_from_matches() -> None:
    items = ItemSet([Question(id="q", text="t", max_points=4)],
                    [Answer(id=i, question_id="q", text=t, human_scores={"h": s})
                     for i, t, s in (("a", "short", 1.0), ("b", "a much longer answer", 3.0),
                                     ("c", "mid size text", 2.0), ("d", "x", 0.0))])

    def game(first: str, second: str, s1: float, s2: float) -> dict[str, object]:
        return {"first": first, "second": second, "scores": [s1, s2]}

    matches = [
        MatchRow("a|b", "q", "a", "b", 1, True, False, [game("a", "b", 3, 1), game("b", "a", 3, 1)]),  # first wins both
        MatchRow("c|d", "q", "c", "d", 1, True, False, [game("c", "d", 3, 1), game("d", "c", 1, 3)]),  # consistent
    ]
    m = match_bias(items, matches)
    assert m is not None
    assert m["games"] == 4 and m["first_win_rate"] == 0.75 and m["swap_consistency"] == 0.5
    assert m["first_wins_both"] == 0.5 and m["debiased_matches"] == 2
    assert m["first_win_rate_human"] == 0.5  # humans: b > a (b first in one game), c > d (c first in one)
    assert m["longer_wins"] == 1.0 and m["decided_matches"] == 1  # a|b is a tie by the mean; c (longer) wins
    assert match_bias(items, []) is None


def test_sbs_length_preference() -> None:
    items = ItemSet([Question(id=i, text="q") for i in ("p1", "p2")],
                    [Answer(id="p1/candidate", question_id="p1", text="long long long"),
                     Answer(id="p1/baseline", question_id="p1", text="short"),
                     Answer(id="p2/candidate", question_id="p2", text="x"),
                     Answer(id="p2/baseline", question_id="p2", text="y y")])
    got = sbs_length(items, ["A", "A"], ["A", "C"], ["B", "A"], ["p1", "p2"])
    assert got == {"unit": "words", "longer_preferred": pytest.approx(2 / 3), "verdicts": 3,
                   "longer_preferred_human": 0.0, "human_verdicts": 2}


def test_report_has_length_and_position_sections(tmp_path: Path) -> None:
    from knockout.data import load_items

    db = tmp_path / "r.db"
    with Store(db) as store:
        r = run(load_items(DEMO), make_judge("scripted?bias=0.2"), store,
                RunConfig(method="knockout", options=MethodOptions(debias=True)))
    res = subprocess.run([sys.executable, "-m", "knockout.cli", "report", f"{db}:{r.run_id}", "--json",
                          "--resamples", "100"], capture_output=True, text=True, timeout=300)
    rep = json.loads(res.stdout)
    assert rep["length"]["partial_r"] is not None and rep["length"]["partial_r_ci"] is not None
    pos = rep["position"]
    assert pos["first_win_rate"] > 0.6 and pos["swap_consistency"] < 1 and pos["debiased_matches"] == 20
    text = subprocess.run([sys.executable, "-m", "knockout.cli", "report", f"{db}:{r.run_id}", "--resamples", "50"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "250"})
    assert "length bias" in text.stdout and "position bias" in text.stdout and "swap consistency" in text.stdout


# -- the vectorised figures equal their definitions --------------------------------------------------------
def _residuals(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    a = np.column_stack([np.ones(len(x)), x])
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    return np.asarray(y - a @ coef)


def _by_definition(j: np.ndarray, h: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Partial r as the Pearson of OLS residuals; length-controlled Pearson by regressing length out."""
    if len(j) < 4 or np.ptp(n) == 0:
        return np.full(2, np.nan)
    return np.array([np.corrcoef(_residuals(j, h), _residuals(n, h))[0, 1],
                     np.corrcoef(_residuals(j, n) + j.mean(), h)[0, 1]])


def test_length_figures_from_moment_sums_equal_the_residual_definitions() -> None:
    from knockout.metrics._bias import _length_stats

    rng = np.random.default_rng(3)
    for size in (4, 9, 50, 400):
        h = rng.integers(0, 5, size) / 4
        n = rng.integers(5, 80, size).astype(float)
        j = np.clip(h + 0.004 * n + rng.normal(0, 0.2, size), 0, 1)
        assert np.allclose(_length_stats(j, h, n), _by_definition(j, h, n), atol=1e-9)
    assert np.isnan(_length_stats(np.arange(6.0), np.arange(6.0) % 2, np.full(6, 7.0))).all()


def test_length_intervals_are_the_cluster_bootstrap_of_the_definition() -> None:
    from knockout.metrics._bias import _length_from_sums, _moments
    from knockout.metrics._bootstrap import bootstrap, sums_bootstrap

    rng = np.random.default_rng(4)
    q = np.repeat(np.arange(30), 6)
    h = rng.integers(0, 5, len(q)) / 4
    n = rng.integers(5, 80, len(q)).astype(float)
    j = np.clip(h + 0.004 * n + rng.normal(0, 0.2, len(q)), 0, 1)
    fast = sums_bootstrap(_moments(j, h, n), q, _length_from_sums, resamples=300, seed=7)
    slow = bootstrap(lambda s: _by_definition(j[s], h[s], n[s]), q, resamples=300, seed=7)
    for f, s in zip(fast, slow, strict=True):
        assert f.resamples == s.resamples
        assert f.low == pytest.approx(s.low, abs=1e-9) and f.high == pytest.approx(s.high, abs=1e-9)


def test_longer_share_counts_every_pair_within_a_question_however_large() -> None:
    from knockout.metrics import _bias

    rng = np.random.default_rng(5)
    group = rng.integers(0, 12, 300)
    group[:60] = 99  # one large question, counted through Kendall's tau below
    score = rng.integers(0, 5, 300).astype(float)
    length = rng.integers(3, 40, 300).astype(float)
    pairs = [(score[a], score[b], int(length[a]), int(length[b]))
             for a in range(300) for b in range(a + 1, 300) if group[a] == group[b]]
    want = _bias._longer_share(pairs)
    assert _bias._longer_share_grouped(score, length, group) == pytest.approx(want)
    old = _bias.PAIRS_PER_GROUP_MAX
    try:
        _bias.PAIRS_PER_GROUP_MAX = 10
        got = _bias._longer_share_grouped(score, length, group)
    finally:
        _bias.PAIRS_PER_GROUP_MAX = old
    assert got["decided"] == want["decided"] and got["share"] == pytest.approx(want["share"])
