"""Prediction-powered estimates (knockout.calibration._ppi, knockout.sciex._ppi): the coverage of their 95%
intervals over many seeds, with the scripted judge (a SIMULATION, not an LLM) grading with a known bias, and
the leaderboard's section on the example exam with expert grades on a subset."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from knockout.calibration import ppi_mean, ppi_total
from knockout.data import Answer, ItemSet, Question, load_items
from knockout.errors import ConfigError
from knockout.judges import make_judge
from knockout.methods._run import GradeRun, RunConfig
from knockout.runs import execute
from knockout.sciex import build_leaderboard, gather, leaderboard_csv, leaderboard_tables
from knockout.sciex._ppi import difference_ppi, exam_average_ppi, examinee_ppi
from knockout.sciex._results import exams_of
from knockout.storage import Store

ppi_py = pytest.importorskip("ppi_py", reason="needs knockout[calibration] (ppi-python)")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "src" / "knockout" / "examples" / "sciex"

#: the scripted judge's known bias: +0.2 of the maximum points on every grade (clipped), and noise 0.15
BIASED = "scripted?inflation=0.2&noise=0.15&seed={seed}"


def _exam_items() -> ItemSet:
    """Two exams of 40 questions (1 to 5 points), two examinees of different strength, expert grades on all."""
    rng = np.random.default_rng(7)
    questions, answers = [], []
    for exam in ("e1", "e2"):
        for i in range(40):
            top = float(1 + i % 5)
            q = Question(id=f"{exam}/{i}", text=f"Question {i} of {exam}", max_points=top, exam_id=exam)
            questions.append(q)
            for who, strength in (("strong", 0.7), ("weak", 0.45)):
                share = float(np.clip(rng.beta(2, 2) * 0.6 + strength - 0.3, 0, 1))
                answers.append(Answer(id=f"{q.id}/{who}", question_id=q.id, examinee=who, text=f"answer by {who}",
                                      human_scores={"prof": round(share * top * 2) / 2}))
    return ItemSet(questions, answers, source="ppi-test")


def _judge_grades(items: ItemSet, tmp_path: Path, seed: int) -> dict[str, float | None]:
    with Store(tmp_path / f"judge{seed}.db") as store:
        report = execute(GradeRun(items, make_judge(BIASED.format(seed=seed)), RunConfig()), store)
    return {r.answer_id: r.score for r in report.results}


def _exact(items: ItemSet, who: str) -> float:
    exams = exams_of(items)
    per = {e: sum(a.human_score for a in items if a.examinee == who and items.question_of(a).exam_id == e)  # type: ignore[misc]
           / x.max_points for e, x in exams.items()}
    return 100 * float(np.mean(list(per.values())))


@pytest.mark.slow
def test_ppi_intervals_cover_at_least_90_percent_at_95_nominal_over_many_seeds(tmp_path: Path) -> None:
    """The scripted judge inflates every grade by 0.2 of the maximum points: the judge-only figure is far off,
    the prediction-powered one is right, its 95% interval covers the experts' figure in >= 90% of 400 draws of
    the expert-graded subset (4 judge seeds x 100 subsets of 30%), and is narrower than the expert-only one."""
    items = _exam_items()
    exams = exams_of(items)
    truth = {"strong": _exact(items, "strong"), "weak": _exact(items, "weak")}
    experts_all = {a.id: a.human_score for a in items}
    exam_truth = {e: 100 * sum(experts_all[a.id] for a in items if items.question_of(a).exam_id == e)  # type: ignore[misc]
                  / (2 * x.max_points) for e, x in exams.items()}
    covered = {"strong": 0, "weak": 0, "diff": 0, "exam": 0}
    widths, expert_widths, judge_off, trials = [], [], [], 0
    for judge_seed in range(4):
        judge = _judge_grades(items, tmp_path, judge_seed)
        for draw in range(100):
            rng = np.random.default_rng(1000 * judge_seed + draw)
            experts = {k: v for k, v in experts_all.items() if rng.uniform() < 0.3}
            trials += 1
            for who in ("strong", "weak"):
                est = examinee_ppi(items, exams, who, judge, experts)
                assert est is not None
                lo, hi = est["ci"]
                covered[who] += lo <= truth[who] <= hi
                widths.append(est["width"])
                expert_widths.append(est["expert_only_width"])
                judge_off.append(est["judge_only"] - truth[who])
                assert 0 <= est["lambda"] <= 1 and est["german_ci"][0] <= est["german"] <= est["german_ci"][1]
            diff = difference_ppi(items, exams, "strong", "weak", judge, experts)
            assert diff is not None
            covered["diff"] += diff["ci"][0] <= truth["strong"] - truth["weak"] <= diff["ci"][1]
            avg = exam_average_ppi(items, exams, "e1", ["strong", "weak"], judge, experts)
            assert avg is not None
            covered["exam"] += avg["ci"][0] <= exam_truth["e1"] <= avg["ci"][1]
    rates = {k: v / trials for k, v in covered.items()}
    assert all(r >= 0.90 for r in rates.values()), rates
    assert np.mean(judge_off) > 8  # the known bias: the judge alone is about 10 points too generous
    assert np.mean(widths) < np.mean(expert_widths)  # the judge's grades narrow the interval


def test_power_tuning_is_the_one_the_package_chooses() -> None:
    from knockout.calibration import power_tuning

    rng = np.random.default_rng(3)
    y = rng.normal(size=300)
    f = y + 0.5 + rng.normal(scale=0.7, size=300)
    labelled = rng.uniform(size=300) < 0.2
    lam = power_tuning(y[labelled], f[labelled], f[~labelled])
    tuned = ppi_py.ppi_mean_ci(y[labelled], f[labelled], f[~labelled], alpha=0.05)
    fixed = ppi_py.ppi_mean_ci(y[labelled], f[labelled], f[~labelled], alpha=0.05, lam=lam)
    assert np.allclose(np.ravel(tuned), np.ravel(fixed)) and 0 < lam < 1
    est = ppi_mean(np.where(labelled, y, np.nan), f)
    assert est is not None and est.labelled == labelled.sum() and est.answers == 300 and est.covers(est.estimate)
    assert abs(est.judge_only - est.estimate) > 0.3  # the judge's offset of 0.5 is taken out


def test_too_few_expert_grades_or_none_missing_gives_no_estimate() -> None:
    assert ppi_mean([1.0, None, None, None], [1.0, 2.0, 3.0, 4.0]) is None
    assert ppi_mean([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]) is None
    assert ppi_mean([0.0, 0.0, 0.0, None], [1.0, 2.0, 3.0, 4.0]) is None  # every expert grade alike: no spread
    assert ppi_total([0.5, 0.5, 0.5, 0.5], [1.0, 2.0, 3.0, None], [1.0, 2.0, 3.0, 4.0]) is not None
    with pytest.raises(ValueError, match="judge grade"):
        ppi_mean([1.0, 2.0, 3.0, None], [1.0, 2.0, float("nan"), 4.0])


def test_missing_ppi_python_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ppi_py", None)
    with pytest.raises(ConfigError, match=r"pip install 'knockout\[calibration\]'"):
        ppi_mean([1.0, 2.0, 3.0, None], [1.0, 2.0, 3.0, 4.0])


@pytest.mark.slow
def test_example_leaderboard_shows_ppi_intervals_with_expert_grades_on_a_subset(tmp_path: Path) -> None:
    """The bundled SciEx example graded by the scripted judge; --expert-sample 0.6 keeps 60% of the expert
    grades: the leaderboard shows PPI intervals beside the expert-only ones and the figures from all grades."""
    from tests.test_sciex_leaderboard import cli

    db = tmp_path / "s.db"
    with Store(db) as store:
        items = load_items(EXAMPLES / "cs-basics-en")
        de = load_items(EXAMPLES / "cs-basics-de")
        both = ItemSet([*items.questions.values(), *de.questions.values()], [*items, *de], source="example")
        execute(GradeRun(both, make_judge("scripted?inflation=0.1"), RunConfig(figures="none")), store)
    done = cli("leaderboard", str(db), "--expert-sample", "0.6", "--seed", "1", "--json", "--resamples", "0",
               cache=tmp_path)
    assert done.returncode == 0, done.stderr
    board = json.loads(done.stdout)
    ppi = board["ppi"]
    assert ppi["labelled"] == round(0.6 * 36) and ppi["answers"] == 36
    assert {r["examinee"] for r in ppi["examinees"]} <= {"sample-a", "sample-b", "sample-c"} and ppi["examinees"]
    for r in ppi["examinees"]:
        assert 0 <= r["ci"][0] <= r["estimate"] <= r["ci"][1] <= 100 and r["all_experts"] is not None
        assert r["expert_only_width"] > 0 and r["labelled"] < r["answers"]
    assert len(ppi["differences"]) >= 1 and len(ppi["exams"]) == 2
    tables = {t.title: t for t in leaderboard_tables(board)}
    assert "PPI % [95% CI]" in tables["SciEx leaderboard"].columns
    ppi_table = tables["Prediction-powered estimates"]
    assert {"PPI [95% CI]", "expert only [95% CI]", "PPI width", "expert-only width", "all experts"} <= set(
        ppi_table.columns) and len(ppi_table.rows) == len(ppi["examinees"]) + 2 + len(ppi["differences"])
    assert "ppi_percent" in leaderboard_csv(board).splitlines()[0]
    g = gather(db)
    with pytest.raises(ConfigError, match="expert-sample"):
        build_leaderboard(g.items, g.judges, resamples=0, expert_sample=1.5)
