"""Answers clustered into groups a teacher would grade alike: meaning first, the draft grade beside it.

Each answer is read as its sentence embedding (the meaning reader's encoder, the question's words taken out:
:func:`knockout.meaning.demote`), plus its draft grade as a share of the question's maximum, weighted by
:data:`GRADE_WEIGHT` (a full-marks difference counts as much as two answers that share nothing).

1. *Near-identical answers always together*: answers whose case-folded, whitespace-tidied texts are equal, or
   whose embeddings lie within :data:`NEAR` cosine distance of one another (single linkage, so a chain of copies
   stays one), form one *atom*; no later step separates an atom.
2. *Groups*: the atoms (their mean embedding and mean draft grade) are clustered with scikit-learn's
   :class:`~sklearn.cluster.AgglomerativeClustering` (Ward linkage on the joint vector).  The number of groups
   is chosen per question from the data: every ``k`` from 2 to about half the atoms
   (:func:`candidate_ks`) is tried and the one with the highest silhouette (:func:`sklearn.metrics.silhouette_score`)
   kept; while a group then holds answers whose draft grades lie further apart than :data:`MAX_RANGE` of the
   maximum, ``k`` is raised by one.  Three atoms or fewer: each is a group.
3. Each group's *draft grade* is the mean of its members' draft grades, its *spread* (points) the root of the
   members' draft variance plus their mean squared judge spread (the judge's own uncertainty,
   :func:`knockout.judges._slot.verdict_spread`, where the run has it), its *representative* the member closest
   to the group's centre (the medoid), and groups are numbered by size, largest first.

The clustering has no randomness: the same answers and drafts give the same groups.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: the weight of the draft grade (share of max points) beside the unit embedding
GRADE_WEIGHT = 1.0
#: cosine distance under which two answers are near-identical (always one group)
NEAR = 0.04
#: a group's draft grades span at most this share of the maximum (the silhouette's k is raised until they do)
MAX_RANGE = 0.35


@dataclass
class Group:
    """One answer group of a question."""

    id: str
    question_id: str
    members: list[str]
    representative: str
    #: the mean draft grade of the members (points; None when no member has one) and its spread (points)
    draft: float | None
    spread: float | None
    max_points: float
    #: the members' own draft grades (answer id -> points or None)
    drafts: dict[str, float | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {"id": self.id, "question_id": self.question_id, "size": len(self.members),
                "representative": self.representative, "draft": self.draft, "spread": self.spread,
                "max_points": self.max_points, "members": list(self.members), "drafts": dict(self.drafts)}


def tidy(text: str) -> str:
    """The text as compared for identity: case-folded, whitespace collapsed."""
    return re.sub(r"\s+", " ", text.casefold()).strip()


def atoms(texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
    """Each answer's atom (near-identical answers share one): equal tidied texts, or embeddings within
    :data:`NEAR` cosine distance, chained (single linkage)."""
    from sklearn.cluster import AgglomerativeClustering

    n = len(texts)
    if n < 2:
        return np.zeros(n, dtype=int)
    # unit vectors: a cosine distance d is a Euclidean distance sqrt(2 d) (an empty text's zero vector included)
    labels: np.ndarray = AgglomerativeClustering(n_clusters=None, linkage="single",
                                                 distance_threshold=math.sqrt(2 * NEAR)).fit_predict(vectors)
    first: dict[str, int] = {}
    parent = {int(x): int(x) for x in labels}

    def root(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for i, t in enumerate(texts):  # equal texts join whatever their embeddings (an empty one included)
        key = tidy(t)
        if key in first:
            a, b = root(int(labels[first[key]])), root(int(labels[i]))
            parent[max(a, b)] = min(a, b)
        else:
            first[key] = i
    out = np.array([root(int(x)) for x in labels])
    _, dense = np.unique(out, return_inverse=True)
    return np.asarray(dense, dtype=int)


def candidate_ks(n_atoms: int) -> range:
    """The numbers of groups the silhouette chooses from for ``n_atoms`` (more than 3) atoms: 2 .. ceil(n / 2)."""
    return range(2, math.ceil(n_atoms / 2) + 1)


def _span(labels: np.ndarray, shares: np.ndarray) -> float:
    return max(float(np.ptp(shares[labels == g])) for g in np.unique(labels))


def cluster(texts: Sequence[str], vectors: np.ndarray, shares: np.ndarray, *,
            grade_weight: float = GRADE_WEIGHT, max_range: float = MAX_RANGE) -> np.ndarray:
    """Each answer's group label (0..k-1), from the answers' ``texts`` (identity), unit ``vectors`` and draft
    grades as shares of the maximum (``shares``; NaN where none: the question's median stands in)."""
    from sklearn.cluster import AgglomerativeClustering
    from sklearn.metrics import silhouette_score

    n = len(texts)
    if n == 0:
        return np.zeros(0, dtype=int)
    filled = np.where(np.isnan(shares), np.nanmedian(shares) if np.isfinite(shares).any() else 0.5, shares)
    atom = atoms(texts, vectors)
    m = int(atom.max()) + 1
    if m <= 3:
        return atom
    feats = np.hstack([vectors, grade_weight * filled[:, None]])
    centres = np.vstack([feats[atom == a].mean(0) for a in range(m)])
    atom_shares = np.array([filled[atom == a].mean() for a in range(m)])
    from sklearn.metrics import pairwise_distances

    dist = pairwise_distances(centres)  # once: the silhouette of every k reads it
    best: tuple[float, np.ndarray] | None = None
    for k in candidate_ks(m):
        lab = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(centres)
        score = float(silhouette_score(dist, lab, metric="precomputed"))
        if best is None or score > best[0] + 1e-12:
            best = (score, lab)
    chosen = best[1] if best is not None else np.arange(m)
    k = len(set(chosen.tolist()))
    while _span(chosen, atom_shares) > max_range and k < m:  # too wide in draft grade: more groups
        k += 1
        chosen = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(centres)
    return np.asarray(chosen[atom], dtype=int)


def medoid(vectors: np.ndarray) -> int:
    """The row of ``vectors`` with the smallest summed distance to the others."""
    from sklearn.metrics import pairwise_distances

    return int(np.argmin(pairwise_distances(vectors).sum(1)))


def make_groups(question_id: str, answer_ids: Sequence[str], labels: Sequence[int] | Sequence[str],
                vectors: np.ndarray | None, drafts: Sequence[float | None], spreads: Sequence[float | None],
                max_points: float, representatives: dict[str, str] | None = None) -> list[Group]:
    """The groups of one question from each answer's ``labels``: draft, spread and representative (named in
    ``representatives``, by label, else the medoid of the unit embedding and the draft share), largest first.
    Integer labels (a fresh clustering) are numbered ``QUESTION#1``, ``QUESTION#2``, ... by size; string labels
    are the groups' stored ids and kept."""
    out: list[tuple[int, str, Group]] = []
    fresh = not labels or not isinstance(labels[0], str)
    for g in sorted(set(labels), key=str):
        idx = [i for i, x in enumerate(labels) if x == g]
        got = [drafts[i] for i in idx]
        valid = np.array([d for d in got if d is not None], dtype=float)
        mean = float(valid.mean()) if len(valid) else None
        judge = [s for i in idx if (s := spreads[i]) is not None]
        var = float(valid.var()) if len(valid) else 0.0
        spread = math.sqrt(var + (float(np.mean(np.square(judge))) if judge else 0.0)) if len(valid) else None
        shares = np.array([(d if d is not None else (mean or 0.0)) / max_points for d in got])
        feats = np.hstack([vectors[idx], GRADE_WEIGHT * shares[:, None]]) if vectors is not None else None
        rep = (representatives or {}).get(str(g))
        if rep is None:
            rep = answer_ids[idx[medoid(feats)]] if feats is not None else answer_ids[idx[0]]
        members = [answer_ids[i] for i in idx]
        out.append((len(idx), min(members), Group("" if fresh else str(g), question_id, members, rep, mean, spread,
                                                   max_points, {answer_ids[i]: drafts[i] for i in idx})))
    out.sort(key=lambda x: (-x[0], x[1]))
    if fresh:
        for n, (_, _, grp) in enumerate(out, 1):
            grp.id = f"{question_id}#{n}"
    return [g for _, _, g in out]
