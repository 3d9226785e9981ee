"""Side-by-side metrics against hand-computed values (Titova et al., 4.2, 4.3, B.1)."""

from __future__ import annotations

import pytest

from knockout.metrics._kappa import cohen_kappa
from knockout.sbs._metrics import (
    con_abcd,
    distribution,
    human_agreement,
    median,
    median_pearson,
    merge_ties,
    pbias_ab,
    pcon_ab,
    sbs_metrics,
    window_medians,
)


def test_distribution_counts_every_class_including_e() -> None:
    assert distribution(["A", "A", "B", "E"]) == {"A": 0.5, "B": 0.25, "C": 0.0, "D": 0.0, "E": 0.25}
    assert distribution([]) == dict.fromkeys("ABCDE", 0.0)


def test_median_is_a_plus_c_over_a_plus_b_plus_2c() -> None:
    assert median(["A", "B", "C", "D"]) == pytest.approx(2 / 4)
    assert median(["A", "A", "B"]) == pytest.approx(2 / 3)
    assert median(["C", "C", "B"]) == pytest.approx(2 / 5)
    assert median(["D", "E"]) is None  # no A, B or C: undefined


def test_windows_are_full_and_strided() -> None:
    v = ["A", "A", "B", "B", "C", "D"]
    # starts 0 and 2 (a window from 4 would be cut short): AAB -> 2/3; BBC -> (0 + 1) / (0 + 2 + 2)
    assert window_medians(v, 3, 2) == [pytest.approx(2 / 3), pytest.approx(1 / 4)]
    assert window_medians(v, 7, 1) == []


def test_mpcc_hand_computed() -> None:
    human = ["A", "A", "B", "B", "A", "B"]  # medians (N=2, K=2): 1, 0, 0.5
    judge = ["A", "B", "B", "B", "A", "A"]  # medians: 0.5, 0, 1
    # means 0.5/0.5; cov 0.25; var 0.5 each -> r = 0.5
    assert median_pearson(human, judge, 2, 2) == pytest.approx(0.5)
    # a window without A/B/C has no median and is dropped from both series
    judge2 = ["A", "A", "D", "D", "B", "B", "A", "B"]
    human2 = ["A", "A", "B", "B", "B", "B", "A", "B"]
    # judge medians 1, None, 0, 0.5; human 1, 0, 0, 0.5 -> pairs (1,1), (0,0), (.5,.5): r = 1
    assert median_pearson(human2, judge2, 2, 2) == pytest.approx(1.0)
    assert median_pearson(["A", "B"], ["A", "B"], 2, 2) is None  # one window: undefined


def test_pbias_sign_and_range() -> None:
    # swap 0 (candidate first): display = candidate terms; P(A|AB) = 3/4
    # swap 1: candidate B -> display A; [B, B, A, C] -> display [A, A, B, C]: P(A|AB) = 2/3
    assert pbias_ab(["A", "A", "A", "B"], ["B", "B", "A", "C"]) == pytest.approx(3 / 4 + 2 / 3 - 1)
    # always the first response: +1; always the second: -1
    assert pbias_ab(["A", "A"], ["B", "B"]) == pytest.approx(1.0)
    assert pbias_ab(["B", "B"], ["A", "A"]) == pytest.approx(-1.0)
    # consistent, unbiased judge: 0
    assert pbias_ab(["A", "B"], ["A", "B"]) == pytest.approx(0.0)
    assert pbias_ab(["C", "D"], ["A", "B"]) is None  # no A/B in swap 0


def test_con_abcd_and_pcon_ab() -> None:
    s0 = ["A", "B", "C", "E", "D"]
    s1 = ["A", "A", "C", "E", "C"]
    assert con_abcd(s0, s1) == pytest.approx(2 / 5)  # A=A, C=C; E=E does not count
    # items with A/B in some order: 0 (A,A) and 1 (B,A); consistent: item 0
    assert pcon_ab(s0, s1) == pytest.approx(1 / 2)
    assert pcon_ab(["A", "C"], ["C", "B"]) == pytest.approx(0.0)
    assert pcon_ab(["C"], ["D"]) is None


def test_three_class_kappa_merges_ties() -> None:
    # C and D swapped: 4 classes po = 1/3 = pe -> 0; C+D merged -> perfect
    assert cohen_kappa(["C", "D", "A"], ["D", "C", "A"]) == pytest.approx(0.0)
    assert cohen_kappa(merge_ties(["C", "D", "A"]), merge_ties(["D", "C", "A"])) == pytest.approx(1.0)
    # an E verdict is its own label: disagreement
    assert cohen_kappa(["A", "E"], ["A", "B"]) == pytest.approx(cohen_kappa(["A", "C"], ["A", "B"]))


def test_human_agreement_pairs_and_fleiss() -> None:
    ann = [{"x": "A", "y": "A"}, {"x": "A", "y": "B"}, {"x": "B", "y": "B"}, {"x": "B", "y": "B"}]
    out = human_agreement(ann)
    # x: A A B B, y: A B B B -> Cohen 0.5 (as above)
    assert out["pairs"] == {"x~y": pytest.approx(0.5)}
    assert out["n_fleiss"] == 4 and out["fleiss"] is not None


def test_sbs_metrics_keys_and_averages() -> None:
    s0 = ["A", "B", "A", "C"]
    s1 = ["A", "B", "B", "C"]
    human = ["A", "B", None, "C"]
    m = sbs_metrics(s0, s1, human, window=2, stride=1)
    assert m["n_items"] == 4 and m["n_human"] == 3
    assert m["distribution"]["mean"]["A"] == pytest.approx((0.5 + 0.25) / 2)
    assert m["kappa"]["swap0"] == pytest.approx(1.0) and m["kappa"]["mean"] == pytest.approx(1.0)
    assert m["accuracy"]["delta"] == pytest.approx(0.0)
    assert m["con_abcd"] == pytest.approx(3 / 4) and m["pcon_ab"] == pytest.approx(2 / 3)
    for key in ("pbias_ab", "mpcc", "mpcc_delta", "mpcc_consistency", "kappa_3class", "human_distribution"):
        assert key in m
    assert "kappa" not in sbs_metrics(s0, s1, None)
