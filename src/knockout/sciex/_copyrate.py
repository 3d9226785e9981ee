"""How often a judge copies the grade of its few-shot example (SciEx, Dinh et al. 2024, section 4.3.2).

The authors hypothesise that a judge shown one graded example of the same question "tends to copy the
grade of the example" and report that Mixtral and GPT-4V do so 25% of the time, Llama3 13%.  knockout
counts, over the answers graded with at least one example and a valid grade, those whose grade equals
the grade of one of the examples shown (``copy_rate``).  Because a judge that grades right also
"copies" whenever the expert grade equals the example's, it also reports the rate over the answers whose
expert grade differs from every example's grade (``copy_rate_when_expert_differs``): there a copied
grade is a wrong one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from knockout.data._records import ItemSet

EPS = 1e-9


@dataclass(frozen=True)
class ShotGrading:
    """One answer graded with few-shot examples: the judge's grade, the examples' grades, the expert grade."""

    grade: float
    shot_grades: Sequence[float]
    expert: float | None = None


def copy_rate(gradings: Iterable[ShotGrading]) -> dict[str, Any] | None:
    """The copy rates of :mod:`knockout.sciex._copyrate` (None when no answer was graded with examples)."""
    n = copied = differs = copied_differs = 0
    for g in gradings:
        if not g.shot_grades:
            continue
        same = any(abs(g.grade - s) < EPS for s in g.shot_grades)
        n += 1
        copied += same
        if g.expert is not None and all(abs(g.expert - s) >= EPS for s in g.shot_grades):
            differs += 1
            copied_differs += same
    if not n:
        return None
    return {
        "graded_with_examples": n,
        "copied": copied,
        "copy_rate": round(copied / n, 4),
        "expert_differs": differs,
        "copied_when_expert_differs": copied_differs,
        "copy_rate_when_expert_differs": round(copied_differs / differs, 4) if differs else None,
    }


def run_gradings(items: ItemSet, results: Iterable[Mapping[str, Any]]) -> list[ShotGrading]:
    """The gradings of a stored grade run whose results name their few-shot answers (``details.shots``);
    each example's grade is its human grade in the run's item set, as it was shown."""
    answers = {a.id: a for a in items}
    out = []
    for r in results:
        score = r.get("score")
        shots = (r.get("details") or {}).get("shots") or []
        if score is None or not r.get("valid", True) or not shots:
            continue
        grades = [answers[s].human_score for s in shots if s in answers]
        target = answers.get(str(r.get("item_id")))
        out.append(ShotGrading(float(score), [g for g in grades if g is not None],
                               target.human_score if target is not None else None))
    return out
