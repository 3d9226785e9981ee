"""Side-by-side metrics of Titova et al. (section 4.2, 4.3 and appendix B.1).

All verdict lists are in benchmark order.  Judge verdicts are ``A``-``E`` in *candidate* terms
(``A`` = candidate better) unless a function says otherwise; human verdicts are ``A``-``D`` or None.

Choices where the paper's formula is ambiguous (tested in tests/test_sbs_metrics.py):

* **Median** (MPCC) of a window = ``(#A + #C) / (#A + #B + 2 #C)``: D and E do not count.  A window
  where the denominator is 0 has no median; such a window is left out of both series of a correlation
  (pairwise deletion).  Windows: size ``window``, stride ``stride``, starting at 0, only full windows.
* **MPCC** = Pearson between the human and judge medians over the items that have a human verdict,
  per order; reported per order and as the mean of the two orders (the paper averages over both
  runs).  **MPCC-Consistency** = Pearson between the medians of swap 0 and swap 1 (all items).
  **MPCC-delta** = ``|MPCC(swap 0) - MPCC(swap 1)|`` (the paper: "lower is less biased", so absolute).
* **PBias@AB** = ``sum over swaps of P(J = A | J in {A, B}) - 1`` with J in *display* terms (A = the
  first response shown).  An unbiased judge prefers the candidate at the same rate p in both orders,
  i.e. first position p in swap 0 and 1 - p in swap 1, which sums to 1: PBias 0.  A judge that always
  picks the first response scores +1, always the second -1.  None when an order has no A/B verdict.
* **Con@ABCD** = the share of items whose two verdicts (candidate terms) are equal and in A-D
  (two E's do not count as consistent).
* **PCon@AB** = ``#(J0 = J1 and J0 in {A, B}) / #(J0 in {A, B} or J1 in {A, B})`` (candidate terms).
  The extracted formula shows a factor ``0.8`` in front; the paper says PCon approaches one for a
  consistent judge, so we read the ``0.8`` as an extraction artefact and leave it out.
* **Cohen's kappa** against the human verdict per order (E is a label of its own, i.e. counts as
  disagreement), and the mean of both orders; also a 3-class kappa where C and D are merged into
  "tie" (for sources such as PandaLM whose humans cannot say "both bad").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from knockout._verdict import Verdict
from knockout.metrics._agreement import pearson
from knockout.metrics._kappa import cohen_kappa, rater_agreement
from knockout.sbs._verdicts import ALL_CLASSES, INVALID, SWAPS, to_display

Verdicts = Sequence[str]


def distribution(verdicts: Verdicts) -> dict[str, float]:
    """Share of each class A-E (0..1); all zero for an empty list."""
    counts = Counter(verdicts)
    n = len(verdicts)
    return {c: (counts[c] / n if n else 0.0) for c in ALL_CLASSES}


def mean_distribution(*dists: dict[str, float]) -> dict[str, float]:
    return {c: float(np.mean([d[c] for d in dists])) for c in ALL_CLASSES}


def merge_ties(verdicts: Verdicts) -> list[str]:
    """C and D (both good, both bad) merged into one class TIE, for the 3-class kappa."""
    return [Verdict.TIE if v in (Verdict.C, Verdict.D) else v for v in verdicts]


def human_agreement(annotations: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """Cohen's kappa per annotator pair (items both rated) and Fleiss' kappa (items all rated)."""
    ag = rater_agreement({str(i): a for i, a in enumerate(annotations)}, fleiss_over="all-raters")
    return {
        "annotators": list(ag["raters"]),
        "pairs": {f"{c['a']}~{c['b']}": c["kappa"] for c in ag["cohen"]},
        "fleiss": ag["fleiss"],
        "n_fleiss": ag["fleiss_items"],
    }


def median(verdicts: Verdicts) -> float | None:
    """The paper's "median" of a set of verdicts: (#A + #C) / (#A + #B + 2 #C); None if undefined."""
    c = Counter(verdicts)
    denom = c[Verdict.A] + c[Verdict.B] + 2 * c[Verdict.C]
    return (c[Verdict.A] + c[Verdict.C]) / denom if denom else None


