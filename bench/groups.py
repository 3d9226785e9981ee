"""What answer groups save a teacher: a simulated teacher grades representatives of the proposed groups, against
answers picked one by one (at random, and in the review queue's order).

    python bench/groups.py                          # mohler-dev and SAF, 20 draws, table + figure
    python bench/groups.py --draws 5 --plot docs/teacher-groups.png
    python bench/groups.py --draft model --draws 20  # the grade model's cross-validated grades as the draft

``--draft model`` (the issue's setting): the draft is the shipped grade model's question-grouped cross-validated
grade (``bench/grade_model/cv_grades.json``, read at run time and checked against the shipped model's digest: each
answer graded by the model fitted without its exam's questions), and only the answers that file grades are in the
exams (mohler-dev: the first 8 of each question; SAF: 8 per training question).  ``--draft similarity`` (the
default): the draft grade is a similarity to the reference times the maximum, a reading that needs no LLM.  By default
(``--encoder tfidf``) the answers' vectors and that similarity are TF-IDF's over the demoted texts (seconds);
``--encoder minilm`` uses the meaning reader's sentence encoder (:mod:`knockout.meaning`, about 1 s
per answer on the loaded 2-core machine).  The judge's grade takes its place in a real run.  The teacher's grade
of an answer is the data's human grade (mohler-dev: the mean of its two graders; SAF, training split: its one
expert).

Each draw is an exam of questions drawn at random (mohler-dev 20 of 63, SAF 6 of 18).  Every strategy gets the
same number of teacher actions; after each, every answer the teacher did not grade directly gets a grade:

* ``groups``: the teacher grades the representative of the group :func:`knockout.groups.propose` puts first (the
  largest expected error; a graded group is not proposed again); with ``--group-grade adapt`` (the product's,
  :func:`knockout.groups.grade_group`) that grade enters the adaptation as the representative's and only the
  members near-identical to it (one atom: :func:`knockout.groups._build.atoms`) take it, the others keep their
  adapted drafts; ``one``: every member takes it (the product's semantics before); ``offset``: every member takes
  it moved by its draft's offset from the representative's;
* ``random``: the teacher grades one answer at random;
* ``queue``: the teacher grades the first answer of today's review queue (:func:`knockout.calibration._review.rank`
  on the draft grades: closeness to a grade boundary, questions with few teacher grades), recomputed after each.

Answers without a teacher grade (or a group grade) get their draft moved to the teacher's level the same way in
every strategy (:func:`adapt`): with ``--adapt model`` (the default with ``--draft model``) the grade model's own
adaptation with the shipped prior, as ``knockout calibrate`` does; with ``--adapt stand-in`` (the default with
``--draft similarity``, whose drafts are not on the model's scale) an exam-level offset and slope with the
identity as prior, per-question offsets shrunk to 0.  RMSE (points) and Pearson are over every answer the
teacher did not grade directly, against the data's human grade.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from knockout.calibration import Graded  # noqa: E402
from knockout.calibration._review import rank  # noqa: E402
from knockout.data import load_items  # noqa: E402
from knockout.groups import Group, propose  # noqa: E402
from knockout.groups._build import atoms, cluster, make_groups  # noqa: E402
from knockout.groups._stored import embed  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
SETS = {"mohler-dev": (SHARED / "mohler-dev" / "mohler_dev.csv", None, 20),
        "SAF": (SHARED / "saf" / "training" / "english", "saf", 6)}
#: the source names of the grade model's cross-validated grades (``bench/grade_model/cv_grades.json``), by set
CV_SOURCE = {"mohler-dev": "mohler", "SAF": "saf-train"}
CV_GRADES = ROOT / "bench" / "grade_model" / "cv_grades.json"
STRATEGIES = ("groups", "random", "queue")


class Exam:
    """The answers of one data set with their draft grades, human grades and groups (per question)."""

    def __init__(self, name: str, encoder: str = "tfidf", draft: str = "similarity") -> None:
        path, loader, self.per_exam = SETS[name]
        items = load_items(path, loader) if loader else load_items(path)
        answers = [a for a in items if a.human_score is not None]
        cv = model_grades(name) if draft == "model" else None
        if cv is not None:
            answers = [a for a in answers if a.id in cv]
        qs = [items.question_of(a) for a in answers]
        self.ids = [a.id for a in answers]
        self.qid = np.array([q.id for q in qs])
        self.maxp = np.array([float(q.max_points) for q in qs])
        self.human = np.array([float(a.human_score) for a in answers])  # type: ignore[arg-type]
        two = [list(a.human_scores.values()) for a in answers]
        self.pair = (np.array([t[0] for t in two]), np.array([t[1] for t in two])) \
            if all(len(t) == 2 for t in two) else None
        from knockout.grading import demote

        if encoder == "minilm":  # the sentence encoder: the answers' and references' demoted embeddings
            vecs = embed([a.text for a in answers], [q.text for q in qs])
            refs = embed([q.reference or "" for q in qs], [q.text for q in qs])
            sim = (vecs * refs).sum(1)
        else:
            vecs, sim = tfidf([demote(a.text, q.text) for a, q in zip(answers, qs, strict=True)],
                              [demote(q.reference or "", q.text) for q in qs])
        self.draft = np.clip(sim, 0, 1) * self.maxp
        if cv is not None:
            self.draft = np.array([cv[a.id] for a in answers]) * self.maxp

        self.groups: dict[str, list[Group]] = {}
        self.atom = np.zeros(len(answers), dtype=int)  # near-identical answers share an atom (per question)
        for q in dict.fromkeys(self.qid.tolist()):
            idx = np.flatnonzero(self.qid == q)
            shares = self.draft[idx] / self.maxp[idx]
            texts = [demote(answers[i].text, qs[i].text) for i in idx]
            labels = cluster(texts, vecs[idx], shares)
            self.atom[idx] = atoms(texts, vecs[idx])
            self.groups[q] = make_groups(q, [self.ids[i] for i in idx], [int(x) for x in labels], vecs[idx],
                                         [float(self.draft[i]) for i in idx], [None] * len(idx),
                                         float(self.maxp[idx[0]]))
        self.index = {a: i for i, a in enumerate(self.ids)}


def model_grades(name: str) -> dict[str, float]:
    """Answer id -> the shipped grade model's question-grouped cross-validated grade (share of max) of set
    ``name``'s answers, read from ``bench/grade_model/cv_grades.json`` at run time; refused when that file is not the
    shipped model's cross-validation."""
    from knockout.grading import default_model

    cv = json.loads(CV_GRADES.read_text())
    if cv.get("model_sha") != default_model().digest:
        raise SystemExit(f"{CV_GRADES} is not the shipped grade model's cross-validation (run bench/fit_grade_model.py "
                         "fit)")
    prefix = CV_SOURCE[name] + "/"
    return {k[len(prefix):]: float(v) for k, v in cv["grades"].items() if k.startswith(prefix)}


