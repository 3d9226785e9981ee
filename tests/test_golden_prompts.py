"""Golden prompts: the exact bytes every preset sends for a fixed item are committed (tests/golden/prompts/).

Any change to what a judge sees — a preset's wording, the rendering, the quoting default, the boundary —
changes one of these files, so it shows in review, and the rule of the accuracy gate applies to it: the
commit or the issue note carries `python bench/accuracy.py` before and after (README, docs/architecture.md).

After a deliberate change, rewrite the files with ``KNOCKOUT_UPDATE_GOLDEN=1 pytest tests/test_golden_prompts.py``
and review the diff.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from knockout.prompts import presets
from knockout.prompts._render import DEFAULT_QUOTING, QUOTINGS, judge_messages
from knockout.prompts._templates import PromptTemplate, placeholders

GOLDEN = Path(__file__).parent / "golden" / "prompts"
UPDATE = os.environ.get("KNOCKOUT_UPDATE_GOLDEN") == "1"

#: one fixed item: a value for every placeholder a preset may use
VALUES = {
    "question": "What does the Domain Name System (DNS) do?",
    "answer": "It translates host names such as example.org into IP addresses.",
    "answer1": "It translates host names into IP addresses.",
    "answer2": "It encrypts web traffic.",
    "reference": "DNS maps domain names to IP addresses (and other records) via a distributed hierarchy.",
    "max_points": "2",
    "text": "The cat sat on the mat. It was warm.",
    "result1": "Assistant 1 is more accurate. Better answer: Answer 1",
    "result2": "Both are wrong. Better answer: Answer 2",
    "eval_result": "Score: 4 (on a scale of 1 to 5). The summary is faithful.",
    "transcript": "Debater 1: Answer 1 is right.\nDebater 2: Answer 2 is right.",
    "criterion": "Faithfulness",
    "max_criteria": "5",
    "side": "Assistant 1",
    "round": "2",
    "grade": "1.5",
    "error": "no grade found in the reply",
    "rubric": "",  # a question without a rubric: the bytes of the papers' prompts
}
#: a text rubric and a criteria rubric (as the builder lists criteria), for the cases that show one
RUBRIC = "Full marks need the mapping of names to addresses and the distributed hierarchy; half for the mapping."
CRITERIA = ("Criterion 1 (1 point): maps domain names to IP addresses\n"
            "Criterion 2 (1 point): mentions the distributed hierarchy of name servers")
CRITERIA_DE = ("Kriterium 1 (1 Punkt): ordnet Domainnamen IP-Adressen zu\n"
               "Kriterium 2 (1 Punkt): nennt die verteilte Hierarchie der Nameserver")
EXAMPLES = [
    {"question": "What is TCP?", "answer": "A reliable transport protocol.", "reference": "Reliable transport.",
     "max_points": "2", "grade": "2"},
    {"question": "What is UDP?", "answer": "A web browser.", "reference": "Unreliable datagrams.",
     "max_points": "2", "grade": "0"},
]


def rendered(t: PromptTemplate, quoting: str, rubric: bool = False) -> str:
    fields = placeholders(t.system) | placeholders(t.template)
    values = {k: v for k, v in VALUES.items() if k in fields}
    if "rubric" in values and t.parser == "criteria":  # a criteria prompt always shows criteria
        values["rubric"] = CRITERIA_DE if t.language == "de" else CRITERIA
    elif "rubric" in values and rubric:  # a match preset lists criteria, an individual one a text rubric
        values["rubric"] = CRITERIA if t.kind == "pairwise" else RUBRIC
    r = judge_messages(t, values, examples=EXAMPLES if t.uses_examples else (), quoting=quoting)
    return "".join(f"--- {m.role} ---\n{m.content}\n" for m in r.messages)


CASES = [(name, DEFAULT_QUOTING, False) for name in sorted(presets())] + [
    ("knockout-individual-en-ref", q, False) for q in sorted(QUOTINGS) if q != DEFAULT_QUOTING] + [
    ("knockout-pairwise-de-ref", q, False) for q in sorted(QUOTINGS) if q != DEFAULT_QUOTING] + [
    # a question with a rubric: every grading and match preset shows it in {rubric}
    (name, DEFAULT_QUOTING, True) for name in sorted(presets())
    if presets()[name].uses_rubric and presets()[name].parser != "criteria"] + [
    ("knockout-individual-en-ref", "all", True), ("knockout-individual-en-criteria", "all", False)]


def golden_name(name: str, quoting: str, rubric: bool = False) -> str:
    tail = ("" if quoting == DEFAULT_QUOTING else f"@{quoting}") + ("@rubric" if rubric else "")
    return f"{name}{tail}.txt"


@pytest.mark.parametrize(("name", "quoting", "rubric"), CASES)
def test_rendered_bytes_match_the_committed_golden_file(name: str, quoting: str, rubric: bool) -> None:
    text = rendered(presets()[name], quoting, rubric)
    path = GOLDEN / golden_name(name, quoting, rubric)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: KNOCKOUT_UPDATE_GOLDEN=1 pytest {__file__}"
    assert text == path.read_text(encoding="utf-8"), (
        f"the bytes {name} sends changed (quoting {quoting}): run bench/accuracy.py before and after, then "
        "KNOCKOUT_UPDATE_GOLDEN=1 to accept")


def test_every_golden_file_belongs_to_a_preset() -> None:
    expected = {golden_name(n, q, r) for n, q, r in CASES}
    assert {p.name for p in GOLDEN.glob("*.txt")} == expected


def test_every_grading_and_match_preset_shows_a_rubric() -> None:
    """{rubric} is in every individual and pairwise preset; the examinee's (solve) prompts never show it."""
    for t in presets().values():
        assert t.uses_rubric == (t.kind in ("individual", "pairwise")), t.name


def test_a_question_without_a_rubric_renders_the_bytes_of_a_template_without_the_placeholder() -> None:
    """The section is empty, with no line break left behind, whatever the quoting."""
    for name in ("knockout-individual-en-ref", "sciex-system-de-ref", "knockout-pairwise-en-ref"):
        t = presets()[name]
        bare = replace(t, template=t.template.replace("{rubric}", ""),
                       fields=t.fields - {"rubric"})
        for q in QUOTINGS:
            assert rendered(t, q) == rendered(bare, q)