def window_medians(verdicts: Verdicts, window: int, stride: int) -> list[float | None]:
    """Medians of the full windows of size ``window`` taken every ``stride`` verdicts."""
    if window < 1 or stride < 1:
        raise ValueError("window and stride must be >= 1")
    return [median(verdicts[s : s + window]) for s in range(0, len(verdicts) - window + 1, stride)]


def median_pearson(x: Verdicts, y: Verdicts, window: int, stride: int) -> float | None:
    """Pearson between the window medians of two aligned verdict lists (undefined windows dropped)."""
    pairs = [
        (a, b)
        for a, b in zip(window_medians(x, window, stride), window_medians(y, window, stride), strict=True)
        if a is not None and b is not None
    ]
    return pearson([a for a, _ in pairs], [b for _, b in pairs])


def pbias_ab(swap0: Verdicts, swap1: Verdicts) -> float | None:
    """PBias@AB from verdicts in candidate terms (converted to display terms here)."""
    total = 0.0
    for swap, vs in zip(SWAPS, (swap0, swap1), strict=True):
        display = [to_display(v, swap) for v in vs if v in (Verdict.A, Verdict.B)]
        if not display:
            return None
        total += display.count(Verdict.A) / len(display)
    return total - 1.0


def con_abcd(swap0: Verdicts, swap1: Verdicts) -> float | None:
    """Share of items with the same verdict A-D in both orders (candidate terms)."""
    if not swap0:
        return None
    same = sum(a == b and a != INVALID for a, b in zip(swap0, swap1, strict=True))
    return same / len(swap0)


def pcon_ab(swap0: Verdicts, swap1: Verdicts) -> float | None:
    """Among items with an A/B verdict in at least one order, the share with the same A/B in both."""
    ab = (Verdict.A, Verdict.B)
    denom = sum(a in ab or b in ab for a, b in zip(swap0, swap1, strict=True))
    if not denom:
        return None
    return sum(a == b and a in ab for a, b in zip(swap0, swap1, strict=True)) / denom


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return float(np.mean(vals)) if len(vals) == len(xs) and vals else None


def _absdiff(a: float | None, b: float | None) -> float | None:
    return abs(a - b) if a is not None and b is not None else None


def accuracy(judge: Verdicts, human: Verdicts) -> float | None:
    return sum(a == b for a, b in zip(judge, human, strict=True)) / len(judge) if judge else None


def sbs_metrics(
    swap0: Verdicts,
    swap1: Verdicts,
    human: Sequence[str | None] | None = None,
    *,
    window: int = 20,
    stride: int = 5,
) -> dict[str, Any]:
    """All metrics of a two-order run (the ``metrics`` object of ``knockout sbs --json``)."""
    if len(swap0) != len(swap1) or (human is not None and len(human) != len(swap0)):
        raise ValueError("verdict lists must be aligned")
    d0, d1 = distribution(swap0), distribution(swap1)
    out: dict[str, Any] = {
        "n_items": len(swap0),
        "invalid": {"swap0": swap0.count(INVALID), "swap1": swap1.count(INVALID)},
        "distribution": {"swap0": d0, "swap1": d1, "mean": mean_distribution(d0, d1)},
        "pbias_ab": pbias_ab(swap0, swap1),
        "con_abcd": con_abcd(swap0, swap1),
        "pcon_ab": pcon_ab(swap0, swap1),
        "mpcc_consistency": median_pearson(swap0, swap1, window, stride),
        "window": window,
        "stride": stride,
    }
    if human is None:
        return out
    keep = [i for i, h in enumerate(human) if h is not None]
    hs = [str(human[i]) for i in keep]
    per = {s: [vs[i] for i in keep] for s, vs in (("swap0", swap0), ("swap1", swap1))}
    kappa = {s: cohen_kappa(v, hs) for s, v in per.items()}
    kappa3 = {s: cohen_kappa(merge_ties(v), merge_ties(hs)) for s, v in per.items()}
    acc = {s: accuracy(v, hs) for s, v in per.items()}
    mpcc = {s: median_pearson(hs, v, window, stride) for s, v in per.items()}
    out.update(
        n_human=len(keep),
        human_distribution=distribution(hs),
        kappa={**kappa, "mean": _mean(list(kappa.values()))},
        kappa_3class={**kappa3, "mean": _mean(list(kappa3.values()))},
        accuracy={**acc, "mean": _mean(list(acc.values())), "delta": _absdiff(acc["swap0"], acc["swap1"])},
        mpcc={**mpcc, "mean": _mean(list(mpcc.values()))},
        mpcc_delta=_absdiff(mpcc["swap0"], mpcc["swap1"]),
    )
    return out


