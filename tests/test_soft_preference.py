"""Soft pairwise verdicts (``--preference soft``, docs/methods.md#soft-preferences): the probability that answer 1
is better, read from the judge's token probabilities at the verdict slot, both orders averaged so that the judge's
preference for a position cancels; used by knockout matches, all-pairs Elo / Bradley-Terry and side-by-side.

The readings are checked on written distributions; the runs use the scripted judge with ``slot=true`` (a simulation
that says it is one).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knockout._verdict import Verdict
from knockout.data._records import Answer, ItemSet, Question
from knockout.engine import Outcome
from knockout.engine._engine import Attempt
from knockout.errors import ConfigError
from knockout.judges import make_judge
from knockout.judges._slot import Slot, first_better, score_values
from knockout.methods._allpairs import bradley_terry
from knockout.methods._base import MethodOptions
from knockout.methods._match import Game, Match
from knockout.methods._run import RunConfig, run, run_id_for
from knockout.sbs._data import SbsItem
from knockout.sbs._judging import OrderResult
from knockout.sbs._run import ItemVerdicts, SbsConfig, SbsRun, run_sbs, sbs_run_id
from knockout.storage._store import Store

PAIR = Slot("pair", ("Answer 1: ", " Answer 2: "), score_values(1), "/1")  # values 0, 0.5, 1
CHOICE = Slot("choice", ("",), ("A", "B", "C", "D"))


def expected(probs: list[list[float]], chosen: list[str]) -> dict[str, object]:
    return {"mode": "expected", "probs": probs, "chosen": chosen}


def game(first: str, second: str, probs: list[list[float]], scores: tuple[float, float] = (1.0, 0.5),
         slot: Slot | None = PAIR) -> Game:
    verdict = expected(probs, ["1", "0.5"])
    attempt = Attempt(key="k", reply="Answer 1: 1/1 Answer 2: 0.5/1", cached=False, error=None, verdict=verdict)
    return Game(first, second, Outcome(value=scores, valid=True, attempts=[attempt]), slot)


def items(n: int = 6) -> ItemSet:
    qs = [Question(id="q1", text="What does DNS do?", max_points=5, language="en",
                   reference="It maps domain names to IP addresses.")]
    answers = [Answer(id=f"a{i}", question_id="q1", text=f"answer number {i}", examinee=f"e{i}",
                      human_scores={"g": float(i % 6)}) for i in range(n)]
    return ItemSet(qs, answers, source="test")


def test_the_probability_that_the_first_answer_is_better_from_a_choice_and_from_two_grades() -> None:
    # a choice: A's share of the four letters, the two ties counted half each way (alpaca_eval's logprob_parser:
    # the first output's letter over the letters allowed)
    assert first_better(CHOICE, expected([[0.54, 0.18, 0.09, 0.09]], ["A"])) == pytest.approx(0.7)
    # two grades: P(S1 > S2) + P(S1 = S2) / 2, each field normalised over the allowed values
    assert first_better(PAIR, expected([[0, 0, 0.9], [0.18, 0.18, 0.54]], ["1", "1"])) == pytest.approx(0.7)
    assert first_better(PAIR, expected([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5]], ["1", "1"])) == pytest.approx(0.5)
    # not a distribution, or one whose allowed values carry too little of the probability: no soft reading
    assert first_better(PAIR, {"mode": "constrained", "chosen": ["1", "0"]}) is None
    assert first_better(CHOICE, expected([[0.2, 0.1, 0.05, 0.05]], ["A"])) is None
    assert first_better(Slot("score", ("Score: ",), score_values(1), "/1"), expected([[0, 0, 1]], ["1"])) is None


def test_a_soft_match_averages_both_orders_so_a_first_position_prior_cancels() -> None:
    favour_first = [[0, 0, 1], [0.2, 0.2, 0.6]]  # P(first better) = 0.7 in whichever order
    ab, ba = game("a", "b", favour_first), game("b", "a", favour_first)
    soft = Match("a", "b", [ab, ba], 1, soft=True)
    assert ab.p_first == pytest.approx(0.7) and soft.preference == pytest.approx(0.5)
    assert soft.verdict is Verdict.TIE and soft.result_for("a") == pytest.approx(0.5)
    # letters: the grades' verdict (a got 1 and 0.5, b 0.5 and 1: a tie as well), unchanged by soft reading
    assert Match("a", "b", [ab, ba], 1).verdict is Verdict.TIE
    # a preference that survives the swap wins: 0.7 for a shown first, 1 - 0.28 for a shown second -> 0.71
    prefers_a = Match("a", "b", [ab, game("b", "a", [[0.2, 0.4, 0.4], [0, 0.2, 0.8]])], 1, soft=True)
    assert prefers_a.preference == pytest.approx((0.7 + (1 - 0.28)) / 2)
    assert prefers_a.verdict is Verdict.A and prefers_a.result_for("b") == pytest.approx(1 - prefers_a.preference)
    ref = prefers_a.ref_for("a")
    assert ref.preference == pytest.approx(prefers_a.preference)
    assert "preference" not in Match("a", "b", [ab], 1).ref_for("a").model_dump()  # letters: details as before
    # a game read from text (no slot) counts by its grades: 1, 0.5 or 0
    assert Match("a", "b", [game("a", "b", favour_first, (0.0, 1.0), slot=None)], 1, soft=True).preference == 0.0


def test_soft_bradley_terry_takes_fractional_wins() -> None:
    ids = ["a", "b", "c"]
    strong = bradley_terry(ids, [("a", "b", 0.8), ("b", "c", 0.8), ("a", "c", 0.9)], 0.01, soft=True)
    assert strong["a"] > strong["b"] > strong["c"]
    even = bradley_terry(ids, [("a", "b", 0.5), ("b", "c", 0.5), ("a", "c", 0.5)], 0.01, soft=True)
    assert max(even.values()) - min(even.values()) < 1e-6


def test_the_run_id_changes_only_when_soft_is_used() -> None:
    judge = make_judge("scripted?slot=true&noise=0")
    letter = RunConfig(method="knockout", options=MethodOptions(reference=True, debias=True))
    soft = RunConfig(method="knockout", options=MethodOptions(reference=True, debias=True, preference="soft"))
    assert "preference" not in letter.options.record() and soft.options.record()["preference"] == "soft"
    assert run_id_for(items(), judge, letter) != run_id_for(items(), judge, soft)
    sbs_items = [SbsItem(id="p", question="q?", candidate="c", baseline="b")]
    assert sbs_run_id(sbs_items, judge, SbsConfig(), source="t") != sbs_run_id(
        sbs_items, judge, SbsConfig(preference="soft"), source="t")
    assert "preference" not in SbsRun(sbs_items, judge, SbsConfig(), source="t").identity()  # letter, the default


@pytest.mark.parametrize(("method", "cfg", "why"), [
    ("individual", {}, "grades each answer on its own"),
    ("knockout", {"verdict": "text"}, "needs --verdict expected"),
    ("knockout", {"verdict": "constrained"}, "needs --verdict expected"),
])
def test_soft_is_refused_where_there_is_no_pair_or_no_probability(method: str, cfg: dict[str, str], why: str,
                                                                  tmp_path: Path) -> None:
    options = MethodOptions(reference=True, preference="soft", **cfg)  # type: ignore[arg-type]
    with Store(tmp_path / "s.db") as store, pytest.raises(ConfigError, match=why):
        run(items(), make_judge("scripted?slot=true"), store, RunConfig(method=method, options=options))
    with pytest.raises(ConfigError, match="needs --verdict expected"):
        reasoned = SbsConfig(prompt="II-reason", preference="soft", verdict="text")  # its verdict read as text
        run_sbs([SbsItem(id="p", question="q?", candidate="c", baseline="b")], make_judge("scripted?slot=true"),
                Store(":memory:"), reasoned, source="t")
    slotted = run_sbs([SbsItem(id="p", question="q?", candidate="c", baseline="b")], make_judge("scripted?slot=true"),
                      Store(":memory:"), SbsConfig(prompt="II-reason", preference="soft"), source="t")
    assert slotted.summary()["invalid_requests"] == 0  # gated (issue 51): its slot, after the reasoning, under auto
    with pytest.raises(ConfigError, match="unknown preference"):
        run(items(), make_judge("scripted?slot=true"), Store(":memory:"),
            RunConfig(method="knockout", options=MethodOptions(preference="argmax")))


def test_the_cli_refuses_soft_without_probabilities_in_one_line(tmp_path: Path) -> None:
    from knockout.cli._main import app

    data = tmp_path / "exam.jsonl"
    data.write_text("\n".join(json.dumps({"question_id": "q1", "question": "Why?", "answer_id": f"a{i}",
                                          "answer": f"because {i}", "max_points": 2, "human_score": i % 3})
                              for i in range(4)) + "\n")
    r = CliRunner().invoke(app, ["grade", str(data), "--method", "knockout", "--judge", "scripted", "--debias",
                                 "--preference", "soft", "--out", str(tmp_path / "k.db")])
    assert r.exit_code == 2 and "needs --verdict expected" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("method", ["knockout", "allpairs"])
def test_soft_matches_are_read_from_the_calls_letters_made(tmp_path: Path, method: str) -> None:
    judge = make_judge("scripted?slot=true&noise=0.2&bias=0.3")  # a judge that favours the first answer
    letter = RunConfig(method=method, options=MethodOptions(reference=True, debias=True))
    soft = RunConfig(method=method, options=MethodOptions(reference=True, debias=True, preference="soft"))
    with Store(tmp_path / "s.db") as store:
        a = run(items(8), judge, store, letter)
        b = run(items(8), judge, store, soft)
    assert a.run_id != b.run_id and b.summary()["info"]["preference"] == "soft"
    assert "preference" not in a.summary()["info"]
    refs = [m for r in b.results for m in r.details["matches"]]
    assert refs and all(0.0 <= m["preference"] <= 1.0 for m in refs)
    assert all("preference" not in m for r in a.results for m in r.details["matches"])
    if method == "allpairs":  # the same matches: every request of the soft run was already asked
        assert b.summary()["judge_calls"] == 0
        assert {r.answer_id for r in b.results if "bt" in r.details} == {f"a{i}" for i in range(8)}
        # Elo and Bradley-Terry from probabilities, not from the grades' letters
        assert [r.details["elo"] for r in a.results] != [r.details["elo"] for r in b.results]


def orders(swap0: list[float], swap1: list[float]) -> list[OrderResult]:
    """Two orders whose judge gave these display-order distributions over A-D."""
    out = []
    for probs in (swap0, swap1):
        letter = "ABCD"[max(range(4), key=probs.__getitem__)]
        attempt = {"key": "k", "reply": letter, "cached": False, "error": None,
                   "verdict": expected([probs], [letter])}
        out.append(OrderResult(Verdict(letter), details={"valid": True, "attempts": [attempt]}))
    return out


def test_a_side_by_side_soft_verdict_removes_the_position_prior() -> None:
    item = SbsItem(id="p", question="q?", candidate="c", baseline="b", human_verdicts={"h": "B"})
    # the judge says A (first shown) in both orders: letters disagree with each other in candidate terms
    biased = ItemVerdicts(item, orders([0.5, 0.3, 0.1, 0.1], [0.5, 0.3, 0.1, 0.1]), CHOICE)
    assert (biased.verdict(0), biased.verdict(1)) == (Verdict.A, Verdict.B)
    soft = biased.soft()
    assert soft.first == (pytest.approx(0.6), pytest.approx(0.6)) and soft.preference == pytest.approx(0.5)
    # under the prior, the baseline more probable in both orders: B (the humans' verdict)
    leaning = ItemVerdicts(item, orders([0.45, 0.35, 0.1, 0.1], [0.6, 0.2, 0.1, 0.1]), CHOICE).soft()
    assert leaning.verdict is Verdict.B and leaning.preference == pytest.approx((0.55 + 0.3) / 2)
    details = ItemVerdicts(item, orders([0.45, 0.35, 0.1, 0.1], [0.6, 0.2, 0.1, 0.1]), CHOICE).details("I", "none")
    assert details["soft"] == "B" and details["first_better"] == [pytest.approx(0.55), pytest.approx(0.7)]
    assert "soft" not in ItemVerdicts(item, biased.orders).details("I", "none")  # letters: details as before


def test_a_soft_side_by_side_run_reports_both_readings(tmp_path: Path) -> None:
    from knockout.reports._runs import read_run
    from knockout.sbs._report import build_sbs_report, sbs_tables

    pattern = "ABBACBDABBACAB"
    sbs_items = [SbsItem(id=f"i{k}", question=f"Question {k}?", candidate=f"cand {k}", baseline=f"base {k}",
                         human_verdicts={"h1": pattern[k % len(pattern)]}) for k in range(40)]
    judge = make_judge("scripted?slot=true&bias=0.3")
    with Store(tmp_path / "s.db") as store:
        letter = run_sbs(sbs_items, judge, store, SbsConfig(), source="t")
        soft = run_sbs(sbs_items, judge, store, SbsConfig(preference="soft"), source="t")
        page = build_sbs_report(read_run(store, store.find_run(soft.run_id), items_needed=False))
    s = soft.summary()
    assert s["judge_calls"] == 0 and letter.summary()["judge_calls"] == 80  # both orders were played already
    assert "soft" not in letter.summary()["metrics"]
    m = s["metrics"]["soft"]
    assert m["n_items"] == 40 and m["n_human"] == 40 and m["kappa"] is not None
    assert m["pbias_soft"] > 0.1  # the judge's prior for the first position, read from its probabilities
    assert page["metrics"]["soft"] == m  # the report recomputes it from the stored results
    rows = [r[0] for t in sbs_tables(page) for r in t.rows]
    assert "soft: Cohen's kappa vs human" in rows and "soft (both orders)" in rows
