"""Side-by-side annotation: pair sets, each annotator's queue, their verdicts and the agreement.

Tables (schema in :mod:`knockout.storage._migrations`; read and written through :attr:`Store.annotations`)
------
``pairsets``       side-by-side sets: overlap (annotators per pair, default 3) and seed.
``pairs``          the pairs of a set (:class:`PairItem` as JSON) in import order.
``pair_views``     per annotator and pair: the position in that annotator's queue and whether the answers
                   were shown swapped (B on the left), drawn with a seed per annotator.
``pair_verdicts``  one row per (pair, annotator): the class chosen as shown (left / right / both_good /
                   both_bad: the buttons, by screen position), the swap flag and the verdict mapped back
                   to the pair, a :class:`knockout.Verdict` (A, B, C = both good, D = both bad; stores
                   written before schema step 12 held ``both_good`` / ``both_bad``, which step 12
                   rewrote); versioned like the grades.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from knockout._bounds import check_name
from knockout._verdict import Verdict
from knockout.annotations._assignments import Assignments
from knockout.annotations._common import check_version
from knockout.data._records import PairItem
from knockout.errors import ConfigError, InputError
from knockout.metrics._kappa import rater_agreement
from knockout.storage._store import Store

#: The four side-by-side classes (A = ``answer_a`` better, B = ``answer_b`` better, C both good, D both bad).
VERDICTS = (Verdict.A, Verdict.B, Verdict.C, Verdict.D)
VERDICT_LABELS = {v: v.label for v in VERDICTS}
#: What the annotator clicks (by screen position) -> verdict as shown (left = the answer shown first);
#: :func:`verdict_from_shown` swaps it back when B was shown on the left.
SHOWN = {"left": Verdict.A, "right": Verdict.B, "both_good": Verdict.C, "both_bad": Verdict.D}
#: The buttons' words, by choice.
CHOICE_LABELS = {"left": "Left is better", "right": "Right is better",
                 "both_good": Verdict.C.label.capitalize(), "both_bad": Verdict.D.label.capitalize()}
DEFAULT_OVERLAP = 3
#: The largest overlap (annotators per pair) a pair set may ask for.
MAX_OVERLAP = 1000


@dataclass(frozen=True)
class PairView:
    position: int  # 1-based, in this annotator's queue
    pair: PairItem
    swapped: bool  # True: answer_b is shown on the left

    @property
    def left(self) -> str:
        return self.pair.answer_b if self.swapped else self.pair.answer_a

    @property
    def right(self) -> str:
        return self.pair.answer_a if self.swapped else self.pair.answer_b


def verdict_from_shown(shown: str, swapped: bool) -> Verdict:
    """Map the class chosen on screen back to the pair: ``left`` with B shown on the left is ``B``."""
    if shown not in SHOWN:
        raise InputError(f"unknown choice '{shown[:40]}' (known: {', '.join(SHOWN)})", field="choice")
    return SHOWN[shown].swap() if swapped else SHOWN[shown]


def check_overlap(overlap: int) -> int:
    if not 1 <= overlap <= MAX_OVERLAP:
        raise ConfigError(f"overlap must be within 1..{MAX_OVERLAP}, got {overlap}")
    return overlap


def check_pairs(pairs: Sequence[PairItem], name: str, overlap: int, source: str | None = None) -> None:
    """What an import of ``pairs`` needs, checked without a store (a refused import creates no file)."""
    check_name(name, "pair set name")
    check_overlap(overlap)
    ids = [p.id for p in pairs]
    dup = next((i for i, n in itertools.groupby(sorted(ids)) if len(list(n)) > 1), None)
    if dup is not None:
        raise InputError("duplicate pair id", file=source, record=dup, field="id")


class PairAnnotations:
    """The pair sets of a store, the annotators' queues and verdicts."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.tables = store.annotations
        self.assignments = Assignments(store)

    def import_pairs(
        self, pairs: Sequence[PairItem], name: str, *, overlap: int = DEFAULT_OVERLAP, seed: int = 0,
        source: str | None = None,
    ) -> int:
        """Add ``pairs`` to the pair set ``name`` (created on first use); returns how many were new."""
        check_pairs(pairs, name, overlap, source)
        return self.tables.add_pairs(name, [(p.id, p.model_dump_json()) for p in pairs], source=source,
                                     overlap=overlap, seed=seed, created=time.time())

    def set_overlap(self, pairset: str, overlap: int) -> None:
        check_overlap(overlap)
        if pairset not in self.pairset_ids():
            raise ConfigError(f"no pair set '{pairset}'")
        self.tables.set_overlap(pairset, overlap)

    def pairset_ids(self) -> list[str]:
        return self.tables.pairset_ids()

    def pairset(self, pairset: str) -> dict[str, Any] | None:
        return self.tables.pairset(pairset)

    def pairs(self, pairset: str) -> list[PairItem]:
        return [PairItem.model_validate_json(data) for data in self.tables.pair_data(pairset)]

    def allocation(self, pairset: str) -> dict[str, list[str]]:
        """Annotator -> the pair ids given to them: pair ``i`` goes to the ``overlap`` annotators
        ``(i*overlap + j) mod n`` (annotators in the order they were assigned), so loads differ by at most one
        and every pair gets ``min(overlap, n)`` annotators."""
        info = self.pairset(pairset)
        annotators = self.assignments.users_of("pairset", pairset)
        out: dict[str, list[str]] = {a: [] for a in annotators}
        if info is None or not annotators:
            return out
        n, k = len(annotators), min(info["overlap"], len(annotators))
        for i, p in enumerate(self.pairs(pairset)):
            for j in range(k):
                out[annotators[(i * k + j) % n]].append(p.id)
        return out

    def queue(self, pairset: str, annotator: str) -> list[PairView]:
        """This annotator's pairs in their own random order and left/right placement.

        Drawn once with ``random.Random("<seed>:<pairset>:<annotator>")`` and stored in ``pair_views``,
        so the order stays put and every verdict maps back to the pair; pairs allocated later are appended."""
        info = self.pairset(pairset)
        if info is None:
            return []
        by_id = {p.id: p for p in self.pairs(pairset)}
        allocated = self.allocation(pairset).get(annotator, [])
        stored = self.tables.pair_views(pairset, annotator)
        missing = [p for p in allocated if p not in stored]
        if missing:
            rng = random.Random(f"{info['seed']}:{pairset}:{annotator}:{len(stored)}")
            rng.shuffle(missing)
            start = max((pos for pos, _ in stored.values()), default=0)
            for k, pid in enumerate(missing, 1):
                swapped = rng.random() < 0.5
                self.tables.add_pair_view(pairset, annotator, pid, start + k, swapped)
                stored[pid] = (start + k, swapped)
        judged = self.tables.judged_pairs(pairset, annotator)
        keep = set(allocated) | judged
        order = sorted((pos, pid, sw) for pid, (pos, sw) in stored.items() if pid in keep and pid in by_id)
        return [PairView(i, by_id[pid], sw) for i, (_, pid, sw) in enumerate(order, 1)]

    def verdict(self, pairset: str, pair_id: str, annotator: str) -> dict[str, Any] | None:
        found = self.verdicts(pairset, pair_id=pair_id, annotator=annotator)
        return found[0] if found else None

    def save_verdict(
        self, view: PairView, pairset: str, annotator: str, shown: str, *, comment: str = "", base_version: int,
    ) -> int:
        """Store the class chosen on screen and its mapping to the pair; same version rule as grades."""
        verdict = verdict_from_shown(shown, view.swapped)
        return self.tables.save_verdict(pairset=pairset, pair_id=view.pair.id, annotator=annotator, shown=shown,
                                        swapped=view.swapped, verdict=verdict, comment=comment,
                                        base_version=check_version(base_version), now=time.time())

    def verdicts(self, pairset: str | None = None, *, pair_id: str | None = None,
                 annotator: str | None = None) -> list[dict[str, Any]]:
        return self.tables.verdicts(pairset, pair_id=pair_id, annotator=annotator)

    def agreement(self, pairset: str) -> dict[str, Any]:
        """Cohen's kappa for every annotator pair (on the pairs both judged) and Fleiss' kappa over the pairs
        with two or more verdicts (:func:`knockout.metrics._kappa.rater_agreement`)."""
        by_pair: dict[str, dict[str, str]] = {}
        for v in self.verdicts(pairset):
            by_pair.setdefault(v["pair_id"], {})[v["annotator"]] = v["verdict"]
        ag = rater_agreement(by_pair, VERDICTS)
        return {"annotators": ag["raters"], "cohen": ag["cohen"], "fleiss": ag["fleiss"],
                "fleiss_items": ag["fleiss_items"], "pairs_judged": ag["items_rated"]}
