"""Two readers for every grade (issue 48): the judge and the answer's meaning against the reference, combined so
that buying one buys little.  The combination's rule is tested on numbers; the run-level tests use the scripted
judge, a SIMULATION (it grades from the human grades, whatever the text says), with the real packaged encoder
reading the real texts; one grades with the real 0.5B GGUF."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.judges import make_judge
from knockout.meaning import MARGIN, combine, demote, encoder_available, read_meaning, resolve_readers
from knockout.methods._base import MethodOptions
from knockout.methods._run import RunConfig, run, run_id_for
from knockout.storage._store import Store

needs_encoder = pytest.mark.skipif(encoder_available() is not None, reason=str(encoder_available()))

DNS = "What does the DNS do?"
DNS_REF = "The DNS translates human-readable domain names into the IP addresses that computers use."
DNS_ANSWERS = [  # (text, the humans' grade of 4)
    ("It translates domain names such as example.com into IP addresses.", 4.0),
    ("DNS turns a website name into the numeric IP address of its server.", 4.0),
    ("It resolves host names to IP addresses, like a phone book of the internet.", 3.5),
    ("It maps names to addresses.", 3.0),
    ("It stores web pages so they load faster.", 1.0),
    ("It encrypts the traffic between the browser and the server.", 0.5),
    ("It assigns IP addresses to computers when they join the network.", 1.0),
    ("I don't know.", 0.0),
]
STACK = "What is a stack?"
STACK_REF = "A stack is a last-in, first-out collection: elements are pushed on top and popped from the top."
STACK_ANSWERS = [
    ("A LIFO structure where you push and pop elements at the top.", 2.0),
    ("A list where the last element added is the first one removed.", 2.0),
    ("A data structure with push and pop operations.", 1.5),
    ("A structure where the first element in is the first out.", 0.5),
    ("A kind of tree with a root node.", 0.0),
    ("Memory for storing things.", 0.5),
    ("An array of values sorted by key.", 0.0),
    ("Last in first out.", 1.5),
]


def _items(german: bool = False, reference: bool = True) -> ItemSet:
    qs = [Question(id="dns", text=DNS, max_points=4, reference=DNS_REF if reference else None),
          Question(id="stack", text=STACK, max_points=2, reference=STACK_REF)]
    answers = [Answer(id=f"{q.id}/{i}", question_id=q.id, text=t, examinee=f"e{i}", human_scores={"g": h})
               for q, rows in zip(qs, (DNS_ANSWERS, STACK_ANSWERS), strict=True) for i, (t, h) in enumerate(rows)]
    if german:
        qs.append(Question(id="de", text="Was ist ein Stapel?", max_points=2, language="de",
                           reference="Ein Stapel ist eine LIFO-Struktur."))
        answers += [Answer(id=f"de/{i}", question_id="de", text=t, examinee=f"e{i}", human_scores={"g": h})
                    for i, (t, h) in enumerate([("Last in, first out.", 2.0), ("Eine Liste.", 0.5)])]
    return ItemSet(qs, answers, source="test")


# -- the rule ----------------------------------------------------------------------------------------------
def test_agreeing_readers_give_their_mean_on_the_judges_scale() -> None:
    judge = [0.1, 0.3, 0.5, 0.7, 0.9, 0.2, 0.4, 0.6, 0.8, 0.5]
    meaning = [0.2 + 0.5 * j for j in judge]  # the same order, another scale
    c = combine(judge, meaning)
    assert c.why_not is None and not any(c.capped)
    np.testing.assert_allclose(c.grades, judge, atol=1e-9)  # both z-scores equal: the judge's own grades
    np.testing.assert_allclose(c.meaning_grades, judge, atol=1e-9)


def test_one_bought_reader_gains_at_most_the_margin_over_the_other() -> None:
    rng = np.random.default_rng(0)
    truth = rng.uniform(0, 1, 60)
    judge = list(np.clip(truth + rng.normal(0, 0.15, 60), 0, 1))
    meaning = list(0.3 + 0.4 * truth + rng.normal(0, 0.06, 60))
    clean = combine(judge, meaning)
    w = int(np.argmin(truth))  # the weakest answer
    for bought in ("judge", "meaning"):
        j, m = list(judge), list(meaning)
        if bought == "judge":
            j[w] = 1.0  # persuasion: the judge gives full points to a weak answer
        else:
            m[w] = 0.99  # gaming: the reference's words listed reach the encoder's top
        attacked = combine(j, m)
        assert attacked.capped[w]  # marked for an expert
        s = attacked.scale
        other = (m[w] - s["meaning_mean"]) / s["meaning_sd"] if bought == "judge" else \
            (j[w] - s["judge_mean"]) / s["judge_sd"]
        assert attacked.grades[w] == pytest.approx(
            float(np.clip(s["judge_mean"] + s["judge_sd"] * (other + MARGIN * s["spread"]), 0, 1)))
        assert attacked.grades[w] < (j[w] + float(attacked.meaning_grades[w] or 0)) / 2  # below the plain mean
    assert sum(clean.capped) <= 6  # on clean answers the cap is rare (readers within twice their spread)


def test_too_few_answers_or_a_flat_reader_leave_the_judges_grade() -> None:
    c = combine([0.5, 0.6, 0.7], [0.3, 0.4, 0.5])
    assert c.grades == [None, None, None] and "fewer than 8" in str(c.why_not)
    c = combine([0.5] * 10, list(np.linspace(0.1, 0.9, 10)))
    assert c.grades == [None] * 10 and "same reading" in str(c.why_not)
    c = combine([0.1, None, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], [0.2, 0.5, None, 0.3, 0.4, 0.5, 0.6, 0.7,
                                                                          0.8, 0.9])
    assert c.grades[1] is None and c.grades[2] is None and c.grades[0] is not None  # read by both only


def test_readers_modes() -> None:
    assert resolve_readers("judge", "individual", False) == ("judge", None)
    mode, why = resolve_readers("auto", "knockout", False)
    assert mode == "judge" and "individual grading" in str(why)
    with pytest.raises(ConfigError, match="individual grading"):
        resolve_readers("two", "knockout", False)
    with pytest.raises(ConfigError, match="unknown readers mode"):
        resolve_readers("both", "individual", False)
    if encoder_available() is None:
        assert resolve_readers("auto", "individual", False) == ("two", None)
        mode, why = resolve_readers("auto", "individual", True)
        assert mode == "judge" and "simulated" in str(why)
        assert resolve_readers("two", "individual", True) == ("two", None)


# -- the meaning reader ------------------------------------------------------------------------------------
def test_question_demoting() -> None:
    assert demote("What does the DNS do? It maps names.", DNS) == "? It maps names."
    assert demote("what DOES the dns DO", DNS) == ""


@needs_encoder
def test_the_meaning_reader_orders_answers_and_says_where_it_does_not_apply() -> None:
    texts = [t for t, _ in DNS_ANSWERS] + [DNS, "word " * 300, "Ein Stapel.", "x"]
    qs = [DNS] * (len(DNS_ANSWERS) + 3) + [STACK]
    refs = [DNS_REF] * (len(DNS_ANSWERS) + 3) + [None]
    langs = ["en"] * (len(DNS_ANSWERS) + 2) + ["de", "en"]
    rd = read_meaning(texts, qs, refs, langs)
    sims = [r.similarity for r in rd[:len(DNS_ANSWERS)]]
    human = [h for _, h in DNS_ANSWERS]
    assert np.corrcoef(sims, human)[0, 1] > 0.6  # type: ignore[arg-type]
    assert rd[len(DNS_ANSWERS)].similarity == 0.0  # the question copied: nothing beyond it
    assert "window" in str(rd[len(DNS_ANSWERS) + 1].why_not)
    assert "language 'de'" in str(rd[len(DNS_ANSWERS) + 2].why_not)
    assert rd[-1].why_not == "no reference"


# -- a run -------------------------------------------------------------------------------------------------
@needs_encoder
def test_a_run_with_two_readers_stores_both_readings_and_resumes_without_a_call(tmp_path: Path) -> None:
    items = _items(german=True)
    judge = make_judge("scripted?slot=true&noise=0.3")  # a simulation
    two = RunConfig(options=MethodOptions(reference=True, readers="two"))
    with Store(tmp_path / "s.db") as store:
        first = run(items, judge, store, two)
        again = run(items, judge, store, two)
        alone = run(items, judge, store, RunConfig(options=MethodOptions(reference=True, readers="judge")))
    s = first.summary()
    assert s["status"] == "complete" and s["valid"] == 18
    assert s["readers"]["mode"] == "two" and s["readers"]["combined"] == 16 and s["readers"]["judge_only"] == 2
    assert list(s["readers"]["why_not"]) == ["language 'de': the encoder reads en"]
    assert again.summary()["judge_calls"] == 0 and [r.score for r in again.results] == [r.score for r in
                                                                                         first.results]
    assert alone.summary()["judge_calls"] == 0 and alone.run_id != first.run_id  # the same requests
    assert alone.summary()["readers"] == {"mode": "judge"}
    judge_grade = {r.answer_id: r.score for r in alone.results}
    for r in first.results:
        d = r.details["readers"]
        assert d["judge"] == pytest.approx(judge_grade[r.answer_id])
        if r.question_id == "de":
            assert r.score == d["judge"] and d.get("combined") is None
        else:
            assert r.score == d["combined"] and 0 <= d["meaning"] <= items.questions[r.question_id].max_points
            assert isinstance(d["similarity"], float) and d["encoder"] == "all-minilm-l6-v2"


@needs_encoder
def test_auto_is_the_judge_alone_for_a_simulated_judge_and_the_run_ids_of_before(tmp_path: Path) -> None:
    items = _items()
    judge = make_judge("scripted?slot=true&noise=0")  # a simulation
    auto = RunConfig(options=MethodOptions(reference=True))
    assert run_id_for(items, judge, auto) == run_id_for(items, judge, RunConfig(options=MethodOptions(
        reference=True, readers="judge")))  # the run ids of a judge-only run are those of before
    assert run_id_for(items, judge, auto) != run_id_for(items, judge, RunConfig(options=MethodOptions(
        reference=True, readers="two")))
    with Store(tmp_path / "s.db") as store:
        report = run(items, judge, store, auto)
    assert report.summary()["readers"]["mode"] == "judge" and "simulated" in report.summary()["readers"]["off"]
    assert all("readers" not in r.details for r in report.results)


@needs_encoder
def test_a_bought_judge_is_capped_and_marked(tmp_path: Path) -> None:
    """The simulation stands for a judge that an answer persuaded: it gives the wrong answer full points."""
    from knockout.calibration._trust import DISAGREE, trust_marks

    items = _items()
    wrong = "dns/5"  # "It encrypts the traffic between the browser and the server.": the humans gave 0.5
    bought = ItemSet(list(items.questions.values()),
                     [a.model_copy(update={"human_scores": {"g": 4.0}}) if a.id == wrong else a for a in items],
                     source="test")
    judge = make_judge("scripted?slot=true&noise=0")
    with Store(tmp_path / "s.db") as store:
        report = run(bought, judge, store, RunConfig(options=MethodOptions(reference=True, readers="two")))
    r = next(x for x in report.results if x.answer_id == wrong)
    d = r.details["readers"]
    assert d["judge"] > 3.5 and d["meaning"] < 2.5  # the judge bought, the meaning reader not
    assert r.score <= (d["judge"] + d["meaning"]) / 2 + 1e-5 < d["judge"]
    trust = trust_marks(bought, [{"item_id": x.answer_id, "score": x.score, "valid": x.valid,
                                  "details": x.details} for x in report.results])
    assert (DISAGREE in trust.marks(wrong)) == d["disagree"]
    assert trust.counts()["disagree"] == sum(bool(x.details["readers"].get("disagree")) for x in report.results)


def test_readers_two_needs_individual_grading(tmp_path: Path) -> None:
    judge = make_judge("scripted?slot=true&noise=0")
    with pytest.raises(ConfigError, match="individual grading"):
        run_id_for(_items(), judge, RunConfig(method="knockout", options=MethodOptions(readers="two")))