def soft_metrics(verdicts: Verdicts, first: Sequence[tuple[float | None, float | None]],
                 human: Sequence[str | None] | None = None) -> dict[str, Any]:
    """The ``soft`` object of ``knockout sbs --preference soft --json``: the items' soft verdicts (both orders
    read together, candidate terms) and the position prior the judge's token probabilities carry.

    ``pbias_soft`` is PBias@AB read from probabilities: the mean over the items with both orders readable of
    ``P(first better | swap 0) + P(first better | swap 1) - 1`` (0: no preference for a position; +1: the first
    response always; the soft verdict averages it away).  ``con_soft``: the share of those items whose two orders
    prefer the same response (``P(candidate better)`` on the same side of one half in both; exactly a half is a
    side of its own).  Against the human verdict: accuracy and Cohen's kappa, four classes and three (C and D
    merged)."""
    pairs = [(f0, f1) for f0, f1 in first if f0 is not None and f1 is not None]

    def side(p: float) -> int:
        return (p > 0.5) - (p < 0.5)

    out: dict[str, Any] = {
        "n_items": len(verdicts),
        "invalid": sum(v == INVALID for v in verdicts),
        "distribution": distribution(verdicts),
        "pbias_soft": float(np.mean([f0 + f1 - 1.0 for f0, f1 in pairs])) if pairs else None,
        "con_soft": float(np.mean([side(f0) == side(1.0 - f1) for f0, f1 in pairs])) if pairs else None,
    }
    if human is None:
        return out
    keep = [i for i, h in enumerate(human) if h is not None]
    hs = [str(human[i]) for i in keep]
    vs = [verdicts[i] for i in keep]
    out.update(n_human=len(keep), accuracy=accuracy(vs, hs), kappa=cohen_kappa(vs, hs),
               kappa_3class=cohen_kappa(merge_ties(vs), merge_ties(hs)))
    return out


# -- bootstrap intervals (items resampled) ------------------------------------------------------------------
#: the figures :func:`bootstrap_intervals` gives an interval for; MPCC and its relatives have none, because
#: their sliding windows run over the benchmark order, which a resample of items does not keep
BOOTSTRAPPED = ("kappa", "accuracy", "pbias_ab", "con_abcd", "pcon_ab")


def _kappa_codes(j: np.ndarray, h: np.ndarray, k: int) -> float:
    """Cohen's kappa of two aligned integer-coded label arrays over ``k`` labels (NaN where undefined)."""
    n = len(j)
    if n == 0:
        return math.nan
    m = np.bincount(j * k + h, minlength=k * k).reshape(k, k).astype(float)
    po = np.trace(m) / n
    pe = float((m.sum(axis=1) * m.sum(axis=0)).sum()) / (n * n)
    present = (m.sum(axis=1) + m.sum(axis=0)) > 0
    if present.sum() < 2 or pe >= 1.0:
        return math.nan
    return float((po - pe) / (1 - pe))


