"""The run analysis on a small hand-made item set: every figure against a hand-computed or scipy value."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.metrics._analysis import analyse
from knockout.metrics._comparison import paired_comparison

Q = [
    Question(id="q1", text="Q1", max_points=2, exam_id="E1", difficulty="easy", language="en"),
    Question(id="q2", text="Q2", max_points=4, exam_id="E1", difficulty="hard", language="de"),
    Question(id="q3", text="Q3", max_points=2, exam_id="E2", difficulty="easy", language="en"),
]
HUMAN = {"q1": {"a": 2, "b": 1, "c": 0}, "q2": {"a": 4, "b": 2, "c": 1}, "q3": {"a": 1, "b": 2, "c": 0}}
JUDGE: dict[str, dict[str, float | None]] = {
    "q1": {"a": 2, "b": 2, "c": 0}, "q2": {"a": 3, "b": 2, "c": None}, "q3": {"a": 0.5, "b": 1.5, "c": 1}}


def items() -> ItemSet:
    answers = [Answer(id=f"{q}/{e}", question_id=q, examinee=e, text="x", human_scores={"h": s})
               for q, row in HUMAN.items() for e, s in row.items()]
    return ItemSet(Q, answers)


def results(judge: dict[str, dict[str, float | None]] = JUDGE, details: dict[str, dict[str, Any]] | None = None
            ) -> list[dict[str, Any]]:
    return [{"item_id": f"{q}/{e}", "question_id": q, "score": s, "valid": s is not None,
             "details": (details or {}).get(f"{q}/{e}", {})} for q, row in judge.items() for e, s in row.items()]


# valid rows, normalised (judge, human): q1 a b c, q2 a b, q3 a b c
J_NORM = [1, 1, 0, 0.75, 0.5, 0.25, 0.75, 0.5]
H_NORM = [1, 0.5, 0, 1, 0.5, 0.5, 1, 0]
J_PTS = [2, 2, 0, 3, 2, 0.5, 1.5, 1]
H_PTS = [2, 1, 0, 4, 2, 1, 2, 0]


def test_question_level_hand_values() -> None:
    an = analyse(items(), results(), resamples=200, seed=1)
    q = an.to_dict()["question_level"]
    assert (q["n"], q["invalid"], q["questions"]) == (8, 1, 3)
    assert q["pearson"] == pytest.approx(stats.pearsonr(J_NORM, H_NORM).statistic)
    assert q["spearman"] == pytest.approx(stats.spearmanr(J_NORM, H_NORM).statistic)
    assert q["kendall"] == pytest.approx(stats.kendalltau(J_NORM, H_NORM).statistic)
    # squared differences in points: 0 1 0 1 0 .25 .25 1 -> mean 3.5 / 8
    assert q["rmse"] == pytest.approx((3.5 / 8) ** 0.5)
    assert q["mean_diff"] == pytest.approx(0.0)
    assert q["mean_diff_norm"] == pytest.approx(np.mean(np.subtract(J_NORM, H_NORM)))
    # judge full points on q1/a, q1/b; humans on q1/a, q2/a, q3/b
    assert (q["full_points_rate"], q["full_points_precision"], q["human_full_points_rate"]) == (0.25, 0.5, 0.375)
    cats = [round(2 * v) for v in J_PTS], [round(2 * v) for v in H_PTS]
    assert q["kappa"] == pytest.approx(cohen_kappa_score(*cats, labels=list(range(0, 9))))
    assert q["kappa_quadratic"] == pytest.approx(cohen_kappa_score(*cats, labels=list(range(0, 9)),
                                                                   weights="quadratic"))
    lo, hi = q["pearson_ci"]
    assert -1 <= lo <= q["pearson"] <= hi <= 1


def test_exam_level_hand_values() -> None:
    e = analyse(items(), results(), resamples=200).to_dict()["exam_level"]
    # E1: a (2+3)/6 vs (2+4)/6, b 4/6 vs 3/6, c only q1 (q2 invalid in both sums): 0/2 vs 0/2
    # E2: a .25 vs .5, b .75 vs 1, c .5 vs 0
    j = [5 / 6, 4 / 6, 0, 0.25, 0.75, 0.5]
    h = [1, 0.5, 0, 0.5, 1, 0]
    assert (e["n"], e["exams"], e["pairs"]) == (6, 2, 6)
    assert e["pearson"] == pytest.approx(stats.pearsonr(j, h).statistic)
    assert e["spearman"] == pytest.approx(stats.spearmanr(j, h).statistic)
    # E1: all 3 pairs agree; E2: (a,b) agree, (a,c) judge - human + disagree, (b,c) agree
    assert e["pairwise_accuracy"] == pytest.approx(5 / 6)
    assert e["rmse_norm"] == pytest.approx(np.sqrt(np.mean((np.array(j) - h) ** 2)))


def test_exam_intervals_from_question_sums_equal_resampling_the_answers() -> None:
    """The exam level's bootstrap sums each question's points per examinee once; its intervals are those of
    recomputing the totals from every resample's answers (the same seed draws the same questions)."""
    from knockout.metrics._analysis import Aligned, build_rows
    from knockout.metrics._bootstrap import bootstrap

    rng = np.random.default_rng(2)
    qs = [Question(id=f"q{i}", text="Q", max_points=4, exam_id=f"E{i % 3}") for i in range(24)]
    answers = [Answer(id=f"q{i}/{e}", question_id=f"q{i}", examinee=e, text="x",
                      human_scores={"h": float(rng.integers(0, 5))}) for i in range(24) for e in "abcde"]
    res = [{"item_id": a.id, "score": float(rng.integers(0, 5)), "valid": True, "details": {}} for a in answers]
    al = Aligned(build_rows(ItemSet(qs, answers), res)[0])
    idx = np.flatnonzero(al.question % 2 == 0)  # a subset, as a breakdown group is
    fast = al.exam_bootstrap(idx, resamples=300, seed=5)
    slow = bootstrap(lambda s: al.exam_stat(idx[s]), al.question[idx], resamples=300, seed=5)
    for f, s in zip(fast, slow, strict=True):
        assert f.resamples == s.resamples
        assert f.low == pytest.approx(s.low, abs=1e-9) and f.high == pytest.approx(s.high, abs=1e-9)


