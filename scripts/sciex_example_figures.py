"""Draw the figures of the SciEx example exam (src/knockout/examples/sciex): a weighted graph as PNG and a
binary search tree as PDF (matplotlib).  Run once; the files are committed.

    python scripts/sciex_example_figures.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parents[1] / "src" / "knockout" / "examples" / "sciex"
EXAMS = ("cs-basics-en", "cs-basics-de")


def graph(path: Path) -> None:
    pos = {"A": (0, 1), "B": (1, 2), "C": (1, 0), "D": (2, 1.6), "E": (3, 1)}
    edges = [("A", "B", 4), ("A", "C", 1), ("C", "B", 2), ("B", "D", 5), ("C", "D", 8), ("D", "E", 3), ("C", "E", 9)]
    fig, ax = plt.subplots(figsize=(4.2, 2.8))
    for u, v, w in edges:
        (x1, y1), (x2, y2) = pos[u], pos[v]
        ax.plot([x1, x2], [y1, y2], color="black", lw=1.2, zorder=1)
        ax.text((x1 + x2) / 2 + 0.1, (y1 + y2) / 2 + 0.08, str(w), ha="center", fontsize=11, color="#b00000")
    for n, (x, y) in pos.items():
        ax.scatter([x], [y], s=520, color="white", edgecolor="black", zorder=2)
        ax.text(x, y, n, ha="center", va="center", fontsize=12, zorder=3)
    ax.set_axis_off()
    ax.set_xlim(-0.3, 3.3)
    ax.set_ylim(-0.4, 2.4)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def tree(path: Path) -> None:
    nodes = {8: (3, 3), 3: (1.5, 2), 10: (4.5, 2), 1: (0.8, 1), 6: (2.2, 1), 14: (5.2, 1), 4: (1.7, 0), 7: (2.7, 0)}
    edges = [(8, 3), (8, 10), (3, 1), (3, 6), (10, 14), (6, 4), (6, 7)]
    fig, ax = plt.subplots(figsize=(4.0, 3.0))
    for u, v in edges:
        (x1, y1), (x2, y2) = nodes[u], nodes[v]
        ax.plot([x1, x2], [y1, y2], color="black", lw=1.2, zorder=1)
    for n, (x, y) in nodes.items():
        ax.scatter([x], [y], s=480, color="white", edgecolor="black", zorder=2)
        ax.text(x, y, str(n), ha="center", va="center", fontsize=11, zorder=3)
    ax.set_axis_off()
    ax.set_xlim(0.2, 5.8)
    ax.set_ylim(-0.5, 3.5)
    fig.savefig(path, metadata={"CreationDate": None, "Producer": None, "Creator": None})
    plt.close(fig)


def main() -> None:
    first = ROOT / EXAMS[0] / "figures"
    first.mkdir(parents=True, exist_ok=True)
    graph(first / "graph.png")
    tree(first / "bst.pdf")
    for exam in EXAMS[1:]:
        target = ROOT / exam / "figures"
        target.mkdir(parents=True, exist_ok=True)
        for f in first.iterdir():
            shutil.copyfile(f, target / f.name)


if __name__ == "__main__":
    main()