def tfidf(texts: list[str], references: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Unit TF-IDF vectors of the (demoted) answers and their cosine to their (demoted) references: the cheap
    stand-in for the sentence encoder (``--encoder tfidf``)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(sublinear_tf=True).fit(texts + sorted(set(references)))
    a = vec.transform(texts).toarray()
    r = vec.transform(references).toarray()
    return a, (a * r).sum(1)


def adapt(draft: np.ndarray, maxp: np.ndarray, qid: np.ndarray, taught: dict[int, float], prior: float = 3.0,
          shrink: float = 3.0, how: str = "stand-in", weights: dict[int, float] | None = None) -> np.ndarray:
    """The drafts moved to the teacher's level.  ``how="model"``: the grade model's own adaptation
    (:func:`knockout.grading._adapt.adapt` with the shipped prior, one exam; ``weights``: a grade's worth in
    teacher judgements, default 1).  ``how="stand-in"``: ``y = a + b x`` on shares of the maximum, fitted on the
    teacher's grades with ``prior`` pseudo-grades holding it to the identity, then per-question offsets shrunk to 0
    (``shrink`` pseudo-grades)."""
    x = draft / maxp
    if not taught:
        return draft.copy()
    idx = np.array(list(taught))
    y = np.array([taught[i] for i in idx]) / maxp[idx]
    if how == "model":
        from knockout.calibration._fit import shipped_prior
        from knockout.grading._adapt import adapt as model_adapt

        w = np.array([(weights or {}).get(int(i), 1.0) for i in idx])
        fitted = model_adapt(x[idx], y, [str(v) for v in qid[idx]], ["exam"] * len(idx), shipped_prior(),
                             weights=w)
        moved: np.ndarray = fitted.predict(x, [str(v) for v in qid], ["exam"] * len(x)) * maxp
        return moved
    xs = x[idx]
    # ridge towards a = 0, b = 1: minimise sum (y - a - b x)^2 + prior (a^2 + (b - 1)^2)
    a_mat = np.array([[len(xs) + prior, xs.sum()], [xs.sum(), (xs ** 2).sum() + prior]])
    rhs = np.array([y.sum(), (xs * y).sum() + prior])
    a, b = np.linalg.solve(a_mat, rhs)
    fit = a + b * x
    resid = y - fit[idx]
    out = fit.copy()
    for q in set(qid[idx].tolist()):
        on = qid[idx] == q
        out[qid == q] += resid[on].sum() / (on.sum() + shrink)
    clipped: np.ndarray = np.clip(out, 0, 1) * maxp
    return clipped


def scores(est: np.ndarray, truth: np.ndarray, others: np.ndarray) -> tuple[float, float]:
    e, t = est[others], truth[others]
    rmse = float(np.sqrt(np.mean((e - t) ** 2)))
    r = float(np.corrcoef(e, t)[0, 1]) if np.std(e) > 0 and np.std(t) > 0 else float("nan")
    return rmse, r


def member_grade(grade: float, draft: np.ndarray, maxp: np.ndarray, member: int, rep: int, mode: str,
                 atom: np.ndarray) -> float | None:
    """What a member gets when the teacher grades its group's representative ``grade``: that grade (``one``), that
    grade moved by the member's draft offset from the representative's (``offset``), within 0..max, or (``adapt``)
    that grade only when the member is near-identical to the representative (same ``atom``), else None: its own
    draft, moved by the adaptation the representative's grade enters."""
    if mode == "one":
        return grade
    if mode == "adapt":
        return grade if atom[member] == atom[rep] else None
    return float(np.clip(grade + draft[member] - draft[rep], 0.0, maxp[member]))


def group_order(ex: Exam, q: str, order: str) -> list[Group]:
    """A question's groups in the order the first-groups check grades them: as listed (``size``: largest first)
    or as :func:`knockout.groups.propose` ranks them before any teacher grade (``propose``)."""
    gs = ex.groups[q]
    if order == "size":
        return gs
    ranked = [r["group"] for r in propose({q: gs}, {})]
    return sorted(gs, key=lambda g: ranked.index(g.id))


def simulate(ex: Exam, questions: list[str], strategy: str, actions: int, seed: int,
             group_grade: str = "one", how: str = "stand-in") -> np.ndarray:
    """RMSE and Pearson of the other answers after 0..actions teacher actions (rows), for one exam."""
    rng = np.random.default_rng(seed)
    sel = np.flatnonzero(np.isin(ex.qid, questions))
    draft, maxp, qid, truth, atom = ex.draft[sel], ex.maxp[sel], ex.qid[sel], ex.human[sel], ex.atom[sel]
    local = {ex.ids[i]: k for k, i in enumerate(sel)}
    direct: dict[int, float] = {}  # graded by the teacher
    via: dict[int, float] = {}  # graded through a group
    done: set[str] = set()  # the groups graded
    groups = {q: ex.groups[q] for q in questions}
    order = list(rng.permutation(len(sel)))
    out = []
    for step in range(actions + 1):
        est = adapt(draft, maxp, qid, direct, how=how)
        for k, v in via.items():
            est[k] = v
        others = np.array([k not in direct for k in range(len(sel))])
        out.append(scores(est, truth, others))
        if step == actions:
            break
        if strategy == "groups":
            known = {ex.ids[sel[k]]: v for k, v in {**via, **direct}.items()}
            nxt = propose(groups, known, graded=done)
            if not nxt:
                break
            g = next(x for gs in groups.values() for x in gs if x.id == nxt[0]["group"])
            done.add(g.id)
            rep = local[g.representative] if local[g.representative] not in direct else \
                next((local[a] for a in g.members if local[a] not in direct), None)
            if rep is None:
                continue
            direct[rep] = float(truth[rep])
            for a in g.members:
                if local[a] not in direct and local[a] not in via:
                    got = member_grade(float(truth[rep]), draft, maxp, local[a], rep, group_grade, atom)
                    if got is not None:
                        via[local[a]] = got
        elif strategy == "random":
            while order and order[0] in direct:
                order.pop(0)
            if not order:
                break
            k = int(order.pop(0))
            direct[k] = float(truth[k])
        else:  # today's review queue on the drafts
            rows = [Graded(str(k), str(qid[k]), float(maxp[k]), float(draft[k]),
                           direct.get(k), "exam") for k in range(len(sel))]
            queue = rank(rows, {}, None)
            if not queue:
                break
            k = int(queue[0]["answer_id"])
            direct[k] = float(truth[k])
    arr = np.array(out)
    if len(arr) < actions + 1:
        arr = np.vstack([arr, np.repeat(arr[-1:], actions + 1 - len(arr), 0)])
    return arr


def two_groups(ex: Exam, questions: list[str], group_grade: str = "one", how: str = "stand-in",
               order: str = "size") -> tuple[float, float, float, float]:
    """One teacher action per group on the first two groups of each question (:func:`group_order`): RMSE of the
    other answers with the group grades (the rest adapted), of the raw drafts, of the adapted drafts alone, and with
    the group grades and the rest raw (no adaptation)."""
    sel = np.flatnonzero(np.isin(ex.qid, questions))
    draft, maxp, qid, truth, atom = ex.draft[sel], ex.maxp[sel], ex.qid[sel], ex.human[sel], ex.atom[sel]
    local = {ex.ids[i]: k for k, i in enumerate(sel)}
    direct: dict[int, float] = {}
    via: dict[int, float] = {}
    for q in questions:
        for g in group_order(ex, q, order)[:2]:
            rep = local[g.representative]
            direct[rep] = float(truth[rep])
            for a in g.members:
                v = member_grade(float(truth[rep]), draft, maxp, local[a], rep, group_grade, atom)
                if v is not None:
                    via.setdefault(local[a], v)
    others = np.array([k not in direct for k in range(len(sel))])
    adapted = adapt(draft, maxp, qid, direct, how=how)
    est = adapted.copy()
    plain = draft.copy()
    for k, v in via.items():
        est[k] = v
        plain[k] = v
    return (scores(est, truth, others)[0], scores(draft, truth, others)[0], scores(adapted, truth, others)[0],
            scores(plain, truth, others)[0])


def first_reach(curve: np.ndarray, target: float) -> float:
    hit = np.flatnonzero(curve >= target - 1e-12)
    return float(hit[0]) if len(hit) else float("nan")


def ci(values: list[float]) -> str:
    v = np.array([x for x in values if np.isfinite(x)])
    if not len(v):
        return "not reached"
    lo, hi = np.percentile(v, [2.5, 97.5])
    miss = len(values) - len(v)
    return f"{v.mean():.3f} [{lo:.3f}, {hi:.3f}]" + (f" ({miss} draws not reached)" if miss else "")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default="mohler-dev,SAF")
    p.add_argument("--draws", type=int, default=20)
    p.add_argument("--share", type=float, default=0.25, help="teacher actions up to this share of the answers")
    p.add_argument("--plot", type=Path, default=None)
    p.add_argument("--encoder", choices=("tfidf", "minilm"), default="tfidf",
                   help="the answers' vectors and draft similarity: TF-IDF (seconds) or the meaning reader's "
                        "sentence encoder (about 1 s per answer on the loaded 2-core machine)")
    p.add_argument("--draft", choices=("similarity", "model"), default="similarity",
                   help="the draft grade: the similarity to the reference (every answer), or the grade model's "
                        "cross-validated grade (the answers it graded: bench/grade_model/cv_grades.json)")
    p.add_argument("--group-grade", choices=("adapt", "one", "offset"), default="adapt",
                   help="what a group's members get from the representative's grade: it enters the adaptation as "
                        "the representative's grade and only the near-identical members take it (adapt, as knockout "
                        "groups does), every member takes it (one), or it is moved by each member's draft offset from "
                        "the representative's (offset)")
    p.add_argument("--adapt", choices=("model", "stand-in"), default=None,
                   help="how the answers without a teacher grade are moved: the grade model's adaptation with the "
                        "shipped prior (model; the default with --draft model) or the bench's ridge stand-in "
                        "(the default with --draft similarity)")
    p.add_argument("--order", choices=("propose", "size"), default="propose",
                   help="the first two groups of each question in the check: as knockout.groups.propose ranks them "
                        "(the product's next group) or largest first (the listing)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    how = args.adapt or ("model" if args.draft == "model" else "stand-in")
    t0 = time.time()
    report: dict[str, Any] = {}
    for name in args.sets.split(","):
        ex = Exam(name, args.encoder, args.draft)
        qs = list(ex.groups)
        curves: dict[str, list[np.ndarray]] = {s: [] for s in STRATEGIES}
        sizes, checks = [], []
        for d in range(args.draws):
            rng = np.random.default_rng(1000 + d)
            questions = [str(q) for q in rng.choice(qs, size=min(ex.per_exam, len(qs)), replace=False)]
            n = int(np.isin(ex.qid, questions).sum())
            sizes.append(n)
            actions = round(args.share * n)
            for s in STRATEGIES:
                curves[s].append(simulate(ex, questions, s, actions, seed=d, group_grade=args.group_grade, how=how)
                                 [:actions + 1])
            checks.append(two_groups(ex, questions, args.group_grade, how, args.order))
        n_min = min(len(c) for cs in curves.values() for c in cs)
        human_r = float(np.corrcoef(*ex.pair)[0, 1]) if ex.pair is not None else None
        best = min(float(np.nanmax(np.mean([c[:n_min, 1] for c in curves[s]], 0))) for s in STRATEGIES)
        target = human_r if human_r is not None and human_r <= best else best
        res: dict[str, Any] = {"answers_per_exam": float(np.mean(sizes)), "draws": args.draws,
                               "human_pearson": human_r, "target_pearson": target,
                               "target_is": "the humans' agreement" if target == human_r else
                               "the best Pearson every strategy's mean curve reaches",
                               "groups": {q: len(g) for q, g in ex.groups.items()}, "strategies": {}}
        for s in STRATEGIES:
            cs = curves[s]
            reach = [first_reach(c[:, 1], target) / sz for c, sz in zip(cs, sizes, strict=True)]
            at = {}
            for share in (0.0, 0.1, 0.2):
                rm = [float(c[min(len(c) - 1, round(share * sz)), 0]) for c, sz in zip(cs, sizes, strict=True)]
                pr = [float(c[min(len(c) - 1, round(share * sz)), 1]) for c, sz in zip(cs, sizes, strict=True)]
                at[f"{share:.0%}"] = {"rmse": ci(rm), "pearson": ci(pr)}
            res["strategies"][s] = {"actions_per_answer_to_target": ci(reach), "at": at,
                                    "mean_curve": np.mean([c[:n_min] for c in cs], 0).tolist()}
        chk = np.array(checks)
        res["two_groups_per_question"] = {"rmse_groups": ci(chk[:, 0].tolist()), "rmse_raw": ci(chk[:, 1].tolist()),
                                          "rmse_adapted_only": ci(chk[:, 2].tolist()),
                                          "rmse_groups_rest_raw": ci(chk[:, 3].tolist()),
                                          "rest_raw_below_raw_in": f"{int((chk[:, 3] < chk[:, 1]).sum())}/{len(chk)}",
                                          "below_raw_in": f"{int((chk[:, 0] < chk[:, 1]).sum())}/{len(chk)} draws"}
        report[name] = res
        print(f"== {name} (draft: {args.draft}, group grade: {args.group_grade}, adaptation: {how}, "
              f"first groups: {args.order}): "
              f"{res['answers_per_exam']:.0f} answers per exam, {args.draws} draws; "
              f"target Pearson "
              f"{target:.3f} ({res['target_is']})")
        for s in STRATEGIES:
            r = res["strategies"][s]
            print(f"  {s:7s} actions/answer to target {r['actions_per_answer_to_target']}; " +
                  "; ".join(f"at {k}: RMSE {v['rmse']} r {v['pearson']}" for k, v in r["at"].items()))
        print(f"  two groups per question, one action each: {res['two_groups_per_question']}")
    print(f"({time.time() - t0:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    if args.plot:
        plot(report, args.plot)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(report), figsize=(5 * len(report), 6.5), squeeze=False)
    for j, (name, res) in enumerate(report.items()):
        n = res["answers_per_exam"]
        for s in STRATEGIES:
            c = np.array(res["strategies"][s]["mean_curve"])
            x = np.arange(len(c)) / n
            axes[0][j].plot(x, c[:, 0], label=s)
            axes[1][j].plot(x, c[:, 1], label=s)
        if res["human_pearson"] is not None:
            axes[1][j].axhline(res["human_pearson"], color="grey", ls=":", label="the two graders")
        axes[0][j].set_title(f"{name} ({n:.0f} answers per exam)")
        axes[0][j].set_ylabel("RMSE of the other answers (points)")
        axes[1][j].set_ylabel("Pearson of the other answers")
        axes[1][j].set_xlabel("teacher actions per answer of the exam")
        axes[0][j].legend()
        axes[1][j].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