def test_breakdowns_ranking_calibration() -> None:
    d = analyse(items(), results(), by=["difficulty", "exam", "meta:none"], resamples=0).to_dict()
    by_diff = {g["group"]: g for g in d["breakdowns"]["difficulty"]}
    assert by_diff["hard"]["n"] == 2 and by_diff["hard"]["invalid"] == 1 and by_diff["easy"]["n"] == 6
    easy_j, easy_h = [1, 1, 0, 0.25, 0.75, 0.5], [1, 0.5, 0, 0.5, 1, 0]
    assert by_diff["easy"]["pearson"] == pytest.approx(stats.pearsonr(easy_j, easy_h).statistic)
    assert [g["group"] for g in d["breakdowns"]["meta:none"]] == ["(none)"]
    infl = {g["group"]: g for g in d["inflation_by_difficulty"]}
    assert infl["hard"]["mean_diff"] == pytest.approx(-0.5)  # (3-4 + 2-2) / 2
    exam = analyse(items(), results(), level="exam", by=["exam"], resamples=0).to_dict()["breakdowns"]["exam"]
    assert [g["n"] for g in exam] == [3, 3] and exam[1]["pairwise_accuracy"] == pytest.approx(2 / 3)
    rk = d["ranking"]["examinees"]
    # a: judge 5.5/8, human 7/8; b: judge 5.5/8, human 5/8; c (q2 invalid): judge 1/4, human 0/4
    assert [(r["examinee"], r["human_rank"], r["judge_rank"]) for r in rk] == [("a", 1, 1), ("b", 2, 1),
                                                                               ("c", 3, 3)]
    assert rk[0]["judge_pct"] == pytest.approx(100 * 5.5 / 8)
    cal = {c["human_low"]: c for c in d["calibration"]}  # few distinct human values: one bin each
    assert cal[0.5]["n"] == 3 and cal[0.5]["judge_mean"] == pytest.approx((1 + 0.5 + 0.25) / 3)
    assert d["rounds"] is None and d["human_human"] is None
    with pytest.raises(ConfigError):
        analyse(items(), results(), by=["colour"])
    with pytest.raises(ConfigError):
        analyse(items(), results(), level="course")