def _figures(c0: np.ndarray, c1: np.ndarray, ch: np.ndarray, has_h: np.ndarray) -> np.ndarray:
    """[kappa mean, accuracy mean, PBias@AB, Con@ABCD, PCon@AB] on coded verdicts (A..E = 0..4)."""
    a, b, e = 0, 1, 4
    out = np.full(5, math.nan)
    if has_h.any():
        hh = ch[has_h]
        k0, k1 = _kappa_codes(c0[has_h], hh, 5), _kappa_codes(c1[has_h], hh, 5)
        out[0] = (k0 + k1) / 2
        out[1] = (np.mean(c0[has_h] == hh) + np.mean(c1[has_h] == hh)) / 2
    ab0, ab1 = (c0 == a) | (c0 == b), (c1 == a) | (c1 == b)
    if ab0.any() and ab1.any():  # display terms: swap 0 as is, swap 1 with A and B traded
        out[2] = np.mean(c0[ab0] == a) + np.mean(c1[ab1] == b) - 1.0
    if len(c0):
        out[3] = np.mean((c0 == c1) & (c0 != e))
    denom = np.sum(ab0 | ab1)
    if denom:
        out[4] = np.sum((c0 == c1) & ab0) / denom
    return out


def bootstrap_intervals(swap0: Verdicts, swap1: Verdicts, human: Sequence[str | None] | None = None, *,
                        resamples: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict[str, list[float] | None]:
    """95% percentile intervals of :data:`BOOTSTRAPPED` (kappa and accuracy: mean of the orders, against the
    human verdict) from resampling items with replacement (seeded)."""
    from knockout.metrics._bootstrap import percentile_intervals

    code: dict[str, int] = {c: i for i, c in enumerate(ALL_CLASSES)}
    c0 = np.array([code.get(v, 4) for v in swap0], dtype=int)
    c1 = np.array([code.get(v, 4) for v in swap1], dtype=int)
    hs = list(human) if human is not None else [None] * len(c0)
    ch = np.array([code.get(h, 4) if h is not None else 0 for h in hs], dtype=int)
    has_h = np.array([h is not None for h in hs], dtype=bool)
    n = len(c0)
    if not resamples or n < 3:
        return {k: None for k in BOOTSTRAPPED}
    rng = np.random.default_rng(seed)
    samples = np.full((resamples, 5), np.nan)
    for b in range(resamples):
        idx = rng.integers(0, n, n)
        samples[b] = _figures(c0[idx], c1[idx], ch[idx], has_h[idx])
    ivs = percentile_intervals(samples, alpha)
    return {k: (None if iv.low is None or iv.high is None else [iv.low, iv.high])
            for k, iv in zip(BOOTSTRAPPED, ivs, strict=True)}


def paired_kappa(a: tuple[Verdicts, Verdicts], b: tuple[Verdicts, Verdicts], human: Sequence[str | None], *,
                 resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Kappa (mean of orders) of run ``b`` minus run ``a`` on the same items, with a paired bootstrap
    interval and two-sided p-value (the same resampled items for both runs)."""
    from knockout.metrics._bootstrap import paired_bootstrap

    code: dict[str, int] = {c: i for i, c in enumerate(ALL_CLASSES)}
    keep = [i for i, h in enumerate(human) if h is not None]
    hh = np.array([code[str(human[i])] for i in keep], dtype=int)

    def coded(vs: Verdicts) -> np.ndarray:
        return np.array([code.get(vs[i], 4) for i in keep], dtype=int)

    a0, a1, b0, b1 = coded(a[0]), coded(a[1]), coded(b[0]), coded(b[1])

    def stat(x0: np.ndarray, x1: np.ndarray) -> Any:
        def f(idx: np.ndarray) -> float | None:
            v = (_kappa_codes(x0[idx], hh[idx], 5) + _kappa_codes(x1[idx], hh[idx], 5)) / 2
            return None if math.isnan(v) else v
        return f

    r = paired_bootstrap(stat(b0, b1), stat(a0, a1), np.arange(len(keep)), resamples=resamples, seed=seed)
    return {"n": len(keep), "delta": r.delta, "ci": None if r.low is None else [r.low, r.high],
            "p_bootstrap": r.p_value}
