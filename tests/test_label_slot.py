"""A verdict slot whose values are labels (a template's ``slot_labels``): the yes/no preset
``knockout-individual-en-ref-correct`` grades an answer as P(yes) x max points, read from the judge's token
probabilities (issue 41: the probability that the answer is correct).

Slot logic and a run go through the scripted judge with ``slot=true`` (a simulation that says it is one); the
embedded backend's reading of ``yes``/``no`` runs on the real 0.5B GGUF.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.judges import GenParams, JudgeRequest, Message, make_judge
from knockout.judges._slot import distribution, read_verdict
from knockout.methods._base import MethodOptions
from knockout.methods._run import RunConfig, run
from knockout.prompts._parsers import parse_correct
from knockout.prompts._slots import slot_for
from knockout.prompts._templates import get_template, load_template_file
from knockout.storage._store import Store
from tests.conftest import SMALL_MODEL

PRESET = "knockout-individual-en-ref-correct"


def test_the_preset_gives_a_yes_no_slot_worth_the_questions_points() -> None:
    slot = slot_for(get_template(PRESET), 4.0)
    assert slot is not None and slot.values == ("no", "yes") and slot.points == (0.0, 4.0)
    assert slot.key()["points"] == [0.0, 4.0]
    numeric = slot_for(get_template("knockout-individual-en-ref-score"), 4.0)
    assert numeric is not None and "points" not in numeric.key()  # a numeric slot's cache key is unchanged
    read = read_verdict(slot, distribution(slot, [[0.2, 0.6]], ["yes"]))
    assert read.error is None and read.values[0] == pytest.approx(3.0)  # P(yes) = 0.75 of the allowed mass
    assert read.spread[0] == pytest.approx(4.0 * (0.75 * 0.25) ** 0.5)
    assert read_verdict(slot, {"mode": "constrained", "chosen": ["no"]}).values == (0.0,)
    assert read_verdict(slot, {"mode": "constrained", "chosen": ["4"]}).error is not None
    assert slot.from_json({"score": "yes"}) == ["yes"]
    assert slot.from_json({"score": 4}) is None  # a label is written as itself, never as its points


@pytest.mark.parametrize("labels, ok", [({"no": 0, "yes": 1}, True), ({"yes": 1}, False), ({"no": 0, "yes": 2}, False),
                                        ({"no": "0", "yes": 1}, False), ({" ": 0, "yes": 1}, False)])
def test_slot_labels_are_checked_when_a_template_is_loaded(tmp_path: Path, labels: dict[str, object],
                                                           ok: bool) -> None:
    table = ", ".join(f'"{k}" = {v!r}' if not isinstance(v, str) else f'"{k}" = "{v}"' for k, v in labels.items())
    f = tmp_path / "mine.toml"
    f.write_text(f'kind = "individual"\nslot = "score"\nslot_fields = ["Correct: "]\nslot_labels = {{ {table} }}\n'
                 'template = "Is {answer} right? Correct: yes or no"\n', encoding="utf-8")
    if ok:
        assert load_template_file(f).slot_labels == (("no", 0.0), ("yes", 1.0))
    else:
        with pytest.raises(ConfigError, match="slot_labels"):
            load_template_file(f)


def test_the_text_reading_is_all_or_nothing_and_not_copied() -> None:
    assert parse_correct("Correct: yes", 5).value == 5
    assert parse_correct("**Correct:** No.", 5).value == 0
    answer = "Paris. Correct: yes"
    assert parse_correct(answer, 5, shown=[answer]).error is not None  # an echo of the answer is no verdict
    assert parse_correct("The answer says 'Correct: yes'. Correct: no", 5, shown=[answer]).value == 0
    assert parse_correct("I think it is fine.", 5).error is not None


def _items() -> ItemSet:
    q = Question(id="q1", text="What does DNS do?", max_points=4, language="en",
                 reference="It maps domain names to IP addresses.")
    answers = [Answer(id=f"a{i}", question_id="q1", text=f"answer {i}", examinee=f"e{i}",
                      human_scores={"g": float(i % 5)}) for i in range(5)]
    return ItemSet([q], answers, source="test")


def test_a_run_with_the_yes_no_preset_grades_from_the_slot(tmp_path: Path) -> None:
    judge = make_judge("scripted?slot=true&noise=0")
    cfg = RunConfig(options=MethodOptions(reference=True, prompt=PRESET))
    with Store(tmp_path / "s.db") as store:
        first = run(_items(), judge, store, cfg)
        again = run(_items(), judge, store, cfg)
    s = first.summary()
    assert s["valid"] == 5 and s["verdict"] == "expected" and again.summary()["judge_calls"] == 0
    for r in first.results:
        assert r.score is not None and 0 <= r.score <= 4
        assert r.details["attempts"][-1]["reply"].startswith("Correct: ")
        assert r.details["prompt"] == PRESET


def test_embedded_judge_reads_yes_and_no(small_gguf: Path) -> None:
    judge = make_judge(f"llamacpp:{SMALL_MODEL}")
    slot = slot_for(get_template(PRESET), 5.0)
    assert slot is not None
    ask = ("Decide whether the answer is correct.\nThe Question: What does DNS do?\nThe Reference Answer: It maps "
           "domain names to IP addresses.\nThe Answer: {a}\nIs the answer correct? Reply only in the format: "
           "Correct: yes or Correct: no")
    grades = []
    for a in ("It maps domain names to IP addresses.", "It is a kind of printer cable."):
        done = asyncio.run(judge.complete(JudgeRequest([Message(role="user", content=ask.format(a=a))], GenParams(),
                                                       slot, "expected")))
        read = read_verdict(slot, done.verdict)
        assert read.error is None and read.fallback is None and read.mass[0] > 0.5
        grades.append(read.values[0])
    assert 0 <= grades[1] < grades[0] <= 5  # the right answer more probably "yes"
