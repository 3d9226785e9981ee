"""Single measures and the bootstrap against hand-computed or scipy/sklearn reference values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from knockout.metrics._agreement import pearson_np, rank_average, spearman_np
from knockout.metrics._analysis import kendall_np
from knockout.metrics._bootstrap import ClusterSampler, bootstrap, paired_bootstrap
from knockout.metrics._measures import (
    full_points,
    kendall,
    pairwise_ranking_accuracy,
    williams_test,
    williams_undefined,
)


def test_kendall_matches_scipy_all_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    import knockout.metrics._analysis as an

    rng = np.random.default_rng(3)
    for n in (2, 3, 7, 60, 300):
        x = np.round(rng.normal(size=n), 1)
        y = np.round(x + rng.normal(size=n), 0)
        ref = stats.kendalltau(x, y).statistic
        assert kendall(x, y) == pytest.approx(ref)
        assert kendall_np(x, y) == pytest.approx(ref)  # contingency table
        monkeypatch.setattr(an, "KENDALL_CELLS", 0)
        assert kendall_np(x, y) == pytest.approx(ref)  # all pairs
        monkeypatch.setattr(an, "KENDALL_PAIRS", 1)
        assert kendall_np(x, y) == pytest.approx(ref)  # scipy
        monkeypatch.undo()
    assert kendall([1, 1, 1], [1, 2, 3]) is None and math.isnan(kendall_np(np.ones(3), np.arange(3.0)))


def test_fast_pearson_spearman_ranks_match_scipy() -> None:
    rng = np.random.default_rng(5)
    x = np.round(rng.normal(size=40), 1)
    y = x + rng.normal(size=40)
    assert pearson_np(x, y) == pytest.approx(stats.pearsonr(x, y).statistic)
    assert spearman_np(x, y) == pytest.approx(stats.spearmanr(x, y).statistic)
    assert np.allclose(rank_average(x), stats.rankdata(x))
    assert math.isnan(pearson_np(np.ones(4), y[:4]))


def test_pairwise_ranking_accuracy_hand() -> None:
    # pairs (0,1): +/+ agree; (0,2): +/+ agree; (1,2): +/- disagree
    assert pairwise_ranking_accuracy([3, 2, 1], [3, 1, 2]) == (pytest.approx(2 / 3), 3)
    assert pairwise_ranking_accuracy([1, 1], [1, 1]) == (1.0, 1)  # both tie: agreement
    assert pairwise_ranking_accuracy([1, 1], [2, 1]) == (0.0, 1)  # only one ties: disagreement
    # pairs only within a group (exam): groups {0,1} and {2,3}
    acc, pairs = pairwise_ranking_accuracy([1, 2, 5, 0], [1, 2, 0, 5], groups=[0, 0, 1, 1])
    assert pairs == 2 and acc == 0.5
    assert pairwise_ranking_accuracy([1], [1]) == (None, 0)


def test_full_points_hand() -> None:
    fp = full_points([2, 2, 1, 0], [2, 1, 1, 0], [2, 2, 2, 2])
    assert (fp.rate, fp.precision, fp.human_rate, fp.n_full) == (0.5, 0.5, 0.25, 2)
    assert full_points([0], [2], [2]).precision is None


def test_williams_against_hand_computed_value() -> None:
    # r12 = .6 (human, A), r13 = .4 (human, B), r23 = .5 (A, B), n = 100:
    # K = 1 - .36 - .16 - .25 + 2(.6)(.4)(.5) = .47
    # t = .2 * sqrt(99 * 1.5) / sqrt(2(.47)(99/97) + (1/4)(.5)^3) = 2.437212 / 0.995304 = 2.448709
    w = williams_test(0.6, 0.4, 0.5, 100)
    assert w.t == pytest.approx(2.448709, abs=1e-6)
    assert w.df == 97
    assert w.p_one_sided == pytest.approx(stats.t.sf(2.448709, 97), rel=1e-5)
    assert w.p_two_sided == pytest.approx(2 * w.p_one_sided)
    assert williams_test(0.4, 0.6, 0.5, 100).t == pytest.approx(-w.t)
    with pytest.raises(ValueError):
        williams_test(0.5, 0.5, 0.5, 3)


def test_cluster_sampler_draws_whole_questions() -> None:
    clusters = np.array([3, 1, 1, 2, 3, 3])
    s = ClusterSampler(clusters, seed=1)
    sizes = {1: 2, 2: 1, 3: 3}
    for _ in range(50):
        idx = s.draw()
        drawn = clusters[idx]
        n_clusters = 0
        for c, size in sizes.items():
            assert (drawn == c).sum() % size == 0
            n_clusters += (drawn == c).sum() // size
        assert n_clusters == 3  # as many questions as there are
    one = ClusterSampler(np.array([7, 7, 7]), seed=0)  # a single question: answers are resampled
    assert len(one.draw()) == 3 and len(set(ClusterSampler(np.array([7, 7, 7]), 0).draw())) <= 3


def test_bootstrap_ci_is_seeded_and_covers_estimate() -> None:
    rng = np.random.default_rng(0)
    h = rng.uniform(size=120)
    j = h + rng.normal(0, 0.2, size=120)
    q = np.repeat(np.arange(30), 4)

    def stat(s: np.ndarray) -> np.ndarray:
        return np.array([pearson_np(j[s], h[s])])

    a = bootstrap(stat, q, resamples=300, seed=4)[0]
    b = bootstrap(stat, q, resamples=300, seed=4)[0]
    assert (a.low, a.high) == (b.low, b.high)
    assert a.low is not None and a.high is not None
    assert a.low < pearson_np(j, h) < a.high and a.resamples == 300
    undefined = bootstrap(lambda s: np.array([math.nan]), q, resamples=20)[0]
    assert undefined.low is None


def test_paired_bootstrap() -> None:
    rng = np.random.default_rng(1)
    h = rng.uniform(size=80)
    good = h + rng.normal(0, 0.05, size=80)
    bad = h + rng.normal(0, 0.5, size=80)
    q = np.repeat(np.arange(20), 4)
    same = paired_bootstrap(lambda s: pearson_np(good[s], h[s]), lambda s: pearson_np(good[s], h[s]), q,
                            resamples=200)
    assert same.delta == 0 and same.p_value == 1.0
    diff = paired_bootstrap(lambda s: pearson_np(good[s], h[s]), lambda s: pearson_np(bad[s], h[s]), q,
                            resamples=200)
    assert diff.delta is not None and diff.delta > 0 and diff.p_value is not None and diff.p_value < 0.05
    assert diff.low is not None and diff.low > 0


def test_pearson_and_spearman_equal_scipy() -> None:
    """The numpy Pearson and Spearman (no scipy import in a grading process) give scipy's figures, ties and
    constant series included."""
    import numpy as np
    from scipy import stats

    from knockout.metrics._agreement import pearson, rank_average, spearman

    rng = np.random.default_rng(0)
    for n in (2, 3, 7, 50, 400):
        for _ in range(20):
            x = rng.integers(0, 5, n).astype(float)  # many ties
            y = x + rng.normal(0, 1.5, n)
            y[: n // 3] = np.round(y[: n // 3])
            assert np.array_equal(rank_average(x), stats.rankdata(x))
            if np.std(x) == 0 or np.std(y) == 0:
                assert pearson(x, y) is None and spearman(x, y) is None
                continue
            assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
            assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)


@pytest.mark.parametrize(("r12", "r13", "r23", "n", "why"), [
    (1.0, 0.6, 0.6, 50, "run A's Pearson is +1.000"),
    (0.5, -1.0, -0.5, 50, "run B's Pearson is -1.000"),
    (0.5, 0.5, 0.9999999, 50, "the two runs correlate +1.000"),
    (0.6, 0.4, 0.5, 3, "n = 3, needs n > 3"),
])
def test_williams_is_not_computed_where_it_says_nothing(r12: float, r13: float, r23: float, n: int,
                                                        why: str) -> None:
    """A correlation of +-1 (one run grades exactly as the humans rank, or the runs agree exactly) gave
    ``t -136.7, p < 0.001`` beside a paired-bootstrap p of 0.611: such a case is n/a, with its reason."""
    assert williams_undefined(r12, r13, r23, n) == why
    with pytest.raises(ValueError, match="undefined"):
        williams_test(r12, r13, r23, n)
    assert williams_undefined(0.6, 0.4, 0.5, 100) is None


def test_paired_comparison_marks_williams_na_for_a_perfect_run() -> None:
    from knockout.data import Answer, ItemSet, Question
    from knockout.metrics import paired_comparison
    from knockout.reports._report import comparison_tables

    qs = [Question(id=f"q{i}", text="t", max_points=4, language="en") for i in range(6)]
    human = [0, 1, 2, 3, 4, 2, 1, 3, 0, 4, 2, 3]
    answers = [Answer(id=f"a{i}", question_id=f"q{i % 6}", text="x", human_scores={"h": h})
               for i, h in enumerate(human)]
    perfect = [{"item_id": f"a{i}", "score": float(h), "valid": True, "details": {}} for i, h in enumerate(human)]
    noisy = [{"item_id": f"a{i}", "score": float((h + i) % 5), "valid": True, "details": {}}
             for i, h in enumerate(human)]
    out = paired_comparison(ItemSet(qs, answers), noisy, perfect, resamples=50)
    ql = out["question_level"]
    assert out["pearson_b"] == pytest.approx(1.0)
    assert "williams_t" not in ql and ql["williams_na"] == "run B's Pearson is +1.000"
    cmp = {"runs": [], "paired": [{"run_id": "b", "baseline": "a", **out}], "resamples": 50, "by": []}
    row = comparison_tables(cmp)[1].rows[0]
    assert row[5] == "n/a: run B's Pearson is +1.000" and row[6] == "n/a"


def test_pearson_of_huge_grades_does_not_overflow() -> None:
    """A fuzzed file with grades near 1e200 overflowed the products (a RuntimeWarning in CI, r = 0): the series are
    scaled first, so r is the one of the same grades scaled down."""
    import warnings

    x, y = np.array([1e200, 2e200, 3.5e200]), np.array([1.0, 2.0, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pearson_np(x, y) == pytest.approx(pearson_np(x / 1e200, y))
        assert math.isnan(pearson_np(np.array([1.0, 1.0]), y[:2]))
