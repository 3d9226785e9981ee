"""The one Cohen's kappa and the one Fleiss' kappa (knockout.metrics._kappa) against hand-computed,
textbook and sklearn values."""

from __future__ import annotations

import pytest
from sklearn.metrics import cohen_kappa_score

from knockout.metrics._kappa import cohen_kappa, fleiss_kappa, grid_kappa, on_grid, rater_agreement


def test_cohen_kappa_hand_computed() -> None:
    # po = 3/4; pe = .5*.25 + .5*.75 = .5 -> kappa = .5
    assert cohen_kappa(["A", "A", "B", "B"], ["A", "B", "B", "B"]) == pytest.approx(0.5)
    assert cohen_kappa(["A", "A"], ["A", "A"]) is None  # one label: undefined
    assert cohen_kappa(["A", "A"], ["A", "A"], labels=["A", "B"]) is None
    assert cohen_kappa(["A"], ["B"]) is None  # one item
    assert cohen_kappa([], []) is None
    with pytest.raises(ValueError, match="aligned"):
        cohen_kappa(["A"], ["A", "B"])


def test_grid_kappa_hand_and_sklearn() -> None:
    # po = 3/4; marginals x (1, 2, 1), y (1, 1, 2): pe = (1 + 2 + 2) / 16; kappa = (0.75 - 5/16) / (1 - 5/16)
    x, y = [0, 1, 1, 2], [0, 1, 2, 2]
    hand = (0.75 - 5 / 16) / (1 - 5 / 16)
    assert grid_kappa(x, y) == pytest.approx(hand)
    assert grid_kappa([v / 2 for v in x], [v / 2 for v in y]) == pytest.approx(hand)  # half points
    for w in ("linear", "quadratic"):
        assert grid_kappa(x, y, w) == pytest.approx(cohen_kappa_score(x, y, weights=w))
    # weighted kappa weighs by distance in points even where a grade never occurs (1 and 3 are absent)
    a, b = [0, 2, 4, 4, 0], [0, 4, 4, 2, 2]
    assert grid_kappa(a, b, "linear") == pytest.approx(
        cohen_kappa_score(a, b, labels=[0, 1, 2, 3, 4], weights="linear"))
    assert grid_kappa([0, 2.75], [1, 2]) is None  # not a category (mean of two graders)
    assert grid_kappa([1, 1], [1, 1]) is None
    assert on_grid([0, 0.5, 3]) and not on_grid([0.25])


def test_fleiss_kappa_wikipedia_example() -> None:
    # Fleiss' kappa, Wikipedia's worked example: 10 items, 14 raters, 5 classes -> 0.210
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    cats = ["1", "2", "3", "4", "5"]
    ratings = [[c for c, n in zip(cats, row, strict=True) for _ in range(n)] for row in table]
    k = fleiss_kappa(ratings, cats)
    assert k is not None and round(k, 3) == 0.210
    assert fleiss_kappa(ratings) == pytest.approx(k)  # categories from the data
    assert fleiss_kappa([["A", "A"], ["B", "B"]]) == pytest.approx(1.0)
    assert fleiss_kappa([["A"]]) is None
    assert fleiss_kappa([["A", "A"], ["A", "A"]]) is None  # Pe = 1
    with pytest.raises(ValueError, match="categories"):
        fleiss_kappa([["A", "C"]], ["A", "B"])


def test_fleiss_kappa_hand_computed_and_unequal_raters() -> None:
    # P_i = 1, 1/3, 1 -> P = 7/9; p_A = 5/9, p_B = 4/9 -> Pe = 41/81; kappa = 22/40
    assert fleiss_kappa([["A", "A", "A"], ["A", "A", "B"], ["B", "B", "B"]]) == pytest.approx(22 / 40)
    # items with different numbers of raters: P_i = 1, 1/3, 1 (n = 2, 3, 2); p_A = 4/7, p_B = 3/7
    p_bar, p_e = (1 + 1 / 3 + 1) / 3, (4 / 7) ** 2 + (3 / 7) ** 2
    expected = (p_bar - p_e) / (1 - p_e)
    assert fleiss_kappa([["A", "A"], ["A", "A", "B"], ["B", "B"], ["A"]]) == pytest.approx(expected)


def test_rater_agreement_cohen_matches_sklearn() -> None:
    x = ["A", "B", "A", "both_bad", "A", "B"]
    y = ["A", "B", "B", "both_bad", "A", "A"]
    by_item = {f"p{i}": {"u1": a, "u2": b} for i, (a, b) in enumerate(zip(x, y, strict=True))}
    by_item["p9"] = {"u1": "A", "u3": "A"}
    ag = rater_agreement(by_item, ["A", "B", "both_good", "both_bad"])
    c12 = next(c for c in ag["cohen"] if (c["a"], c["b"]) == ("u1", "u2"))
    assert c12["kappa"] == pytest.approx(cohen_kappa_score(x, y)) and c12["n"] == 6
    assert c12["agreement"] == pytest.approx(4 / 6)
    c13 = next(c for c in ag["cohen"] if (c["a"], c["b"]) == ("u1", "u3"))
    assert c13["kappa"] is None and c13["agreement"] is None  # one pair only
    assert ag["raters"] == {"u1": 7, "u2": 6, "u3": 1} and ag["fleiss_items"] == 7 and ag["items_rated"] == 7
    # only the items every rater rated (the side-by-side report's Fleiss): none here
    assert rater_agreement(by_item, fleiss_over="all-raters")["fleiss_items"] == 0