def test_rounds_first_vs_later() -> None:
    rounds = {"q1/a": None, "q1/b": 2, "q1/c": 1, "q2/a": 2, "q2/b": 1, "q2/c": 1,
              "q3/a": 1, "q3/b": None, "q3/c": 1}
    det = {k: {"groups": {"round": "winner" if v is None else str(v)}} for k, v in rounds.items()}
    d = analyse(items(), results(details=det), by=["round"], resamples=0).to_dict()
    r = d["rounds"]
    # valid rows eliminated in round 1: q1/c, q2/b, q3/a, q3/c; later or winner: q1/a, q1/b, q2/a, q3/b
    first_j, first_h = [0, 0.5, 0.25, 0.5], [0, 0.5, 0.5, 0]
    later_j, later_h = [1, 1, 0.75, 0.75], [1, 0.5, 1, 1]
    assert r["first_round"]["n"] == 4 and r["later_rounds"]["n"] == 4
    assert r["first_round"]["pearson"] == pytest.approx(stats.pearsonr(first_j, first_h).statistic)
    assert r["later_rounds"]["pearson"] == pytest.approx(stats.pearsonr(later_j, later_h).statistic)
    groups = {g["group"]: g for g in d["breakdowns"]["round"]}
    assert set(groups) == {"1", "2", "winner"} and groups["1"]["invalid"] == 1


def test_human_human_and_judge_vs_each_grader() -> None:
    g1 = [2, 1, 0, 2, 1, 2]
    g2 = [2, 1, 1, 2, 0, 2]
    q = [Question(id=f"q{i}", text="Q", max_points=2) for i in range(3)]
    answers = [Answer(id=f"a{i}", question_id=f"q{i // 2}", examinee=f"e{i % 2}", text="x",
                      human_scores={"g1": g1[i], "g2": g2[i]}) for i in range(6)]
    judge = [2, 1, 1, 1, 0, 2]
    res = [{"item_id": f"a{i}", "score": judge[i], "valid": True, "details": {}} for i in range(6)]
    hh = analyse(ItemSet(q, answers), res, resamples=100).to_dict()["human_human"]
    pair = hh["pairs"][0]
    assert (pair["a"], pair["b"], pair["n"]) == ("g1", "g2", 6)
    assert pair["pearson"] == pytest.approx(stats.pearsonr(g1, g2).statistic)
    assert pair["kappa"] == pytest.approx(cohen_kappa_score([2 * v for v in g1], [2 * v for v in g2],
                                                            labels=list(range(0, 5))))
    vs = {v["grader"]: v for v in hh["judge_vs_grader"]}
    assert vs["g2"]["pearson"] == pytest.approx(stats.pearsonr(judge, g2).statistic)


def test_paired_comparison_on_same_items() -> None:
    noisy: dict[str, dict[str, float | None]] = {
        "q1": {"a": 0, "b": 2, "c": 2}, "q2": {"a": 1, "b": 4, "c": 0}, "q3": {"a": 2, "b": 0, "c": None}}
    out = paired_comparison(items(), results(), results(noisy), resamples=200)
    # common valid answers: all but q2/c and q3/c
    keep = [0, 1, 2, 3, 4, 5, 6]
    nj = [0, 1, 1, 0.25, 1, 1, 0]
    assert out["n"] == 7
    assert out["pearson_a"] == pytest.approx(stats.pearsonr([J_NORM[i] for i in keep],
                                                            [H_NORM[i] for i in keep]).statistic)
    assert out["pearson_b"] == pytest.approx(stats.pearsonr(nj, [H_NORM[i] for i in keep]).statistic)
    ql = out["question_level"]
    assert ql["delta"] == pytest.approx(out["pearson_a"] - out["pearson_b"])
    assert "williams_t" in ql and 0 <= ql["p_bootstrap"] <= 1
    assert out["exam_level"]["delta"] is not None
