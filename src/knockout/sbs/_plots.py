"""Side-by-side plots: the verdict classes per order (matplotlib through :mod:`knockout.reports._plots`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from knockout.reports._plots import _plt, _png
from knockout.sbs._verdicts import ALL_CLASSES


def sbs_distribution(rep: dict[str, Any]) -> bytes:
    """Side-by-side: share of each verdict class per order (and the human verdicts), grouped bars."""
    plt = _plt()
    m = rep["metrics"]
    classes = list(ALL_CLASSES)
    series = [("swap 0 (candidate first)", m["distribution"]["swap0"]),
              ("swap 1 (baseline first)", m["distribution"]["swap1"])]
    if "human_distribution" in m:
        series.append(("human", m["human_distribution"]))
    x = np.arange(len(classes))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    for i, (label, dist) in enumerate(series):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, [100 * dist[c] for c in classes], width, label=label)
    ax.set_xticks(x, ["A cand.", "B base.", "C both good", "D both bad", "E invalid"])
    ax.set_ylabel("% of items")
    ax.set_title(f"verdicts by order (PBias@AB {m['pbias_ab'] if m['pbias_ab'] is None else round(m['pbias_ab'], 3)})")
    ax.legend(fontsize=8)
    return _png(fig)
